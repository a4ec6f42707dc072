"""``runbridges``: every enabled binding runs on its own, follows changes, survives a broken neighbour, turns
a binding off when its token is refused, and retries rate limits and 5xx."""

from __future__ import annotations

import io
import os
import signal
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from bridges import services
from bridges.models import Binding
from bridges.runner import Supervisor, SupervisorThread
from bridges.selectors import binding_credentials
from bridges.telegram.adapter import webhook_url
from tests.bridges.conftest import DISCORD_TOKEN, SLACK_SECRET, TELEGRAM_TOKEN, pair
from tests.chats.helpers import make_agent
from tests.fakes import slack_server as slack_fake
from tests.fakes import telegram_server as telegram_fake
from tests.fakes.openai_server import reply

pytestmark = pytest.mark.django_db(transaction=True)


def wait_until(condition: Callable[[], bool], timeout: float = 10.0, message: str = "") -> None:
    """Wait (bounded) until ``condition()`` holds, re-checking every 50 ms."""
    pause = threading.Event()
    for _ in range(int(timeout / 0.05)):
        if condition():
            return
        pause.wait(0.05)
    raise TimeoutError(message or "the condition did not hold in time")


@pytest.fixture
def run_bridges() -> Iterator[Callable[..., SupervisorThread]]:
    started: list[SupervisorThread] = []

    def start(**options) -> SupervisorThread:
        thread = SupervisorThread(Supervisor(reload_seconds=0.1, **options)).start()
        started.append(thread)
        return thread

    yield start
    for thread in started:
        thread.stop()


@pytest.fixture
def telegram(telegram_server, settings, model):
    settings.TELEGRAM_API_BASE_URL = telegram_server.origin
    return telegram_server


def polling_binding(owner, token: str = TELEGRAM_TOKEN, **fields) -> Binding:
    return services.binding_create(owner_id=owner.pk, platform="telegram", name=f"bot {token[-4:]}",
                                   credentials={"token": token}, **fields)


def polls(server, token: str) -> int:
    return sum(1 for call in server.calls_to("getUpdates") if call.token == token)


def test_runbridges_polls_telegram_and_answers_a_paired_sender(owner, telegram, model, run_bridges, alice):
    binding = polling_binding(owner)
    pair(_driver(binding, "telegram"), alice)
    model.script(reply("Hello from the poller."))
    run_bridges()

    telegram.push_update(telegram_fake.private_message("hi", user_id=alice.number))
    telegram.wait_for_sent(1, timeout=10)

    assert telegram.sent_texts(alice.number) == ["Hello from the poller."]
    assert telegram.calls_to("deleteWebhook")
    [listed] = telegram.calls_to("setMyCommands")  # "/" in the chat lists /remember
    assert [c["command"] for c in listed.params["commands"]] == ["remember", "memory", "new", "help"]
    binding.refresh_from_db()
    assert binding.last_connected_at is not None and binding.bot_identity == "@memory_test_bot"


def test_a_duplicate_telegram_update_is_processed_once_when_polling(owner, telegram, model, run_bridges, alice):
    binding = polling_binding(owner)
    pair(_driver(binding, "telegram"), alice)
    model.script(reply("First."), reply("Second."))
    run_bridges()
    update = telegram_fake.private_message("hi", user_id=alice.number)

    telegram.push_update(update)
    telegram.wait_for_sent(1, timeout=10)
    telegram.push_update(dict(update))  # Telegram delivers the same update_id again
    telegram.push_update(telegram_fake.private_message("ping", user_id=alice.number))
    telegram.wait_for_sent(2, timeout=10)

    assert telegram.sent_texts() == ["First.", "Second."]
    assert [r["messages"][-1]["content"] for r in model.requests] == ["hi", "ping"]


