"""Writes of memory growth that are not consolidation or import: erasing everything of a user's notes.

``memory_clear`` is the terminal's ``clear``: unlike Forget everything (which moves the notes to the Trash),
it erases them for good — the files, every version, every change set, the Trash and every proposal — so no
text of a note survives anywhere. ``memory_leftovers`` reads that back; the caller reports success only when
it finds nothing.
"""

from __future__ import annotations

from django.apps import apps
from django.db import models, transaction

from localai_memory.memory.models import Proposal
from localai_memory.memory.services import settings_mark_forgotten
from localai_memory.notes.models import (
    ChangeSet,
    FileChange,
    FileVersion,
    NoteFile,
    NoteImportance,
    TrashEntry,
    TrashFile,
)
from localai_memory.notes.services import lock_owner, memory_erase, note_copies

from .consolidation import consolidation_forget_chats

#: Apps whose rows keyed by an owner hold note text (vectors and copies made for recall).
_DERIVED_APPS = ("recall",)


def _derived_models() -> list[type[models.Model]]:
    found: list[type[models.Model]] = []
    for label in _DERIVED_APPS:
        try:
            config = apps.get_app_config(label)
        except LookupError:
            continue
        for model in config.get_models():
            if any(f.name == "owner" and f.is_relation for f in model._meta.get_fields()):
                found.append(model)
    return found


def memory_leftovers(*, owner_id: int) -> dict[str, int]:
    """What of the owner's notes is still stored anywhere: ``{what: count}`` for every non-zero count."""
    counts = {
        "files": NoteFile.objects.filter(owner_id=owner_id).count(),
        "versions": FileVersion.objects.filter(owner_id=owner_id).count(),
        "change_sets": ChangeSet.objects.filter(owner_id=owner_id).count(),
        "changed_files": FileChange.objects.filter(change_set__owner_id=owner_id).count(),
        "trash_entries": TrashEntry.objects.filter(owner_id=owner_id).count(),
        "trash_files": TrashFile.objects.filter(entry__owner_id=owner_id).count(),
        "proposals": Proposal.objects.filter(owner_id=owner_id).count(),
        "importances": NoteImportance.objects.filter(owner_id=owner_id).count(),  # their topics name notes
    }
    for model in _derived_models():
        counts[model._meta.label_lower] = model._default_manager.filter(owner_id=owner_id).count()
    for copies in note_copies:
        counts[copies.name] = copies.rows(owner_id).count()
    return {what: count for what, count in counts.items() if count}


@transaction.atomic
def memory_clear(*, owner_id: int) -> dict[str, int]:
    """Erase every note of the owner everywhere (files, versions, change sets, Trash, proposals, recall copies,
    and the ``note_copies`` other apps keep: what memory did on each chat turn, what a bot said about a note).

    Not undoable: there is nothing left to undo from. The owner's settings, agents and chats stay (the chats'
    messages as written, without the record of what memory did in them); so do the consolidation watermarks
    (ids only), moved to each chat's last message (``consolidation_forget_chats``), so nothing said before is
    suggested afterwards, not even by a pass that was running; and the time is recorded as for Forget
    everything (``memory.services.settings_mark_forgotten``), so a chat turn still answering saves and
    suggests nothing it read before. Returns what was deleted or wiped, per kind.
    """
    lock_owner(owner_id)
    deleted: dict[str, int] = {}
    deleted["proposals"] = Proposal.objects.filter(owner_id=owner_id).delete()[0]
    for model in _derived_models():
        deleted[model._meta.label_lower] = model._default_manager.filter(owner_id=owner_id).delete()[0]
    for copies in note_copies:
        deleted[copies.name] = copies.wipe(copies.rows(owner_id))
    deleted.update(memory_erase(owner_id=owner_id))
    consolidation_forget_chats(owner_id=owner_id)
    settings_mark_forgotten(user_id=owner_id)
    return deleted
