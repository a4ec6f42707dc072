"""A note's text shows in the chat exactly as it was written, on each platform through its real library: a
note reading ``*bold*``, ``_x_``, a backtick, ``~``, ``@everyone``, ``<!channel>`` or ``<@U…>`` neither renders
as markup nor pings anyone wherever the bot repeats it (the question, "Saved", the notes listing, the Undo,
the answer to a tap). Telegram gets plain text (no parse mode) with a word joiner after each ``@`` that would
be a mention (in the model's answer too); Slack gets the text escaped with its formatting off; Discord gets
the markdown escaped and no mentions allowed."""

from __future__ import annotations

import html
import re
from typing import Any

import pytest

from localai_memory.memory.services import settings_update
from tests.bridges.conftest import pair
from tests.fakes import discord_server as discord_fake
from tests.fakes.openai_server import reply, tool_calls

pytestmark = pytest.mark.django_db(transaction=True)

MARKUP = "lunch *friday* at _noon_ in `room 4` ~moved~ tell @everyone <!channel> <@U5550002> & co"
NOTE = {"kind": "memory", "topic": "lunch", "summary": MARKUP}


def shown(bot, since: dict[str, int]) -> list[str]:
    """What the platform shows of each message the bot sent that repeats the note (since ``since``, from
    ``counts``), read as the platform reads it. Fails when one of them would render markup or ping."""
    texts: list[str] = []
    if bot.platform == "telegram":
        for item in bot.server.sent[since["sent"]:]:
            assert not item["params"].get("parse_mode") and not item["params"].get("entities"), item  # plain text
            if "lunch" in item["text"]:  # the bot's own words: no @name becomes a mention that pings
                assert item["mentions"] == [], item
            texts.append(item["text"].replace("\u2060", ""))  # a word joiner shows as nothing
        texts += [c.params.get("text") or "" for c in bot.server.calls_to("answerCallbackQuery")[since["taps"]:]]
    elif bot.platform == "slack":
        bodies: list[dict[str, Any]] = [post["params"] for post in bot.server.posts[since["posts"]:]]
        bodies += bot.server.responses[since["responses"]:]
        for body in bodies:
            text = str(body.get("text") or "")
            if "lunch" not in text:
                continue  # the model's own answer ("Noted."), which keeps Slack's formatting
            assert body.get("mrkdwn") in (False, "false"), body  # Slack's formatting off: * _ ~ ` as typed
            assert "<" not in text and ">" not in text, text  # no mention, channel ping or link
            texts.append(html.unescape(text))
    else:
        contents: list[tuple[str, dict[str, Any]]] = [(m["content"], m["payload"])
                                                      for m in bot.server.messages[since["messages"]:]]
        contents += [(r["data"].get("content") or "", r["data"])
                     for r in bot.server.interaction_responses[since["interactions"]:]]
        for content, payload in contents:
            assert payload.get("allowed_mentions") == {"parse": []}, payload  # pings nobody
            if "lunch" not in content:
                continue
            # Each markdown character is escaped with a backslash, so Discord shows it as it is.
            assert not re.search(r"(?<!\\)[*_~`|]", content), content
            texts.append(discord_fake.shown(content))
    return [text for text in texts if "lunch" in text]


def counts(bot) -> dict[str, int]:
    server = bot.server
    if bot.platform == "telegram":
        return {"sent": len(server.sent), "taps": len(server.calls_to("answerCallbackQuery"))}
    if bot.platform == "slack":
        return {"posts": len(server.posts), "responses": len(server.responses)}
    return {"messages": len(server.messages), "interactions": len(server.interaction_responses)}


def test_a_note_saved_at_once_shows_as_written_when_saved_listed_and_undone(bot, owner, model, alice):
    settings_update(user_id=owner.pk, messaging_save="paired_private")
    pair(bot, alice, can_confirm=True)
    model.script(tool_calls(("propose_change", NOTE)), reply("Noted."))

    before = counts(bot)
    said = bot.dm(alice, "remember where we lunch on friday", expect=2)
    saved = shown(bot, before)
    before = counts(bot)
    bot.memory(alice)
    listed = shown(bot, before)
    before = counts(bot)
    bot.dm(alice, "undo")
    undone = shown(bot, before)

    assert "Saved to this conversation's notes" in said.text
    assert len(saved) == 1 and f"\u201c{MARKUP}\u201d" in saved[0]
    assert len(listed) == 1 and f"- lunch: {MARKUP}" in listed[0]
    assert len(undone) == 1 and undone[0].startswith(f"Undone: \u201c{MARKUP}\u201d")


