"""What people notice in a messaging chat, on each platform through its real library: confirming a note with
yes, a yes that does not count, groups, undo, expiry, pairing and duplicate deliveries."""

from __future__ import annotations

from datetime import timedelta

import pytest
import time_machine
from django.utils import timezone

from localai_memory.memory.models import Proposal
from localai_memory.memory.services import settings_update
from localai_memory.notes.paths import Scope
from localai_memory.notes.services import note_upsert
from tests.bridges.conftest import dm_scope, group_scope, notes_of, pair
from tests.fakes.openai_server import reply, tool_calls

pytestmark = pytest.mark.django_db(transaction=True)

VEGAN = {"kind": "memory", "topic": "diet", "summary": "vegan, no honey"}


def propose(model, note: dict, text: str = "Good to know.") -> None:
    """The model proposes ``note`` with propose_change, then answers."""
    model.script(tool_calls(("propose_change", note)), reply(text))


def test_a_paired_sender_confirms_with_yes_and_the_note_lands_in_the_conversation_notes(bot, owner, model, alice):
    pair(bot, alice, can_confirm=True)
    propose(model, VEGAN)

    asked = bot.dm(alice, "Remember that I am vegan.", expect=2)

    assert "Good to know." in asked.texts
    assert "I can save a note" in asked.text and "Reply yes to save it or no to drop it" in asked.text
    assert asked.buttons == [("yes", Proposal.objects.get().pk), ("no", Proposal.objects.get().pk)]
    assert notes_of(owner, dm_scope(bot, alice)) == ""

    answered = bot.dm(alice, "yes")

    assert "Saved" in answered.text
    assert notes_of(owner, dm_scope(bot, alice)) == "- diet: vegan, no honey\n"
    assert Proposal.objects.get().status == "confirmed"


def test_the_question_quotes_the_line_a_change_would_replace_or_forget(bot, owner, model, alice):
    """Asked to change or forget a note, the person sees what it says now, as beside the suggestion in the web
    inbox: no yes given blind. A long line is quoted short."""
    pair(bot, alice, can_confirm=True)
    scope = dm_scope(bot, alice)
    settings_update(user_id=owner.pk, save_mode="ask")
    note_upsert(owner_id=owner.pk, scope=scope, topic="diet", summary="vegetarian, eats fish on Fridays",
                source="files", actor="you")
    long_line = "works at the harbour office " + "and on the ferries " * 8
    note_upsert(owner_id=owner.pk, scope=scope, topic="work", summary=long_line.strip(), source="files",
                actor="you")
    propose(model, VEGAN)

    asked = bot.dm(alice, "I am vegan now.", expect=2)

    assert ("I can save a note to this conversation's notes: \u201cvegan, no honey\u201d (diet). It would replace "
            "\u201cvegetarian, eats fish on Fridays\u201d. Reply yes to save it or no to drop it.") in asked.text
    bot.dm(alice, "no")

    propose(model, {"kind": "memory", "topic": "work", "delete": True})
    asked = bot.dm(alice, "Forget where I work.", expect=2)

    quoted = asked.text.split("\u201cwork\u201d (\u201c", 1)[1].split("\u201d)", 1)[0]
    assert quoted.startswith("works at the harbour office and on the ferries") and quoted.endswith("\u2026")
    assert len(quoted) <= 120 and "in this conversation's notes. Reply yes to forget it or no to keep it." in asked.text
    assert "vegetarian, eats fish on Fridays" in notes_of(owner, scope)


def test_the_question_says_whether_a_change_replaces_the_notes_details_or_adds_some(bot, owner, model, alice):
    pair(bot, alice, can_confirm=True)
    scope = dm_scope(bot, alice)
    settings_update(user_id=owner.pk, save_mode="ask")
    note_upsert(owner_id=owner.pk, scope=scope, topic="diet", summary="vegan, no honey", source="files", actor="you")
    propose(model, {**VEGAN, "details": "No eggs either."})

    asked = bot.dm(alice, "No eggs either.", expect=2)

    assert "(diet). It would add details to the note. Reply yes" in asked.text
    bot.dm(alice, "no")
    note_upsert(owner_id=owner.pk, scope=scope, topic="diet", summary="vegan, no honey", details="Since 2020.",
                source="files", actor="you")
    propose(model, {**VEGAN, "details": "Since 2020. No eggs either."})

    asked = bot.dm(alice, "No eggs either, since 2020.", expect=2)

    assert "(diet). It would replace the note's details. Reply yes" in asked.text


