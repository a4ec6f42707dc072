"""While the model answers, the person sees "typing…": Telegram's chat action, sent again every few seconds,
and Discord's typing indicator. The indicator never holds up the turn or the answer, and a refused one is
no reason not to answer. (Slack offers bots no typing indicator for the Events API or Socket Mode.)"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from bridges import services
from bridges.runner import Supervisor, SupervisorThread
from tests.bridges.conftest import TELEGRAM_TOKEN, pair
from tests.fakes import telegram_server as telegram_fake
from tests.fakes.openai_server import reply

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def polling_bot(owner, telegram_server, settings, model) -> Iterator[Any]:
    """A Telegram bot that runbridges polls for (the way most run), with the model as the loopback server."""
    settings.TELEGRAM_API_BASE_URL = telegram_server.origin
    binding = services.binding_create(owner_id=owner.pk, platform="telegram", name="Family bot", mode="polling",
                                      credentials={"token": TELEGRAM_TOKEN})
    bridges = SupervisorThread(Supervisor(reload_seconds=0.2, binding_ids={binding.pk})).start()
    try:
        yield binding
    finally:
        bridges.stop()


class _Stub:
    def __init__(self, binding: Any, platform: str) -> None:
        self.binding, self.platform = binding, platform


def _thinking(model: Any, release: threading.Event, answer: str) -> Callable[[dict[str, Any]], Any]:
    def slow(body: dict[str, Any]) -> Any:
        model.think_until(release)
        return reply(answer)

    return slow


def test_telegram_shows_typing_again_and_again_while_the_model_thinks_and_never_after_the_answer(
        polling_bot, telegram_server, model, alice, settings):
    settings.BRIDGES_TYPING_SECONDS = 0.1
    pair(_Stub(polling_bot, "telegram"), alice)
    release = threading.Event()
    model.script(_thinking(model, release, "Thought it over."))

    telegram_server.push_update(telegram_fake.private_message("a hard question", user_id=alice.number))
    try:
        telegram_server.wait_for(lambda: len(telegram_server.chat_actions) >= 3, timeout=10,
                                 message="no typing while the model thought")
        assert telegram_server.sent == []  # still thinking
    finally:
        release.set()
    telegram_server.wait_for_sent(1, timeout=10)

    assert telegram_server.sent_texts(alice.number) == ["Thought it over."]
    assert set(telegram_server.chat_actions) == {(alice.number, "typing")}
    order = [call.method for call in telegram_server.calls if call.method in ("sendChatAction", "sendMessage")]
    assert order[-1] == "sendMessage"  # the indicator stopped before the answer went


def test_a_refused_typing_call_is_no_reason_not_to_answer(polling_bot, telegram_server, model, alice):
    pair(_Stub(polling_bot, "telegram"), alice)
    telegram_server.fail_next(400, method="sendChatAction", times=100, description="Bad Request: not now")
    model.script(reply("Still answered."))

    telegram_server.push_update(telegram_fake.private_message("hi", user_id=alice.number))
    telegram_server.wait_for_sent(1, timeout=10)

    assert telegram_server.sent_texts(alice.number) == ["Still answered."]
    assert len(telegram_server.calls_to("sendChatAction")) == 0  # refused once (not recorded), not tried again
    assert sum(1 for r in telegram_server.log if r.path.endswith("/sendChatAction")) == 1


def test_nobody_sees_typing_for_a_group_message_that_is_not_for_the_bot(polling_bot, telegram_server, model, alice):
    pair(_Stub(polling_bot, "telegram"), alice)
    model.script(reply("Answered the mention."))

    telegram_server.push_update(telegram_fake.group_message("lunch at one?", user_id=alice.number))
    telegram_server.push_update(telegram_fake.group_message(f"@{telegram_fake.BOT_USERNAME} and you?",
                                                            user_id=alice.number))
    telegram_server.wait_for_sent(1, timeout=10)

    assert telegram_server.sent_texts() == ["Answered the mention."]
    assert len(telegram_server.chat_actions) == 1  # for the mention only


def test_discord_shows_typing_while_the_model_thinks(discord_bot, model, alice, settings):
    settings.BRIDGES_TYPING_SECONDS = 0.1
    pair(discord_bot, alice)
    server = discord_bot.server
    release = threading.Event()
    model.script(_thinking(model, release, "Thought it over."))

    server.push_message("a hard question", author_id=alice.number, username="alice")
    try:
        server.wait_for(lambda: len(server.typing) >= 3, timeout=10, message="no typing while the model thought")
        assert server.messages == []
    finally:
        release.set()
    server.wait_for_messages(1, timeout=10)

    assert server.posted_contents() == ["Thought it over."]
    assert set(server.typing) == {server.dm_channel_id(alice.number)}


def test_a_typing_call_that_hangs_holds_up_neither_the_turn_nor_the_answer(discord_bot, model, alice):
    """discord.py would wait half a minute for the hung call; the answer does not."""
    pair(discord_bot, alice)
    server = discord_bot.server
    server.fail_next("hang", path="/typing", times=100)
    model.script(reply("Not held up."))

    said = discord_bot.dm(alice, "hi")  # waits at most 15 s for the answer

    assert said.texts == ["Not held up."]
