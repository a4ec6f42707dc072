"""The Files API (DESIGN §8): list, read, write with versions, delete to Trash, history, restore, audit, undo."""

from __future__ import annotations

import io
import zipfile
from urllib.parse import urlencode

import pytest
from django.db import transaction

from localai_memory.notes import services
from localai_memory.notes.models import FileVersion, NoteFile, TrashEntry
from localai_memory.notes.paths import Scope

from .conftest import assert_error, post_json


def content_url(path: str, **extra: object) -> str:
    return "/api/files/content?" + urlencode({"path": path, **extra})


def write(api, path: str, content: str, version: int | None = None):
    body: dict = {"content": content}
    if version is not None:
        body["version"] = version
    return api.put(content_url(path), body, format="json")


def files_of(owner) -> dict[str, str]:
    return {f.path: f.content for f in NoteFile.objects.filter(owner=owner)}


def test_a_new_file_is_created_without_a_version_and_read_back(api):
    response = write(api, "Memory/home.md", "Lives in Rome.\n")
    assert response.status_code == 200
    body = response.json()
    assert (body["path"], body["content"], body["version"]) == ("Memory/home.md", "Lives in Rome.\n", 1)
    assert isinstance(body["change_id"], int)
    read = api.get(content_url("Memory/home.md"))
    assert read.status_code == 200
    assert {k: read.json()[k] for k in ("path", "content", "version")} == \
        {"path": "Memory/home.md", "content": "Lives in Rome.\n", "version": 1}


def test_an_update_sends_the_version_it_edited(api):
    write(api, "Memory/home.md", "one")
    response = write(api, "Memory/home.md", "two", version=1)
    assert response.status_code == 200
    assert (response.json()["content"], response.json()["version"]) == ("two", 2)


def test_creating_a_file_that_exists_is_a_409_with_its_text(api, owner):
    write(api, "Memory/home.md", "first tab")
    error = assert_error(write(api, "Memory/home.md", "second tab"), 409, "file_exists")
    assert error["details"]["content"] == "first tab"
    assert files_of(owner) == {"Memory/home.md": "first tab"}


def test_a_stale_version_gets_409_with_the_current_text_and_loses_nothing(api, owner):
    write(api, "Memory/home.md", "v1")
    write(api, "Memory/home.md", "v2 from tab A", version=1)
    error = assert_error(write(api, "Memory/home.md", "v2 from tab B", version=1), 409, "stale_version")
    assert error["details"] == {"path": "Memory/home.md", "version": 2, "content": "v2 from tab A"}
    assert files_of(owner) == {"Memory/home.md": "v2 from tab A"}
    assert FileVersion.objects.filter(owner=owner, path="Memory/home.md").count() == 2


def test_a_version_of_a_file_that_does_not_exist_is_a_404(api, owner):
    assert_error(write(api, "Memory/home.md", "x", version=3), 404, "file_not_found")
    assert files_of(owner) == {}


def test_saving_a_file_deleted_in_another_tab_is_refused_and_the_trash_keeps_it(api, owner):
    write(api, "Memory/home.md", "one")
    api.delete(content_url("Memory/home.md"))
    assert_error(write(api, "Memory/home.md", "edited in the old tab", version=1), 404, "file_not_found")
    assert files_of(owner) == {}
    assert api.get("/api/files/trash").json()["entries"][0]["files"][0]["path"] == "Memory/home.md"


def test_writing_the_same_text_again_is_refused_without_a_new_version(api, owner):
    write(api, "Memory/home.md", "same")
    assert_error(write(api, "Memory/home.md", "same", version=1), 409)
    assert FileVersion.objects.filter(owner=owner).count() == 1


def test_the_listing_holds_every_file_under_a_folder(api, owner, alices_notes):
    response = api.get("/api/files")
    assert response.status_code == 200
    listed = [f["path"] for f in response.json()["files"]]
    assert listed == sorted(files_of(owner))
    assert {"Memory/index.md", "Memory/home.md", "Memory/agents/7/index.md"} <= set(listed)
    agent = api.get("/api/files", {"path": "Memory/agents/7"})
    assert [f["path"] for f in agent.json()["files"]] == ["Memory/agents/7/index.md"]


