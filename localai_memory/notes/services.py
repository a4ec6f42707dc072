"""The notes store: the only code that writes a note.

Every write is one change set with each file's text before and after; versions are numbered without gaps
(and keep rising across an erase, so an old version number never names a new text); deletes go to the Trash. All writes of one owner are serialised by a PostgreSQL advisory lock taken inside the
transaction, so two writers never lose each other's edits, and caps are checked against the text as it is
under the lock. Nothing here decides *whether* the model may save: that is ``memory.policy``.
"""

from __future__ import annotations

import io
import json
import re
import zipfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from django.conf import settings
from django.db import connection, transaction
from django.db.models import QuerySet
from django.dispatch import Signal
from django.utils import timezone

from localai_memory.core.errors import ApplicationError, Conflict, Forbidden, Gone, InvalidInput, NotFound
from localai_memory.memory import policy

from .models import (
    ChangeSet,
    FileChange,
    FileVersion,
    NoteFile,
    NoteImportance,
    TrashEntry,
    TrashFile,
    VersionFloor,
)
from .paths import (
    INDEX_MAX_BYTES,
    INDEX_MAX_LINES,
    INDEX_NAME,
    INDEX_TOPIC,
    ROOT,
    TOPIC_MAX_BYTES,
    IndexEntry,
    Scope,
    check_own_files,
    check_topic,
    clean_summary,
    closed_details,
    index_over_caps,
    index_size,
    parse_index,
    parse_path,
    render_index,
)

# Sent inside the writing transaction with owner_id, paths (the files touched) and change_set.
notes_changed = Signal()

_LOCK_NAMESPACE = 0x4C4D  # "LM": keeps our advisory locks apart from anyone else's


class CapExceeded(ApplicationError):
    """A write would pass an index cap. ``details`` lists the current entries so a model can merge."""

    status = 422
    code = "cap_exceeded"


class Forgotten(Gone):
    """410 ``forgotten`` (the code of a suggestion Forget everything dropped, ``memory.proposals.DROPPED``): the
    owner forgot everything after what a note or a suggestion is made of was read; a chat turn that was still
    answering when they pressed Forget everything (``check_not_forgotten``)."""

    code = "forgotten"

    def __init__(self, message: str = "Everything in memory was forgotten while the chat was answering, so "
                                      "nothing said or read before it was saved or suggested.", **kwargs: Any) -> None:
        super().__init__(message, **kwargs)


def check_not_forgotten(owner_id: int, read_after: datetime | None) -> None:
    """Raise Forgotten when the owner forgot everything after ``read_after`` (the time a chat turn's reads are
    from: ``chats.tools.ToolContext.read_after``; None: nothing to check). Call under the owner's lock, which
    a forget holds while it records its time."""
    if read_after is None:
        return
    from localai_memory.memory.selectors import forgotten_after

    if forgotten_after(owner_id=owner_id, moment=read_after):
        raise Forgotten()


def lock_owner(owner_id: int) -> None:
    """Serialise every note write of one owner until the transaction ends. Raises Gone when the account was
    deleted (an account's delete holds this lock while it erases: a write that waited for it finds nobody)."""
    from django.contrib.auth import get_user_model

    users = get_user_model()._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [_LOCK_NAMESPACE, owner_id])
        # a statement of its own: its snapshot is taken after the wait, so it sees a delete that held the lock
        cursor.execute(f'SELECT EXISTS (SELECT 1 FROM "{users}" WHERE id = %s)', [owner_id])
        exists = cursor.fetchone()[0]
    if not exists:
        raise Gone("This account was deleted.", code="account_deleted")


def _check_content(path: str, content: str, *, current: str | None = None) -> None:
    """Refuse text that is not a valid note. ``current`` is the stored text: a cap refusal lists its entries."""
    if not isinstance(content, str):
        raise InvalidInput("content must be text", code="invalid_content")
    if "\x00" in content:
        raise InvalidInput("content may not contain NUL characters", code="invalid_content")
    parsed = parse_path(path)
    if parsed.is_index:
        entries = parse_index(content)
        # only a line new in this write: one an older version let through must not block every other edit
        kept = set(_entries_or_empty(current))
        itself = next((entry for entry in entries if INDEX_TOPIC in (entry.topic, entry.file) and entry not in kept),
                      None)
        if itself is not None:
            raise InvalidInput(f"the line of {itself.topic!r} names the index itself; 'index' is no topic and "
                               f"index.md no topic file", code="invalid_index_line")
        check_own_files(content, kept=kept)
        lines, size = index_size(content)
        if index_over_caps(lines, size):
            raise cap_error(path, entries, lines, size, current=_entries_or_empty(current))
    elif len(content.encode()) > TOPIC_MAX_BYTES:
        raise topic_too_large(path, content, current)


def topic_too_large(path: str, content: str, current: str | None) -> InvalidInput:
    """400 ``topic_too_large`` for a topic file past its cap; ``details`` hold the file's text as it is now
    (``current``, None for a new file), so a model can shorten or merge rather than guess."""
    size = len(content.encode())
    return InvalidInput(
        f"{path} would hold {size} bytes; a topic file holds at most {TOPIC_MAX_BYTES} bytes, Memory is for short "
        f"notes. Shorten it{' or merge it with its current text' if current else ''} first.",
        code="topic_too_large",
        details={"path": path, "max_bytes": TOPIC_MAX_BYTES, "bytes": size, "current": current},
    )


def _entries_or_empty(text: str | None) -> list[IndexEntry]:
    if not text:
        return []
    try:
        return parse_index(text)
    except InvalidInput:  # an old index that no longer parses still gets a refusal, just without a listing
        return []


def cap_error(path: str, entries: list[IndexEntry], lines: int, size: int,
               current: list[IndexEntry] | None = None) -> CapExceeded:
    listing = current if current is not None else entries
    return CapExceeded(
        f"{path} would hold {lines} lines and {size} bytes; an index holds at most {INDEX_MAX_LINES} lines "
        f"and {INDEX_MAX_BYTES} bytes. Merge or remove entries first.",
        details={"path": path, "max_lines": INDEX_MAX_LINES, "max_bytes": INDEX_MAX_BYTES,
                 "entries": [entry.as_dict() for entry in listing]},
    )


