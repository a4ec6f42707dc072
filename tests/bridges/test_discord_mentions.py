"""On Discord, nothing the bot says pings anyone: a mention in the model's answer or in a note's text is
shown as text, never notified (every message goes with no mentions allowed)."""

from __future__ import annotations

import pytest

from tests.bridges.conftest import pair
from tests.bridges.test_conversations import propose
from tests.fakes.openai_server import reply

pytestmark = pytest.mark.django_db(transaction=True)

PINGS = "@everyone @here <@5550002> <@&123456789012345678>"


def test_a_mention_in_the_answer_pings_nobody(discord_bot, model, alice):
    pair(discord_bot, alice)
    model.script(reply(f"Sure, I will tell {PINGS} that lunch is ready."))

    said = discord_bot.group(alice, "announce lunch to everyone")

    assert PINGS in said.text
    sent = discord_bot.server.messages[-1]["payload"]
    assert sent.get("allowed_mentions") == {"parse": []}


def test_a_mention_in_a_note_pings_nobody_in_the_question_nor_in_the_answer_to_a_tap(discord_bot, model, alice):
    pair(discord_bot, alice, can_confirm=True)
    propose(model, {"kind": "memory", "topic": "team", "summary": f"lunch with {PINGS}"}, text="Noted.")

    asked = discord_bot.dm(alice, "remember lunch with the team", expect=2)
    answer, proposal_id = asked.buttons[0]
    discord_bot.tap(alice, answer, proposal_id)

    assert all(m["payload"].get("allowed_mentions") == {"parse": []} for m in discord_bot.server.messages)
    tapped = discord_bot.server.interaction_responses[-1]["data"]
    assert PINGS in tapped["content"] and tapped.get("allowed_mentions") == {"parse": []}