def test_a_question_never_quotes_the_owners_own_note_in_the_chat(bot, owner, model, alice):
    """The owner's own notes (and the agent's) are not shown in a chat others may read, as /memory lists only
    the conversation's: a question to change or forget one names its topic, not what it says; the owner sees
    that beside the suggestion on the web."""
    pair(bot, alice, can_confirm=True)
    note_upsert(owner_id=owner.pk, scope=Scope.user(), topic="health", summary="takes insulin twice a day",
                source="files", actor="you")
    propose(model, {"kind": "memory", "topic": "health", "summary": "runs every morning", "scope": "user"})

    asked = bot.group(alice, "remember that I run every morning", expect=2)

    assert Proposal.objects.get().scope_kind == "user"
    assert "I can save a note to the owner's notes: \u201cruns every morning\u201d (health)." in asked.text
    assert "insulin" not in asked.text
    assert "It would replace the note \u201chealth\u201d as it is now" in asked.text
    bot.group(alice, "no")

    propose(model, {"kind": "memory", "topic": "health", "delete": True, "scope": "user"})
    asked = bot.group(alice, "forget my health note", expect=2)

    assert "I can forget the note \u201chealth\u201d in the owner's notes." in asked.text
    assert "insulin" not in asked.text


def test_a_tap_on_yes_saves_the_note(bot, owner, model, alice):
    pair(bot, alice, can_confirm=True)
    propose(model, VEGAN)
    asked = bot.dm(alice, "Remember that I am vegan.", expect=2)
    answer, proposal_id = asked.buttons[0]

    tapped = bot.tap(alice, answer, proposal_id)

    assert "Saved" in tapped.text
    assert notes_of(owner, dm_scope(bot, alice)) == "- diet: vegan, no honey\n"


def test_on_discord_an_answered_question_shows_the_answer_and_loses_its_buttons(discord_bot, owner, model, alice):
    pair(discord_bot, alice, can_confirm=True)
    propose(model, VEGAN)
    asked = discord_bot.dm(alice, "Remember that I am vegan.", expect=2)
    answer, proposal_id = asked.buttons[0]

    tapped = discord_bot.tap(alice, answer, proposal_id)

    assert "Saved" in tapped.text
    update = discord_bot.server.interaction_responses[-1]
    assert update["type"] == 7  # the question message itself was updated, not answered beside it
    assert update["data"].get("components") == [] and "Saved" in update["data"]["content"]
    assert notes_of(owner, dm_scope(discord_bot, alice)) == "- diet: vegan, no honey\n"


def test_a_tap_whose_answer_telegram_refuses_still_saves_says_so_and_clears_the_buttons(telegram_bot, owner,
                                                                                        model, alice):
    pair(telegram_bot, alice, can_confirm=True)
    propose(model, VEGAN)
    asked = telegram_bot.dm(alice, "Remember that I am vegan.")
    answer, proposal_id = asked.buttons[0]
    telegram_bot.server.fail_next(400, method="answerCallbackQuery",
                                  description="Bad Request: query is too old and response timeout expired or "
                                              "query ID is invalid")

    tapped = telegram_bot.tap(alice, answer, proposal_id)

    assert "Saved: \u201cvegan, no honey\u201d (diet)." in tapped.text
    assert telegram_bot.server.calls_to("editMessageReplyMarkup")
    assert notes_of(owner, dm_scope(telegram_bot, alice)) == "- diet: vegan, no honey\n"
    assert Proposal.objects.get().status == "confirmed"