def apply_changes(
    *,
    owner_id: int,
    writes: Mapping[str, str | None],
    source: str,
    summary: str,
    actor: str = "",
    automatic: bool = False,
    undo_until: datetime | None = None,
    chat_id: int | None = None,
    proposal_id: int | None = None,
    reverts: ChangeSet | None = None,
    expected_versions: Mapping[str, int | None] | None = None,
    validate: bool = True,
    change_id: int | None = None,
) -> ChangeSet:
    """Write several files as one change set (``change_id``: its id, taken beforehand; None for a new one).
    ``None`` deletes a file.

    The one place a note's text changes: callers hold the owner lock (``lock_owner``) and an open transaction.
    Raises Conflict when nothing would change or an expected version is stale, and CapExceeded / InvalidInput
    when ``validate`` finds a file past its cap or malformed.
    """
    now = timezone.now()
    current = {f.path: f for f in NoteFile.objects.select_for_update().filter(owner_id=owner_id, path__in=list(writes))}
    if expected_versions:
        for path, expected in expected_versions.items():
            existing = current.get(path)
            if expected is None and existing is not None:
                raise Conflict(f"{path} already exists (version {existing.version}); send the version you edited.",
                               code="file_exists", details={"path": path, "version": existing.version,
                                                            "content": existing.content})
            if expected is not None and existing is None:
                # Deleted since it was loaded, or never there (e.g. another user's path): nothing to edit.
                raise NotFound(f"{path} does not exist (any more); leave out the version to create it.",
                               code="file_not_found", details={"path": path, "version": None, "content": None})
            if expected is not None and existing is not None and existing.version != expected:
                raise Conflict(
                    f"{path} changed since version {expected}; reload it and apply your edit again.",
                    code="stale_version",
                    details={"path": path, "version": existing.version, "content": existing.content},
                )
    effective = {p: c for p, c in writes.items() if (current[p].content if p in current else None) != c}
    if not effective:
        raise Conflict("Nothing would change.", code="no_change")
    if not settings.FILES_ENABLED and not all(_only_forgets(path, content, current.get(path))
                                               for path, content in effective.items()):
        # notes are files: with the server's files off nothing is written, but a note can still be forgotten
        raise Forbidden(policy.MESSAGES["server_files_off"], code="server_files_off")
    if validate:
        for path, content in effective.items():
            if content is not None:
                _check_content(path, content, current=current[path].content if path in current else None)
    change_set = ChangeSet.objects.create(
        pk=change_id, owner_id=owner_id, created_at=now, source=source, summary=summary[:300], actor=actor[:200],
        automatic=automatic, undo_until=undo_until, chat_id=chat_id, proposal_id=proposal_id, reverts=reverts,
    )
    last_versions = _last_versions(owner_id, list(effective))
    changes: list[FileChange] = []
    versions: list[FileVersion] = []
    for path in sorted(effective):
        content = effective[path]
        existing = current.get(path)
        version = last_versions[path] + 1
        changes.append(FileChange(
            change_set=change_set, path=path,
            before=existing.content if existing else None, before_version=existing.version if existing else None,
            after=content, after_version=version,
        ))
        versions.append(FileVersion(owner_id=owner_id, path=path, version=version, content=content or "",
                                    deleted=content is None, change_set=change_set, created_at=now))
        if content is None:
            if existing:
                existing.delete()
        elif existing:
            existing.content, existing.version, existing.updated_at = content, version, now
            existing.save(update_fields=["content", "version", "updated_at"])
        else:
            NoteFile.objects.create(owner_id=owner_id, path=path, content=content, version=version, updated_at=now)
    # The history of every file in one statement each (a note's write is its index and its topic file).
    FileChange.objects.bulk_create(changes)
    FileVersion.objects.bulk_create(versions)
    notes_changed.send(sender=ChangeSet, owner_id=owner_id, paths=sorted(effective), change_set=change_set,
                       contents=dict(effective))
    return change_set


def _only_forgets(path: str, content: str | None, existing: NoteFile | None) -> bool:
    """Whether writing ``content`` to ``path`` only takes something away: a file deleted, or an index left
    with some of its lines (a note forgotten among others)."""
    if content is None:
        return True
    if existing is None or not parse_path(path).is_index:
        return False
    try:
        return set(parse_index(content)) <= set(parse_index(existing.content))
    except InvalidInput:
        return False


def _last_versions(owner_id: int, paths: list[str]) -> dict[str, int]:
    """The last version number of each of ``paths``: its history's, else the owner's ``VersionFloor`` (0 for
    an owner whose memory was never erased)."""
    from django.db.models import Max

    rows = (FileVersion.objects.filter(owner_id=owner_id, path__in=paths).values("path")
            .annotate(last=Max("version")))
    last = {row["path"]: row["last"] for row in rows}
    if len(last) < len(set(paths)):
        floor = VersionFloor.objects.filter(owner_id=owner_id).values_list("version", flat=True).first() or 0
        last = {path: last.get(path, floor) for path in paths}
    return last


@transaction.atomic
def file_write(*, owner_id: int, path: str, content: str, version: int | None, source: str = "files",
               actor: str = "you") -> ChangeSet:
    """Write one file as the owner edited it. ``version`` is the version the edit started from (None only to
    create). Raises Conflict (409) when it is stale, CapExceeded (422) past a cap, InvalidInput (400)."""
    path = parse_path(path).path
    if version is not None and (not isinstance(version, int) or isinstance(version, bool) or version < 1):
        raise InvalidInput("version must be a positive whole number", code="invalid_version")
    if isinstance(content, str):
        content = content.removeprefix("\ufeff")  # the byte-order mark some editors put first: invisible
    lock_owner(owner_id)
    return apply_changes(owner_id=owner_id, writes={path: content}, source=source, summary=f"Edited {path}",
                  actor=actor, expected_versions={path: version})


@transaction.atomic
def file_write_read(*, owner_id: int, path: str, content: str, version: int | None) -> tuple[ChangeSet, NoteFile]:
    """``file_write``, then the file as written, read in the same transaction: if the database goes away
    before it is read, nothing was saved, so a 503 tells the truth (read after the commit, it could hide a
    saved edit; seen in bench/faults)."""
    from .selectors import access_file

    change = file_write(owner_id=owner_id, path=path, content=content, version=version)
    return change, access_file(owner_id=owner_id, path=path)


@transaction.atomic
def file_delete(*, owner_id: int, path: str, version: int | None = None, actor: str = "you",
                source: str = "trash") -> TrashEntry:
    """Move one file to the Trash, as one entry and one change set. Deleting an index also trashes its scope's
    topic files (those its lines name and any other beside it): without its index no note of the scope is
    left, so no topic file may stay to reach recall or be inherited by a new note of its topic. ``version``
    (when given) is the deleted file's, checked under the owner lock (409 ``stale_version``)."""
    parsed = parse_path(path)
    lock_owner(owner_id)
    existing = NoteFile.objects.filter(owner_id=owner_id, path=parsed.path).first()
    if existing is None:
        raise NotFound(f"{parsed.path} does not exist.")
    if version is not None and existing.version != version:
        raise Conflict(f"{parsed.path} changed since version {version}.", code="stale_version",
                       details={"path": parsed.path, "version": existing.version, "content": existing.content})
    paths, label = [parsed.path], parsed.path
    if parsed.is_index:
        folder = parsed.scope.root + "/"
        topics = [p for p in NoteFile.objects.filter(owner_id=owner_id, path__startswith=folder)
                  .values_list("path", flat=True) if p != parsed.path and "/" not in p[len(folder):]]
        paths += topics
        if topics:
            label = f"{parsed.path} and its {len(topics)} topic file{'s' if len(topics) > 1 else ''}"
    # Not None: the file is there and the owner lock keeps it there.
    return cast(TrashEntry, _trash(owner_id=owner_id, paths=paths, kind=TrashEntry.Kind.FILE, label=label,
                                   source=source, actor=actor))


