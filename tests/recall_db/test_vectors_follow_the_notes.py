"""The recall rows follow every write of the notes store in the same transaction: a saved note is
recallable at once, and undo, the Trash and Forget take it out of recall (restore brings it back)."""

from __future__ import annotations

import pytest
import time_machine
from django.db import transaction

from localai_memory.notes.models import ChangeSet, TrashEntry
from localai_memory.notes.paths import Scope
from localai_memory.notes.services import (
    CapExceeded,
    change_undo,
    file_delete,
    file_write,
    memory_forget,
    note_upsert,
    trash_restore,
)
from localai_memory.recall import index, service
from localai_memory.recall.embedders import FAST_MODEL_ID
from localai_memory.recall.models import NoteVector

from .conftest import note

pytestmark = pytest.mark.django_db

QUERY = "Which neighbourhood do I live in?"


def recalled(owner, query: str = QUERY) -> list[str]:
    return [r.note.topic for r in service.recall_notes(owner_id=owner.pk, scopes=[Scope.user()], query=query).items]


def test_a_saved_note_is_recallable_at_once_with_who_wrote_it(owner):
    change = note_upsert(owner_id=owner.pk, scope=Scope.user(), topic="home", summary="lives in Rome",
                         details="Trastevere since 2024.", source=ChangeSet.Source.MODEL, actor="the model",
                         automatic=True)
    rows = {row.kind: row for row in NoteVector.objects.filter(owner=owner)}
    assert set(rows) == {"line", "details"}
    assert rows["line"].text == "lives in Rome" and rows["details"].text == "Trastevere since 2024.\n"
    assert {row.source for row in rows.values()} == {"model"}
    assert {row.updated_at for row in rows.values()} == {change.created_at}
    assert rows["line"].dim == 384 and rows["line"].model_id == FAST_MODEL_ID
    assert recalled(owner) == ["home"]


def test_undo_takes_the_note_out_of_recall(owner):
    note(owner, "diet", "vegetarian")
    change = note_upsert(owner_id=owner.pk, scope=Scope.user(), topic="home", summary="lives in Rome",
                         details="Trastevere since 2024.", source="model", actor="the model", automatic=True)
    assert recalled(owner) == ["home"]
    change_undo(owner_id=owner.pk, change_id=change.pk)
    assert recalled(owner) == []
    assert not NoteVector.objects.filter(owner=owner, topic="home").exists()
    assert NoteVector.objects.filter(owner=owner, topic="diet").count() == 1


def test_undoing_an_update_brings_back_the_old_text(owner):
    note(owner, "home", "lives in Rome", details="Trastevere since 2024.")
    change = note_upsert(owner_id=owner.pk, scope=Scope.user(), topic="home", summary="lives in Milan",
                         details="Navigli since 2026.", source="model", actor="the model")
    assert "Navigli" in NoteVector.objects.get(owner=owner, topic="home", kind="details").text
    change_undo(owner_id=owner.pk, change_id=change.pk)
    assert NoteVector.objects.get(owner=owner, topic="home", kind="line").text == "lives in Rome"
    assert "Trastevere" in NoteVector.objects.get(owner=owner, topic="home", kind="details").text


def test_the_trash_takes_the_note_out_and_restore_brings_it_back(owner):
    note(owner, "home", "lives in Rome", details="Trastevere since 2024.")
    topic_entry = file_delete(owner_id=owner.pk, path="Memory/home.md")
    assert list(NoteVector.objects.filter(owner=owner).values_list("kind", flat=True)) == ["line"]
    trash_restore(owner_id=owner.pk, entry_id=topic_entry.pk)
    index_entry = file_delete(owner_id=owner.pk, path="Memory/index.md")  # its topic files go with it
    assert recalled(owner) == [] and not NoteVector.objects.filter(owner=owner).exists()
    trash_restore(owner_id=owner.pk, entry_id=index_entry.pk)
    assert recalled(owner) == ["home"]
    assert sorted(NoteVector.objects.filter(owner=owner).values_list("kind", flat=True)) == ["details", "line"]


def test_forget_everything_takes_every_scope_out_of_recall(owner):
    note(owner, "home", "lives in Rome", details="Trastevere since 2024.")
    note(owner, "style", "answers in Italian", scope=Scope.agent(4))
    memory_forget(owner_id=owner.pk)
    assert not NoteVector.objects.filter(owner=owner).exists()
    assert recalled(owner) == []
    assert service.search(owner_id=owner.pk, scopes=[Scope.user(), Scope.agent(4)], query="Italian")["results"] == []
    trash_restore(owner_id=owner.pk, entry_id=TrashEntry.objects.get(owner=owner).pk)
    assert NoteVector.objects.filter(owner=owner).count() == 3


def test_a_write_that_fails_leaves_recall_as_it_was(owner):
    for n in range(40):
        note(owner, f"t{n}", f"fact {n}")
    before = list(NoteVector.objects.filter(owner=owner).order_by("id").values_list("id", "text"))
    with pytest.raises(CapExceeded):
        note(owner, "home", "lives in Rome")
    assert list(NoteVector.objects.filter(owner=owner).order_by("id").values_list("id", "text")) == before