def test_no_drops_the_note(bot, owner, model, alice):
    pair(bot, alice, can_confirm=True)
    propose(model, VEGAN)
    bot.dm(alice, "Remember that I am vegan.", expect=2)

    answered = bot.dm(alice, "no")

    assert "Dropped" in answered.text
    assert notes_of(owner, dm_scope(bot, alice)) == ""
    assert Proposal.objects.get().status == "rejected"


def test_a_sender_without_the_permission_says_yes_and_is_told_the_note_waits_for_the_owner(bot, owner, model,
                                                                                           alice):
    pair(bot, alice, can_confirm=False)
    propose(model, VEGAN)
    asked = bot.dm(alice, "Remember that I am vegan.", expect=2)
    assert "You cannot confirm notes here yourself" in asked.text
    calls = len(model.requests)

    answered = bot.dm(alice, "yes")

    assert answered.texts == [("You cannot confirm notes in this chat, so the note waits for the owner. The owner can "
                               "allow you to confirm changes from the chat.")]
    assert len(model.requests) == calls  # not a chat message for the model
    assert notes_of(owner, dm_scope(bot, alice)) == ""
    assert Proposal.objects.get().status == "pending"  # it waits for the owner in the inbox


def test_a_sender_without_the_permission_can_say_yes_to_the_model_once_it_has_answered_since_the_question(
        bot, owner, model, alice):
    pair(bot, alice, can_confirm=False)
    propose(model, VEGAN)
    bot.dm(alice, "Remember that I am vegan.", expect=2)
    model.script(reply("Lentil soup is nice. Want a recipe?"))
    bot.dm(alice, "What could I cook tonight?")
    model.script(reply("Here it is: lentils, carrots, cumin."))

    answered = bot.dm(alice, "yes")  # to the model's own question, not to the note's

    assert answered.texts == ["Here it is: lentils, carrots, cumin."]
    assert model.requests[-1]["messages"][-1]["content"] == "yes"
    assert "cannot confirm" not in answered.text
    assert Proposal.objects.get().status == "pending"  # the note still waits for the owner
    assert notes_of(owner, dm_scope(bot, alice)) == ""


def test_in_a_group_under_paired_private_nothing_saves_at_once(bot, owner, model, alice):
    settings_update(user_id=owner.pk, messaging_save="paired_private")
    pair(bot, alice, can_confirm=True)
    propose(model, VEGAN)

    asked = bot.group(alice, "remember that I am vegan", expect=2)

    assert "I can save a note" in asked.text
    assert notes_of(owner, group_scope(bot)) == ""
    assert Proposal.objects.get().status == "pending"


def test_in_a_private_chat_under_paired_private_the_note_saves_at_once_and_the_bot_says_so(bot, owner, model,
                                                                                           alice):
    settings_update(user_id=owner.pk, messaging_save="paired_private")
    pair(bot, alice, can_confirm=False)
    propose(model, VEGAN)

    said = bot.dm(alice, "Remember that I am vegan.", expect=2)

    assert notes_of(owner, dm_scope(bot, alice)) == "- diet: vegan, no honey\n"
    assert "Saved to this conversation's notes" in said.text and "undo within 30 minutes" in said.text
    assert not Proposal.objects.exists()


def test_undo_within_thirty_minutes_restores_the_earlier_text(bot, owner, model, alice):
    settings_update(user_id=owner.pk, messaging_save="paired_private")
    pair(bot, alice)
    note_upsert(owner_id=owner.pk, scope=dm_scope(bot, alice), topic="diet", summary="vegetarian",
                source="files", actor="you")
    propose(model, VEGAN)
    said = bot.dm(alice, "Actually I am vegan now.", expect=2)
    assert notes_of(owner, dm_scope(bot, alice)) == "- diet: vegan, no honey\n"
    assert ("Saved to this conversation's notes: \u201cvegan, no honey\u201d (diet). It replaces \u201cvegetarian"
            "\u201d. Reply undo within 30 minutes to take it back.") in said.texts

    with time_machine.travel(timezone.now() + timedelta(minutes=29)):
        undone = bot.dm(alice, "undo")

    assert "Undone" in undone.text
    assert notes_of(owner, dm_scope(bot, alice)) == "- diet: vegetarian\n"