def _trash(*, owner_id: int, paths: Iterable[str], kind: str, label: str, source: str, actor: str,
           summary: str | None = None) -> TrashEntry | None:
    files = list(NoteFile.objects.filter(owner_id=owner_id, path__in=list(paths)).order_by("path"))
    if not files:
        return None
    change_set = apply_changes(owner_id=owner_id, writes={f.path: None for f in files}, source=source,
                        summary=summary or f"Moved {label} to the Trash", actor=actor, validate=False)
    entry = TrashEntry.objects.create(owner_id=owner_id, kind=kind, label=label, created_at=change_set.created_at,
                                      change_set=change_set)
    TrashFile.objects.bulk_create([TrashFile(entry=entry, path=f.path, content=f.content) for f in files])
    return entry


@transaction.atomic
def folder_trash(*, owner_id: int, folder: str, kind: str = TrashEntry.Kind.FOLDER, label: str | None = None,
                 source: str = "trash", actor: str = "you") -> TrashEntry | None:
    """Move every file under ``folder`` (e.g. an agent's notes) to the Trash as one entry."""
    lock_owner(owner_id)
    prefix = folder.rstrip("/") + "/"
    paths = NoteFile.objects.filter(owner_id=owner_id, path__startswith=prefix).values_list("path", flat=True)
    return _trash(owner_id=owner_id, paths=list(paths), kind=kind, label=label or folder, source=source,
                  actor=actor)


@transaction.atomic
def memory_forget(*, owner_id: int, actor: str = "you") -> TrashEntry | None:
    """Forget everything: every note of the owner to the Trash as one restorable entry."""
    lock_owner(owner_id)
    paths = NoteFile.objects.filter(owner_id=owner_id, path__startswith=ROOT + "/").values_list("path", flat=True)
    return _trash(owner_id=owner_id, paths=list(paths), kind=TrashEntry.Kind.FORGET, label="Everything in Memory",
                  source=ChangeSet.Source.FORGET, actor=actor, summary="Forgot everything (moved to the Trash)")


@dataclass(frozen=True)
class NoteCopies:
    """Rows outside the notes store that keep text of an owner's notes (what memory did on a chat turn, what a
    bot said about a note), registered by their app in ``note_copies`` so that clearing a user's memory
    (``growth.services.memory_clear``) wipes them and reads them back too."""

    name: str
    #: the owner's rows that still hold note text
    rows: Callable[[int], QuerySet[Any]]
    #: erases the note text from those rows (the rows themselves may stay); returns how many it changed
    wipe: Callable[[QuerySet[Any]], int]


note_copies: list[NoteCopies] = []


@transaction.atomic
def memory_erase(*, owner_id: int) -> dict[str, int]:
    """Erase every file of the owner for good: current text, versions, change sets and the Trash.

    Not undoable (nothing is left to undo from); Forget everything (``memory_forget``) is the restorable
    one. Only the highest version number is kept (``VersionFloor``): versions written afterwards start above
    it, so an editor still holding a version from before gets a 409, not a silent overwrite of a new note.
    Returns what was deleted, per kind.
    """
    from django.db.models import Max

    lock_owner(owner_id)
    highest = FileVersion.objects.filter(owner_id=owner_id).aggregate(last=Max("version"))["last"]
    if highest is not None:  # above any floor already there: versions since an erase start above it
        VersionFloor.objects.update_or_create(owner_id=owner_id, defaults={"version": highest})
    deleted: dict[str, int] = {}
    deleted["trash_files"] = TrashFile.objects.filter(entry__owner_id=owner_id).delete()[0]
    deleted["trash_entries"] = TrashEntry.objects.filter(owner_id=owner_id).delete()[0]
    deleted["versions"] = FileVersion.objects.filter(owner_id=owner_id).delete()[0]
    deleted["changed_files"] = FileChange.objects.filter(change_set__owner_id=owner_id).delete()[0]
    ChangeSet.objects.filter(owner_id=owner_id).update(reverts=None)
    deleted["change_sets"] = ChangeSet.objects.filter(owner_id=owner_id).delete()[0]
    deleted["files"] = NoteFile.objects.filter(owner_id=owner_id).delete()[0]
    deleted["importances"] = NoteImportance.objects.filter(owner_id=owner_id).delete()[0]  # topics name notes
    return deleted


def check_importance(value: object) -> float | None:
    """A note's importance as given: a number from 0 to 1, or None (back to the one its writer gives)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise InvalidInput("importance must be a number from 0 to 1 (or null for the default)",
                           code="invalid_importance")
    return float(value)


#: ``note_save(importance=KEEP)``: the note's importance is left as it is; ``note_upsert(summary=KEEP)`` (and
#: ``note_save``'s): its summary, as the index says under the owner's lock.
KEEP: Any = object()
#: ``note_save(index_version=UNCHECKED)``: the write does not say which version of the index it was made from.
UNCHECKED: Any = object()


def check_index_version(*, owner_id: int, scope: Scope, expected: object) -> None:
    """Refuse a write made from an older ``scope`` index than the one there now (409 ``stale_version`` with the
    index as it is: its path, version and text), as the Files API refuses a stale file. ``expected`` is the
    ``index_version`` the client read (None: there was no index). Call it under the owner's lock."""
    from .selectors import scope_label

    if expected is not None and (isinstance(expected, bool) or not isinstance(expected, int) or expected < 1):
        raise InvalidInput("index_version must be a positive whole number or null", code="invalid_version")
    index_file = NoteFile.objects.filter(owner_id=owner_id, path=scope.index_path).first()
    now = index_file.version if index_file else None
    if now != expected:
        seen = f"version {expected}" if expected is not None else "a time it had no notes"
        raise Conflict(f"The index of {scope_label(owner_id=owner_id, scope=scope)} changed since {seen}; "
                       "reload the notes and apply your edit again.",
                       code="stale_version",
                       details={"path": scope.index_path, "version": now,
                                "content": index_file.content if index_file else None})


#: What a ``note_version`` a client sends may look like: ``selectors.note_version``'s 16 hex digits, in either
#: case (``note_version_given`` reads it).
NOTE_VERSION_RE = re.compile(r"[0-9a-fA-F]{16}")


