"""The invariant checker holds after a realistic workload, and catches each kind of damage it promises to.

The workload goes through the project's own services only (edits, notes, proposals confirmed and rejected,
Undo, Trash and restore, an agent's folder, Forget). The damage is done behind the store's back with SQL,
the way a bug or a half-applied write would leave the rows.
"""

from __future__ import annotations

import pytest
from django.db import connection

from localai_memory.agents.services import agent_create, agent_delete
from localai_memory.core.invariants import check_invariants, owner_path, summary
from localai_memory.memory.models import Proposal
from localai_memory.memory.proposals import proposal_confirm, proposal_create, proposal_reject
from localai_memory.notes.models import ChangeSet, FileChange, FileVersion, NoteFile
from localai_memory.notes.paths import Scope
from localai_memory.notes.services import (
    change_undo,
    file_delete,
    file_write,
    importance_change,
    memory_erase,
    memory_forget,
    note_importance_set,
    note_upsert,
    trash_restore,
)

pytestmark = pytest.mark.django_db


def workload(owner, other) -> dict:
    """Everything a person does to their notes, for two people."""
    ids: dict = {}
    for person in (owner, other):
        note_upsert(owner_id=person.pk, scope=Scope.user(), topic="home", summary="Lives in Rome",
                    details="Trastevere, near the river.", source="files", actor="you")
        note_upsert(owner_id=person.pk, scope=Scope.user(), topic="diet", summary="Vegetarian", source="files")
    edit = file_write(owner_id=owner.pk, path="Memory/home.md", content="Trastevere, top floor.\n", version=1)
    file_write(owner_id=owner.pk, path="Memory/home.md", content="Monti now.\n", version=2)
    change_undo(owner_id=owner.pk, change_id=ChangeSet.objects.filter(owner=owner).first().pk)
    ids["edit"] = edit.pk
    saved = proposal_create(owner_id=owner.pk, scope=Scope.user(), topic="tea", summary="Likes green tea")
    dropped = proposal_create(owner_id=owner.pk, scope=Scope.user(), topic="coffee", summary="No coffee")
    forget = proposal_create(owner_id=owner.pk, scope=Scope.user(), topic="diet", delete=True)
    proposal_confirm(owner_id=owner.pk, proposal_id=saved.pk, actor="you")
    proposal_reject(owner_id=owner.pk, proposal_id=dropped.pk, actor="you")
    proposal_confirm(owner_id=owner.pk, proposal_id=forget.pk, actor="you")
    ids["saved"] = saved.pk
    agent = agent_create(owner_id=owner.pk, name="Chef")
    note_upsert(owner_id=owner.pk, scope=Scope.agent(agent.pk), topic="oven", summary="Gas oven", source="files")
    kept = agent_create(owner_id=owner.pk, name="Gardener")
    note_upsert(owner_id=owner.pk, scope=Scope.agent(kept.pk), topic="soil", summary="Clay", source="files")
    agent_delete(owner_id=owner.pk, agent_id=agent.pk, memory="delete")
    agent_delete(owner_id=owner.pk, agent_id=kept.pk, memory="keep")
    entry = file_delete(owner_id=other.pk, path="Memory/home.md")
    trash_restore(owner_id=other.pk, entry_id=entry.pk)
    forgot = memory_forget(owner_id=other.pk)
    trash_restore(owner_id=other.pk, entry_id=forgot.pk)
    note_upsert(owner_id=other.pk, scope=Scope.user(), topic="tea", summary="Likes green tea", source="files")
    # Erased for good, then written again: the versions go on above the erased ones.
    memory_erase(owner_id=other.pk)
    note_upsert(owner_id=other.pk, scope=Scope.user(), topic="tea", summary="Likes black tea", source="files",
                details="Assam.")
    file_write(owner_id=other.pk, path="Memory/tea.md", content="Assam, with milk.\n",
               version=NoteFile.objects.get(owner=other, path="Memory/tea.md").version)
    # Confirming what memory already holds saves nothing, and is still a clean confirm.
    same = proposal_create(owner_id=owner.pk, scope=Scope.user(), topic="pets", summary="A cat")
    note_upsert(owner_id=owner.pk, scope=Scope.user(), topic="pets", summary="A cat", source="files")
    assert proposal_confirm(owner_id=owner.pk, proposal_id=same.pk, actor="you") is None
    # An importance given, changed and undone: change sets of importances only, touching no file.
    note_importance_set(owner_id=owner.pk, scope=Scope.user(), topic="home", importance=0.9)
    _, weighed = importance_change(owner_id=owner.pk, scope=Scope.user(), topic="home", importance=0.2)
    change_undo(owner_id=owner.pk, change_id=weighed.pk)
    return ids


@pytest.fixture
def worked(owner, outsider):
    return workload(owner, outsider)


def sql(statement: str, params: list | None = None) -> None:
    with connection.cursor() as cursor:
        cursor.execute(statement, params or [])


def checks_broken() -> set[str]:
    return set(summary(check_invariants()))


def test_every_invariant_holds_after_a_day_of_ordinary_use(worked):
    assert check_invariants() == []


def test_it_reports_a_change_set_that_touched_neither_a_file_nor_an_importance(worked, owner):
    ChangeSet.objects.create(owner=owner, created_at=ChangeSet.objects.first().created_at, source="files",
                             summary="nothing", importance=[])
    assert checks_broken() == {"empty_change_set"}


