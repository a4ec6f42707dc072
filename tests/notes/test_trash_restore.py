"""The Trash keeps every delete restorable: one note deleted on its own, and Forget everything even after new
notes were saved since (restore merges, and never overwrites what was written after the delete)."""

from __future__ import annotations

import pytest

from localai_memory.core.errors import Conflict
from localai_memory.notes import selectors, services
from localai_memory.notes.models import NoteFile, TrashEntry
from localai_memory.notes.paths import Scope

from .test_store import save

pytestmark = pytest.mark.django_db


def files_of(user) -> dict[str, str]:
    return {f.path: f.content for f in NoteFile.objects.filter(owner=user)}


def delete(user, topic, scope=None):
    return services.note_upsert(owner_id=user.pk, scope=scope or Scope.user(), topic=topic, delete=True,
                                source="files", actor="you")


def test_a_deleted_note_waits_in_the_trash_with_its_line_and_file_and_comes_back_at_the_end(owner):
    save(owner, "home", "lives in Rome", details="Since 2020, near the Pantheon.")
    save(owner, "diet", "vegetarian")
    delete(owner, "home")
    save(owner, "tone", "short answers")

    (entry,) = selectors.trash_list(owner_id=owner.pk)
    assert (entry.kind, entry.label) == ("note", "“home” in your notes")
    assert {f.path: f.content for f in entry.files.all()} == {
        "Memory/index.md": "- home: lives in Rome -> home.md\n",
        "Memory/home.md": "Since 2020, near the Pantheon.\n",
    }
    change = services.trash_restore(owner_id=owner.pk, entry_id=entry.pk)

    assert change.summary == "Restored “home” in your notes from the Trash"
    assert files_of(owner) == {
        "Memory/index.md": "- diet: vegetarian\n- tone: short answers\n- home: lives in Rome -> home.md\n",
        "Memory/home.md": "Since 2020, near the Pantheon.\n",
    }
    assert list(selectors.trash_list(owner_id=owner.pk)) == []


def test_a_note_without_details_comes_back_as_its_line(owner):
    save(owner, "diet", "vegetarian")
    delete(owner, "diet")
    assert files_of(owner) == {}
    services.trash_restore(owner_id=owner.pk, entry_id=TrashEntry.objects.get(owner=owner).pk)
    assert files_of(owner) == {"Memory/index.md": "- diet: vegetarian\n"}


def test_a_deleted_note_saved_again_since_is_not_overwritten_by_the_trash(owner):
    save(owner, "home", "lives in Rome", details="old")
    delete(owner, "home")
    save(owner, "home", "lives in Lisbon", details="new")
    entry = TrashEntry.objects.get(owner=owner)
    with pytest.raises(Conflict) as refused:
        services.trash_restore(owner_id=owner.pk, entry_id=entry.pk)
    assert refused.value.code == "restore_conflict" and "“home” exists again" in refused.value.message
    assert files_of(owner) == {"Memory/index.md": "- home: lives in Lisbon -> home.md\n", "Memory/home.md": "new\n"}


def test_undoing_the_delete_takes_the_note_out_of_the_trash(owner):
    save(owner, "diet", "vegetarian")
    change = delete(owner, "diet")
    services.change_undo(owner_id=owner.pk, change_id=change.pk)
    assert files_of(owner) == {"Memory/index.md": "- diet: vegetarian\n"}
    assert list(selectors.trash_list(owner_id=owner.pk)) == []


@pytest.mark.parametrize("brought_back_by", ["undo", "trash"])
def test_undoing_the_way_a_note_came_back_puts_it_in_the_trash_again(owner, brought_back_by):
    save(owner, "diet", "vegetarian")
    change = delete(owner, "diet")
    (entry,) = selectors.trash_list(owner_id=owner.pk)
    back = (services.change_undo(owner_id=owner.pk, change_id=change.pk) if brought_back_by == "undo"
            else services.trash_restore(owner_id=owner.pk, entry_id=entry.pk))
    services.change_undo(owner_id=owner.pk, change_id=back.pk)
    assert files_of(owner) == {}
    assert [e.pk for e in selectors.trash_list(owner_id=owner.pk)] == [entry.pk]  # restorable from the Trash
    services.trash_restore(owner_id=owner.pk, entry_id=entry.pk)
    assert files_of(owner) == {"Memory/index.md": "- diet: vegetarian\n"}


def test_undo_redo_undo_of_a_restore_keeps_the_trash_in_step(owner):
    """The note is in the Trash exactly when it is gone, however often its restore is undone and redone."""
    save(owner, "diet", "vegetarian")
    delete(owner, "diet")
    (entry,) = selectors.trash_list(owner_id=owner.pk)
    latest = services.trash_restore(owner_id=owner.pk, entry_id=entry.pk)
    for _ in range(3):
        latest = services.change_undo(owner_id=owner.pk, change_id=latest.pk)
        in_trash = [e.pk for e in selectors.trash_list(owner_id=owner.pk)]
        assert (files_of(owner) == {}) == (in_trash == [entry.pk]), (files_of(owner), in_trash)
    assert files_of(owner) == {}  # three Undos: gone again, and restorable
    services.trash_restore(owner_id=owner.pk, entry_id=entry.pk)
    assert files_of(owner) == {"Memory/index.md": "- diet: vegetarian\n"}