def note_version_given(raw: object) -> object:
    """A ``note_version`` as a client sent it, read the one way every way in reads it (the API, the terminal's
    ``--version``, the Memory tab's forms, MCP's ``memory_propose``): 16 hex digits in either case, blanks
    around them ignored, are the version in lower case, as ``selectors.note_version`` makes it; anything else
    is returned as it is, for ``check_note_version`` to refuse."""
    if isinstance(raw, str) and NOTE_VERSION_RE.fullmatch(raw.strip()):
        return raw.strip().lower()
    return raw


def check_note_version(*, owner_id: int, scope: Scope, topic: str, expected: object,
                       listed_by: str = "GET /api/chats/memory/notes", outcome: str = "nothing was changed",
                       null_means_none: bool = True) -> None:
    """Refuse a change of one note made from an older read of it than the note there now: 409
    ``stale_version`` saying so, with the note as it is in ``details`` (``note_version``, ``summary``,
    ``details``, ``importance``; all null when it was deleted meanwhile), so a person or a client sees what
    changed instead of overwriting it unseen. ``expected`` is the ``note_version`` the client read, as it sent
    it (``note_version_given`` reads it; None: there was no such note). Call it under the owner's lock.
    ``listed_by`` names where a client reads a note's version (the API, the terminal's ``memory list``, the
    MCP ``memory_list``) and ``outcome`` what the refusal left undone (an MCP proposal changes nothing even
    when it is made), for the messages; ``null_means_none`` whether the caller's null says "there was no such
    note" (the API's) or "not checked" (the MCP tools': there a null is left out before this is called)."""
    from .selectors import note_now, note_version, scope_label

    expected = note_version_given(expected)
    if expected is not None and not (isinstance(expected, str) and NOTE_VERSION_RE.fullmatch(expected)):
        null = "or null for a note that did not exist" if null_means_none else "or left out not to check it"
        raise InvalidInput(f"note_version must be the one {listed_by} lists for the note, {null}",
                           code="invalid_version")
    line, details = note_now(owner_id=owner_id, scope=scope, topic=topic)
    importance = _importance_of(owner_id, scope, topic)
    now = note_version(line=line, details=details, importance=importance)
    if now == expected:
        return
    where = scope_label(owner_id=owner_id, scope=scope)
    if line is None:
        # The version says what was read, not whether the note was there: it may never have been (a topic
        # misspelt, or one MCP named from the words).
        said = f"There is no note {topic!r} in {where} now (deleted since you read it, or never there), so {outcome}."
    elif expected is None:
        said = (f"A note {topic!r} was added to {where} since you read it, so {outcome}. It reads: "
                f"{line.summary!r}.")
    else:
        # All it holds now, its details and importance too: a change of those alone is a change of the note.
        shown = [repr(line.summary)]
        if details and details.strip():
            text = details.strip()
            shown.append(f"with the details {text if len(text) <= 120 else text[:120].rstrip() + '…'!r}")
        if importance is not None:
            shown.append(f"importance {importance:g}")
        said = (f"The note {topic!r} in {where} changed since you read it, so {outcome}. It now reads: "
                f"{', '.join(shown)} (version {now}).")
    raise Conflict(f"{said} Look at it again and apply your change to it if you still want it.",
                   code="stale_version",
                   details={"scope": scope.name, "topic": topic, "note_version": now,
                            "summary": line.summary if line else None, "details": details if line else None,
                            "importance": importance if line else None})


@transaction.atomic
def note_save(*, owner_id: int, scope: Scope, topic: str, summary: str | None = None, details: str | None = None,
              importance: object = KEEP, source: str, actor: str, clear_details: bool = False,
              create_only: bool = False, index_version: object = UNCHECKED,
              note_version: object = UNCHECKED) -> ChangeSet | None:
    """A person's write of one note, its text and its importance as one step: the text when a ``summary`` is
    given (``note_upsert``; ``KEEP`` keeps the note's own), then the importance unless it is ``KEEP`` (``note_importance_set``; None gives
    back the writer's). A bad importance is a 400 before anything is written. With the text as it is already,
    only the importance changes, in a change set of its own (None when it has that importance already); with
    nothing to change, the store's 409 ``no_change``. ``index_version`` (when given): the version of the
    scope's index the edit was made from, a stale one refused under the owner's lock
    (``check_index_version``); ``note_version`` (when given): the version of the note itself the edit was
    made from, its line, details and importance (``check_note_version``), so two editors of one note never
    overwrite each other unseen, a details-only edit included."""
    if importance is not KEEP:
        check_importance(importance)
    if index_version is not UNCHECKED or note_version is not UNCHECKED:
        lock_owner(owner_id)
    if index_version is not UNCHECKED:
        check_index_version(owner_id=owner_id, scope=scope, expected=index_version)
    if note_version is not UNCHECKED:
        check_note_version(owner_id=owner_id, scope=scope, topic=check_topic(topic), expected=note_version)
    change = None
    if summary is not None:
        try:
            change = note_upsert(owner_id=owner_id, scope=scope, topic=topic, summary=summary, details=details,
                                 source=source, actor=actor, clear_details=clear_details, create_only=create_only)
        except Conflict as exc:
            if exc.code != "no_change" or importance is KEEP:
                raise
    if importance is not KEEP:
        _, weighed = importance_change(owner_id=owner_id, scope=scope, topic=topic, importance=importance,
                                       change=change, source=source, actor=actor)
        change = change or weighed
    return change


def note_importance_set(*, owner_id: int, scope: Scope, topic: str, importance: object,
                        change: ChangeSet | None = None, source: str = ChangeSet.Source.FILES,
                        actor: str = "you", note_version: object = UNCHECKED) -> float | None:
    """``importance_change`` when only the importance it set matters to the caller."""
    return importance_change(owner_id=owner_id, scope=scope, topic=topic, importance=importance, change=change,
                             source=source, actor=actor, note_version=note_version)[0]


@transaction.atomic
def importance_change(*, owner_id: int, scope: Scope, topic: str, importance: object,
                      change: ChangeSet | None = None, source: str = ChangeSet.Source.FILES,
                      actor: str = "you", note_version: object = UNCHECKED) -> tuple[float | None, ChangeSet | None]:
    """Give one note of ``scope`` an importance from 0 to 1 for recall, or None to take it back to the one its
    writer gives it. The note must exist (NotFound names the topics that do); ``note_version`` (when given) is
    the version of it the person read, a note changed since refused (``check_note_version``).

    The change is part of ``change`` when given (a note written with its importance in one step), else a
    change set of its own, so that Undo gives back the importance it had; nothing is recorded when the note
    has that importance already. Returns what was set and the change set that records it (None: no change)."""
    value = check_importance(importance)
    topic = check_topic(topic)
    lock_owner(owner_id)
    index_file = NoteFile.objects.filter(owner_id=owner_id, path=scope.index_path).first()
    topics = [entry.topic for entry in parse_index(index_file.content)] if index_file else []
    if topic not in topics:
        raise NotFound(f"There is no note {topic!r} here. These notes exist: {', '.join(topics) or 'none'}.",
                       code="unknown_topic")
    if note_version is not UNCHECKED:
        check_note_version(owner_id=owner_id, scope=scope, topic=topic, expected=note_version)
    before = _importance_of(owner_id, scope, topic)
    if before == value:
        return value, None
    if change is None:
        words = f"{value:g}" if value is not None else "its writer's"
        change = ChangeSet.objects.create(owner_id=owner_id, created_at=timezone.now(), source=source,
                                          summary=f"Importance of {topic}: {words}"[:300], actor=actor)
    _importance_recorded(owner_id, scope, topic, before, value, change)
    return value, change


