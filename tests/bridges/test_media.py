"""A photo or a file in a messaging chat, on each platform through its real library: the text that comes with
it is the message; one without text is answered that the bot reads only text, where a message would be
answered; on Slack, only the subtypes that are a person writing reach the bot."""

from __future__ import annotations

import pytest

from bridges import core
from tests.bridges.conftest import dm_scope, notes_of, pair
from tests.bridges.drivers import DiscordDriver, Driver
from tests.fakes import slack_server as slack_fake
from tests.fakes import telegram_server as telegram_fake
from tests.fakes.openai_server import reply

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_text_that_comes_with_a_photo_is_the_message(bot, model, alice):
    pair(bot, alice)
    model.script(reply("It is blue."))

    said = bot.share_photo(alice, "what colour is my bike?")

    assert said.texts == ["It is blue."]
    assert model.requests[-1]["messages"][-1]["content"] == "what colour is my bike?"


def test_a_photo_captioned_remember_saves_the_note(telegram_bot, owner, model, alice):
    pair(telegram_bot, alice, can_confirm=True)

    said = telegram_bot.share_photo(alice, "/remember my bike is blue")

    assert said.text.startswith("Saved to this conversation's notes: \u201cmy bike is blue\u201d")
    assert "my bike is blue" in notes_of(owner, dm_scope(telegram_bot, alice))
    assert model.requests == []


def test_a_photo_alone_is_answered_that_the_bot_reads_only_text(bot, model, alice):
    pair(bot, alice)

    said = bot.share_photo(alice)

    assert said.texts == [core.UNREADABLE_TEXT] == ["I can only read text messages."]
    assert model.requests == []


def mention(bot: Driver) -> str:
    """How a message mentions the bot on ``bot``'s platform."""
    if isinstance(bot, DiscordDriver):
        return f"<@{bot.server.bot_id}>"
    return f"<@{slack_fake.BOT_USER_ID}>" if bot.platform == "slack" else f"@{telegram_fake.BOT_USERNAME}"


def test_in_a_group_a_photo_alone_is_answered_only_when_it_mentions_the_bot(bot, model, alice):
    pair(bot, alice)
    if bot.platform != "discord":  # (over the gateway, silence cannot be told from slowness)
        assert bot.share_photo(alice, in_group=True).texts == []

    said = bot.share_photo(alice, mention(bot), in_group=True)

    assert said.texts == [core.UNREADABLE_TEXT]
    assert model.requests == []


def test_a_slack_thread_reply_also_sent_to_the_channel_is_a_message(slack_bot, model, alice):
    pair(slack_bot, alice)
    model.script(reply("Noted."))
    event = slack_fake.message_event(f"<@{slack_fake.BOT_USER_ID}> and the bike is blue",
                                     user=slack_bot.user(alice), channel=slack_bot.GROUP_ID, channel_type="channel",
                                     thread_ts="1700000000.000100", subtype="thread_broadcast")

    said = slack_bot._deliver(event, 1)

    assert said.texts == ["Noted."]
    assert model.requests[-1]["messages"][-1]["content"].endswith("and the bike is blue")


@pytest.mark.parametrize("subtype", ["message_changed", "message_deleted", "channel_join", "bot_message"])
def test_slack_messages_that_are_not_a_person_writing_are_ignored(slack_bot, model, alice, subtype):
    pair(slack_bot, alice)
    event = slack_fake.message_event("hello", user=slack_bot.user(alice), channel=slack_bot.dm_id(alice),
                                     subtype=subtype)

    said = slack_bot._deliver(event, 1)

    assert said.texts == [] and model.requests == []