def test_forget_everything_comes_back_after_new_notes_and_keeps_them(owner):
    save(owner, "home", "lives in Rome", details="Rome since 2020.")
    save(owner, "diet", "vegetarian", details="No meat.")
    save(owner, "tone", "short", scope=Scope.agent(7))
    entry = services.memory_forget(owner_id=owner.pk)
    save(owner, "diet", "vegan now", details="No animal products.")  # saved after forgetting: newer
    save(owner, "pets", "a cat called Miso")

    change = services.trash_restore(owner_id=owner.pk, entry_id=entry.pk)

    assert files_of(owner) == {
        "Memory/index.md": ("- home: lives in Rome -> home.md\n- diet: vegan now -> diet.md\n"
                            "- pets: a cat called Miso\n"),
        "Memory/home.md": "Rome since 2020.\n",
        "Memory/diet.md": "No animal products.\n",
        "Memory/agents/7/index.md": "- tone: short\n",
    }
    assert change.summary == "Restored Everything in Memory from the Trash; kept Memory/diet.md"


def test_forget_everything_restored_after_a_topic_was_saved_again_brings_no_old_file_beside_the_new_note(owner):
    save(owner, "home", "lives in Rome", details="Trastevere")
    save(owner, "diet", "vegetarian", details="No meat.")
    entry = services.memory_forget(owner_id=owner.pk)
    save(owner, "home", "lives in Paris now")  # the same topic again, without details

    change = services.trash_restore(owner_id=owner.pk, entry_id=entry.pk)

    assert files_of(owner) == {
        "Memory/index.md": "- home: lives in Paris now\n- diet: vegetarian -> diet.md\n",
        "Memory/diet.md": "No meat.\n",
    }
    assert change.summary == "Restored Everything in Memory from the Trash; kept the note home as it is now"
    save(owner, "home", "lives in Paris")  # a later edit of the line links no Rome details
    assert files_of(owner)["Memory/index.md"].startswith("- home: lives in Paris\n")


def test_a_deleted_topic_file_does_not_come_back_beside_a_note_of_its_topic_saved_since(owner):
    save(owner, "home", "lives in Rome", details="Trastevere")
    entry = services.file_delete(owner_id=owner.pk, path="Memory/home.md")
    save(owner, "home", "lives in Paris now")
    with pytest.raises(Conflict) as refused:
        services.trash_restore(owner_id=owner.pk, entry_id=entry.pk)
    assert refused.value.code == "restore_conflict" and refused.value.details == {"paths": ["Memory/home.md"]}
    assert files_of(owner) == {"Memory/index.md": "- home: lives in Paris now\n"}
    assert TrashEntry.objects.get(pk=entry.pk).restored_at is None


def forgotten_then_fifteen_new(owner):
    """30 notes forgotten, then 15 new ones saved: restoring all of them would give the index 45 lines."""
    for number in range(30):
        save(owner, f"old-{number}", f"old fact {number}")
    entry = services.memory_forget(owner_id=owner.pk)
    for number in range(15):
        save(owner, f"new-{number}", f"new fact {number}")
    return entry


def test_a_restore_that_would_pass_the_index_cap_is_refused_and_writes_nothing(owner):
    entry = forgotten_then_fifteen_new(owner)
    before = files_of(owner)
    with pytest.raises(services.CapExceeded) as refused:
        services.trash_restore(owner_id=owner.pk, entry_id=entry.pk)
    assert refused.value.code == "restore_over_cap" and refused.value.status == 422
    assert "45 lines" in refused.value.message and "at most 40 lines" in refused.value.message
    assert files_of(owner) == before
    assert TrashEntry.objects.get(pk=entry.pk).restored_at is None


def test_another_user_cannot_restore_my_note(owner, outsider):
    save(owner, "diet", "vegetarian")
    delete(owner, "diet")
    entry = TrashEntry.objects.get(owner=owner)
    with pytest.raises(Exception) as refused:
        services.trash_restore(owner_id=outsider.pk, entry_id=entry.pk)
    assert getattr(refused.value, "status", None) == 404
    assert files_of(owner) == {} and files_of(outsider) == {}


def test_on_the_trash_page_a_restore_past_the_cap_says_why(owner):
    from tests.web.conftest import signed_in

    entry = forgotten_then_fifteen_new(owner)
    page = signed_in(owner).post(f"/files/trash/{entry.pk}/restore/", follow=True)
    assert page.status_code == 200
    assert "Restoring would give Memory/index.md 45 lines" in page.content.decode()