def _importance_recorded(owner_id: int, scope: Scope, topic: str, before: float | None, after: float | None,
                         change: ChangeSet) -> None:
    """Give the note ``after`` and record it in ``change``, so that its Undo gives back ``before``."""
    _importance_write(owner_id, scope, topic, after)
    change.importance = [*(change.importance or []),
                         {"scope": scope.name, "topic": topic, "before": before, "after": after}]
    change.save(update_fields=["importance"])


def _importance_of(owner_id: int, scope: Scope, topic: str) -> float | None:
    return NoteImportance.objects.filter(owner_id=owner_id, scope_kind=scope.kind, scope_key=scope.key,
                                         topic=topic).values_list("importance", flat=True).first()


def _importance_write(owner_id: int, scope: Scope, topic: str, value: float | None) -> None:
    if value is None:
        NoteImportance.objects.filter(owner_id=owner_id, scope_kind=scope.kind, scope_key=scope.key,
                                      topic=topic).delete()
    else:
        NoteImportance.objects.update_or_create(owner_id=owner_id, scope_kind=scope.kind, scope_key=scope.key,
                                                topic=topic,
                                                defaults={"importance": value, "updated_at": timezone.now()})


@transaction.atomic
def trash_restore(*, owner_id: int, entry_id: int, actor: str = "you") -> ChangeSet:
    """Put a Trash entry's files back, as one change set, without losing anything written since.

    - A file whose path is free again comes back as it was.
    - An index that exists again (a note saved after Forget everything) is merged: its lines stay, the
      Trash's lines for other topics come back in their old order. The merged index must fit the caps.
    - A topic file that exists again is newer than the Trash's copy and stays; the summary names it. So does
      a note of that topic saved again since without details: the Trash's topic file does not come back
      beside it (its line is today's, as above), just as a deleted note's entry does not.
    - A note's entry (one note deleted) comes back as that note: its index line and its topic file, unless
      a note of that topic exists again.

    Refuses when nothing could come back (409), or the merged index would pass the caps (422); writes nothing
    then.
    """
    lock_owner(owner_id)
    entry = TrashEntry.objects.select_for_update().filter(owner_id=owner_id, pk=entry_id).first()
    if entry is None:
        raise NotFound("No such Trash entry.")
    if entry.restored_at is not None:
        raise Conflict("This Trash entry was restored already.", code="already_restored")
    files = {f.path: f.content for f in entry.files.all()}
    current = {f.path: f.content for f in NoteFile.objects.filter(owner_id=owner_id, path__in=list(files))}
    kept: list[str] = []
    if entry.kind == TrashEntry.Kind.NOTE:
        writes = _note_back(files, current)
    else:
        writes, kept = _files_back(files, current, listed=_notes_without_file(owner_id, files))
    summary = f"Restored {entry.label} from the Trash"
    if kept:
        summary += "; kept " + ", ".join(kept)
    change_set = apply_changes(owner_id=owner_id, writes=writes, source=ChangeSet.Source.RESTORE,
                               summary=summary[:300], actor=actor, validate=False)
    entry.restored_at, entry.restored_by, entry.unrestored_by = change_set.created_at, change_set, None
    entry.save(update_fields=["restored_at", "restored_by", "unrestored_by"])
    return change_set


@transaction.atomic
def trash_restore_for_owner(*, owner_id: int, entry_id: int, actor: str) -> ChangeSet:
    """``trash_restore`` done by somebody else for the owner (an administrator), with what the owner's own restore
    is held to (caps, the server's files), and refused while the owner's memory is switched off (Forbidden
    ``user_off``, nothing written): memory is their choice alone, and notes brought back while it is off (a
    whole Forget everything) are theirs to bring back, from their Trash, once they want them. Checked under
    the owner's note lock, which the restore holds to its end."""
    from localai_memory.growth.selectors import owner_context

    lock_owner(owner_id)
    decision = owner_context(owner_id=owner_id).decision
    if decision.blocked_by == "user":
        raise Forbidden("Their memory is switched off (or their settings cannot be read), so only they can restore "
                        "it, from the Trash on their Files page.", code=decision.code or "user_off")
    return trash_restore(owner_id=owner_id, entry_id=entry_id, actor=actor)


def _notes_without_file(owner_id: int, paths: Iterable[str]) -> set[str]:
    """The topic files among ``paths`` whose topic has a line in its scope's index as it is now that does not
    point to them: a note of that topic saved again since, without details. (A line that still points to its
    file is the note the file was deleted from: the file may come back to it.)"""
    topic_paths = [parsed for parsed in map(parse_path, paths) if parsed.topic is not None]
    indexes = dict(NoteFile.objects.filter(owner_id=owner_id, path__in={p.scope.index_path for p in topic_paths})
                   .values_list("path", "content"))
    unlinked = {path: {e.topic for e in _entries_or_empty(text) if e.file != e.topic}
                for path, text in indexes.items()}
    return {p.path for p in topic_paths if p.topic in unlinked.get(p.scope.index_path, set())}


def _files_back(files: dict[str, str], current: dict[str, str], *,
                listed: set[str]) -> tuple[dict[str, str | None], list[str]]:
    """What restoring ``files`` writes, given the ``current`` text of those that exist again and the topic
    files whose topic is ``listed`` again without them, and which of those stay as they are (newer notes)."""
    writes: dict[str, str | None] = {}
    kept: list[str] = []
    for path in sorted(files):
        topic = parse_path(path).topic
        if topic is not None and (path in current or path in listed):
            # A file that exists again is named; a note saved again without details has no file to name.
            kept.append(path if path in current else f"the note {topic} as it is now")
        elif path not in current:
            writes[path] = files[path]
        else:
            merged = _merged_index(path, trashed=files[path], now=current[path])
            if merged != current[path]:
                writes[path] = merged
    if not writes:
        taken = sorted(set(current) | listed)
        raise Conflict("These notes or files exist again; move or delete them first: " + ", ".join(kept or taken),
                       code="restore_conflict", details={"paths": taken})
    return writes, kept