def test_the_listing_shows_size_and_version(api):
    write(api, "Memory/home.md", "ünï")
    entry = api.get("/api/files").json()["files"][0]
    assert (entry["path"], entry["version"], entry["size"]) == ("Memory/home.md", 1, len("ünï".encode()))


def test_reading_a_missing_file_is_a_404(api):
    assert_error(api.get(content_url("Memory/nothing.md")), 404)


def test_delete_moves_the_file_to_the_trash_and_restore_brings_it_back(api, owner):
    write(api, "Memory/home.md", "keep me\n")
    response = api.delete(content_url("Memory/home.md"))
    assert response.status_code == 200
    entry = response.json()["trash"]
    assert entry["files"] == [{"path": "Memory/home.md", "size": 8}]
    assert_error(api.get(content_url("Memory/home.md")), 404)
    trash = api.get("/api/files/trash").json()["entries"]
    assert [t["id"] for t in trash] == [entry["id"]]
    restored = api.post(f"/api/files/trash/{entry['id']}/restore")
    assert restored.status_code == 200
    assert files_of(owner) == {"Memory/home.md": "keep me\n"}
    assert api.get("/api/files/trash").json()["entries"] == []
    assert_error(api.post(f"/api/files/trash/{entry['id']}/restore"), 409, "already_restored")


def test_delete_with_a_stale_version_is_a_409_and_keeps_the_file(api, owner):
    write(api, "Memory/home.md", "one")
    write(api, "Memory/home.md", "two", version=1)
    assert_error(api.delete(content_url("Memory/home.md", version=1)), 409)
    assert files_of(owner) == {"Memory/home.md": "two"}


def test_delete_with_a_stale_version_in_a_json_body_is_a_409_and_keeps_the_file(api, owner):
    """``{"version": 1}`` in the body counts as ``?version=1`` does: never a silent delete of a newer text."""
    write(api, "Memory/home.md", "one")
    write(api, "Memory/home.md", "two", version=1)
    error = assert_error(api.delete(content_url("Memory/home.md"), {"version": 1}, format="json"), 409,
                         "stale_version")
    assert (error["details"]["version"], error["details"]["content"]) == (2, "two")
    assert files_of(owner) == {"Memory/home.md": "two"}
    assert api.delete(content_url("Memory/home.md"), {"version": 2}, format="json").status_code == 200
    assert files_of(owner) == {}


@pytest.mark.parametrize(("query", "body", "code"), [
    ({"version": 2}, {"version": 1}, "invalid_version"),  # two versions that differ: which one?
    ({}, {"version": "2"}, "invalid"),
    ({}, {"versoin": 2}, "unknown_field"),
    ({}, [2], "invalid_body"),
])
def test_a_delete_body_it_cannot_take_as_a_version_is_a_400_and_keeps_the_file(api, owner, query, body, code):
    write(api, "Memory/home.md", "one")
    write(api, "Memory/home.md", "two", version=1)
    assert_error(api.delete(content_url("Memory/home.md", **query), body, format="json"), 400, code)
    assert files_of(owner) == {"Memory/home.md": "two"}


def test_deleting_a_missing_file_is_a_404(api):
    assert_error(api.delete(content_url("Memory/nothing.md")), 404)


def test_restoring_from_the_trash_refuses_when_the_path_holds_a_file_again(api, owner):
    write(api, "Memory/home.md", "old")
    entry = api.delete(content_url("Memory/home.md")).json()["trash"]
    write(api, "Memory/home.md", "new")
    assert_error(api.post(f"/api/files/trash/{entry['id']}/restore"), 409, "restore_conflict")
    assert files_of(owner) == {"Memory/home.md": "new"}


def test_history_lists_every_version_newest_first(api):
    write(api, "Memory/home.md", "one")
    write(api, "Memory/home.md", "two", version=1)
    api.delete(content_url("Memory/home.md"))
    response = api.get("/api/files/history", {"path": "Memory/home.md"})
    assert response.status_code == 200
    versions = response.json()["versions"]
    assert [(v["version"], v["content"], v["deleted"]) for v in versions] == \
        [(3, "", True), (2, "two", False), (1, "one", False)]
    assert_error(api.get("/api/files/history", {"path": "Memory/never.md"}), 404)


