"""Reads of the notes store, always scoped to one owner (another owner's rows are a 404)."""

from __future__ import annotations

from dataclasses import dataclass

from django.db import connection
from django.db.models import Q, QuerySet

from localai_memory.core.access import owned_or_404
from localai_memory.core.errors import NotFound

from .models import ChangeSet, FileVersion, NoteFile, NoteImportance, TrashEntry
from .paths import INDEX_NAME, IndexEntry, Scope, parse_folder, parse_index, parse_path


def access_file(*, owner_id: int, path: str) -> NoteFile:
    parsed = parse_path(path)
    note = NoteFile.objects.filter(owner_id=owner_id, path=parsed.path).first()
    if note is None:
        raise NotFound(f"{parsed.path} does not exist.", code="file_not_found")
    return note


def access_change(*, owner_id: int, change_id: object) -> ChangeSet:
    return owned_or_404(ChangeSet.objects.prefetch_related("files"), owner_field="owner_id", owner=owner_id,
                        pk=change_id)


def access_trash(*, owner_id: int, entry_id: object) -> TrashEntry:
    return owned_or_404(TrashEntry.objects.prefetch_related("files"), owner_field="owner_id", owner=owner_id,
                        pk=entry_id)


def file_list(*, owner_id: int, folder: str | None = None) -> QuerySet[NoteFile]:
    prefix = parse_folder(folder)
    return NoteFile.objects.filter(owner_id=owner_id, path__startswith=prefix + "/").order_by("path")


def file_history(*, owner_id: int, path: str) -> QuerySet[FileVersion]:
    parsed = parse_path(path)
    versions = FileVersion.objects.filter(owner_id=owner_id, path=parsed.path).select_related("change_set")
    if not versions.exists():
        raise NotFound(f"{parsed.path} has no history.", code="file_not_found")
    return versions.order_by("-version")


def trash_list(*, owner_id: int, include_restored: bool = False) -> QuerySet[TrashEntry]:
    entries = TrashEntry.objects.filter(owner_id=owner_id).prefetch_related("files")
    return entries if include_restored else entries.filter(restored_at__isnull=True)


def change_list(*, owner_id: int, before: int | None = None) -> QuerySet[ChangeSet]:
    """The owner's change sets, newest first; with ``before`` (a change set's id) only those listed after
    it (an id that is not the owner's lists nothing)."""
    changes = ChangeSet.objects.filter(owner_id=owner_id).prefetch_related("files", "reverted_by")
    if before is None:
        return changes
    cursor = ChangeSet.objects.filter(owner_id=owner_id, pk=before).values_list("created_at", flat=True).first()
    if cursor is None:
        return changes.none()
    return changes.filter(Q(created_at__lt=cursor) | Q(created_at=cursor, pk__lt=before))


def index_entries(*, owner_id: int, scope: Scope) -> list[IndexEntry]:
    """The entries of one scope's index ([] without notes)."""
    note = NoteFile.objects.filter(owner_id=owner_id, path=scope.index_path).only("content").first()
    return parse_index(note.content) if note else []


def index_text(*, owner_id: int, scope: Scope) -> str:
    note = NoteFile.objects.filter(owner_id=owner_id, path=scope.index_path).only("content").first()
    return note.content if note else ""


def topic_text(*, owner_id: int, scope: Scope, topic: str) -> str | None:
    note = NoteFile.objects.filter(owner_id=owner_id, path=scope.topic_path(topic)).only("content").first()
    return note.content if note else None


def note_now(*, owner_id: int, scope: Scope, topic: str) -> tuple[IndexEntry | None, str | None]:
    """A topic as it is, in one query: its index line (None without one) and its topic file's text."""
    with connection.cursor() as cursor:  # without the queryset compiler: this read is in a proposing turn
        cursor.execute(f"SELECT path, content FROM {NoteFile._meta.db_table} WHERE owner_id = %s AND path IN (%s, %s)",
                       [owner_id, scope.index_path, scope.topic_path(topic)])
        files = dict(cursor.fetchall())
    line = next((e for e in parse_index(files.get(scope.index_path) or "") if e.topic == topic), None)
    return line, files.get(scope.topic_path(topic))


def scope_folders(*, owner_id: int, kind: str) -> list[str]:
    """Keys of the agent or channel folders that hold files (``Memory/agents/<key>/…``)."""
    folder = "agents" if kind == "agent" else "channels"
    prefix = f"Memory/{folder}/"
    keys = {path[len(prefix):].split("/", 1)[0]
            for path in NoteFile.objects.filter(owner_id=owner_id, path__startswith=prefix).values_list("path", flat=True)}
    return sorted(keys, key=lambda k: (len(k), k))


@dataclass(frozen=True)
class NoteDeletion:
    """A note deleted by hand (``note_upsert(delete=True)`` from the Files source): the change, the topics it
    took out of the index, and whether it has been undone."""

    change: ChangeSet
    topics: list[str]
    undone: bool


def note_deletion(*, owner_id: int, change_id: int) -> NoteDeletion | None:
    """The owner's change ``change_id`` if it deleted a note by hand, else None (another's change, or another
    kind of change)."""
    change = ChangeSet.objects.filter(owner_id=owner_id, pk=change_id, source=ChangeSet.Source.FILES).first()
    if change is None or not change.summary.startswith("Forgot "):
        return None
    index = change.files.filter(path__endswith=f"/{INDEX_NAME}").first()
    if index is None:
        return None
    gone = {e.topic for e in parse_index(index.before or "")} - {e.topic for e in parse_index(index.after or "")}
    return NoteDeletion(change, sorted(gone),
                        ChangeSet.objects.filter(owner_id=owner_id, reverts=change).exists())


def note_importances(*, owner_id: int) -> dict[tuple[str, str, str], float]:
    """The importances the owner gave their notes: ``(scope kind, scope key, topic)`` → 0..1."""
    rows = NoteImportance.objects.filter(owner_id=owner_id).values_list("scope_kind", "scope_key", "topic",
                                                                        "importance")
    return {(kind, key, topic): importance for kind, key, topic, importance in rows}