def _merged_index(path: str, *, trashed: str, now: str) -> str:
    """The index at ``path`` as it is ``now`` with the Trash's lines for topics it no longer has put back in
    their old order (a topic in both keeps today's line). 409 when either text is not an index or the result
    would pass the caps."""
    old, new = _index_to_merge(path, trashed), _index_to_merge(path, now)
    todays = {e.topic: e for e in new}
    merged = [todays.pop(e.topic, e) for e in old]
    return _index_within_caps(path, merged + [e for e in new if e.topic in todays])


def _index_to_merge(path: str, text: str) -> list[IndexEntry]:
    try:
        return parse_index(text)
    except InvalidInput as exc:
        raise Conflict(f"{path} exists again and cannot be merged with the Trash's copy ({exc.message}); "
                       "move or delete it first.", code="restore_conflict", details={"paths": [path]}) from None


def _index_within_caps(path: str, entries: list[IndexEntry]) -> str:
    """The index text of ``entries``, or 422 ``restore_over_cap`` when it would pass the caps."""
    text = render_index(entries)
    lines, size = index_size(text)
    if index_over_caps(lines, size):  # a 422 as any write past a cap
        raise CapExceeded(f"Restoring would give {path} {lines} lines ({size} bytes); an index holds at most "
                          f"{INDEX_MAX_LINES} lines and {INDEX_MAX_BYTES} bytes. Delete some notes there first.",
                          code="restore_over_cap", details={"paths": [path], "lines": lines, "bytes": size})
    return text


def _note_back(files: dict[str, str], current: dict[str, str]) -> dict[str, str | None]:
    """What restoring one deleted note writes: its index line into the index as it is now, its topic file."""
    index_path = next((p for p in files if parse_path(p).topic is None), None)
    topic_path = next((p for p in files if parse_path(p).topic is not None), None)
    line = parse_index(files[index_path]) if index_path else []
    todays = _index_to_merge(index_path, current[index_path]) if index_path and index_path in current else []
    present = [p for p in (topic_path,) if p in current]
    if index_path and {e.topic for e in line} & {e.topic for e in todays}:
        present.append(index_path)
    if present:
        label = line[0].topic if line else (topic_path or "")
        raise Conflict(f"A note “{label}” exists again; delete or rename it first.", code="restore_conflict",
                       details={"paths": sorted(present)})
    writes: dict[str, str | None] = {}
    if topic_path:
        writes[topic_path] = files[topic_path]
    if index_path:  # the line goes back at the end, as a new note's does
        writes[index_path] = _index_within_caps(index_path, todays + line)
    return writes


_NO_MERGE = object()


def _index_lines_back(path: str, before: str | None, after: str | None, current: str | None) -> object:
    """``current`` (an index) with the lines a change made (``before`` → ``after``) taken back, or ``_NO_MERGE``
    when that cannot be done without losing a later edit: a line of this change edited since, a file that
    is not an index, or an index holding anything but entry lines. A line the change removed comes back
    where it stood, after the nearest line that preceded it then."""
    if not path.endswith("/" + INDEX_NAME) or after is None or current is None:
        return _NO_MERGE
    texts = [before or "", after, current]
    try:
        parsed = [parse_index(text) for text in texts]
    except InvalidInput:
        return _NO_MERGE
    if any(render_index(entries) != text for entries, text in zip(parsed, texts, strict=True)):
        return _NO_MERGE  # blank or odd lines a merge would drop
    old, new, now = ({e.topic: e for e in entries} for entries in parsed)
    result = list(parsed[2])
    for entry in parsed[1]:  # the change's own lines, edited since: not this Undo's to take back
        if old.get(entry.topic) != entry and now.get(entry.topic) != entry:
            return _NO_MERGE
    for topic in old.keys() - new.keys():  # removed by the change: back, unless written again since
        if topic in now:
            return _NO_MERGE
    for position, entry in enumerate(parsed[0]):
        if new.get(entry.topic) == entry:
            continue
        kept = [e.topic for e in result]
        if entry.topic in kept:
            result[kept.index(entry.topic)] = entry
        else:
            earlier = [e.topic for e in parsed[0][:position] if e.topic in kept]
            result.insert(kept.index(earlier[-1]) + 1 if earlier else 0, entry)
    result = [e for e in result if e.topic in old or new.get(e.topic) != e]
    text = render_index(result)
    lines, size = index_size(text)
    if index_over_caps(lines, size):
        return _NO_MERGE  # the lines added since leave no room for the one this Undo brings back
    return text or None  # an index whose last line goes is deleted, as a note's delete does


