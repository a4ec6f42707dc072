"""The notes store: caps, change sets, undo, versions, Trash, export, forget."""

from __future__ import annotations

import io
import zipfile

import pytest

from localai_memory.core.errors import Conflict, InvalidInput
from localai_memory.notes import selectors, services
from localai_memory.notes.models import ChangeSet, FileVersion, NoteFile
from localai_memory.notes.paths import INDEX_MAX_BYTES, Scope, parse_index
from localai_memory.notes.services import CapExceeded

pytestmark = pytest.mark.django_db


def save(user, topic, summary, details=None, scope=None):
    return services.note_upsert(owner_id=user.pk, scope=scope or Scope.user(), topic=topic, summary=summary,
                                details=details, source="files", actor="you")


def index_of(user, scope=None):
    return selectors.index_text(owner_id=user.pk, scope=scope or Scope.user())


def test_a_note_is_an_index_line_and_a_topic_file(owner):
    save(owner, "home", "lives in Rome", details="Moved to Rome in 2024, Trastevere.")
    assert index_of(owner) == "- home: lives in Rome -> home.md\n"
    assert selectors.topic_text(owner_id=owner.pk, scope=Scope.user(), topic="home") == \
        "Moved to Rome in 2024, Trastevere.\n"


def test_saving_the_same_topic_replaces_its_line(owner):
    save(owner, "home", "lives in Rome")
    save(owner, "diet", "vegetarian")
    save(owner, "home", "lives in Paris")
    assert [e.summary for e in parse_index(index_of(owner))] == ["lives in Paris", "vegetarian"]


