"""A full index: the pass suggests forgetting the note the model saved longest ago (a month or more, unchanged
since), never one a person wrote; the owner decides, and Undo brings it back."""

from __future__ import annotations

from datetime import timedelta

import pytest
import time_machine
from django.utils import timezone

from localai_memory.growth.consolidation import EPISODES_TOPIC, consolidate_user
from localai_memory.memory import policy, proposals
from localai_memory.memory.models import Proposal
from localai_memory.memory.services import settings_update
from localai_memory.notes import selectors as notes_selectors
from localai_memory.notes import services as notes_services
from localai_memory.notes.paths import INDEX_MAX_LINES, Scope
from tests.fakes.openai_server import reply

from .conftest import fact, facts_reply

pytestmark = pytest.mark.django_db

LISBON = "I moved to Lisbon last month and I only eat vegetarian food."


def write(owner, topic: str, summary: str, *, source: str, days_ago: int = 0) -> None:
    with time_machine.travel(timezone.now() - timedelta(days=days_ago), tick=False):
        notes_services.note_upsert(owner_id=owner.pk, scope=Scope.user(), topic=topic, summary=summary,
                                   source=source, actor="you" if source == "files" else "model")


def fill(owner, model_notes: dict[str, int]) -> None:
    """A full index: the model's notes (topic: days ago) and the person's own for the rest."""
    for topic, days_ago in model_notes.items():
        write(owner, topic, f"the model's guess about {topic}", source="model", days_ago=days_ago)
    for n in range(INDEX_MAX_LINES - len(model_notes)):
        write(owner, f"typed-{n:02d}", f"something I typed, number {n}", source="files", days_ago=90)


def suggestions(owner) -> list[Proposal]:
    return list(Proposal.objects.filter(owner=owner, status=Proposal.Status.PENDING).order_by("id"))


def index(owner) -> str:
    return notes_selectors.index_text(owner_id=owner.pk, scope=Scope.user())


def test_a_full_index_gets_a_suggestion_to_forget_the_oldest_note_of_the_model(owner, model, make_chat):
    fill(owner, {"old-guess": 45, "older-guess": 60, "fresh-guess": 5})
    make_chat(owner, LISBON)
    model.script(reply(facts_reply(fact("home", "lives in Lisbon"))))

    result = consolidate_user(owner_id=owner.pk)

    [suggestion] = suggestions(owner)
    assert (suggestion.topic, suggestion.delete, suggestion.reason) == ("older-guess", True, "make_room")
    assert suggestion.old_summary == "the model's guess about older-guess"
    assert {"topic": "home", "reason": "cap_exceeded"} in result.refused  # the new fact did not fit
    assert "These notes are full" in policy.MESSAGES[suggestion.reason]
    assert "- older-guess:" in index(owner)  # nothing is forgotten until the owner says so

    change = proposals.proposal_confirm(owner_id=owner.pk, proposal_id=suggestion.pk, actor="you")
    assert "- older-guess:" not in index(owner) and "- old-guess:" in index(owner)

    notes_services.change_undo(owner_id=owner.pk, change_id=change.pk)
    assert "- older-guess: the model's guess about older-guess" in index(owner)


def test_the_inbox_says_why_the_note_should_go(owner, model, make_chat, client):
    fill(owner, {"old-guess": 45})
    make_chat(owner, LISBON)
    model.script(reply(facts_reply(fact("home", "lives in Lisbon"))))
    consolidate_user(owner_id=owner.pk)

    client.force_login(owner)
    page = client.get("/inbox/").content.decode()
    assert "Forget the note “old-guess”?" in page
    assert "These notes are full" in page and "Undo brings it back" in page


def test_notes_a_person_wrote_or_the_model_wrote_lately_are_never_suggested(owner, model, make_chat):
    fill(owner, {"fresh-guess": 12, EPISODES_TOPIC: 90})
    make_chat(owner, LISBON)
    model.script(reply(facts_reply(fact("home", "lives in Lisbon"))))

    result = consolidate_user(owner_id=owner.pk)

    assert suggestions(owner) == []
    assert {"topic": "home", "reason": "cap_exceeded"} in result.refused


def test_one_suggestion_waits_at_a_time_and_one_turned_down_is_not_made_again(owner, model, make_chat):
    fill(owner, {"old-guess": 45, "older-guess": 60})
    make_chat(owner, LISBON)
    model.script(reply(facts_reply(fact("home", "lives in Lisbon"))))
    consolidate_user(owner_id=owner.pk)
    [first] = suggestions(owner)

    make_chat(owner, "I started learning the cello.")
    model.script(reply(facts_reply(fact("music", "learns the cello"))))
    consolidate_user(owner_id=owner.pk)
    assert suggestions(owner) == [first]  # still the one waiting

    proposals.proposal_reject(owner_id=owner.pk, proposal_id=first.pk, actor="you")
    make_chat(owner, "I also play chess on Sundays.")
    model.script(reply(facts_reply(fact("chess", "plays chess on Sundays"))))
    consolidate_user(owner_id=owner.pk)
    [second] = suggestions(owner)
    assert (second.topic, second.reason) == ("old-guess", "make_room")  # the next one, not the refused one


def test_under_never_nothing_is_suggested(owner, model, make_chat):
    fill(owner, {"old-guess": 45})
    settings_update(user_id=owner.pk, save_mode="never")
    make_chat(owner, LISBON)
    model.script(reply(facts_reply(fact("home", "lives in Lisbon"))))

    consolidate_user(owner_id=owner.pk)

    assert suggestions(owner) == []