@transaction.atomic
def change_undo(*, owner_id: int, change_id: int, actor: str = "you", source: str = ChangeSet.Source.UNDO,
                not_after: datetime | None = None) -> ChangeSet:
    """Restore the exact text every file had before change set ``change_id``.

    Refuses with 409 when it was undone already, or a file or an importance it set changed since (the later
    change is never lost); with 410 once the Undo window has closed: an automatic note's own window
    (``undo_until``, 30 minutes, wherever the Undo is pressed), or ``not_after`` when the caller names an
    earlier end. The end is the policy's (``memory.policy.undo_open``): at exactly 30 minutes the window is
    closed. The Trash follows: undoing a delete restores its entry, undoing a restore puts the entry back
    (``unrestored_by``), and undoing that Undo restores it again.
    """
    lock_owner(owner_id)
    change = ChangeSet.objects.select_for_update().filter(owner_id=owner_id, pk=change_id).first()
    if change is None:
        raise NotFound("No such change.")
    if change.source == ChangeSet.Source.ADDON:  # the add-on keeps the note: nothing here to restore
        raise Conflict("This note was handed to a memory add-on, which keeps it; it cannot be undone here. Change "
                       "or forget it through the add-on.", code="not_undoable")
    ends = [end for end in (not_after, change.undo_until if change.automatic else None) if end is not None]
    if ends and not policy.undo_open(saved_at=min(ends) - policy.UNDO_WINDOW, now=timezone.now()):
        raise Gone("The Undo window of this change has closed; restore an earlier version from Files instead.",
                   code="undo_window_closed")
    if change.reverted_by.exists():
        raise Conflict("This change was undone already.", code="already_undone")
    files = list(change.files.all())
    current = {f.path: f.content for f in NoteFile.objects.filter(owner_id=owner_id, path__in=[x.path for x in files])}
    # A file as it was before, or, for an index that later changes touched only on other notes' lines, the
    # index as it is now with this change's lines taken back: each note saved at once keeps its own Undo.
    back: dict[str, str | None] = {}
    changed: list[str] = []
    for f in files:
        if current.get(f.path) == f.after:
            back[f.path] = f.before
        elif (merged := _index_lines_back(f.path, f.before, f.after, current.get(f.path))) is not _NO_MERGE:
            back[f.path] = cast("str | None", merged)
        else:
            changed.append(f.path)
    if changed:
        raise Conflict("These files changed after this change; undo the later change first or edit them in "
                       "Files: " + ", ".join(changed), code="changed_since", details={"paths": changed})
    # Per note, what it had before the change's first entry and after its last (a new note saved with an
    # importance clears the one its topic had, then gives its own: two entries).
    weighed: dict[tuple[str, str], dict[str, Any]] = {}
    for entry in change.importance or []:
        key = (entry["scope"], entry["topic"])
        weighed[key] = {**entry, "before": weighed[key]["before"]} if key in weighed else dict(entry)
    reweighed = [{"scope": e["scope"], "topic": e["topic"]} for e in weighed.values()
                 if _importance_of(owner_id, Scope.parse(e["scope"]), e["topic"]) != e["after"]]
    if reweighed:
        raise Conflict("The importance of " + ", ".join(e["topic"] for e in reweighed) + " changed after this "
                       "change; undo the later change first.", code="changed_since",
                       details={"paths": [], "importance": reweighed})
    trashed = TrashEntry.objects.filter(change_set=change, restored_at__isnull=True).first()
    # Undoing a restore (from the Trash, or an Undo of a delete) puts its files back in the Trash entry;
    # undoing that Undo restores the entry again.
    unrestored = list(TrashEntry.objects.filter(owner_id=owner_id, restored_by=change))
    restored_again = list(TrashEntry.objects.filter(owner_id=owner_id, unrestored_by=change))
    summary = f"Undid: {change.summary}"[:300]
    if files:
        undo = apply_changes(owner_id=owner_id, writes=back, source=source,
                             summary=summary, actor=actor, reverts=change, validate=False)
    else:  # only importances
        undo = ChangeSet.objects.create(owner_id=owner_id, created_at=timezone.now(), source=source,
                                        summary=summary, actor=actor, reverts=change)
    if weighed:
        for entry in weighed.values():
            _importance_write(owner_id, Scope.parse(entry["scope"]), entry["topic"], entry["before"])
        undo.importance = [{**e, "before": e["after"], "after": e["before"]} for e in weighed.values()]
        undo.save(update_fields=["importance"])
    for entry in [trashed, *restored_again] if trashed is not None else restored_again:
        entry.restored_at, entry.restored_by, entry.unrestored_by = undo.created_at, undo, None
        entry.save(update_fields=["restored_at", "restored_by", "unrestored_by"])
    for entry in unrestored:
        entry.restored_at, entry.restored_by, entry.unrestored_by = None, None, undo
        entry.save(update_fields=["restored_at", "restored_by", "unrestored_by"])
    return undo


@transaction.atomic
def version_restore_read(*, owner_id: int, path: str, version: int) -> ChangeSet:
    """``version_restore``, then its change set (files loaded) read in the same transaction, as
    ``file_write_read`` does for an edit."""
    from .selectors import access_change

    change = version_restore(owner_id=owner_id, path=path, version=version)
    return access_change(owner_id=owner_id, change_id=change.pk)


@transaction.atomic
def version_restore(*, owner_id: int, path: str, version: int, actor: str = "you") -> ChangeSet:
    """Make an earlier version of a file its current text (a new version; nothing is lost)."""
    path = parse_path(path).path
    lock_owner(owner_id)
    old = FileVersion.objects.filter(owner_id=owner_id, path=path, version=version).first()
    if old is None:
        raise NotFound(f"{path} has no version {version}.")
    if old.deleted:
        raise InvalidInput(f"Version {version} of {path} is its deletion, not a text: restore an earlier version, "
                           "or the file from the Trash.", code="deleted_version")
    return apply_changes(owner_id=owner_id, writes={path: old.content}, source=ChangeSet.Source.RESTORE,
                  summary=f"Restored {path} to version {version}", actor=actor)