def test_any_version_can_be_restored_as_a_new_version(api, owner):
    write(api, "Memory/home.md", "one\n\ttabbed ünïcode  \n")
    write(api, "Memory/home.md", "two", version=1)
    response = post_json(api, "/api/files/history/restore", {"path": "Memory/home.md", "version": 1})
    assert response.status_code == 200
    assert response.json()["change"]["source"] == "restore"
    note = NoteFile.objects.get(owner=owner, path="Memory/home.md")
    assert (note.content, note.version) == ("one\n\ttabbed ünïcode  \n", 3)


def test_restoring_a_deleted_version_brings_the_file_back(api, owner):
    write(api, "Memory/home.md", "one")
    api.delete(content_url("Memory/home.md"))
    post_json(api, "/api/files/history/restore", {"path": "Memory/home.md", "version": 1})
    assert files_of(owner) == {"Memory/home.md": "one"}
    # The deletion itself (version 2) is no text to restore: refused, never a second delete of the file.
    error = assert_error(post_json(api, "/api/files/history/restore", {"path": "Memory/home.md", "version": 2}),
                         400, "deleted_version")
    assert "restore an earlier version" in error["message"]
    assert files_of(owner) == {"Memory/home.md": "one"}


def test_restoring_a_version_that_does_not_exist_is_a_404(api):
    write(api, "Memory/home.md", "one")
    assert_error(post_json(api, "/api/files/history/restore", {"path": "Memory/home.md", "version": 9}), 404)


def test_the_audit_lists_every_change_newest_first(api, owner):
    write(api, "Memory/home.md", "one")
    write(api, "Memory/home.md", "two", version=1)
    api.delete(content_url("Memory/home.md"))
    response = api.get("/api/chats/changes/audit")
    assert response.status_code == 200
    changes = response.json()["changes"]
    assert [c["source"] for c in changes] == ["trash", "files", "files"]
    assert changes[1]["files"] == [{"path": "Memory/home.md", "before": "one", "after": "two",
                                    "before_version": 1, "after_version": 2}]
    assert [c["id"] for c in api.get("/api/chats/changes/audit", {"limit": 1}).json()["changes"]] == \
        [changes[0]["id"]]


def test_the_audit_reaches_every_change_page_by_page(api, owner, outsider_api):
    """More change sets than one page holds: ``next_before`` reads the next page, until none is left, so every
    automatic note is in the audit however many there are."""
    made = [services.note_upsert(owner_id=owner.pk, scope=Scope.user(), topic=f"t{n}", summary=f"note {n}",
                                 source="model", actor="model", automatic=True).pk for n in range(7)]
    seen, before, pages = [], None, 0
    while True:
        query = {"limit": 3, "automatic": "true", **({"before": before} if before is not None else {})}
        body = api.get("/api/chats/changes/audit", query).json()
        seen += [c["id"] for c in body["changes"]]
        pages += 1
        before = body["next_before"]
        if before is None:
            break
    assert seen == made[::-1] and pages == 3


def test_a_cursor_that_is_not_one_of_your_changes_is_a_400_not_an_empty_page(api, owner, outsider_api):
    """An empty page would read as "no more": another's change set, or none, says what is wrong instead."""
    made = services.note_upsert(owner_id=owner.pk, scope=Scope.user(), topic="home", summary="lives in Rome",
                                source="files", actor="you").pk
    for client, before in ((outsider_api, made), (api, made + 1000)):
        error = assert_error(client.get("/api/chats/changes/audit", {"before": before}), 400, "invalid_before")
        assert f"before={before}" in error["message"]
    assert api.get("/api/chats/changes/audit", {"before": made}).json() == {"changes": [], "next_before": None}


