"""``runbridges`` told to stop while the bots are answering: the turns in flight get the stop grace to finish
and send their answers; the process ends within that grace (plus a moment) even when the model has not
answered; and a turn cut off never looks answered: its sender is told when the bot starts again, with the
answer it had (late), or that it had none yet. The real process is stopped with SIGTERM as a deploy does."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings as django_settings

from bridges import pending, services
from bridges.models import Binding, PendingReply
from bridges.runner import Supervisor, SupervisorThread
from bridges.runtime import blocking_calls
from localai_memory.chats.models import Message
from tests.api.test_two_processes import test_database_url
from tests.bridges.conftest import TELEGRAM_TOKEN, pair
from tests.fakes import telegram_server as telegram_fake
from tests.fakes.openai_server import reply

pytestmark = pytest.mark.django_db(transaction=True)

PROJECT_ROOT = Path(__file__).resolve().parents[2]
QUESTION = "What should I cook tonight?"


class _Stub:
    """What ``pair`` needs of a bot: its binding and platform."""

    def __init__(self, binding: Binding, platform: str) -> None:
        self.binding, self.platform = binding, platform


def _thinking(model: Any, release: threading.Event, answer: str) -> Callable[[dict[str, Any]], Any]:
    def slow(body: dict[str, Any]) -> Any:
        model.think_until(release, timeout=60)
        return reply(answer)

    return slow


def _wait(condition: Callable[[], bool], timeout: float, message: str) -> None:
    """A bounded wait on a condition, looked at every 50 ms."""
    pause = threading.Event()
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(message)
        pause.wait(0.05)


@pytest.fixture
def polling_binding(owner, telegram_server, settings, model, alice) -> Binding:
    settings.TELEGRAM_API_BASE_URL = telegram_server.origin
    binding = services.binding_create(owner_id=owner.pk, platform="telegram", name="Family bot", mode="polling",
                                      credentials={"token": TELEGRAM_TOKEN})
    pair(_Stub(binding, "telegram"), alice)
    return binding


@pytest.fixture
def turns_end() -> Iterator[None]:
    """After the test, no turn of a cut-off bot still runs in a thread of this process (it would write into
    the next test's database)."""
    yield
    _wait(lambda: blocking_calls() == 0, 60, "a cut-off turn kept running")


# --------------------------------------------------------------------------------------------------------
# The real process
# --------------------------------------------------------------------------------------------------------

GRACE = 2.0


class Bridges:
    """``manage.py runbridges`` as a child process on this test's database and loopback fakes."""

    def __init__(self, log: Path, env: dict[str, str]) -> None:
        self.log_path = log
        with log.open("ab") as out:
            self.process = subprocess.Popen([sys.executable, "manage.py", "runbridges", "--reload-seconds", "0.5"],
                                            cwd=PROJECT_ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def terminate(self, within: float) -> float:
        """SIGTERM, as ``docker stop`` sends it; returns the seconds it took to end (at most ``within``)."""
        started = time.monotonic()
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(within)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise AssertionError(f"runbridges did not end within {within} s of SIGTERM:\n{self.log()[-3000:]}")
        return time.monotonic() - started

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


@pytest.fixture
def bridges_process(telegram_server, slack_server, model, tmp_path) -> Iterator[Callable[[], Bridges]]:
    env = {**os.environ, "DATABASE_URL": test_database_url(), "REDIS_URL": django_settings.REDIS_URL,
           "SECRET_KEY": django_settings.SECRET_KEY, "TELEGRAM_API_BASE_URL": telegram_server.origin,
           "SLACK_API_BASE_URL": slack_server.url,
           "LLM_BASE_URL": model.url, "LLM_MODEL": "fake-model", "LLM_TIMEOUT": "60",
           "BRIDGES_STOP_GRACE_SECONDS": str(GRACE), "DATABASE_CONN_MAX_AGE": "0", "PYTHONUNBUFFERED": "1"}
    if django_settings.BRIDGES_SECRET_KEY:
        env["BRIDGES_SECRET_KEY"] = django_settings.BRIDGES_SECRET_KEY
    started: list[Bridges] = []

    def start() -> Bridges:
        started.append(Bridges(tmp_path / "runbridges.log", env))
        return started[-1]

    yield start
    for process in started:
        process.kill()


def test_runbridges_stopped_while_the_model_thinks_ends_within_its_grace_and_tells_the_sender_on_restart(
        polling_binding, bridges_process, telegram_server, model, owner, alice):
    release = threading.Event()
    model.script(_thinking(model, release, "Pasta, since you asked."))
    first = bridges_process()
    try:
        telegram_server.push_update(telegram_fake.private_message(QUESTION, user_id=alice.number))
        # the process started, polled, and the turn reached the model
        _wait(lambda: bool(model.requests), 90, "the turn never reached the model")

        took = first.terminate(within=GRACE + 10)
    finally:
        release.set()  # the model answers, to a connection nobody reads any more

    assert took < GRACE + 5, first.log()[-3000:]
    assert first.process.returncode == 0, first.log()[-3000:]
    assert "cut off" in first.log()
    assert telegram_server.sent == []  # nothing reached the person...
    assert not Message.objects.filter(chat__owner=owner, role="assistant").exists()  # ...nor looks as if it had
    [left] = PendingReply.objects.filter(binding=polling_binding)
    assert (left.said, left.messages) == (QUESTION, None)

    second = bridges_process()
    telegram_server.wait_for_sent(1, timeout=90)
    second.terminate(within=GRACE + 10)

    assert telegram_server.sent_texts(alice.number) == [pending.cut_off_text(QUESTION)]
    assert "Please send it again" in telegram_server.sent_texts()[0]
    assert not PendingReply.objects.exists()


def test_runbridges_stopped_while_slack_does_not_answer_ends_within_its_grace(owner, slack_server,
                                                                             bridges_process):
    """Slack's blocking calls (here the token check, which Slack does not answer) are cut off at the end of
    the grace like a turn, never waited for until the process manager kills the process."""
    services.binding_create(owner_id=owner.pk, platform="slack", name="Team bot", mode="http",
                            credentials={"bot_token": "xoxb-loopback", "signing_secret": "loopback-secret"})
    slack_server.fail_next("hang", method="auth.test")
    bridges = bridges_process()
    _wait(lambda: any(request.path.endswith("/auth.test") for request in slack_server.log), 90,
          "the bot never checked its token")

    took = bridges.terminate(within=GRACE + 10)

    assert took < GRACE + 5, bridges.log()[-3000:]
    assert bridges.process.returncode == 0, bridges.log()[-3000:]
    assert "cut off" in bridges.log()


# --------------------------------------------------------------------------------------------------------
# The supervisor in this process
# --------------------------------------------------------------------------------------------------------


def test_a_turn_answered_within_the_grace_is_sent_before_the_bot_stops(discord_bot, model, alice, settings):
    """Discord's gateway client is closed only once the turns it is answering have sent their answers."""
    settings.BRIDGES_STOP_GRACE_SECONDS = 15.0
    settings.LLM_TIMEOUT = 30.0
    pair(discord_bot, alice)
    server = discord_bot.server
    release = threading.Event()
    model.script(_thinking(model, release, "Answered in time."))
    server.push_message(QUESTION, author_id=alice.number, username="alice")
    _wait(lambda: bool(model.requests), 15, "the turn never reached the model")

    running = discord_bot.bridges.supervisor.tasks[discord_bot.binding.pk]

    stopping = threading.Thread(target=discord_bot.close)
    stopping.start()
    _wait(running.stop_event.is_set, 10, "the bot was not told to stop")
    release.set()  # the model answers while the bot stops
    stopping.join(20)

    assert not stopping.is_alive() and not discord_bot.bridges.alive
    assert server.posted_contents() == ["Answered in time."]
    assert not PendingReply.objects.exists()


def test_an_answer_cut_off_on_its_way_is_sent_late_when_the_bot_starts_again(polling_binding, telegram_server,
                                                                             model, alice, settings, turns_end):
    settings.BRIDGES_STOP_GRACE_SECONDS = 0.5
    model.script(reply("Pasta, since you asked."))
    telegram_server.fail_next("hang", method="sendMessage")  # Telegram does not answer while the bot stops
    bridges = SupervisorThread(Supervisor(reload_seconds=0.2, binding_ids={polling_binding.pk})).start()
    telegram_server.push_update(telegram_fake.private_message(QUESTION, user_id=alice.number))
    _wait(lambda: any(r.path.endswith("/sendMessage") for r in telegram_server.log), 15, "the answer never went")

    bridges.stop()

    [left] = PendingReply.objects.all()
    assert left.messages == [{"text": "Pasta, since you asked.", "buttons": [], "formatted": True}]
    assert telegram_server.sent == []

    again = SupervisorThread(Supervisor(reload_seconds=0.2, binding_ids={polling_binding.pk})).start()
    try:
        telegram_server.wait_for_sent(2, timeout=15)
    finally:
        again.stop()

    assert telegram_server.sent_texts(alice.number) == [pending.late_text(QUESTION), "Pasta, since you asked."]
    assert not PendingReply.objects.exists()


def test_a_message_still_waiting_for_its_turn_when_the_bot_stops_is_told_on_restart(
        polling_binding, telegram_server, model, alice, settings, turns_end):
    """A message that waits behind a turn (its chat's earlier message; with more turns in flight than turn
    threads, any message) was taken from Telegram already: cut off before its turn started, its sender is
    told too, after the late answer to the message ahead of it."""
    settings.BRIDGES_STOP_GRACE_SECONDS = 0.5
    release = threading.Event()
    model.script(_thinking(model, release, "Pasta, since you asked."))
    bridges = SupervisorThread(Supervisor(reload_seconds=0.2, binding_ids={polling_binding.pk})).start()
    try:
        telegram_server.push_update(telegram_fake.private_message(QUESTION, user_id=alice.number))
        second = telegram_server.push_update(telegram_fake.private_message("And for dessert?",
                                                                           user_id=alice.number))
        _wait(lambda: bool(model.requests), 15, "the turn never reached the model")
        # the second message was taken from Telegram (a poll after it confirmed it) and waits behind the first
        telegram_server.wait_for(lambda: any(int(call.params.get("offset") or 0) > second["update_id"]
                                             for call in telegram_server.calls_to("getUpdates")), timeout=15)

        bridges.stop()

        assert sorted(PendingReply.objects.values_list("said", flat=True)) == ["And for dessert?", QUESTION]
    finally:
        release.set()
    _wait(lambda: blocking_calls() == 0, 60, "the cut-off turn kept running")  # it writes its answer down
    assert telegram_server.sent == []

    again = SupervisorThread(Supervisor(reload_seconds=0.2, binding_ids={polling_binding.pk})).start()
    try:
        telegram_server.wait_for_sent(3, timeout=15)
    finally:
        again.stop()

    assert telegram_server.sent_texts(alice.number) == [
        pending.late_text(QUESTION), "Pasta, since you asked.", pending.cut_off_text("And for dessert?")]
    assert not PendingReply.objects.exists()
    assert len(model.requests) == 1  # the second message's turn never ran: nothing of it looks answered


def test_the_end_of_the_process_cuts_a_restarts_longer_grace_short(polling_binding, telegram_server, model, alice,
                                                                   settings, turns_end):
    """A new token restarts the bot, whose turn then gets the model's time-out to finish; told to stop
    meanwhile, the process gives it the stop grace only."""
    settings.BRIDGES_STOP_GRACE_SECONDS = 0.5
    settings.LLM_TIMEOUT = 60.0
    release = threading.Event()
    model.script(_thinking(model, release, "Too late."))
    bridges = SupervisorThread(Supervisor(reload_seconds=0.2, binding_ids={polling_binding.pk})).start()
    try:
        telegram_server.push_update(telegram_fake.private_message(QUESTION, user_id=alice.number))
        _wait(lambda: bool(model.requests), 15, "the turn never reached the model")
        services.binding_update(binding=Binding.objects.get(pk=polling_binding.pk),
                                credentials={"token": "777777:NEW-TOKEN-abcd"})
        _wait(lambda: bool(bridges.supervisor.stopping), 10, "the bot was not restarted")

        bridges.stop(timeout=10)

        assert not bridges.alive
    finally:
        release.set()


def test_a_cut_off_reply_the_platform_refuses_is_tried_again_at_the_next_start_and_none_a_day_old_is_sent(
        polling_binding, telegram_server, alice):
    from datetime import timedelta

    from django.utils import timezone

    recent = services.reply_pending_open(binding_id=polling_binding.pk, conversation_id=str(alice.number),
                                         said="Are you there?")
    services.reply_pending_open(binding_id=polling_binding.pk, conversation_id="5550999", said="Old news",
                                now=timezone.now() - timedelta(days=2))
    telegram_server.fail_next(403, method="sendMessage")  # e.g. the person had blocked the bot

    def started_once() -> None:
        bridges = SupervisorThread(Supervisor(reload_seconds=0.2, binding_ids={polling_binding.pk})).start()
        try:
            telegram_server.wait_for(lambda: bool(telegram_server.calls_to("getUpdates")), timeout=15)
        finally:
            bridges.stop()
        telegram_server.calls.clear()

    started_once()
    assert list(PendingReply.objects.values_list("pk", flat=True)) == [recent]  # the day-old one is dropped
    started_once()

    # the two-day-old message is never answered, however well the platform takes it
    assert telegram_server.sent_texts() == [pending.cut_off_text("Are you there?")]
    assert not PendingReply.objects.exists()


def test_the_hourly_tidy_drops_replies_a_bot_that_never_starts_again_left_once_they_are_a_day_old(
        polling_binding, time_machine):
    """Only a bot's start reads what its runbridges left; a bot that never starts again (taken out of the
    process, or runbridges no longer run) would keep its rows for ever. Past a day they are never sent, so
    Celery beat's tidy drops them, and leaves the younger ones for the bot's next start."""
    from bridges import tasks

    time_machine.move_to("2026-12-01 09:00:00+00:00", tick=False)
    services.reply_pending_open(binding_id=polling_binding.pk, conversation_id="5550999", said="Old news")
    time_machine.move_to("2026-12-01 20:00:00+00:00", tick=False)
    younger = services.reply_pending_open(binding_id=polling_binding.pk, conversation_id="5550999",
                                          said="Still there?")

    time_machine.move_to("2026-12-02 08:59:00+00:00", tick=False)
    tasks.tidy()
    assert PendingReply.objects.count() == 2  # not a day old yet
    time_machine.move_to("2026-12-02 09:01:00+00:00", tick=False)
    tasks.tidy()

    assert list(PendingReply.objects.values_list("pk", flat=True)) == [younger]