@transaction.atomic
def note_upsert(
    *,
    owner_id: int,
    scope: Scope,
    topic: str,
    summary: str | None = None,
    details: str | None = None,
    delete: bool = False,
    source: str,
    actor: str = "",
    automatic: bool = False,
    undo_until: datetime | None = None,
    chat_id: int | None = None,
    proposal_id: int | None = None,
    clear_details: bool = False,
    create_only: bool = False,
    read_after: datetime | None = None,
    note_version: object = UNCHECKED,
    change_id: int | None = None,
) -> ChangeSet:
    """Add, replace or remove one topic: its index line and (optionally) its topic file, as one change set.
    Blank ``details`` keep the topic file as it is, unless ``clear_details`` (the person emptied them): then
    it goes, and the line no longer points to it. ``create_only``: a topic that exists is refused (409
    ``topic_exists``), checked under the owner's lock. ``summary=KEEP`` keeps the line's summary as it is
    under the lock (a change committed by someone else meanwhile is not reverted); the note must exist then
    (404 ``unknown_topic``). ``read_after``: the note is made of what a chat turn read after that time; it is
    refused (410, ``Forgotten``) when the owner forgot everything since, checked under the owner's lock.
    ``note_version`` (when given): the version of the note the person read; one changed since is a 409
    ``stale_version`` (``check_note_version``), and a delete of a note deleted meanwhile the 404.

    A new line past the index caps raises CapExceeded listing the current entries, and writes nothing.
    ``change_id``: the id taken beforehand for its change set (``apply_changes``).
    """
    from .selectors import scope_label

    # A line "- index: …" that an older version let through can still be forgotten: its line goes, and no
    # file with it (its "topic file" would be the index itself).
    legacy_line = delete and topic == INDEX_TOPIC
    topic = topic if legacy_line else check_topic(topic)
    lock_owner(owner_id)
    check_not_forgotten(owner_id, read_after)
    label = scope_label(owner_id=owner_id, scope=scope)  # an agent's notes by its name
    topic_path = None if legacy_line else scope.topic_path(topic)
    # The index and the topic file as they are, in one read (the owner's lock keeps them so until the write).
    wanted = [scope.index_path, topic_path] if topic_path else [scope.index_path]
    files: dict[str, str] = dict(NoteFile.objects.filter(owner_id=owner_id, path__in=wanted)
                                 .values_list("path", "content"))
    entries = parse_index(files[scope.index_path]) if scope.index_path in files else []
    writes: dict[str, str | None] = {}
    gone: list[IndexEntry] = []  # the line a delete removes (it goes to the Trash)
    if delete:
        remaining = [e for e in entries if e.topic != topic]
        if len(remaining) == len(entries) and (topic_path is None or topic_path not in files):
            raise NotFound(f"There is no note {topic!r} in {label}.", code="unknown_topic",
                           details={"entries": [e.as_dict() for e in entries]})
        if note_version is not UNCHECKED and not legacy_line:
            check_note_version(owner_id=owner_id, scope=scope, topic=topic, expected=note_version)
        writes[scope.index_path] = render_index(remaining) if remaining else None
        if topic_path is not None:
            writes[topic_path] = None
        gone = [e for e in entries if e.topic == topic]
        verb = "Forgot"
    else:
        assert topic_path is not None  # only a forget takes the legacy "index" line
        if note_version is not UNCHECKED:
            check_note_version(owner_id=owner_id, scope=scope, topic=topic, expected=note_version)
        if summary is KEEP:
            own = next((e for e in entries if e.topic == topic), None)
            if own is None:
                raise NotFound(f"There is no note {topic!r} in {label}.", code="unknown_topic",
                               details={"entries": [e.as_dict() for e in entries]})
            summary = own.summary
        line_summary = clean_summary(summary)
        if create_only and any(e.topic == topic for e in entries):  # a stray topic file is adopted
            raise Conflict(f"{topic!r} exists already in {label}.", code="topic_exists")
        if details is not None and not isinstance(details, str):
            raise InvalidInput("details must be text", code="invalid_details")
        clear = clear_details and not (details and details.strip())
        has_file = bool(details and details.strip()) or (not clear and topic_path in files)
        new_entry = IndexEntry(topic, line_summary, topic if has_file else None)
        replaced = False
        updated: list[IndexEntry] = []
        for entry in entries:
            if entry.topic == topic:
                updated.append(new_entry)
                replaced = True
            else:
                updated.append(entry)
        if not replaced:
            updated.append(new_entry)
        text = render_index(updated)
        lines, size = index_size(text)
        if index_over_caps(lines, size):
            raise cap_error(scope.index_path, updated, lines, size, current=entries)
        writes[scope.index_path] = text
        if details is not None and details.strip():
            writes[topic_path] = closed_details(details)
        elif clear:
            writes[topic_path] = None
        verb = "Updated" if replaced else "Saved"
    writes = {p: c for p, c in writes.items() if files.get(p) != c}
    if not writes:
        raise Conflict(f"Memory already holds exactly this note ({topic}).", code="no_change")
    change = apply_changes(owner_id=owner_id, writes=writes, source=source,
                           summary=f"{verb} {topic} in {label}", actor=actor, automatic=automatic,
                           undo_until=undo_until, chat_id=chat_id, proposal_id=proposal_id, change_id=change_id)
    if verb == "Saved":  # a new note starts from its writer's importance, not one an older note of its topic had
        old = _importance_of(owner_id, scope, topic)
        if old is not None:  # recorded, so that the Undo of this save gives it back
            _importance_recorded(owner_id, scope, topic, old, None, change)
    if delete:  # the note goes to the Trash: its line (under the index's path) and its topic file
        trashed = TrashEntry.objects.create(owner_id=owner_id, kind=TrashEntry.Kind.NOTE,
                                            label=f"“{topic}” in {label}", created_at=change.created_at,
                                            change_set=change)
        kept = [TrashFile(entry=trashed, path=scope.index_path, content=render_index(gone))] if gone else []
        if topic_path in files:
            kept.append(TrashFile(entry=trashed, path=topic_path, content=files[topic_path]))
        TrashFile.objects.bulk_create(kept)
    return change


#: The export's record of the importances the owner gave their notes, beside the ``Memory/`` folder:
#: ``{"importance": [{"scope": "user", "topic": "home", "importance": 0.9}, …]}`` (only when there are some).
IMPORTANCE_FILE = "importance.json"
#: The export's record of whose each agent's and conversation's folder was (``memory.selectors
#: .folder_holders``), beside the ``Memory/`` folder: ``{"account": "…", "folders": [{"folder":
#: "Memory/agents/7", "agent": "Cook"}, {"folder": "Memory/channels/3-…", "bot": "Home", "platform":
#: "telegram"}, …]}`` (only when it holds such folders). Ids differ between accounts and servers, so an import
#: into another account goes by these names; one into the account the export was made in (``account``,
#: ``memory.selectors.account_mark``) goes by the ids, which stay with an agent or a bot renamed since.
FOLDERS_FILE = "folders.json"


@transaction.atomic
def memory_export(*, owner_id: int, folder: str = ROOT) -> bytes:
    """A zip of the owner's files under ``folder``, exactly as they are (works while memory is off),
    ``IMPORTANCE_FILE`` when the owner gave any of those notes an importance of their own, and
    ``FOLDERS_FILE`` when it holds the folder of an agent or a conversation. Read under the owner's note lock,
    so the files and the importances are of one moment (a note saved or forgotten while the zip is made is in
    both or in neither; an agent is deleted before or after)."""
    from localai_memory.memory.selectors import account_mark, folder_holders

    prefix = folder.rstrip("/") + "/"
    lock_owner(owner_id)
    files = list(NoteFile.objects.filter(owner_id=owner_id, path__startswith=prefix).order_by("path"))
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for note in files:
            info = zipfile.ZipInfo(note.path, date_time=note.updated_at.timetuple()[:6])
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            archive.writestr(info, note.content.encode())
        weights = [(Scope.parse(row.scope_kind if row.scope_kind == "user" else f"{row.scope_kind}:{row.scope_key}"),
                    row) for row in NoteImportance.objects.filter(owner_id=owner_id).order_by(
                        "scope_kind", "scope_key", "topic")]
        # Only the notes the export holds: an importance outlives its note (a note in the Trash keeps it).
        indexed: set[tuple[Scope, str]] = set()
        for index in (note for note in files if note.path.endswith("/" + INDEX_NAME)):
            try:  # an index edited into a shape the parser refuses still exports; its notes' weights do not
                indexed |= {(parse_path(index.path).scope, entry.topic) for entry in parse_index(index.content)}
            except InvalidInput:
                continue
        weights = [(scope, row) for scope, row in weights
                   if f"{scope.root}/".startswith(prefix) and (scope, row.topic) in indexed]
        if weights:
            info = zipfile.ZipInfo(IMPORTANCE_FILE,
                                   date_time=max(row.updated_at for _, row in weights).timetuple()[:6])
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            body = {"importance": [{"scope": scope.name, "topic": row.topic, "importance": row.importance}
                                   for scope, row in weights]}
            archive.writestr(info, json.dumps(body, indent=1, ensure_ascii=False).encode())
        roots = {note.path.rsplit("/", 1)[0] for note in files} - {ROOT}
        holders = folder_holders(owner_id=owner_id, roots=roots) if roots else {}
        if holders:
            info = zipfile.ZipInfo(FOLDERS_FILE, date_time=max(note.updated_at for note in files).timetuple()[:6])
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            record = {"account": account_mark(owner_id=owner_id),
                      "folders": [{"folder": root, **holder} for root, holder in sorted(holders.items())]}
            archive.writestr(info, json.dumps(record, indent=1, ensure_ascii=False).encode())
    return buffer.getvalue()