def test_a_slow_turn_in_one_chat_does_not_hold_up_another_chat(owner, telegram, model, run_bridges,
                                                               alice, bob, settings):
    settings.LLM_TIMEOUT = 30.0
    binding = polling_binding(owner)
    pair(_driver(binding, "telegram"), alice)
    pair(_driver(binding, "telegram"), bob)
    release = threading.Event()

    def answer(body: dict[str, Any]) -> Any:
        said = body["messages"][-1]["content"]
        if said == "a long question":
            model.think_until(release)  # the model thinks until the test lets it answer
        return reply(f"Answer to {said}.")

    model.script(answer, answer, answer)
    run_bridges()

    telegram.push_update(telegram_fake.private_message("a long question", user_id=alice.number))
    telegram.push_update(telegram_fake.private_message("and then this", user_id=alice.number))
    telegram.push_update(telegram_fake.private_message("a quick one", user_id=bob.number))
    try:
        telegram.wait_for(lambda: bool(telegram.sent_texts(bob.number)), timeout=15,
                          message="Bob waited for Alice's turn")
        assert telegram.sent_texts(alice.number) == []
    finally:
        release.set()
    telegram.wait_for_sent(3, timeout=10)

    assert telegram.sent_texts() == ["Answer to a quick one.", "Answer to a long question.",
                                     "Answer to and then this."]


def test_a_telegram_webhook_binding_registers_its_webhook_with_the_secret(owner, telegram, settings, run_bridges):
    settings.PUBLIC_URL = "https://memory.example.org"
    binding = polling_binding(owner, mode="webhook")
    run_bridges()

    telegram.wait_for(lambda: bool(telegram.webhook.get("url")), timeout=10)

    assert telegram.webhook["url"] == webhook_url(binding.pk)
    assert telegram.webhook["secret_token"] == binding_credentials(binding=binding)["webhook_secret"]
    assert polls(telegram, TELEGRAM_TOKEN) == 0


def test_runbridges_follows_changes_to_the_bindings(owner, telegram, run_bridges):
    binding = polling_binding(owner, enabled=False)
    bridges = run_bridges()
    assert bridges.supervisor.running == set()

    services.binding_set_enabled(binding=binding, enabled=True)
    telegram.wait_for(lambda: polls(telegram, TELEGRAM_TOKEN) > 0, timeout=10)
    services.binding_set_enabled(binding=Binding.objects.get(pk=binding.pk), enabled=False)
    wait_until(lambda: bridges.supervisor.running == set(), message="the bot kept running")

    other = polling_binding(owner, token="654321:ANOTHER-TOKEN-abcd")
    telegram.wait_for(lambda: polls(telegram, "654321:ANOTHER-TOKEN-abcd") > 0, timeout=10)
    assert bridges.supervisor.running == {other.pk}


def test_runbridges_stops_the_bots_of_a_suspended_account_and_starts_them_when_it_is_active_again(
        owner, telegram, run_bridges):
    from django.contrib.auth import get_user_model

    binding = polling_binding(owner)
    bridges = run_bridges()
    telegram.wait_for(lambda: polls(telegram, TELEGRAM_TOKEN) > 0, timeout=10)

    get_user_model().objects.filter(pk=owner.pk).update(is_active=False)  # the admin's "Active" unticked
    wait_until(lambda: bridges.supervisor.running == set(), message="the suspended account's bot kept running")
    calls, rounds = polls(telegram, TELEGRAM_TOKEN), bridges.supervisor.rounds
    wait_until(lambda: bridges.supervisor.rounds >= rounds + 3)  # three more looks at the bindings
    assert polls(telegram, TELEGRAM_TOKEN) == calls and bridges.supervisor.running == set()

    get_user_model().objects.filter(pk=owner.pk).update(is_active=True)
    wait_until(lambda: bridges.supervisor.running == {binding.pk}, message="the bot did not start again")


def test_renaming_a_bot_or_giving_it_an_agent_keeps_its_connection_and_a_new_token_restarts_it(
        owner, telegram, run_bridges):
    binding = polling_binding(owner)
    bridges = run_bridges()
    telegram.wait_for(lambda: polls(telegram, TELEGRAM_TOKEN) > 0, timeout=10)
    running = bridges.supervisor.tasks[binding.pk]

    services.binding_update(binding=binding, name="Kitchen bot", agent_id=make_agent(owner).pk)
    rounds = bridges.supervisor.rounds
    wait_until(lambda: bridges.supervisor.rounds >= rounds + 3)  # three more looks at the bindings

    assert bridges.supervisor.tasks[binding.pk] is running and not running.task.done()
    assert len(telegram.calls_to("getMe")) == 1  # connected once

    services.binding_update(binding=Binding.objects.get(pk=binding.pk), credentials={"token": "777777:NEW-TOKEN-abcd"})
    telegram.wait_for(lambda: polls(telegram, "777777:NEW-TOKEN-abcd") > 0, timeout=10)

    assert bridges.supervisor.tasks[binding.pk] is not running


