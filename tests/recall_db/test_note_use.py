"""A note a turn shows the model is marked used: recall's recency counts its last use as much as its last
write (a note the assistant keeps needing stays fresh), and a used note is not offered for forgetting."""

from __future__ import annotations

from datetime import timedelta

import pytest
import time_machine
from django.utils import timezone

from localai_memory.notes.paths import Scope
from localai_memory.recall.models import NoteVector
from localai_memory.recall.service import USE_RESOLUTION, notes_activity, notes_used, owner_notes
from tests.chats.helpers import new_chat, send

from .conftest import note

pytestmark = pytest.mark.django_db


def used(owner, topic: str):
    found = notes_activity(owner_id=owner.pk, scope=Scope.user()).get(("user", "", topic))
    return found.used_at if found else None


def test_a_note_shown_in_a_turn_is_marked_used_and_the_others_are_not(api, owner, outsider, model, alices_notes):
    note(outsider, "home", "lives in Oslo", details="A flat by the fjord.")
    with time_machine.travel("2026-12-01 09:00:00+00:00", tick=False):
        body = send(api, new_chat(api), "Which neighbourhood do I live in now?")
    shown = [n["topic"] for n in body["memory"]["recall"]["notes"] if n["shown"]]
    assert "home" in shown and "pets" not in shown
    assert used(owner, "home").isoformat() == "2026-12-01T09:00:00+00:00"
    assert used(owner, "pets") is None
    assert used(outsider, "home") is None  # the same topic of another user is not theirs to mark


def test_a_use_is_written_once_an_hour_at_most(owner, alices_notes):
    start = timezone.now()
    assert notes_used(owner_id=owner.pk, notes=[("user", "", "home")], now=start) >= 1
    assert notes_used(owner_id=owner.pk, notes=[("user", "", "home")], now=start + timedelta(minutes=5)) == 0
    later = start + USE_RESOLUTION + timedelta(seconds=1)
    assert notes_used(owner_id=owner.pk, notes=[("user", "", "home")], now=later) >= 1
    assert used(owner, "home") == later


def test_a_note_shown_again_within_the_hour_costs_the_turn_no_write(api, owner, model, alices_notes):
    """The turn read each note's last use with the notes: one used within ``USE_RESOLUTION`` is not marked
    again (no statement at all), one used before it is."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    chat = new_chat(api)
    question = "Which neighbourhood do I live in now?"
    with time_machine.travel("2026-12-01 09:00:00+00:00", tick=False):
        send(api, chat, question)
    with time_machine.travel("2026-12-01 09:40:00+00:00", tick=False), CaptureQueriesContext(connection) as seen:
        body = send(api, chat, question)
    assert "home" in body["memory"]["recall"]["topics"]
    assert not [q for q in seen.captured_queries if "SET used_at" in q["sql"]]
    assert used(owner, "home").isoformat() == "2026-12-01T09:00:00+00:00"
    with time_machine.travel("2026-12-01 10:01:00+00:00", tick=False):
        send(api, chat, question)
    assert used(owner, "home").isoformat() == "2026-12-01T10:01:00+00:00"


def test_recency_is_the_last_write_or_use_whichever_came_later(owner):
    with time_machine.travel(timezone.now() - timedelta(days=60), tick=False):
        note(owner, "tea", "drinks green tea", source="model")
    written = NoteVector.objects.filter(owner=owner, topic="tea").first().updated_at
    [before] = owner_notes(owner_id=owner.pk, scopes=[Scope.user()])
    assert before.updated_at == written
    now = timezone.now()
    notes_used(owner_id=owner.pk, notes=[("user", "", "tea")], now=now)
    [after] = owner_notes(owner_id=owner.pk, scopes=[Scope.user()])
    assert after.updated_at == now


def test_a_rewritten_note_waits_for_a_turn_to_use_its_new_text(owner):
    note(owner, "tea", "drinks green tea", details="Sencha, mornings.")
    notes_used(owner_id=owner.pk, notes=[("user", "", "tea")])
    assert used(owner, "tea") is not None
    note(owner, "tea", "drinks black tea", details="Sencha, mornings.")  # the line changes, the file does not
    rows = dict(NoteVector.objects.filter(owner=owner, topic="tea").values_list("kind", "used_at"))
    assert rows["line"] is None and rows["details"] is not None


def test_a_recalled_note_without_details_is_marked_used_and_not_offered_for_forgetting(api, owner, model):
    """Its index line is the whole note and the memory block has it already, so the recall block adds nothing
    for it (``shown`` is false); the turn still brought it into the chat, so it counts as used."""
    from localai_memory.growth.consolidation import consolidate_user
    from localai_memory.memory.models import Proposal
    from tests.fakes.openai_server import reply
    from tests.growth.conftest import facts_reply

    with time_machine.travel(timezone.now() - timedelta(days=100), tick=False):
        note(owner, "work", "software engineer at a bank", source="model")
        note(owner, "boots", "hiking boots are size 44", source="model")
    with time_machine.travel("2026-12-01 09:00:00+00:00", tick=False):
        body = send(api, new_chat(api), "Which bank do I work at as a software engineer?")
    recall = body["memory"]["recall"]
    [work] = [n for n in recall["notes"] if n["topic"] == "work"]
    assert work["shown"] is False and "work" in recall["topics"] and recall["count"] >= 1
    assert used(owner, "work").isoformat() == "2026-12-01T09:00:00+00:00"
    assert "boots" not in recall["topics"] and used(owner, "boots") is None

    with time_machine.travel("2026-12-02 09:00:00+00:00", tick=False):
        model.script(reply(facts_reply()))
        consolidate_user(owner_id=owner.pk)
    unused = Proposal.objects.filter(owner=owner, reason="unused")
    assert [p.topic for p in unused] == ["boots"]  # the note nobody needed, not the one the turn used