def test_undo_after_thirty_minutes_undoes_nothing_and_is_a_message_for_the_model(bot, owner, model, alice):
    settings_update(user_id=owner.pk, messaging_save="paired_private")
    pair(bot, alice)
    note_upsert(owner_id=owner.pk, scope=dm_scope(bot, alice), topic="diet", summary="vegetarian",
                source="files", actor="you")
    propose(model, VEGAN)
    bot.dm(alice, "Actually I am vegan now.", expect=2)
    model.script(reply("Undo what?"))

    with time_machine.travel(timezone.now() + timedelta(minutes=31)):
        late = bot.dm(alice, "undo")

    assert late.texts == ["Undo what?"]
    assert model.requests[-1]["messages"][-1]["content"] == "undo"
    assert notes_of(owner, dm_scope(bot, alice)) == "- diet: vegan, no honey\n"


def test_a_proposal_older_than_24_hours_cannot_be_confirmed(bot, owner, model, alice):
    pair(bot, alice, can_confirm=True)
    propose(model, VEGAN)
    bot.dm(alice, "Remember that I am vegan.", expect=2)

    with time_machine.travel(timezone.now() + timedelta(hours=24, minutes=1)):
        late = bot.dm(alice, "yes")

    assert "expired" in late.text
    assert notes_of(owner, dm_scope(bot, alice)) == ""
    assert Proposal.objects.get().status == "expired"


def test_an_unknown_sender_gets_a_pairing_code_and_the_owners_approval_lets_them_in(bot, api, owner, model, carol):
    offered = bot.dm(carol, "Hello, who are you?")

    code = offered.pairing_code()
    assert model.requests == []  # nothing of theirs reached the model
    pending = api.get(f"/api/bridges/bindings/{bot.binding.pk}/pairings").json()["pairings"]
    assert len(pending) == 1
    assert code not in str(pending)  # the code is what Carol tells the owner; the list does not show it

    approved = api.post(f"/api/bridges/bindings/{bot.binding.pk}/pairings/approve", {"code": code}, format="json")
    assert approved.status_code == 200 and approved.json()["paired"] is True
    model.script(reply("Hi Carol!"))
    welcomed = bot.dm(carol, "Hello again")

    assert welcomed.texts == ["Hi Carol!"]
    assert model.requests[-1]["messages"][-1]["content"] == "Hello again"


def test_an_unknown_sender_writing_again_gets_the_same_code(bot, carol, model):
    first = bot.dm(carol, "Hello?").pairing_code()

    assert bot.dm(carol, "Hello??").pairing_code() == first


def test_a_duplicate_delivery_is_processed_once(bot, model, alice):
    pair(bot, alice)
    model.script(reply("Hello Alice."), reply("Still here."))

    said = bot.dm(alice, "Hi there", repeat=2)
    bot.dm(alice, "ping")  # a later message: the duplicate was handled before it

    assert said.texts == ["Hello Alice."]
    user_turns = [r["messages"][-1]["content"] for r in model.requests]
    assert user_turns == ["Hi there", "ping"]


def test_in_a_slack_group_dm_under_paired_private_nothing_saves_at_once(slack_bot, owner, model, alice):
    from tests.fakes import slack_server as slack_fake

    settings_update(user_id=owner.pk, messaging_save="paired_private")
    pair(slack_bot, alice, can_confirm=True)
    propose(model, VEGAN)
    event = slack_fake.message_event(f"<@{slack_fake.BOT_USER_ID}> remember that I am vegan",
                                     user=slack_bot.user(alice), channel="G0FRIENDS", channel_type="mpim")

    asked = slack_bot._deliver(event, 1)

    assert "I can save a note" in asked.text  # a group DM is a group: the note waits to be confirmed
    assert Proposal.objects.get().status == "pending"
    assert not notes_of(owner, dm_scope(slack_bot, alice))


