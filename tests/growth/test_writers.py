"""Who last wrote a note: whoever changed its index line or its topic file later, read in a fixed number of
queries however many notes and confirmed suggestions there are."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
import time_machine
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from localai_memory.growth.selectors import line_writers, note_author
from localai_memory.memory import proposals
from localai_memory.notes import services as notes_services
from localai_memory.notes.models import ChangeSet, NoteFile
from localai_memory.notes.paths import Scope

pytestmark = pytest.mark.django_db

YOURS = Scope.user()


def days_ago(days: int) -> time_machine.travel:
    return time_machine.travel(timezone.now() - timedelta(days=days), tick=False)


def write(owner, topic: str, summary: str, *, source: str, details: str | None = None) -> ChangeSet:
    return notes_services.note_upsert(owner_id=owner.pk, scope=YOURS, topic=topic, summary=summary,
                                      details=details, source=source, actor="model" if source == "model" else "you")


def edit_details(owner, topic: str, details: str, *, source: str = "files") -> ChangeSet:
    path = YOURS.topic_path(topic)
    version = NoteFile.objects.get(owner=owner, path=path).version
    return notes_services.file_write(owner_id=owner.pk, path=path, content=details, version=version, source=source)


def accept(owner, topic: str, summary: str, *, source: str, details: str | None = None) -> ChangeSet:
    proposal = proposals.proposal_create(owner_id=owner.pk, scope=YOURS, topic=topic, summary=summary,
                                         details=details, source=source)
    change = proposals.proposal_confirm(owner_id=owner.pk, proposal_id=proposal.pk, actor="you")
    assert change is not None
    return change


def test_a_person_who_edited_only_the_details_of_a_model_note_wrote_it_last(owner):
    with days_ago(60):
        write(owner, "units", "uses metric units", details="Celsius.", source="model")
    with days_ago(5):
        edit = edit_details(owner, "units", "Celsius, but miles when running.")

    written = line_writers(owner_id=owner.pk, scope=YOURS, topics=["units"])["units"]

    assert (written.author, written.at, written.model_only) == ("user", edit.created_at, False)
    assert note_author(owner_id=owner.pk, scope=YOURS, topic="units") == "user"


def test_the_line_counts_when_it_changed_after_the_details(owner):
    with days_ago(60):
        write(owner, "units", "uses metric units", details="Celsius.", source="files")
    with days_ago(40):
        change = write(owner, "units", "uses metric units, always", source="model")

    written = line_writers(owner_id=owner.pk, scope=YOURS, topics=["units"])["units"]

    assert (written.author, written.at) == ("model", change.created_at)
    assert not written.model_only  # a person typed it, even though the model changed it last


def test_a_note_only_the_model_ever_touched_is_the_models_alone(owner):
    with days_ago(60):
        write(owner, "units", "uses metric units", details="Celsius.", source="model")
    with days_ago(40):
        change = edit_details(owner, "units", "Celsius and kilometres.", source="model")
    with days_ago(1):
        write(owner, "diet", "vegetarian", source="files")  # another note's change says nothing of this one

    written = line_writers(owner_id=owner.pk, scope=YOURS, topics=["units", "diet", "unknown"])

    assert (written["units"].author, written["units"].at, written["units"].model_only) == (
        "model", change.created_at, True)
    assert (written["diet"].author, written["diet"].model_only) == ("user", False)
    assert "unknown" not in written


def test_a_details_change_past_the_lines_lookback_is_not_proof_the_model_alone_wrote_it(owner):
    with days_ago(60):
        write(owner, "units", "uses metric units", details="Celsius.", source="model")
    with days_ago(50):
        write(owner, "diet", "vegetarian", source="model")  # the index's last change: units' line is older

    written = line_writers(owner_id=owner.pk, scope=YOURS, topics=["units"], lookback=1)["units"]

    assert written.author == "model" and not written.model_only  # who wrote the line is past the lookback


def test_a_person_s_edit_of_the_details_past_the_files_lookback_is_not_taken_for_the_models_alone(owner):
    with days_ago(60):
        write(owner, "units", "uses metric units", details="Celsius.", source="model")
    with days_ago(55):
        edit_details(owner, "units", "Celsius, but miles when running.")  # a person's edit ...
    with days_ago(50):
        write(owner, "diet", "vegetarian", details="No meat.", source="model")
        edit_details(owner, "diet", "No meat, some fish.", source="model")  # ... out of a two-change window

    written = line_writers(owner_id=owner.pk, scope=YOURS, topics=["units", "diet"], lookback=2)

    assert not written["units"].model_only  # its line is older than what the files' window shows
    assert written["diet"].model_only


def test_an_accepted_suggestion_is_the_models_from_consolidation_an_imports_from_import_else_the_users(owner):
    accept(owner, "grown", "grown from chats", details="From a chat.", source="consolidation")
    accept(owner, "imported", "imported from a file", source="import")
    accept(owner, "asked", "proposed over MCP", source="mcp")

    written = line_writers(owner_id=owner.pk, scope=YOURS, topics=["grown", "imported", "asked"])

    assert {topic: (w.author, w.model_only) for topic, w in written.items()} == {
        "grown": ("model", True), "imported": ("import", False), "asked": ("user", False)}


def notes_with_history(owner, first: int, count: int) -> list[str]:
    """``count`` notes, each an accepted suggestion (of varying source), every other one's details edited
    after by a person."""
    topics = []
    for n in range(first, first + count):
        topic = f"topic-{n:02d}"
        accept(owner, topic, f"fact number {n}", details=f"Details of fact {n}.",
               source=("consolidation", "import", "mcp")[n % 3])
        if n % 2:
            edit_details(owner, topic, f"Better details of fact {n}.")
        topics.append(topic)
    return topics


def test_it_reads_in_three_queries_however_many_notes_and_suggestions_there_are(owner):
    few = notes_with_history(owner, 0, 3)
    with CaptureQueriesContext(connection) as for_few:
        written = line_writers(owner_id=owner.pk, scope=YOURS, topics=few)
    assert [written[t].author for t in few] == ["model", "user", "user"]

    many = few + notes_with_history(owner, 3, 15)
    with CaptureQueriesContext(connection) as for_many:
        written = line_writers(owner_id=owner.pk, scope=YOURS, topics=many)
    assert [written[t].author for t in many[3:9]] == ["user", "import", "user", "model", "user", "user"]

    assert len(for_few) == len(for_many) == 3
    index_read = for_many.captured_queries[0]["sql"]
    assert '"before"' in index_read and '"after"' in index_read
    files_read = for_many.captured_queries[1]["sql"]
    # the topic files' text is never read, only its hash (to tell a restore that gives one back)
    assert "MD5(" in files_read and '"before"' not in re.sub(r"MD5\([^)]*\)", "", files_read)


def test_forget_everything_and_its_restore_give_back_each_notes_author(api, owner):
    """A restore is the person's change, but the text it gives back keeps its writer: the model's notes stay
    the model's (they fade, and may be offered to make room), a typed note stays the person's."""
    from localai_memory.recall.service import notes_activity
    from tests.growth.test_memory_command import memory

    with days_ago(60):
        write(owner, "units", "uses metric units", details="Celsius.", source="model")
        write(owner, "tea", "drinks green tea", source="model")
        write(owner, "home", "lives in Rome", details="Trastevere.", source="files")
    assert api.post("/api/chats/memory/forget", {"confirm": True}, format="json").status_code == 200
    [entry] = api.get("/api/files/trash").json()["entries"]
    assert api.post(f"/api/files/trash/{entry['id']}/restore").status_code == 200

    listing = {e["topic"]: e["written_by"] for e in api.get("/api/chats/memory/notes").json()["scopes"][0]["index"]}
    assert listing == {"units": "model", "tea": "model", "home": "user"}
    written = line_writers(owner_id=owner.pk, scope=YOURS, topics=["units", "tea", "home"])
    assert {t: (w.author, w.model_only) for t, w in written.items()} == {
        "units": ("model", True), "tea": ("model", True), "home": ("user", False)}
    activity = notes_activity(owner_id=owner.pk, scope=YOURS)
    assert activity[("user", "", "units")].model_only and activity[("user", "", "tea")].model_only
    tea = next(line for line in memory("list", user="alice").splitlines() if "green tea" in line)
    assert tea.split()[-4] == "assistant"  # then when (date, time) and the version


def test_a_deleted_note_restored_from_the_trash_is_still_the_models(owner):
    from localai_memory.notes.models import TrashEntry

    with days_ago(60):
        write(owner, "units", "uses metric units", details="Celsius.", source="model")
    notes_services.note_upsert(owner_id=owner.pk, scope=YOURS, topic="units", delete=True, source="files",
                               actor="you")
    restore = notes_services.trash_restore(owner_id=owner.pk, entry_id=TrashEntry.objects.get(owner=owner).pk)

    written = line_writers(owner_id=owner.pk, scope=YOURS, topics=["units"])["units"]
    assert (written.author, written.at, written.model_only) == ("model", restore.created_at, True)
    assert note_author(owner_id=owner.pk, scope=YOURS, topic="units") == "model"


def test_an_undo_gives_back_the_author_of_the_text_it_brings_back(owner):
    from localai_memory.recall.service import notes_activity

    with days_ago(60):
        write(owner, "units", "uses metric units", details="Celsius.", source="model")
        write(owner, "home", "lives in Rome", source="files")
    with days_ago(5):
        mine = edit_details(owner, "units", "Celsius, but miles when running.")
        theirs = write(owner, "home", "lives in Lisbon", source="model")
    assert line_writers(owner_id=owner.pk, scope=YOURS, topics=["units"])["units"].author == "user"

    notes_services.change_undo(owner_id=owner.pk, change_id=mine.pk)  # the person takes their edit back
    notes_services.change_undo(owner_id=owner.pk, change_id=theirs.pk)  # and the model's

    written = line_writers(owner_id=owner.pk, scope=YOURS, topics=["units", "home"])
    assert {t: (w.author, w.model_only) for t, w in written.items()} == {
        "units": ("model", True), "home": ("user", False)}
    activity = notes_activity(owner_id=owner.pk, scope=YOURS)
    assert (activity[("user", "", "units")].written_by, activity[("user", "", "home")].written_by) == (
        "model", "user")