def test_a_revoked_token_turns_the_binding_off_with_a_reason_instead_of_looping(owner, telegram, run_bridges):
    binding = polling_binding(owner)
    telegram.revoke()
    bridges = run_bridges()

    wait_until(lambda: not Binding.objects.get(pk=binding.pk).enabled, message="the binding stayed on")
    wait_until(lambda: bridges.supervisor.running == set())
    calls, rounds = len(telegram.calls), bridges.supervisor.rounds
    wait_until(lambda: bridges.supervisor.rounds >= rounds + 5)  # five more looks at the bindings
    binding.refresh_from_db()

    assert binding.state == "revoked" and "Telegram refused the bot's token" in binding.state_reason
    assert len(telegram.calls) == calls == 1  # getMe once; no retry loop


def test_one_broken_binding_never_stops_the_others(owner, telegram, model, run_bridges, alice):
    good = polling_binding(owner)
    broken = polling_binding(owner, token="999999:BROKEN-TOKEN-zzzz")
    telegram.fail_next(502, times=10_000, when=lambda request: "BROKEN-TOKEN" in request.path)
    pair(_driver(good, "telegram"), alice)
    model.script(reply("Still answering."))
    run_bridges()

    telegram.push_update(telegram_fake.private_message("hi", user_id=alice.number))
    telegram.wait_for_sent(1, timeout=10)
    wait_until(lambda: Binding.objects.get(pk=broken.pk).state == "error")

    broken.refresh_from_db()
    assert telegram.sent_texts(alice.number) == ["Still answering."]
    assert broken.enabled is True and "retrying" in broken.state_reason
    assert "BROKEN-TOKEN" not in broken.state_reason


def test_a_rate_limited_or_failing_send_is_retried(telegram_bot, model, alice):
    pair(telegram_bot, alice)
    model.script(reply("Made it."))
    telegram_bot.server.fail_next(429, method="sendMessage", retry_after=1)
    telegram_bot.server.fail_next(502, method="sendMessage")

    said = telegram_bot.dm(alice, "hi")

    assert said.texts == ["Made it."]
    assert sum(1 for r in telegram_bot.server.log if r.path.endswith("/sendMessage")) == 3  # two failed


def test_slack_retries_rate_limits_and_5xx(slack_bot, model, alice):
    pair(slack_bot, alice)
    model.script(reply("Made it."))
    slack_bot.server.fail_next(429, method="chat.postMessage", retry_after=0)
    slack_bot.server.fail_next(503, method="chat.postMessage")

    said = slack_bot.dm(alice, "hi")

    assert said.texts == ["Made it."]
    assert sum(1 for r in slack_bot.server.log if r.path.endswith("/chat.postMessage")) == 3  # two failed


def test_a_revoked_slack_token_turns_the_binding_off(owner, slack_server, settings, run_bridges):
    settings.SLACK_API_BASE_URL = slack_server.url
    binding = services.binding_create(owner_id=owner.pk, platform="slack", name="Team", mode="http",
                                      credentials={"bot_token": "xoxb-loopback", "signing_secret": SLACK_SECRET})
    slack_server.revoke("token_revoked")
    run_bridges()

    wait_until(lambda: not Binding.objects.get(pk=binding.pk).enabled)

    binding.refresh_from_db()
    assert binding.state == "revoked" and binding.state_code == "token_revoked"
    assert "Slack refused the bot's token" in binding.state_reason


def test_a_token_revoked_while_answering_in_slack_turns_the_binding_off(slack_bot, model, alice):
    pair(slack_bot, alice)
    model.script(reply("You will not see this."))
    slack_bot.post(slack_fake.event_request(slack_fake.message_im("warm up", user="U5550001", channel="D5550001"),
                                            signing_secret=SLACK_SECRET))
    slack_bot.server.revoke("invalid_auth")
    model.script(reply("Nor this."))

    slack_bot.post(slack_fake.event_request(slack_fake.message_im("hi", user="U5550001", channel="D5550001"),
                                            signing_secret=SLACK_SECRET))

    binding = Binding.objects.get(pk=slack_bot.binding.pk)
    assert binding.enabled is False and binding.state == "revoked"


