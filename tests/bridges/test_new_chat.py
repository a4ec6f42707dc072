"""A conversation that outgrew the model's context, on each platform through its real library: the bot says
so and how to go on, and ``/new`` starts a fresh chat for the conversation while its notes stay."""

from __future__ import annotations

import json
from typing import Any

import pytest

from bridges import core
from bridges.models import Conversation
from localai_memory.chats.models import Chat
from tests.bridges.conftest import dm_scope, notes_of, pair
from tests.fakes._loopback import Response
from tests.fakes.openai_server import ScriptedReply, reply

pytestmark = pytest.mark.django_db(transaction=True)

#: The model's context, counted crudely as the characters of the conversation (the system prompt aside).
CONTEXT_CHARS = 3000
LONG_ANSWER = "Here is a long answer. " + "Lorem ipsum dolor sit amet. " * 63


def small_context(body: dict[str, Any]) -> ScriptedReply | Response:
    """A model server with a small context: a longer conversation is refused with a 400, as llama.cpp does."""
    size = sum(len(str(m.get("content") or "")) for m in body["messages"] if m["role"] != "system")
    if size > CONTEXT_CHARS:
        error = {"error": {"code": 400, "type": "invalid_request_error",
                           "message": f"the request exceeds the available context size ({size} characters)"}}
        return Response(status=400, body=json.dumps(error).encode(), headers={"Content-Type": "application/json"})
    return reply(LONG_ANSWER)


def test_a_conversation_too_long_for_the_model_says_so_and_new_starts_a_fresh_chat_with_the_notes(bot, owner,
                                                                                                   model, alice):
    pair(bot, alice, can_confirm=True)
    model.script(reply("Hello."))
    bot.dm(alice, "Hello")  # on Slack, /remember works where the bot has talked before
    assert "Saved" in bot.remember(alice, "I live in Rome").text
    answers = []
    for number in range(4):
        model.script(small_context)
        answers.append(bot.dm(alice, f"Question {number}: tell me more").text)
    assert answers[:2] == [LONG_ANSWER.strip()] * 2
    # The third no longer fits, and neither does any later one: each says why and what to do.
    assert answers[2:] == [core.MODEL_REFUSED_TEXT] * 2
    assert "may have grown too long for the model" in core.MODEL_REFUSED_TEXT and "/new" in core.MODEL_REFUSED_TEXT
    calls = len(model.requests)

    started = bot.start_over(alice)

    assert started.texts == [core.NEW_CHAT_TEXT] and len(model.requests) == calls  # the model is not asked
    model.script(small_context)
    answered = bot.dm(alice, "Where do I live?")
    assert answered.text == LONG_ANSWER.strip()
    sent = model.requests[-1]["messages"]
    assert [m["role"] for m in sent] == ["system", "user"]  # nothing said before the fresh chat
    assert "Rome" in sent[0]["content"]  # the conversation's notes stay
    assert "Rome" in notes_of(owner, dm_scope(bot, alice))
    conversation = Conversation.objects.get(binding=bot.binding, external_id=bot.dm_id(alice))
    chats = Chat.objects.filter(owner=owner, conversation_key=conversation.channel_key)
    assert chats.count() == 2 and conversation.chat_id == chats.order_by("-id").first().pk  # the old one stays


def test_help_names_new(telegram_bot, alice):
    pair(telegram_bot, alice)

    helped = telegram_bot.dm(alice, "/help")

    assert "/new starts a fresh chat" in helped.text


def test_reset_is_new_by_another_name(telegram_bot, owner, model, alice):
    pair(telegram_bot, alice)
    model.script(reply("Hello."))
    telegram_bot.dm(alice, "Hello")

    assert telegram_bot.dm(alice, "/reset").texts == [core.NEW_CHAT_TEXT]
    model.script(reply("Hello again."))
    telegram_bot.dm(alice, "Hello again")
    assert [m["role"] for m in model.requests[-1]["messages"]] == ["system", "user"]


def start_over_in_group(bot, person) -> list[str]:
    """``person`` writes ``/new`` in the group, to the bot (on Slack, the slash command typed there)."""
    if bot.platform == "slack":
        return bot._command(person, "/new", "", channel=bot.group_id()).texts
    return bot.group(person, "/new").texts


def test_in_a_group_only_someone_who_may_confirm_starts_a_fresh_chat_for_everyone(bot, owner, model, alice, bob):
    pair(bot, alice, can_confirm=True)
    pair(bot, bob, can_confirm=False)
    model.script(reply("Hello."))
    bot.group(alice, "Hello")
    conversation = Conversation.objects.get(binding=bot.binding, external_id=bot.group_id())
    chat_id = conversation.chat_id
    assert chat_id is not None

    refused = start_over_in_group(bot, bob)

    conversation.refresh_from_db()
    assert conversation.chat_id == chat_id  # the group's chat goes on
    assert len(refused) == 1
    assert "Only someone the owner allows to confirm changes can start a fresh chat for everyone here" in refused[0]
    assert refused == [core.NEW_CHAT_REFUSED_TEXT]

    assert start_over_in_group(bot, alice) == [core.NEW_CHAT_TEXT]
    conversation.refresh_from_db()
    assert conversation.chat_id is None


def test_in_a_direct_chat_anyone_paired_starts_a_fresh_chat(telegram_bot, owner, model, bob):
    pair(telegram_bot, bob, can_confirm=False)
    model.script(reply("Hello."))
    telegram_bot.dm(bob, "Hello")

    assert telegram_bot.dm(bob, "/new").texts == [core.NEW_CHAT_TEXT]