def test_the_audit_can_show_only_automatic_notes(api, owner):
    write(api, "Memory/home.md", "typed by me")
    saved = services.note_upsert(owner_id=owner.pk, scope=Scope.user(), topic="diet", summary="vegetarian",
                                 source="model", actor="model", automatic=True)
    automatic = api.get("/api/chats/changes/audit", {"automatic": "true"}).json()["changes"]
    assert [(c["id"], c["automatic"], c["source"]) for c in automatic] == [(saved.pk, True, "model")]
    typed = api.get("/api/chats/changes/audit", {"automatic": "false"}).json()["changes"]
    assert [c["source"] for c in typed] == ["files"]


def test_undo_restores_the_exact_earlier_bytes_of_every_file(api, owner, alices_notes):
    before = files_of(owner)
    tricky = "line one\r\n\ttabs, trailing spaces   \n\u00e9\u0301 \U0001f600 no final newline"
    change = write(api, "Memory/home.md", tricky, version=NoteFile.objects.get(owner=owner,
                                                                                path="Memory/home.md").version)
    assert files_of(owner)["Memory/home.md"] == tricky
    response = api.post(f"/api/chats/changes/{change.json()['change_id']}/undo")
    assert response.status_code == 200
    assert response.json()["change"]["reverts"] == change.json()["change_id"]
    assert files_of(owner) == before
    # and undo of the undo puts the tricky bytes back
    api.post(f"/api/chats/changes/{response.json()['change']['id']}/undo")
    assert files_of(owner)["Memory/home.md"].encode() == tricky.encode()


def test_undo_of_a_note_that_touched_two_files_restores_both(api, owner, alices_notes):
    before = files_of(owner)
    change = services.note_upsert(owner_id=owner.pk, scope=Scope.user(), topic="home", summary="lives in Paris",
                                  details="Moved again.", source="model", actor="model", automatic=True)
    assert api.post(f"/api/chats/changes/{change.pk}/undo").status_code == 200
    assert files_of(owner) == before


def test_undo_twice_is_a_409(api, owner):
    change_id = write(api, "Memory/home.md", "one").json()["change_id"]
    assert api.post(f"/api/chats/changes/{change_id}/undo").status_code == 200
    assert_error(api.post(f"/api/chats/changes/{change_id}/undo"), 409, "already_undone")
    assert files_of(owner) == {}


def test_undo_refuses_when_a_file_changed_since_and_keeps_the_later_text(api, owner):
    first = write(api, "Memory/home.md", "one").json()["change_id"]
    write(api, "Memory/home.md", "two", version=1)
    assert_error(api.post(f"/api/chats/changes/{first}/undo"), 409, "changed_since")
    assert files_of(owner) == {"Memory/home.md": "two"}


def test_undo_of_a_delete_empties_the_trash_entry(api, owner):
    write(api, "Memory/home.md", "one")
    api.delete(content_url("Memory/home.md"))
    delete_change = api.get("/api/chats/changes/audit").json()["changes"][0]
    assert api.post(f"/api/chats/changes/{delete_change['id']}/undo").status_code == 200
    assert files_of(owner) == {"Memory/home.md": "one"}
    assert api.get("/api/files/trash").json()["entries"] == []
    assert TrashEntry.objects.get(owner=owner).restored_at is not None


def test_undo_of_a_change_that_does_not_exist_is_a_404(api):
    assert_error(api.post("/api/chats/changes/999999999/undo"), 404)


def test_export_zip_holds_exactly_the_files(api, owner, outsider, alices_notes):
    services.file_write(owner_id=outsider.pk, path="Memory/secret.md", content="not alice's", version=None)
    response = api.get("/api/chats/memory/export")
    assert response.status_code == 200
    assert response["Content-Type"] == "application/zip"
    assert "attachment" in response["Content-Disposition"]
    archive = zipfile.ZipFile(io.BytesIO(response.content))
    assert archive.testzip() is None
    assert {name: archive.read(name).decode() for name in archive.namelist()} == files_of(owner)
    assert all(not info.is_dir() for info in archive.infolist())


def test_export_of_nothing_is_an_empty_zip(api):
    response = api.get("/api/chats/memory/export")
    assert response.status_code == 200
    assert zipfile.ZipFile(io.BytesIO(response.content)).namelist() == []


