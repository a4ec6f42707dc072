"""Answers longer than a platform takes in one message: they arrive whole, in several messages cut at
paragraphs, with the question after them and its buttons, on each platform through its real library (the
loopback servers refuse a text over the platform's limit, as the platforms do)."""

from __future__ import annotations

import pytest

from localai_memory.memory.models import Proposal
from tests.bridges.conftest import pair
from tests.bridges.test_conversations import VEGAN, propose

pytestmark = pytest.mark.django_db(transaction=True)

#: What each platform takes in one message (Slack: the advice is under 4,000; Telegram counts UTF-16 units).
LIMITS = {"telegram": 4096, "slack": 4000, "discord": 2000}


def long_answer(paragraphs: int = 12) -> str:
    return "\n\n".join(f"Step {n}: " + " ".join(f"stir{n}x{w}" for w in range(90)) for n in range(paragraphs))


def parts_of(text: str, limit: int) -> int:
    """How many messages ``text`` needs at the least (the Discord driver waits for that many)."""
    return -(-len(text) // limit) + 1


def test_a_long_answer_arrives_whole_in_several_messages_followed_by_the_question(bot, owner, model, alice):
    pair(bot, alice, can_confirm=True)
    answer = long_answer()
    propose(model, VEGAN, text=answer)

    said = bot.dm(alice, "Give me the whole recipe, and remember that I am vegan.",
                  expect=parts_of(answer, LIMITS[bot.platform]) + 1)

    assert len(said.texts) >= 3
    assert all(len(text.encode("utf-16-le")) // 2 <= LIMITS[bot.platform] for text in said.texts)
    *parts, question = said.texts
    assert " ".join(" ".join(parts).split()) == " ".join(answer.split())  # every word, in order
    assert all(part.startswith("Step ") for part in parts)  # cut at paragraphs
    assert "I can save a note" in question
    proposal = Proposal.objects.get()
    assert said.buttons == [("yes", proposal.pk), ("no", proposal.pk)]


def test_a_part_the_platform_refuses_does_not_keep_back_the_rest(bot, owner, model, alice):
    pair(bot, alice, can_confirm=True)
    answer = long_answer()
    propose(model, VEGAN, text=answer)
    if bot.platform == "telegram":
        bot.server.fail_next(400, method="sendMessage", description="Bad Request: message is too long")
    elif bot.platform == "slack":
        bot.server.fail_next(400, method="chat.postMessage", error="msg_too_long")
    else:
        bot.server.fail_next(403, method="POST", path="/messages")

    said = bot.dm(alice, "Give me the whole recipe, and remember that I am vegan.",
                  expect=parts_of(answer, LIMITS[bot.platform]))

    assert "Step 0:" not in said.text  # the first part was refused
    assert "stir11x89" in said.text  # the parts after it went, to the last word
    assert "I can save a note" in said.texts[-1]
    assert said.buttons
