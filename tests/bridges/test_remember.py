"""``/remember <fact>`` and ``/memory`` in a messaging chat, on each platform through its real library (on Slack, as the
slash command Slack delivers): the sender's own note, saved to the conversation's notes with its Undo when
their yes would count, asked otherwise, and never a model call."""

from __future__ import annotations

import pytest

from bridges import core
from bridges.models import Conversation
from localai_memory.memory.models import Proposal
from localai_memory.memory.services import settings_update
from localai_memory.notes.models import ChangeSet
from tests.bridges.conftest import dm_scope, group_scope, notes_of, pair
from tests.fakes.openai_server import reply

pytestmark = pytest.mark.django_db(transaction=True)


def met(bot, model, person) -> int:
    """``person`` has written to the bot once (a Slack command works only where the bot has a conversation);
    the number of model calls so far."""
    model.script(reply("Hello."))
    bot.dm(person, "hello")
    return len(model.requests)


def test_a_paired_sender_who_may_confirm_saves_at_once_and_can_undo(bot, owner, model, alice):
    sender = pair(bot, alice, can_confirm=True)
    calls = met(bot, model, alice)

    said = bot.remember(alice, "I live in Rome")

    assert said.texts == [("Saved to this conversation's notes: \u201cI live in Rome\u201d (live-rome). Reply undo "
                          "within 30 minutes to take it back.")]
    assert notes_of(owner, dm_scope(bot, alice)) == "- live-rome: I live in Rome\n"
    change = ChangeSet.objects.get(source="chat")
    sender.refresh_from_db()  # the label the platform gave with the message
    assert change.actor == f"{sender.label} with /remember"
    assert len(model.requests) == calls  # no model call

    undone = bot.dm(alice, "undo")

    assert "Undone" in undone.text and notes_of(owner, dm_scope(bot, alice)) == ""


def test_a_paired_sender_who_may_not_confirm_is_asked_and_nothing_is_saved_yet(bot, owner, model, alice):
    pair(bot, alice, can_confirm=False)
    calls = met(bot, model, alice)

    asked = bot.remember(alice, "I live in Rome")

    proposal = Proposal.objects.get()
    assert proposal.source == "chat" and proposal.reason == "typed_needs_confirmer" and proposal.status == "pending"
    assert "I can save a note to this conversation's notes: \u201cI live in Rome\u201d" in asked.text
    assert "You cannot confirm notes here yourself" in asked.text
    assert asked.buttons == [("yes", proposal.pk), ("no", proposal.pk)]
    assert notes_of(owner, dm_scope(bot, alice)) == "" and len(model.requests) == calls


def test_where_messaging_apps_may_not_save_it_says_so(bot, owner, model, alice):
    settings_update(user_id=owner.pk, messaging_save="never")
    pair(bot, alice, can_confirm=True)
    met(bot, model, alice)

    said = bot.remember(alice, "I live in Rome")

    assert said.texts == [("Nothing was saved. Saving notes from messaging apps is off in your settings (In "
                          "messaging apps).")]
    assert notes_of(owner, dm_scope(bot, alice)) == "" and not Proposal.objects.exists()


def test_an_unpaired_sender_gets_a_pairing_code_and_saves_nothing(bot, owner, model, carol):
    bot.dm(carol, "hello")  # a pairing code, and nothing reaches the model

    said = bot.remember(carol, "I live in Rome")

    assert said.pairing_code()
    assert not ChangeSet.objects.filter(source="chat").exists() and model.requests == []


def test_a_telegram_group_command_addressed_to_the_bot_saves_to_the_groups_notes(telegram_bot, owner, model,
                                                                                   alice):
    pair(telegram_bot, alice, can_confirm=True)

    said = telegram_bot.group_as_typed(alice, "/remember@memory_test_bot we meet on Fridays")

    assert "Saved to this conversation's notes" in said.text
    assert notes_of(owner, group_scope(telegram_bot)) == "- meet-fridays: we meet on Fridays\n"


