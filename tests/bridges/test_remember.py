"""``/remember <fact>`` in a messaging chat, on each platform through its real library (on Slack, as the
slash command Slack delivers): the sender's own note, saved to the conversation's notes with its Undo when
their yes would count, asked otherwise, and never a model call."""

from __future__ import annotations

import pytest

from localai_memory.memory.models import Proposal
from localai_memory.memory.services import settings_update
from localai_memory.notes.models import ChangeSet
from tests.bridges.conftest import dm_scope, notes_of, pair

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_paired_sender_who_may_confirm_saves_at_once_and_can_undo(bot, owner, model, alice):
    sender = pair(bot, alice, can_confirm=True)

    said = bot.remember(alice, "I live in Rome")

    assert said.texts == [("Saved to this conversation's notes: \u201cI live in Rome\u201d (live-rome). Reply undo "
                          "within 30 minutes to take it back.")]
    assert notes_of(owner, dm_scope(bot, alice)) == "- live-rome: I live in Rome\n"
    change = ChangeSet.objects.get(source="chat")
    sender.refresh_from_db()  # the label the platform gave with the message
    assert change.actor == f"{sender.label} with /remember"
    assert model.requests == []

    undone = bot.dm(alice, "undo")

    assert "Undone" in undone.text and notes_of(owner, dm_scope(bot, alice)) == ""


def test_a_paired_sender_who_may_not_confirm_is_asked_and_nothing_is_saved_yet(bot, owner, model, alice):
    pair(bot, alice, can_confirm=False)

    asked = bot.remember(alice, "I live in Rome")

    proposal = Proposal.objects.get()
    assert proposal.source == "chat" and proposal.reason == "typed_needs_confirmer" and proposal.status == "pending"
    assert "I can save a note to this conversation's notes: \u201cI live in Rome\u201d" in asked.text
    assert "You cannot confirm notes here yourself" in asked.text
    assert asked.buttons == [("yes", proposal.pk), ("no", proposal.pk)]
    assert notes_of(owner, dm_scope(bot, alice)) == "" and model.requests == []


def test_where_messaging_apps_may_not_save_it_says_so(bot, owner, model, alice):
    settings_update(user_id=owner.pk, messaging_save="never")
    pair(bot, alice, can_confirm=True)

    said = bot.remember(alice, "I live in Rome")

    assert said.texts == [("Nothing was saved. Saving notes from messaging apps is off in your settings (In "
                          "messaging apps).")]
    assert notes_of(owner, dm_scope(bot, alice)) == "" and not Proposal.objects.exists()


def test_an_unpaired_sender_gets_a_pairing_code_and_saves_nothing(bot, owner, model, carol):
    said = bot.remember(carol, "I live in Rome")

    assert said.pairing_code()
    assert not ChangeSet.objects.filter(source="chat").exists() and model.requests == []


def test_a_telegram_group_command_addressed_to_the_bot_saves_to_the_groups_notes(telegram_bot, owner, model,
                                                                                   alice):
    from tests.bridges.conftest import group_scope

    pair(telegram_bot, alice, can_confirm=True)

    said = telegram_bot.group(alice, "/remember@memory_bot we meet on Fridays")

    assert "Saved to this conversation's notes" in said.text
    assert notes_of(owner, group_scope(telegram_bot)) == "- meet-fridays: we meet on Fridays\n"