def test_in_a_discord_thread_under_paired_private_nothing_saves_at_once(discord_bot, owner, model, alice):
    from bridges.models import Conversation

    server = discord_bot.server
    settings_update(user_id=owner.pk, messaging_save="paired_private")
    pair(discord_bot, alice, can_confirm=True)
    propose(model, VEGAN)
    before = len(server.messages)
    server.push_message(f"<@{server.bot_id}> remember that I am vegan", author_id=alice.number,
                        username=alice.name.lower(), guild_id=server.guild_id, channel_id=server.thread_id)
    server.wait_for(lambda: len(server.messages) - before >= 2, timeout=15, message="no answer in the thread")

    asked = server.messages[before:]
    assert {int(m["channel_id"]) for m in asked} == {server.thread_id}  # answered where it was asked
    assert any("I can save a note" in m["content"] for m in asked), asked  # a thread is a group: it waits
    assert Proposal.objects.get().status == "pending"
    assert not notes_of(owner, Scope.channel(discord_bot.binding.pk, str(server.thread_id)))
    conversation = Conversation.objects.get(external_id=str(server.thread_id))
    assert (conversation.kind, conversation.title) == ("group", "weekend plans")


def test_a_note_for_a_memory_addon_waits_for_a_yes_even_under_save_for_a_paired_sender(bot, owner, model, alice,
                                                                                       monkeypatch):
    """An add-on of one store for every chat (no namespaces): more than this conversation, so never saved at once
    here."""
    import sample_memory_provider

    from localai_memory.memory.services import provider_pick

    monkeypatch.delenv("SAMPLE_PROVIDER_DOWN", raising=False)
    monkeypatch.setenv("SAMPLE_PROVIDER_ONE_STORE", "1")
    store: dict[str, str] = {}
    monkeypatch.setitem(sample_memory_provider.NOTES, owner.pk, store)
    provider_pick(user_id=owner.pk, provider="sample")
    settings_update(user_id=owner.pk, messaging_save="paired_private")
    pair(bot, alice)
    propose(model, VEGAN)

    asked = bot.dm(alice, "Remember that I am vegan.", expect=2)

    assert store == {} and "yes" in asked.text.lower()
    said = bot.dm(alice, "yes")
    assert store == {"diet": "vegan, no honey"}
    assert "undo" not in said.text.lower()
    assert notes_of(owner, dm_scope(bot, alice)) == ""


def test_a_note_to_forget_is_asked_as_forget_or_keep_and_yes_forgets_it(bot, owner, model, alice):
    pair(bot, alice, can_confirm=True)
    propose(model, VEGAN)
    bot.dm(alice, "Remember that I am vegan.", expect=2)
    bot.dm(alice, "yes")
    assert notes_of(owner, dm_scope(bot, alice)) == "- diet: vegan, no honey\n"
    propose(model, {"kind": "memory", "topic": "diet", "delete": True}, text="I can drop that.")

    asked = bot.dm(alice, "Forget what I eat.", expect=2)

    assert "I can forget the note \u201cdiet\u201d" in asked.text
    assert "Reply yes to forget it or no to keep it" in asked.text and "save" not in asked.text.lower()
    answered = bot.dm(alice, "yes")
    assert "Forgotten: the note \u201cdiet\u201d. It waits in the Trash of your Files" in answered.text
    assert notes_of(owner, dm_scope(bot, alice)) == ""
    from localai_memory.notes.models import TrashEntry

    trashed = TrashEntry.objects.get(owner=owner, kind="note")
    assert [f.content for f in trashed.files.all()] == ["- diet: vegan, no honey\n"]


def test_no_to_a_note_to_forget_keeps_it(bot, owner, model, alice):
    pair(bot, alice, can_confirm=True)
    note_upsert(owner_id=owner.pk, scope=dm_scope(bot, alice), topic="diet", summary="vegan, no honey",
                source="files")
    propose(model, {"kind": "memory", "topic": "diet", "delete": True}, text="I can drop that.")
    bot.dm(alice, "Forget what I eat.", expect=2)

    answered = bot.dm(alice, "no")

    assert "Kept: the note \u201cdiet\u201d. Nothing was forgotten." in answered.text
    assert notes_of(owner, dm_scope(bot, alice)) == "- diet: vegan, no honey\n"