def test_forget_then_trash_restore_brings_every_note_back(api, owner, alices_notes):
    before = files_of(owner)
    response = post_json(api, "/api/chats/memory/forget", {"confirm": True})
    assert response.status_code == 200
    assert response.json()["files"] == len(before)
    assert files_of(owner) == {}
    assert api.get("/api/chats/memory/notes").json()["scopes"][0]["index"] == []
    entry_id = response.json()["trash_id"]
    assert entry_id in [e["id"] for e in api.get("/api/files/trash").json()["entries"]]
    assert api.post(f"/api/files/trash/{entry_id}/restore").status_code == 200
    assert files_of(owner) == before


def test_forget_drops_the_suggestions_still_waiting(api, owner, alices_notes):
    """A clean slate: a suggestion made before cannot be confirmed into it afterwards."""
    from localai_memory.memory.proposals import proposal_create

    waiting = proposal_create(owner_id=owner.pk, scope=Scope.user(), topic="tea", summary="likes green tea")
    assert post_json(api, "/api/chats/memory/forget", {"confirm": True}).status_code == 200
    assert_error(api.post(f"/api/chats/memory/proposals/{waiting.pk}/confirm"), 410, "forgotten")
    assert api.get("/api/chats/memory/proposals").json()["proposals"] == []
    assert files_of(owner) == {}


@pytest.mark.parametrize("body", [{}, {"confirm": False}, {"confirm": "true"}, {"confirm": 1}, {"confirm": None},
                                  {"confirm": True, "everything": True}])
def test_forget_needs_an_explicit_confirm_true(api, owner, alices_notes, body):
    before = files_of(owner)
    assert_error(post_json(api, "/api/chats/memory/forget", body), 400)
    assert files_of(owner) == before


def test_forget_with_no_notes_says_so(api):
    response = post_json(api, "/api/chats/memory/forget", {"confirm": True})
    assert response.status_code == 200
    assert (response.json()["trash_id"], response.json()["files"]) == (None, 0)
    assert response.json()["message"] == "There were no notes to forget."


def test_the_notes_listing_shows_each_scope_with_its_entries(api, alices_notes):
    scopes = api.get("/api/chats/memory/notes").json()["scopes"]
    by_kind = {(s["kind"], s["key"]): s for s in scopes}
    yours = by_kind[("user", "")]
    assert [e["topic"] for e in yours["index"]] == ["home", "diet"]
    home = yours["index"][0]
    assert {k: home[k] for k in ("topic", "summary", "file", "importance", "written_by", "used_at")} == {
        "topic": "home", "summary": "lives in Rome", "file": "home.md", "importance": None, "written_by": "user",
        "used_at": None}
    agent = by_kind[("agent", "7")]
    assert agent["deleted_agent"] is True and agent["index"][0]["topic"] == "tone"
    assert any(kind == "channel" for kind, _ in by_kind)


def test_deleting_an_index_moves_its_topic_files_to_the_trash_with_it_and_restore_or_undo_brings_all_back(
        api, owner):
    from localai_memory.recall.models import NoteVector

    services.note_upsert(owner_id=owner.pk, scope=Scope.user(), topic="home", summary="lives in Rome",
                         details="Trastevere", source="files", actor="you")
    services.note_upsert(owner_id=owner.pk, scope=Scope.agent(7), topic="tone", summary="short answers",
                         details="No lists.", source="files", actor="you")
    write(api, "Memory/stray.md", "beside the index, named by no line\n")
    before = files_of(owner)
    version = api.get(content_url("Memory/index.md")).json()["version"]

    response = api.delete(content_url("Memory/index.md", version=version))

    assert response.status_code == 200
    entry = response.json()["trash"]
    assert [f["path"] for f in entry["files"]] == ["Memory/home.md", "Memory/index.md", "Memory/stray.md"]
    assert files_of(owner) == {"Memory/agents/7/index.md": "- tone: short answers -> tone.md\n",
                               "Memory/agents/7/tone.md": "No lists.\n"}  # another scope's notes stay
    assert not NoteVector.objects.filter(owner=owner, scope_kind="user").exists()  # recall no longer reads them
    services.note_upsert(owner_id=owner.pk, scope=Scope.user(), topic="home", summary="lives in Paris",
                         source="files", actor="you")
    assert files_of(owner)["Memory/index.md"] == "- home: lives in Paris\n"  # inherits no Rome details
    services.change_undo(owner_id=owner.pk, change_id=owner.change_sets.first().pk)

    assert api.post(f"/api/files/trash/{entry['id']}/restore").status_code == 200
    assert files_of(owner) == before
    change = owner.change_sets.first()
    services.change_undo(owner_id=owner.pk, change_id=change.pk)  # the restore undone: all in the Trash again
    assert set(files_of(owner)) == {"Memory/agents/7/index.md", "Memory/agents/7/tone.md"}
    services.change_undo(owner_id=owner.pk, change_id=TrashEntry.objects.get(pk=entry["id"]).change_set_id)
    assert files_of(owner) == before  # and the delete undone brings them back as well