def test_details_of_exactly_the_topic_cap_are_taken_as_the_files_page_takes_them(owner):
    from localai_memory.notes.paths import TOPIC_MAX_BYTES

    save(owner, "home", "lives in Rome", details="é" * (TOPIC_MAX_BYTES // 2))  # 8192 bytes, no newline
    assert selectors.topic_text(owner_id=owner.pk, scope=Scope.user(), topic="home") == "é" * (TOPIC_MAX_BYTES // 2)
    with pytest.raises(InvalidInput) as refused:
        save(owner, "diet", "vegetarian", details="x" * (TOPIC_MAX_BYTES + 1))
    assert refused.value.code == "topic_too_large"
    save(owner, "tone", "short", details="x" * (TOPIC_MAX_BYTES - 1))  # room for the closing newline
    assert selectors.topic_text(owner_id=owner.pk, scope=Scope.user(), topic="tone") == "x" * 8191 + "\n"



def test_a_proposal_of_details_of_exactly_the_topic_cap_waits_and_saves_them_as_they_are(owner):
    """Ask me first, an MCP client and an import make proposals: the same 8 KiB the Files page takes."""
    from localai_memory.memory.proposals import proposal_confirm, proposal_create
    from localai_memory.notes.paths import TOPIC_MAX_BYTES

    waiting = proposal_create(owner_id=owner.pk, scope=Scope.user(), topic="home", summary="lives in Rome",
                              details="é" * (TOPIC_MAX_BYTES // 2), source="mcp")
    proposal_confirm(owner_id=owner.pk, proposal_id=waiting.pk, actor="you")
    assert selectors.topic_text(owner_id=owner.pk, scope=Scope.user(), topic="home") == "é" * (TOPIC_MAX_BYTES // 2)


def test_a_summary_keeps_no_control_bidi_or_zero_width_character(owner):
    save(owner, "home", "lives\x07 in\x1b[2J Rome\u0085 \u202etxt.exe\u202c no\u200bw \u2066here\u2069\ufeff")
    assert index_of(owner) == "- home: lives in [2J Rome txt.exe now here\n"


def test_a_summary_keeps_the_joiners_that_spell_a_word_or_an_emoji(owner):
    save(owner, "wish", "\u200dمی\u200cخواهم \u200c برم 👩\u200d💻")  # Persian "I want" and a technologist
    assert index_of(owner) == "- wish: می\u200cخواهم برم 👩\u200d💻\n"


def test_it_refuses_a_41st_index_line_and_lists_the_current_entries(owner):
    for n in range(40):
        save(owner, f"t{n}", "x")
    before = index_of(owner)
    changes = ChangeSet.objects.count()
    with pytest.raises(CapExceeded) as caught:
        save(owner, "one-more", "y")
    assert len(caught.value.details["entries"]) == 40
    assert caught.value.details["entries"][0] == {"topic": "t0", "summary": "x", "file": None}
    assert index_of(owner) == before
    assert ChangeSet.objects.count() == changes


def test_it_refuses_an_index_over_two_kib_and_writes_nothing(owner):
    long = "a" * 190
    n = 0
    with pytest.raises(CapExceeded) as caught:
        while True:
            save(owner, f"topic-{n}", long)
            n += 1
    assert len(index_of(owner).encode()) <= INDEX_MAX_BYTES
    assert len(caught.value.details["entries"]) == n
    assert not NoteFile.objects.filter(path=f"Memory/topic-{n}.md").exists()


def test_a_files_write_past_the_cap_is_refused_too(owner):
    text = "".join(f"- t{n}: x\n" for n in range(41))
    with pytest.raises(CapExceeded):
        services.file_write(owner_id=owner.pk, path="Memory/index.md", content=text, version=None)
    assert not NoteFile.objects.filter(owner=owner).exists()


def test_undo_restores_the_exact_earlier_bytes(owner):
    save(owner, "home", "lives in Rome", details="line one\n\ttabbed ünïcode\n")
    before = {f.path: f.content for f in NoteFile.objects.filter(owner=owner)}
    change = save(owner, "home", "lives in Paris", details="other")
    services.change_undo(owner_id=owner.pk, change_id=change.pk)
    after = {f.path: f.content for f in NoteFile.objects.filter(owner=owner)}
    assert after == before


def test_undo_of_a_new_note_removes_it_and_a_second_undo_is_refused(owner):
    change = save(owner, "home", "lives in Rome", details="d")
    services.change_undo(owner_id=owner.pk, change_id=change.pk)
    assert not NoteFile.objects.filter(owner=owner).exists()
    with pytest.raises(Conflict):
        services.change_undo(owner_id=owner.pk, change_id=change.pk)


def test_undo_refuses_when_a_file_changed_since_and_keeps_the_later_edit(owner):
    first = save(owner, "home", "lives in Rome")
    save(owner, "home", "lives in Milan")
    with pytest.raises(Conflict) as caught:
        services.change_undo(owner_id=owner.pk, change_id=first.pk)
    assert caught.value.code == "changed_since"
    assert "Milan" in index_of(owner)


def test_each_note_keeps_its_own_undo_when_later_notes_share_its_index(owner):
    """Notes of one scope share one index: undoing an earlier note takes back its own line (and topic file),
    and keeps every line written since."""
    services.file_write(owner_id=owner.pk, path="Memory/index.md", content="- diet: vegetarian\n", version=None)
    changed = save(owner, "diet", "vegan, no honey")
    added = save(owner, "home", "lives in Rome", details="Trastevere.")
    save(owner, "pet", "has a cat")
    services.change_undo(owner_id=owner.pk, change_id=changed.pk)
    assert index_of(owner) == "- diet: vegetarian\n- home: lives in Rome -> home.md\n- pet: has a cat\n"
    services.change_undo(owner_id=owner.pk, change_id=added.pk)
    assert index_of(owner) == "- diet: vegetarian\n- pet: has a cat\n"
    assert not NoteFile.objects.filter(owner=owner, path="Memory/home.md").exists()

    gone = services.note_upsert(owner_id=owner.pk, scope=Scope.user(), topic="diet", delete=True, source="files")
    save(owner, "work", "nurse")
    services.change_undo(owner_id=owner.pk, change_id=gone.pk)  # the forgotten line comes back where it stood
    assert index_of(owner) == "- diet: vegetarian\n- pet: has a cat\n- work: nurse\n"


def test_an_undo_still_refuses_when_its_own_line_was_written_again_since(owner):
    first = save(owner, "home", "lives in Rome")
    save(owner, "pet", "has a cat")
    save(owner, "home", "lives in Milan")
    with pytest.raises(Conflict) as caught:
        services.change_undo(owner_id=owner.pk, change_id=first.pk)
    assert caught.value.code == "changed_since"
    assert index_of(owner) == "- home: lives in Milan\n- pet: has a cat\n"
    gone = services.note_upsert(owner_id=owner.pk, scope=Scope.user(), topic="pet", delete=True, source="files")
    save(owner, "pet", "has a dog")  # a note of the forgotten topic again: the Undo would overwrite it
    with pytest.raises(Conflict):
        services.change_undo(owner_id=owner.pk, change_id=gone.pk)
    assert index_of(owner) == "- home: lives in Milan\n- pet: has a dog\n"


def test_a_stale_version_gets_a_conflict_and_loses_nothing(owner):
    services.file_write(owner_id=owner.pk, path="Memory/home.md", content="v1", version=None)
    services.file_write(owner_id=owner.pk, path="Memory/home.md", content="v2 by tab A", version=1)
    with pytest.raises(Conflict) as caught:
        services.file_write(owner_id=owner.pk, path="Memory/home.md", content="v2 by tab B", version=1)
    assert caught.value.status == 409
    assert caught.value.details["content"] == "v2 by tab A"
    assert NoteFile.objects.get(owner=owner, path="Memory/home.md").content == "v2 by tab A"


def test_versions_are_numbered_without_gaps_across_delete_and_recreate(owner):
    services.file_write(owner_id=owner.pk, path="Memory/a.md", content="one", version=None)
    services.file_delete(owner_id=owner.pk, path="Memory/a.md")
    services.file_write(owner_id=owner.pk, path="Memory/a.md", content="two", version=None)
    versions = list(FileVersion.objects.filter(owner=owner, path="Memory/a.md").order_by("version")
                    .values_list("version", "deleted", "content"))
    assert versions == [(1, False, "one"), (2, True, ""), (3, False, "two")]


def test_any_version_can_be_restored(owner):
    services.file_write(owner_id=owner.pk, path="Memory/a.md", content="one", version=None)
    services.file_write(owner_id=owner.pk, path="Memory/a.md", content="two", version=1)
    services.version_restore(owner_id=owner.pk, path="Memory/a.md", version=1)
    note = NoteFile.objects.get(owner=owner, path="Memory/a.md")
    assert (note.content, note.version) == ("one", 3)


def test_delete_goes_to_the_trash_and_comes_back(owner):
    save(owner, "home", "lives in Rome", details="d")
    entry = services.file_delete(owner_id=owner.pk, path="Memory/home.md")
    assert not NoteFile.objects.filter(owner=owner, path="Memory/home.md").exists()
    services.trash_restore(owner_id=owner.pk, entry_id=entry.pk)
    assert NoteFile.objects.get(owner=owner, path="Memory/home.md").content == "d\n"


def test_forget_then_restore_brings_every_note_back(owner):
    save(owner, "home", "lives in Rome", details="d1")
    save(owner, "diet", "vegetarian")
    save(owner, "tone", "short answers", scope=Scope.agent(7))
    before = {f.path: f.content for f in NoteFile.objects.filter(owner=owner)}
    entry = services.memory_forget(owner_id=owner.pk)
    assert not NoteFile.objects.filter(owner=owner).exists()
    services.trash_restore(owner_id=owner.pk, entry_id=entry.pk)
    assert {f.path: f.content for f in NoteFile.objects.filter(owner=owner)} == before


def test_export_holds_exactly_the_files(owner, outsider):
    save(owner, "home", "lives in Rome", details="d1")
    save(owner, "tone", "short", scope=Scope.channel(3, "C123"))
    save(outsider, "secret", "not alice's")
    archive = zipfile.ZipFile(io.BytesIO(services.memory_export(owner_id=owner.pk)))
    files = {name: archive.read(name).decode() for name in archive.namelist()}
    assert files == {f.path: f.content for f in NoteFile.objects.filter(owner=owner)}
    assert all(not name.startswith("/") and ".." not in name for name in files)


@pytest.mark.parametrize("bad", ["../etc/passwd", "Memory/../x.md", "Memory/a\x00.md", "Memory/UPPER.md",
                                 "Notes/a.md", "Memory/agents/x/index.md", "Memory/a/b/c/d.md", "Memory/a.txt"])
def test_bad_paths_are_refused(owner, bad):
    with pytest.raises(InvalidInput):
        services.file_write(owner_id=owner.pk, path=bad, content="x", version=None)


def test_a_malformed_index_is_refused_with_the_line_number(owner):
    with pytest.raises(InvalidInput) as caught:
        services.file_write(owner_id=owner.pk, path="Memory/index.md", content="- ok: fine\nnot an entry\n",
                            version=None)
    assert "line 2" in caught.value.message


@pytest.mark.django_db(transaction=True)
def test_an_export_waits_for_a_note_being_written_so_the_zip_holds_all_of_it_or_none(owner):
    """The export reads under the owner's note lock: it cannot interleave with a write of a note and its
    importance (a zip held importances of notes it did not hold). Shown with a writer that holds the lock:
    the export waits for it (here it gives up after 50 ms rather than wait)."""
    import threading

    from django.db import OperationalError, connection, transaction

    holding, done = threading.Event(), threading.Event()

    def writer() -> None:
        try:
            with transaction.atomic():
                services.lock_owner(owner.pk)
                holding.set()
                done.wait(10)
        finally:
            connection.close()

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        assert holding.wait(10)
        with connection.cursor() as cursor:
            cursor.execute("SET lock_timeout = '50ms'")
        with pytest.raises(OperationalError, match="lock timeout"):
            services.memory_export(owner_id=owner.pk)
    finally:
        done.set()
        thread.join()
        with connection.cursor() as cursor:
            cursor.execute("RESET lock_timeout")
    assert services.memory_export(owner_id=owner.pk)  # and once the writer is done, it runs