def test_a_rolled_back_write_leaves_no_vector_behind(owner):
    with pytest.raises(RuntimeError), transaction.atomic():
        note(owner, "home", "lives in Rome")
        assert NoteVector.objects.filter(owner=owner).exists()  # in step inside the transaction
        raise RuntimeError("the caller fails after the write")
    assert not NoteVector.objects.filter(owner=owner).exists()


def test_an_edit_on_the_files_page_re_embeds_only_what_changed(owner, openai_server, use_endpoint):
    from tests.recall_db.conftest import real_embeddings

    openai_server.embed = real_embeddings
    use_endpoint(openai_server)
    file_write(owner_id=owner.pk, path="Memory/index.md", version=None,
               content="- home: lives in Rome\n- diet: vegetarian\n- pets: a dog named Rex\n")
    assert [len(r["input"]) for r in openai_server.embedding_requests] == [3]
    file_write(owner_id=owner.pk, path="Memory/index.md", version=1,
               content="- home: lives in Milan\n- diet: vegetarian\n- pets: a dog named Rex\n")
    assert openai_server.embedding_requests[-1]["input"] == ["my home: lives in Milan"]
    assert NoteVector.objects.filter(owner=owner, model_id="openai:all-minilm-l6-v2").count() == 3


def test_a_failing_embedder_stores_the_row_and_the_catch_up_embeds_it(owner, openai_server, use_endpoint):
    from localai_memory.recall import index, tasks

    use_endpoint(openai_server)
    openai_server.fail_next(500, when=lambda request: request.path.endswith("/embeddings"))
    note(owner, "home", "lives in Rome")  # the write itself succeeds
    row = NoteVector.objects.get(owner=owner)
    assert row.embedding is None and row.model_id == "" and row.text == "lives in Rome"
    index.reset_breakers()
    assert tasks.catch_up(owner_id=owner.pk) == {"embedded": 1, "done": True, "failed": False}
    row.refresh_from_db()
    assert row.model_id == "openai:all-minilm-l6-v2" and row.dim == 384


def test_an_index_line_without_a_topic_file_and_a_topic_file_without_a_line_are_both_kept(owner):
    file_write(owner_id=owner.pk, path="Memory/index.md", version=None, content="- diet: vegetarian\n")
    file_write(owner_id=owner.pk, path="Memory/garden.md", version=None, content="Tomatoes on the balcony.\n")
    assert set(NoteVector.objects.filter(owner=owner).values_list("topic", "kind")) == {
        ("diet", "line"), ("garden", "details")}
    assert recalled(owner, "How are my balcony tomatoes doing?") == ["garden"]


def test_a_write_to_one_note_leaves_every_other_notes_rows_as_they_were(owner):
    for n in range(5):
        note_upsert(owner_id=owner.pk, scope=Scope.user(), topic=f"t{n}", summary=f"fact number {n}",
                    details=f"More about fact {n}.", source=ChangeSet.Source.MODEL, actor="the model")
    before = {(r.topic, r.kind): (r.pk, r.source, r.updated_at) for r in NoteVector.objects.filter(owner=owner)}
    change = note_upsert(owner_id=owner.pk, scope=Scope.user(), topic="t2", summary="fact number two, updated",
                         details="Now with more.", source=ChangeSet.Source.FILES, actor="you")
    after = {(r.topic, r.kind): (r.pk, r.source, r.updated_at) for r in NoteVector.objects.filter(owner=owner)}
    assert set(after) == set(before)
    assert {key: value for key, value in after.items() if key[0] != "t2"} == {
        key: value for key, value in before.items() if key[0] != "t2"}
    assert {after[("t2", kind)][1:] for kind in ("line", "details")} == {("user", change.created_at)}
    rows = {r.kind: r.text for r in NoteVector.objects.filter(owner=owner, topic="t2")}
    assert rows == {"line": "fact number two, updated", "details": "Now with more.\n"}


def test_a_rebuild_of_recall_keeps_who_wrote_each_note_and_when(owner):
    with time_machine.travel("2026-03-01 10:00Z", tick=False):
        model_note = note_upsert(owner_id=owner.pk, scope=Scope.user(), topic="home", summary="lives in Rome",
                                 details="Trastevere.", source=ChangeSet.Source.MODEL, actor="the model",
                                 automatic=True)
    with time_machine.travel("2026-04-01 10:00Z", tick=False):
        own_note = note_upsert(owner_id=owner.pk, scope=Scope.user(), topic="diet", summary="vegetarian",
                               source=ChangeSet.Source.FILES, actor="you")
    NoteVector.objects.filter(owner=owner).delete()  # lost rows (a restore of the database, a new model)
    with time_machine.travel("2026-05-01 10:00Z", tick=False):
        index.owner_reindex(owner_id=owner.pk)
    rows = {(r.topic, r.kind): (r.source, r.updated_at) for r in NoteVector.objects.filter(owner=owner)}
    assert rows == {("home", "line"): ("model", model_note.created_at),
                    ("home", "details"): ("model", model_note.created_at),
                    ("diet", "line"): ("user", own_note.created_at)}