@pytest.mark.parametrize("line", ["- index: see all -> index.md", "- index: plain line", "- work: at the bakery -> index.md"])
def test_an_index_line_that_names_the_index_itself_is_refused_and_the_notes_stay_listed(api, owner, line):
    assert api.put("/api/chats/memory/notes", {"topic": "home", "summary": "lives in Rome", "details": "Via Roma 1"},
                   format="json").status_code == 200
    before = files_of(owner)
    response = write(api, "Memory/index.md", f"- home: lives in Rome -> home.md\n{line}\n", version=1)
    assert_error(response, 400, "invalid_index_line")
    assert "names the index itself" in response.json()["error"]["message"]
    assert files_of(owner) == before
    [scope] = [s for s in api.get("/api/chats/memory/notes").json()["scopes"] if s["kind"] == "user"]
    assert [e["topic"] for e in scope["index"]] == ["home"]


def test_an_index_line_that_names_another_topics_file_is_refused_but_an_old_one_does_not_block_edits(api, owner):
    response = write(api, "Memory/index.md", "- alpha: summary of alpha -> beta.md\n")
    error = assert_error(response, 400, "invalid_index_line")
    assert error["message"].startswith("line 1: the note 'alpha' names beta.md")
    assert files_of(owner) == {}

    with transaction.atomic():  # a line an older version let through
        services.apply_changes(owner_id=owner.pk, writes={"Memory/index.md": "- alpha: old line -> beta.md\n"},
                               source="files", summary="older", validate=False)
    assert write(api, "Memory/index.md", "- alpha: old line -> beta.md\n- home: lives in Rome\n",
                 version=1).status_code == 200


def test_a_byte_order_mark_an_editor_put_first_is_dropped_not_refused(api, owner):
    assert write(api, "Memory/index.md", "\ufeff- home: lives in Rome\n").status_code == 200
    assert write(api, "Memory/pets.md", "\ufeffA cat, Miso.\n").status_code == 200
    assert files_of(owner) == {"Memory/index.md": "- home: lives in Rome\n", "Memory/pets.md": "A cat, Miso.\n"}


def test_an_index_line_an_older_version_let_through_can_be_forgotten_and_blocks_no_other_edit(api, owner):
    from localai_memory.notes.services import apply_changes, lock_owner

    with transaction.atomic():  # as an older version wrote it (its Files page took such a line)
        lock_owner(owner.pk)
        apply_changes(owner_id=owner.pk, writes={"Memory/index.md": "- home: lives in Rome\n- index: my list -> index.md\n"
                                                 "- car: drives a Volvo\n"}, source="files", summary="old", actor="you",
                      validate=False)
    # another note of the scope is still edited and forgotten as usual
    assert api.put("/api/chats/memory/notes", {"topic": "car", "summary": "drives a Fiat"},
                   format="json").status_code == 200
    assert api.delete("/api/chats/memory/notes?topic=home").status_code == 200
    # and the line itself is forgotten, leaving the index file in place
    assert api.delete("/api/chats/memory/notes?topic=index").status_code == 200
    assert files_of(owner) == {"Memory/index.md": "- car: drives a Fiat\n"}
