"""A note the model saved three months ago or more, that nobody changed and no chat needed since, is suggested
for forgetting, full index or not: one suggestion at a time per scope, never a person's note, never one its
owner weighed above the model's own, never again once turned down. The owner decides; Undo brings it back."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from localai_memory.growth.consolidation import consolidate_user
from localai_memory.memory import policy, proposals
from localai_memory.memory.models import Proposal
from localai_memory.memory.services import settings_update
from localai_memory.notes import services as notes_services
from localai_memory.notes.paths import Scope
from localai_memory.recall.service import notes_used
from tests.fakes.openai_server import reply

from .conftest import facts_reply
from .test_make_room import index, suggestions, write

pytestmark = pytest.mark.django_db


def waiting_unused(owner) -> list[str]:
    """The topics of the unused-note suggestions that wait now (not past their 24 hours)."""
    return [p.topic for p in Proposal.objects.filter(owner=owner, status=Proposal.Status.PENDING, reason="unused",
                                                     expires_at__gt=timezone.now())]


def a_pass(owner, model, make_chat, text: str = "Planning a trip to the mountains next week.") -> None:
    make_chat(owner, text)
    model.script(reply(facts_reply()))
    consolidate_user(owner_id=owner.pk)


def test_a_note_nobody_needed_for_three_months_is_suggested_for_forgetting(owner, model, make_chat):
    write(owner, "old-guess", "the model's guess about old-guess", source="model", days_ago=100)
    write(owner, "older-guess", "the model's guess about older-guess", source="model", days_ago=120)
    write(owner, "recent-guess", "the model's guess about recent-guess", source="model", days_ago=60)
    write(owner, "typed", "something I typed long ago", source="files", days_ago=400)

    a_pass(owner, model, make_chat)

    [suggestion] = suggestions(owner)
    assert (suggestion.topic, suggestion.is_delete, suggestion.reason) == ("older-guess", True, "unused")
    assert "no chat has needed it" in policy.MESSAGES[suggestion.reason]
    assert "- older-guess:" in index(owner)  # nothing is forgotten until the owner says so

    a_pass(owner, model, make_chat, "And I need boots for the trip.")
    assert [p.topic for p in suggestions(owner)] == ["older-guess"]  # one at a time

    change = proposals.proposal_confirm(owner_id=owner.pk, proposal_id=suggestion.pk, actor="you")
    assert "- older-guess:" not in index(owner)
    notes_services.change_undo(owner_id=owner.pk, change_id=change.pk)
    assert "- older-guess:" in index(owner)


def test_a_note_a_chat_brought_in_lately_or_weighed_up_by_its_owner_is_not_suggested(owner, model, make_chat):
    write(owner, "used-guess", "the model's guess about used-guess", source="model", days_ago=200)
    write(owner, "weighed-guess", "the model's guess about weighed-guess", source="model", days_ago=200)
    notes_used(owner_id=owner.pk, notes=[("user", "", "used-guess")], now=timezone.now() - timedelta(days=10))
    notes_services.note_importance_set(owner_id=owner.pk, scope=Scope.user(), topic="weighed-guess",
                                       importance=0.9)

    a_pass(owner, model, make_chat)

    assert suggestions(owner) == []


def test_a_suggestion_turned_down_is_not_made_again_and_the_next_one_comes(owner, model, make_chat):
    write(owner, "old-guess", "the model's guess about old-guess", source="model", days_ago=100)
    write(owner, "older-guess", "the model's guess about older-guess", source="model", days_ago=120)
    a_pass(owner, model, make_chat)
    [first] = suggestions(owner)
    proposals.proposal_reject(owner_id=owner.pk, proposal_id=first.pk, actor="you")

    a_pass(owner, model, make_chat, "And I need boots for the trip.")

    assert [p.topic for p in suggestions(owner)] == ["old-guess"]
    assert Proposal.objects.filter(owner=owner, topic="older-guess").count() == 1


def test_a_note_with_a_change_waiting_is_not_suggested_and_an_ignored_one_rests_a_month(owner, model, make_chat,
                                                                                       time_machine):
    from localai_memory.memory.proposals import proposal_create

    write(owner, "old-guess", "the model's guess about old-guess", source="model", days_ago=100)
    write(owner, "older-guess", "the model's guess about older-guess", source="model", days_ago=120)
    proposal_create(owner_id=owner.pk, scope=Scope.user(), topic="older-guess", summary="a better guess")
    a_pass(owner, model, make_chat)
    assert sorted(p.topic for p in suggestions(owner)) == ["old-guess", "older-guess"]
    [unused] = [p for p in suggestions(owner) if p.reason == "unused"]
    assert unused.topic == "old-guess"  # not the one whose change waits

    time_machine.move_to(timezone.now() + timedelta(days=2))  # both expire unanswered
    a_pass(owner, model, make_chat, "And I need boots for the trip.")
    assert waiting_unused(owner) == ["older-guess"]
    time_machine.move_to(timezone.now() + timedelta(days=2))
    a_pass(owner, model, make_chat, "And a map of the valley.")
    assert waiting_unused(owner) == []  # both rest for a month
    time_machine.move_to(timezone.now() + timedelta(days=30))
    a_pass(owner, model, make_chat, "Back home now.")
    assert waiting_unused(owner) == ["older-guess"]


def test_a_full_index_turns_a_waiting_unused_suggestion_into_the_room_for_a_new_fact(owner, model, make_chat):
    from .conftest import fact
    from .test_make_room import LISBON, fill

    fill(owner, {"old-guess": 100, "older-guess": 120})
    a_pass(owner, model, make_chat)
    [unused] = suggestions(owner)
    assert (unused.topic, unused.reason) == ("older-guess", "unused")

    make_chat(owner, LISBON)
    model.script(reply(facts_reply(fact("home", "lives in Lisbon"))))
    consolidate_user(owner_id=owner.pk)

    [room] = suggestions(owner)
    assert room.pk == unused.pk and room.reason == "make_room" and room.makes_room_for["topic"] == "home"
    proposals.proposal_confirm(owner_id=owner.pk, proposal_id=room.pk, actor="you")
    assert [(p.topic, p.is_delete) for p in suggestions(owner)] == [("home", False)]  # the fact, in its turn


def test_under_never_nothing_is_suggested(owner, model, make_chat):
    write(owner, "old-guess", "the model's guess about old-guess", source="model", days_ago=100)
    settings_update(user_id=owner.pk, save_mode="never")

    a_pass(owner, model, make_chat)

    assert suggestions(owner) == []


def test_the_inbox_says_why_and_does_not_pin_the_suggestion_on_a_chat(owner, model, make_chat, client):
    write(owner, "old-guess", "the model's guess about old-guess", source="model", days_ago=100)
    a_pass(owner, model, make_chat)
    client.force_login(owner)

    page = client.get("/inbox/").content.decode()

    assert "no chat has needed it" in page and "old-guess" in page
    assert "Proposed in the chat" not in page and "From: " in page


def test_a_models_note_restored_after_forget_everything_is_the_models_again_and_may_be_suggested(
        owner, model, make_chat, time_machine):
    from localai_memory.notes.models import TrashEntry

    write(owner, "old-guess", "the model's guess about old-guess", source="model", days_ago=200)
    notes_services.memory_forget(owner_id=owner.pk)
    notes_services.trash_restore(owner_id=owner.pk, entry_id=TrashEntry.objects.get(owner=owner).pk)
    a_pass(owner, model, make_chat)
    assert suggestions(owner) == []  # a restore dates it: as if just written

    time_machine.move_to(timezone.now() + timedelta(days=100))
    a_pass(owner, model, make_chat, "And I need boots for the trip.")
    assert waiting_unused(owner) == ["old-guess"]  # still the model's: nobody needed it since
