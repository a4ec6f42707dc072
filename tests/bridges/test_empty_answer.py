"""A model that answers with nothing (or only blanks) is not silence in the chat: the bot says so, and still
asks its question."""

from __future__ import annotations

import pytest

from bridges import core
from localai_memory.memory.models import Proposal
from tests.bridges.conftest import pair
from tests.bridges.test_conversations import VEGAN, propose
from tests.fakes.openai_server import reply

pytestmark = pytest.mark.django_db(transaction=True)


def test_an_empty_answer_is_said_to_be_empty(bot, model, alice):
    pair(bot, alice)
    model.script(reply("  \n "))

    said = bot.dm(alice, "Are you there?")

    assert said.texts == [core.NO_ANSWER_TEXT]


def test_an_empty_answer_with_a_question_says_both(bot, model, alice):
    pair(bot, alice, can_confirm=True)
    propose(model, VEGAN, text="")

    said = bot.dm(alice, "Remember that I am vegan.", expect=2)

    assert said.texts[0] == core.NO_ANSWER_TEXT
    assert "I can save a note" in said.texts[1]
    assert said.buttons[0] == ("yes", Proposal.objects.get().pk)