def test_it_reports_a_note_changed_behind_the_stores_back(worked, owner):
    NoteFile.objects.filter(owner=owner, path="Memory/home.md").update(content="edited by hand")
    assert checks_broken() == {"current_text_differs"}


def test_it_reports_a_note_that_vanished_although_its_last_change_wrote_it(worked, owner):
    NoteFile.objects.filter(owner=owner, path="Memory/index.md").delete()
    assert checks_broken() == {"file_lost"}


def test_it_reports_a_file_no_change_set_ever_wrote(worked, owner):
    NoteFile.objects.create(owner=owner, path="Memory/ghost.md", content="boo", version=1,
                            updated_at=NoteFile.objects.first().updated_at)
    assert checks_broken() == {"file_without_change"}


def test_it_reports_a_gap_in_a_version_chain(worked, owner):
    last = FileVersion.objects.filter(owner=owner, path="Memory/home.md").order_by("-version").first()
    sql(f"UPDATE {FileVersion._meta.db_table} SET version = version + 5 WHERE id = %s", [last.pk])
    FileChange.objects.filter(change_set_id=last.change_set_id, path=last.path).update(
        after_version=last.version + 5)
    NoteFile.objects.filter(owner=owner, path=last.path).update(version=last.version + 5)
    assert checks_broken() == {"version_gap"}


def test_it_reports_a_version_chain_after_an_erase_that_restarted_at_1(worked, outsider):
    """Versions written after an erase start above the erased ones: a chain that starts again at 1 is a gap."""
    first = FileVersion.objects.filter(owner=outsider, path="Memory/tea.md").order_by("version").first()
    assert first.version > 1
    sql(f"UPDATE {FileVersion._meta.db_table} SET version = version - %s WHERE owner_id = %s AND path = %s",
        [first.version - 1, outsider.pk, "Memory/tea.md"])
    sql(f"UPDATE {FileChange._meta.db_table} SET after_version = after_version - %s, "
        "before_version = before_version - %s WHERE change_set_id IN (SELECT change_set_id FROM "
        f"{FileVersion._meta.db_table} WHERE owner_id = %s) AND path = %s",
        [first.version - 1, first.version - 1, outsider.pk, "Memory/tea.md"])
    NoteFile.objects.filter(owner=outsider, path="Memory/tea.md").update(version=2)
    assert checks_broken() == {"version_gap"}


def test_it_reports_an_edit_that_silently_overwrote_another(worked, owner):
    """Two writers both started from version 1; the second one's "before" is not what the first left."""
    second = FileChange.objects.filter(change_set__owner=owner, path="Memory/home.md", after_version=3).get()
    second.before = "Trastevere, near the river.\n"  # what version 1 said, not version 2
    second.save()
    assert checks_broken() == {"lost_update"}


def test_it_reports_a_proposal_saved_twice(worked, owner):
    proposal = Proposal.objects.get(pk=worked["saved"])
    twin = ChangeSet.objects.create(owner=owner, created_at=proposal.decided_at, source="proposal",
                                    summary="again", proposal_id=proposal.pk)
    note = NoteFile.objects.get(owner=owner, path="Memory/index.md")
    FileChange.objects.create(change_set=twin, path="Memory/zz-twin.md", before=None, after="x", after_version=1)
    FileVersion.objects.create(owner=owner, path="Memory/zz-twin.md", version=1, content="x", change_set=twin,
                               created_at=note.updated_at)
    NoteFile.objects.create(owner=owner, path="Memory/zz-twin.md", content="x", version=1, updated_at=note.updated_at)
    assert checks_broken() == {"proposal_saved_twice"}


def test_it_reports_a_confirmed_proposal_whose_note_was_never_saved(worked, owner):
    proposal = Proposal.objects.get(pk=worked["saved"])
    sql(f"UPDATE {Proposal._meta.db_table} SET change_set_id = NULL WHERE id = %s", [proposal.pk])
    sql(f"UPDATE {ChangeSet._meta.db_table} SET proposal_id = NULL, source = 'files' WHERE proposal_id = %s",
        [proposal.pk])
    # and no version of the index ever held its line, so it was not a confirm of a note already saved
    Proposal.objects.filter(pk=proposal.pk).update(topic="never-saved", summary="Nobody saved this")
    assert checks_broken() == {"confirmed_without_change"}


def test_it_reports_half_a_confirm(worked, owner):
    """The note was saved for the proposal, but the proposal still waits."""
    Proposal.objects.filter(pk=worked["saved"]).update(status="pending", change_set=None)
    assert checks_broken() == {"change_for_unconfirmed_proposal"}


def test_it_reports_a_row_that_belongs_to_two_owners(worked, owner, outsider):
    theirs = ChangeSet.objects.filter(owner=outsider).first()
    ChangeSet.objects.filter(pk=worked["edit"]).update(reverts=theirs)
    assert checks_broken() == {"two_owners"}


def test_it_reports_a_note_filed_in_another_owners_agent_folder(worked, owner, outsider):
    agent = agent_create(owner_id=outsider.pk, name="Theirs")
    note_upsert(owner_id=owner.pk, scope=Scope.agent(agent.pk), topic="sneaky", summary="x", source="files")
    assert checks_broken() == {"two_owners"}


def test_every_owned_model_is_found_through_its_parent_rows():
    from localai_memory.notes.models import TrashFile

    assert owner_path(NoteFile) == "owner_id"
    assert owner_path(FileChange) == "change_set__owner_id"
    assert owner_path(TrashFile) == "entry__owner_id"