def test_a_telegram_command_for_another_bot_is_not_for_this_one(telegram_bot, owner, model, alice):
    pair(telegram_bot, alice, can_confirm=True)

    said = telegram_bot.group_as_typed(alice, "/remember@weather_bot we meet on Fridays")

    assert said.texts == [] and notes_of(owner, group_scope(telegram_bot)) == "" and model.requests == []


def test_under_paired_private_a_paired_sender_saves_in_a_direct_chat_without_the_permission(bot, owner, model,
                                                                                              alice):
    settings_update(user_id=owner.pk, messaging_save="paired_private")
    pair(bot, alice, can_confirm=False)
    met(bot, model, alice)

    said = bot.remember(alice, "I live in Rome")

    assert "Saved to this conversation's notes" in said.text
    assert notes_of(owner, dm_scope(bot, alice)) == "- live-rome: I live in Rome\n"


def test_a_slack_command_where_the_bot_has_no_conversation_saves_nothing(slack_bot, owner, model, alice):
    pair(slack_bot, alice, can_confirm=True)

    said = slack_bot.remember(alice, "I live in Rome", channel="D0OTHERPERSON")

    assert said.texts == [core.NOT_HERE_TEXT]
    assert not ChangeSet.objects.filter(source="chat").exists()
    assert not Conversation.objects.filter(external_id="D0OTHERPERSON").exists()


def test_a_slack_answer_the_bot_cannot_post_is_shown_to_its_typist(slack_bot, slack_server, owner, model, alice):
    pair(slack_bot, alice, can_confirm=True)
    met(slack_bot, model, alice)
    slack_server.fail_next(200, method="chat.postMessage", error="not_in_channel")

    said = slack_bot.remember(alice, "I live in Rome")

    assert any(text.startswith("Saved to this conversation's notes") for text in said.texts)
    assert slack_server.responses[-1]["response_type"] == "ephemeral"


def test_in_a_group_remember_addressed_to_the_bot_saves_to_the_groups_notes(bot, owner, model, alice):
    pair(bot, alice, can_confirm=True)
    calls = met(bot, model, alice)

    said = bot.group(alice, "/remember we meet on Fridays")

    assert "Saved to this conversation's notes" in said.text
    assert notes_of(owner, group_scope(bot)) == "- meet-fridays: we meet on Fridays\n"
    assert len(model.requests) == calls


def test_memory_lists_this_conversations_notes_and_nothing_of_the_owners_own(bot, owner, model, alice):
    from localai_memory.notes.paths import Scope
    from localai_memory.notes.services import note_upsert

    note_upsert(owner_id=owner.pk, scope=Scope.user(), topic="salary", summary="earns a lot", source="files")
    pair(bot, alice, can_confirm=True)
    calls = met(bot, model, alice)
    assert bot.memory(alice).texts == ["This conversation has no notes yet. Write /remember and a fact to add one."]
    bot.remember(alice, "I live in Rome")

    note_upsert(owner_id=owner.pk, scope=group_scope(bot), topic="fridays", summary="meets on Fridays",
                source="files")  # another conversation's

    listed = bot.memory(alice)

    assert listed.text.startswith("This conversation's notes (1):\n- live-rome: I live in Rome\n")
    assert "salary" not in listed.text and "fridays" not in listed.text and len(model.requests) == calls


def test_memory_while_memory_is_off_says_so_first(bot, owner, model, alice):
    pair(bot, alice, can_confirm=True)
    met(bot, model, alice)
    bot.remember(alice, "I live in Rome")
    settings_update(user_id=owner.pk, enabled=False)

    listed = bot.memory(alice)

    assert listed.text.startswith("Memory is off here, so the assistant reads none of these. Memory is off in "
                                  "your settings.")
    assert "- live-rome: I live in Rome" in listed.text