def test_a_note_asked_about_shows_as_written_in_the_question_and_in_the_answer_to_a_tap(bot, owner, model, alice):
    pair(bot, alice, can_confirm=True)
    model.script(tool_calls(("propose_change", NOTE)), reply("Noted."))

    before = counts(bot)
    asked = bot.dm(alice, "remember where we lunch on friday", expect=2)
    question = shown(bot, before)
    answer, proposal_id = asked.buttons[0]
    before = counts(bot)
    bot.tap(alice, answer, proposal_id)
    answered = shown(bot, before)

    assert len(question) == 1 and f"I can save a note to this conversation's notes: \u201c{MARKUP}\u201d" in question[0]
    assert answered and all(f"Saved: \u201c{MARKUP}\u201d (lunch)." in text for text in answered)


def test_the_line_a_question_would_replace_shows_as_written(bot, owner, model, alice):
    from localai_memory.notes.services import note_upsert
    from tests.bridges.conftest import dm_scope

    pair(bot, alice, can_confirm=True)
    note_upsert(owner_id=owner.pk, scope=dm_scope(bot, alice), topic="lunch", summary=MARKUP, source="files",
                actor="you")
    model.script(tool_calls(("propose_change", {"kind": "memory", "topic": "lunch", "summary": "lunch on thursday"})),
                 reply("Noted."))

    before = counts(bot)
    bot.dm(alice, "lunch is on thursday now", expect=2)
    question = shown(bot, before)

    assert len(question) == 1 and f"It would replace \u201c{MARKUP}\u201d." in question[0]


def test_a_telegram_note_naming_someone_by_username_pings_nobody_in_a_group_where_the_bot_repeats_it(
        telegram_bot, telegram_server, owner, model, alice):
    """Telegram makes every ``@username`` of a plain text a mention, which notifies that person in a group.
    The bot's own words quoting a note (the question, "Saved", the /memory listing) carry a word joiner after
    each ``@``: they read the same and mention nobody; so does the model's answer."""
    pair(telegram_bot, alice, can_confirm=True)
    note = {"kind": "memory", "topic": "standup", "summary": "ask @bob_smith about the standup"}
    model.script(tool_calls(("propose_change", note)), reply("Sure, @bob_smith runs it."))

    asked = telegram_bot.group(alice, "remember to ask bob about the standup", expect=2)
    answer, proposal_id = next(button for button in asked.buttons if button[0] == "yes")
    tapped = telegram_bot.tap_seen(alice, answer, proposal_id, in_group=True)
    listed = telegram_bot.group_as_typed(alice, "/memory")

    own = [item for item in telegram_server.sent if "standup" in item["text"]]
    assert len(own) == 3 and [item["mentions"] for item in own] == [[], [], []], own  # question, Saved, listing
    assert [item["text"] for item in own] == [t for t in (*asked.texts, *tapped.public, listed.text) if "standup" in t]
    shown = [item["text"].replace("\u2060", "") for item in own]  # a word joiner shows as nothing
    assert shown[0].startswith("I can save a note to this conversation's notes: \u201cask @bob_smith about")
    assert shown[1].startswith("Saved") and "@bob_smith" in shown[1]
    assert "- standup: ask @bob_smith about the standup" in shown[2]
    [answered] = [item for item in telegram_server.sent if "runs it" in item["text"]]
    assert answered["mentions"] == [] and answered["text"].replace("\u2060", "") == "Sure, @bob_smith runs it."


def test_the_models_answer_on_telegram_pings_nobody_in_a_group_and_reads_as_it_wrote_it(
        telegram_bot, telegram_server, model, alice):
    """The model's answer (careless, or prompt-injected by a message or a web page) naming a member by
    username mentions nobody, as on Slack and Discord: a word joiner after the ``@``, invisible. An e-mail
    address and a link with an ``@`` in it (which Telegram makes no mention of) go as the model wrote them,
    so the link still opens that page."""
    pair(telegram_bot, alice)
    answer = ("Ask @bob_smith (or @anna) about the standup, write to bob.smith@example.com, and see "
              "https://mastodon.social/@bob_smith/1 for the notes.")
    model.script(reply(answer))

    said = telegram_bot.group(alice, "who runs the standup?")

    [sent] = [item for item in telegram_server.sent if "standup" in item["text"]]
    assert not sent["params"].get("parse_mode") and sent["mentions"] == [], sent  # nobody notified
    assert sent["text"].replace("\u2060", "") == answer  # reads as the model wrote it
    assert "bob.smith@example.com" in sent["text"] and "https://mastodon.social/@bob_smith/1 " in sent["text"]
    assert said.texts == [sent["text"]]
