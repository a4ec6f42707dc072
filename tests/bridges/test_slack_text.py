"""Slack delivers what people type in its markup (``&amp;``, ``<https://…|label>``, ``<@U123>``): the model and the
notes get the text as it was typed, and the bot's echo shows it once escaped, as Slack wants, not twice."""

from __future__ import annotations

import pytest

from tests.bridges.conftest import dm_scope, notes_of, pair
from tests.fakes.openai_server import reply

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_model_reads_a_slack_message_as_it_was_typed(slack_bot, model, alice):
    pair(slack_bot, alice)
    model.script(reply("Noted."))

    slack_bot.dm(alice, "R&amp;D moved: see <https://wiki.example/rd?a=1&amp;b=2|the wiki> or "
                        "<https://example.org>, mail <mailto:rd@example.org|rd@example.org>, ask <@U5550002> in "
                        "<#C0GENERAL|general> if 1 &lt; 2 &gt; 0 <!here>; typed <http://example.com|example.com>")

    assert model.requests[-1]["messages"][-1]["content"] == (
        "R&D moved: see the wiki (https://wiki.example/rd?a=1&b=2) or https://example.org, mail rd@example.org, "
        "ask @u5550002 in #general if 1 < 2 > 0 @here; typed example.com")


def test_a_note_remembered_on_slack_is_saved_and_echoed_as_it_was_typed(slack_bot, owner, model, alice):
    pair(slack_bot, alice, can_confirm=True)
    model.script(reply("Hello."))
    slack_bot.dm(alice, "hello")

    said = slack_bot.remember(alice, "R&amp;D sits on floor 3")

    assert "R&D sits on floor 3" in notes_of(owner, dm_scope(slack_bot, alice))
    assert "\u201cR&amp;D sits on floor 3\u201d" in said.text  # escaped once for Slack, shown as R&D