def test_a_revoked_discord_token_turns_the_binding_off(owner, discord_server, settings, run_bridges):
    settings.DISCORD_API_BASE_URL = discord_server.url
    settings.DISCORD_GATEWAY_URL = discord_server.gateway_url
    binding = services.binding_create(owner_id=owner.pk, platform="discord", name="Guild",
                                      credentials={"token": DISCORD_TOKEN})
    discord_server.revoke()
    run_bridges()

    wait_until(lambda: not Binding.objects.get(pk=binding.pk).enabled)

    binding.refresh_from_db()
    assert binding.state == "revoked" and "Discord refused the bot's token" in binding.state_reason


def test_the_runbridges_command_runs_the_bindings_until_it_is_told_to_stop(owner, telegram):
    polling_binding(owner)

    def stop_once_polling() -> None:
        try:
            telegram.wait_for(lambda: polls(telegram, TELEGRAM_TOKEN) > 0, timeout=10)
        finally:
            os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=stop_once_polling, daemon=True).start()
    out = io.StringIO()
    call_command("runbridges", "--reload-seconds", "0.5", stdout=out)

    assert polls(telegram, TELEGRAM_TOKEN) > 0
    assert "bridges: stopped" in out.getvalue()


def _driver(binding: Binding, platform: str):
    """A stand-in with what ``pair`` needs: the binding and the platform."""
    class Stub:
        pass

    stub = Stub()
    stub.binding, stub.platform = binding, platform  # type: ignore[attr-defined]
    return stub


def test_a_refused_command_list_does_not_stop_the_bot(owner, telegram, model, run_bridges, alice):
    binding = polling_binding(owner)
    pair(_driver(binding, "telegram"), alice)
    telegram.fail_next(400, path="setMyCommands", times=1000)  # every time: a bot that needed it would never run
    model.script(reply("Still here."))
    run_bridges()

    telegram.push_update(telegram_fake.private_message("hi", user_id=alice.number))
    telegram.wait_for_sent(1, timeout=10)

    assert telegram.sent_texts(alice.number) == ["Still here."]


def test_a_bot_restarted_in_the_middle_of_a_turn_still_sends_that_answer(owner, telegram, model, run_bridges,
                                                                        alice, settings):
    """New credentials restart the bot; the turn it is answering gets the model's time-out to finish, not the
    short grace of a process that ends (no platform would send that message again)."""
    settings.BRIDGES_STOP_GRACE_SECONDS = 0.5
    settings.LLM_TIMEOUT = 3.0
    binding = polling_binding(owner)
    pair(_driver(binding, "telegram"), alice)
    release = threading.Event()

    def slow(body: dict[str, Any]) -> Any:
        model.think_until(release)
        return reply("Here is the long answer.")

    model.script(slow)
    bridges = run_bridges()
    telegram.push_update(telegram_fake.private_message("a long question", user_id=alice.number))
    telegram.wait_for(lambda: bool(model.requests), timeout=10, message="the turn never reached the model")
    running = bridges.supervisor.tasks[binding.pk]

    services.binding_update(binding=Binding.objects.get(pk=binding.pk), credentials={"token": TELEGRAM_TOKEN})
    telegram.wait_for(lambda: bridges.supervisor.tasks.get(binding.pk) is not running, timeout=10,
                      message="the bot was not restarted")
    timer = threading.Timer(1.5, release.set)  # the model answers well past the short grace
    timer.start()
    try:
        telegram.wait_for(lambda: telegram.sent_texts(alice.number) == ["Here is the long answer."], timeout=10,
                          message="the answer of the turn cut by the restart was lost")
    finally:
        timer.cancel()
        release.set()


@pytest.mark.parametrize("seconds", ["-1", "0", "0.2", "nan", "inf"])
def test_runbridges_refuses_a_reload_time_that_is_no_usable_number_of_seconds(db, seconds):
    with pytest.raises(CommandError, match="--reload-seconds .* at least 0.5"):
        call_command("runbridges", "--reload-seconds", seconds, stdout=io.StringIO())


def test_runbridges_says_when_a_bot_it_is_told_to_run_does_not_exist(owner):
    known = polling_binding(owner)

    with pytest.raises(CommandError, match="no bot has the id 999"):
        call_command("runbridges", "--binding", str(known.pk), "--binding", "999", stdout=io.StringIO())
