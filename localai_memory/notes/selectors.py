"""Reads of the notes store, always scoped to one owner (another owner's rows are a 404)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from django.apps import apps
from django.db import connection
from django.db.models import QuerySet
from django.db.models.functions import MD5

from localai_memory.core.access import owned_or_404
from localai_memory.core.db import listed_after
from localai_memory.core.errors import InvalidInput, NotFound

from .models import ChangeSet, FileChange, FileVersion, NoteFile, NoteImportance, TrashEntry, TrashFile
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


def trashed(*, owner_id: int, paths: Iterable[str]) -> tuple[set[tuple[str, str]], set[str]]:
    """What of ``paths`` the owner deleted and has not restored (in the Trash): ``(index path, topic)`` of each
    note line an index of them held, and the path of each file. An import asks before it brings such a note
    back, rather than undoing the owner's delete on its own."""
    lines: set[tuple[str, str]] = set()
    files: set[str] = set()
    for path, content in TrashFile.objects.filter(entry__owner_id=owner_id, entry__restored_at__isnull=True,
                                                  path__in=list(paths)).values_list("path", "content"):
        files.add(path)
        if parse_path(path).is_index:
            try:
                lines |= {(path, entry.topic) for entry in parse_index(content)}
            except InvalidInput:  # an index the Files page let through long ago: its lines are not known
                continue
    return lines, files


def change_list(*, owner_id: int, before: int | None = None) -> QuerySet[ChangeSet]:
    """The owner's change sets, newest first; with ``before`` (a change set's id) only those listed after
    it (an id that is not one of the owner's is a 400 ``invalid_before``: ``core.db.listed_after``)."""
    changes = ChangeSet.objects.filter(owner_id=owner_id).prefetch_related("files", "reverted_by")
    return listed_after(changes, before=before, owned=ChangeSet.objects.filter(owner_id=owner_id),
                        what="change sets")


def scope_label(*, owner_id: int, scope: Scope) -> str:
    """How a message, a change set and a Trash entry name the notes of ``scope``: ``Scope.label`` ("your
    notes", "conversation …"), but an agent's by its name — ``agent “Cook”`` — as the Memory tab and the
    notes listing name it (a deleted agent's by the name it had; ``agent 7`` when no agent of the owner had
    that id)."""
    if scope.kind != "agent" or scope.holder_id is None or not apps.is_installed("localai_memory.agents"):
        return scope.label
    from localai_memory.agents.selectors import agent_name  # agents build on the notes, not the other way

    name = agent_name(owner_id=owner_id, agent_id=scope.holder_id)
    return f"agent “{name}”" if name else scope.label


def index_entries(*, owner_id: int, scope: Scope) -> list[IndexEntry]:
    """The entries of one scope's index ([] without notes)."""
    note = NoteFile.objects.filter(owner_id=owner_id, path=scope.index_path).only("content").first()
    return parse_index(note.content) if note else []


def index_text(*, owner_id: int, scope: Scope) -> str:
    note = NoteFile.objects.filter(owner_id=owner_id, path=scope.index_path).only("content").first()
    return note.content if note else ""


def index_version(*, owner_id: int, scope: Scope) -> int | None:
    """The version of one scope's index (None without notes): what a note's edit names as ``index_version``."""
    return NoteFile.objects.filter(owner_id=owner_id, path=scope.index_path).values_list("version", flat=True).first()


def topic_text(*, owner_id: int, scope: Scope, topic: str) -> str | None:
    note = NoteFile.objects.filter(owner_id=owner_id, path=scope.topic_path(topic)).only("content").first()
    return note.content if note else None


def one_line_notes(*, owner_id: int, paths: Iterable[str]) -> dict[str, str]:
    """Of ``paths`` (topic files, as a turn's report names them), those of a note that is one index line now:
    no such file, and its scope's index lists the topic. Each maps to that index's path, where its line is.
    Paths that are no topic file, or name a note with a file or no note at all, are left out. Two queries,
    and one more per scope named."""
    topics: dict[str, tuple[Scope, str]] = {}
    for path in set(paths):
        try:
            parsed = parse_path(path)
        except InvalidInput:
            continue  # not a note's path (a report is stored data): named as stored
        if parsed.topic is not None:
            topics[path] = (parsed.scope, parsed.topic)
    if not topics:
        return {}
    with_file = set(NoteFile.objects.filter(owner_id=owner_id, path__in=list(topics)).values_list("path", flat=True))
    listed: dict[Scope, set[str]] = {}
    found: dict[str, str] = {}
    for path, (scope, topic) in topics.items():
        if path in with_file:
            continue
        if scope not in listed:
            listed[scope] = {entry.topic for entry in index_entries(owner_id=owner_id, scope=scope)}
        if topic in listed[scope]:
            found[path] = scope.index_path
    return found


def note_now(*, owner_id: int, scope: Scope, topic: str) -> tuple[IndexEntry | None, str | None]:
    """A topic as it is, in one query: its index line (None without one) and its topic file's text."""
    with connection.cursor() as cursor:  # without the queryset compiler: this read is in a proposing turn
        cursor.execute(f"SELECT path, content FROM {NoteFile._meta.db_table} WHERE owner_id = %s AND path IN (%s, %s)",
                       [owner_id, scope.index_path, scope.topic_path(topic)])
        files = dict(cursor.fetchall())
    line = next((e for e in parse_index(files.get(scope.index_path) or "") if e.topic == topic), None)
    return line, files.get(scope.topic_path(topic))


def note_before(*, change: ChangeSet, scope: Scope, topic: str) -> dict[str, str | None] | None:
    """The note ``change`` replaced, as a proposal's card shows it (``{summary, details}``: its index line and
    its topic file before the change, each None when it had none), or None when ``change`` made it new. A file
    the change did not touch is read as it is now, which is as it was."""
    index_path, topic_path = scope.index_path, scope.topic_path(topic)
    touched = dict(change.files.filter(path__in=[index_path, topic_path]).values_list("path", "before"))
    line_now, details_now = (note_now(owner_id=change.owner_id, scope=scope, topic=topic) if len(touched) < 2
                             else (None, None))
    line = (next((e for e in parse_index(touched[index_path] or "") if e.topic == topic), None)
            if index_path in touched else line_now)
    details = touched.get(topic_path, details_now)
    if line is None and details is None:
        return None
    return {"summary": line.summary if line is not None else None, "details": details}


def note_version(*, line: IndexEntry | None, details: str | None, importance: float | None) -> str | None:
    """The version of one note as a person reads it: its index line, its topic file's text and the importance
    they gave it, in 16 hex digits (None: there is no such note). A note's edit, delete or importance sends
    the one it read (``note_version``), and a note changed meanwhile is refused (``services
    .check_note_version``). Made of the note alone, so a change of another note of the scope leaves it as it
    is (unlike the scope's ``index_version``), and its topic file counts (a details-only edit changes it)."""
    if line is None:
        return None
    state = json.dumps([line.summary, line.file, details, importance])
    return hashlib.sha256(state.encode()).hexdigest()[:16]


def note_version_now(*, owner_id: int, scope: Scope, topic: str) -> str | None:
    """``note_version`` of the note as it is now (read it under the owner's lock to compare it)."""
    line, details = note_now(owner_id=owner_id, scope=scope, topic=topic)
    importance = NoteImportance.objects.filter(owner_id=owner_id, scope_kind=scope.kind, scope_key=scope.key,
                                               topic=topic).values_list("importance", flat=True).first()
    return note_version(line=line, details=details, importance=importance)


def note_versions(*, owner_id: int, scope: Scope, entries: Iterable[IndexEntry]) -> dict[str, str | None]:
    """``note_version`` of each listed note of one scope (topic → version), from the index lines a listing
    read and, in two queries, their topic files (by the topic's name, as a write of the note finds it) and
    importances: what the terminal and the MCP tools show, so an edit can send the version it was made from."""
    entries = list(entries)
    paths: dict[str, str] = {}
    for entry in entries:
        try:
            paths[scope.topic_path(entry.topic)] = entry.topic
        except InvalidInput:  # a line an older version let through ("- index: …"): no topic file of its own
            continue
    texts = dict(NoteFile.objects.filter(owner_id=owner_id, path__in=list(paths)).values_list("path", "content")
                 ) if paths else {}
    details = {topic: texts.get(path) for path, topic in paths.items()}
    weights = dict(NoteImportance.objects.filter(owner_id=owner_id, scope_kind=scope.kind, scope_key=scope.key,
                                                 topic__in=[e.topic for e in entries])
                   .values_list("topic", "importance")) if entries else {}
    return {entry.topic: note_version(line=entry, details=details.get(entry.topic), importance=weights.get(entry.topic))
            for entry in entries}


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


# --- who wrote a note -------------------------------------------------------------------------------------

#: Change sets that give back a text a note had before (a Trash restore, a version restored on the Files
#: page, an Undo) instead of writing a new one: that text keeps its writer.
GIVES_BACK = (ChangeSet.Source.RESTORE, ChangeSet.Source.UNDO)


def author_of(source: str, proposal_source: str | None = None) -> str:
    """The author (``user``, ``model`` or ``import``) of the text a change set of ``source`` wrote;
    ``proposal_source`` is where the proposal a change set confirmed came from: an accepted suggestion was
    approved by the person, but typed by them only if it came from their chat."""
    if source == ChangeSet.Source.PROPOSAL and proposal_source:
        source = {"consolidation": "model", "import": "import"}.get(proposal_source, source)
    if source == ChangeSet.Source.MODEL:
        return "model"
    if source == ChangeSet.Source.IMPORT:
        return "import"
    return "user"


@dataclass(frozen=True)
class Written:
    """The last write of one piece of a note (its index line or its topic file): by whom, when, which change."""

    author: str  # user, model or import
    at: datetime
    change_id: int


@dataclass(frozen=True)
class PieceHistory:
    """One piece of a note as its history in sight shows it."""

    last: Written | None = None
    by_person: bool = False  # a change of it that is not the model's own is in sight
    first: tuple[datetime, int] | None = None  # (time, change id) of its oldest change in sight


@dataclass(frozen=True)
class NoteWriters:
    """Who wrote a note's index line and its topic file (``note_writers``)."""

    line: PieceHistory = field(default_factory=PieceHistory)
    file: PieceHistory = field(default_factory=PieceHistory)
    model_only: bool = False

    @property
    def last(self) -> Written | None:
        """The later of the two writes."""
        writes = [w for w in (self.line.last, self.file.last) if w is not None]
        return max(writes, key=lambda w: (w.at, w.change_id), default=None)


#: One change of a piece, oldest first: the text (or its hash) before and after, the change's time, id,
#: source and the author it resolves to.
_Change = tuple[str | None, str | None, datetime, int, str, str]


def _piece_history(changes: Iterable[_Change]) -> PieceHistory:
    """Walk one piece's changes, oldest first. A change that gives back (``GIVES_BACK``) a text the piece had
    before one of the changes in sight takes the piece back to how it was then, its writer included: the
    restore of a deleted note, or the Undo of an edit, leaves the note as it was (dated by the restore). One
    whose text was written before the history in sight counts as its own author's, as any other change."""
    piece = PieceHistory()
    earlier: list[tuple[str | None, PieceHistory]] = []  # per change in sight: its text before, and the piece
    for before, after, at, change_id, source, author in changes:
        if source in GIVES_BACK:
            depth = next((i for i in range(len(earlier) - 1, -1, -1) if earlier[i][0] == after), None)
            if depth is not None and (earlier[depth][1].last is not None or after is None):
                was = earlier[depth][1]
                del earlier[depth:]
                piece = PieceHistory(Written(was.last.author, at, change_id) if was.last else None,
                                     was.by_person, was.first)
                continue
        earlier.append((before, piece))
        piece = PieceHistory(Written(author, at, change_id), piece.by_person or author != "model",
                             piece.first or (at, change_id))
    return piece


def note_writers(*, owner_id: int, scope: Scope, topics: list[str], lookback: int = 200) -> dict[str, NoteWriters]:
    """Who last wrote each of ``topics`` (its index line and its topic file) and when, from the last
    ``lookback`` changes of the scope's index and the last ``lookback`` changes of these topics' files; a topic
    none of them shows is left out (unknown). A restore or an Undo is not an author: the text it gives back
    keeps the writer it had (``_piece_history``), so a note of the model's restored from the Trash is still
    the model's.

    ``model_only``: the lookback shows who wrote the line, and every change it shows of the line or the file
    (a restore: the change it gives back to) is the model's own.

    At most three queries whatever the number of topics: the index's changes, the files' changes (their text
    only as a hash) and the sources of the proposals whose confirmation wrote any of them.
    """
    if not topics:
        return {}
    columns = ("change_set__created_at", "change_set_id", "change_set__source", "change_set__proposal_id")
    changes = FileChange.objects.filter(change_set__owner_id=owner_id).order_by("-change_set__created_at",
                                                                                 "-change_set_id")
    index_rows = list(changes.filter(path=scope.index_path).values_list("before", "after", *columns)[:lookback])
    topic_of: dict[str, str] = {}
    for topic in topics:
        try:
            topic_of[scope.topic_path(topic)] = topic
        except InvalidInput:
            continue
    file_rows = list(changes.filter(path__in=list(topic_of)).annotate(before_md5=MD5("before"), after_md5=MD5("after"))
                     .values_list("path", "before_md5", "after_md5", *columns)[:lookback])
    proposal_ids = {row[-1] for row in [*index_rows, *file_rows]
                    if row[-2] == ChangeSet.Source.PROPOSAL and row[-1]}
    came_from: dict[int, str] = {}
    if proposal_ids:
        from localai_memory.memory.models import Proposal

        came_from = dict(Proposal.objects.filter(owner_id=owner_id, pk__in=proposal_ids).values_list("pk", "source"))

    def change(before: str | None, after: str | None, at: datetime, change_id: int, source: str,
               proposal_id: int | None) -> _Change:
        return (before, after, at, change_id, source,
                author_of(source, came_from.get(proposal_id) if proposal_id else None))

    wanted = set(topics)
    line_changes: dict[str, list[_Change]] = {}
    parsed: dict[str, dict[str, str]] = {}  # one change's "before" is usually the next older one's "after"
    for before, after, *rest in reversed(index_rows):
        old, new = _lines_of(before, parsed), _lines_of(after, parsed)
        for topic in wanted & (old.keys() | new.keys()):
            if old.get(topic) != new.get(topic):
                line_changes.setdefault(topic, []).append(change(old.get(topic), new.get(topic), *rest))
    file_changes: dict[str, list[_Change]] = {}
    for path, before_md5, after_md5, *rest in reversed(file_rows):
        file_changes.setdefault(topic_of[path], []).append(change(before_md5, after_md5, *rest))
    # The files' history was cut at ``lookback``: for a line first seen before that cut, a person's earlier
    # edit of its file could be out of sight, so it is not known to be the model's alone.
    files_from = (file_rows[-1][3], file_rows[-1][4]) if len(file_rows) == lookback else None

    found: dict[str, NoteWriters] = {}
    for topic in wanted:
        line, file = _piece_history(line_changes.get(topic, [])), _piece_history(file_changes.get(topic, []))
        if line.last is None and file.last is None:
            continue
        model_only = (line.first is not None and not line.by_person and not file.by_person
                      and (files_from is None or line.first >= files_from))
        found[topic] = NoteWriters(line, file, model_only)
    return found


def _lines_of(text: str | None, parsed: dict[str, dict[str, str]] | None = None) -> dict[str, str]:
    """Each topic's line in an index text (``- topic: …``), to tell which lines a change touched. A quick
    split, not ``parse_index``: the index was valid when it was written, and this runs over hundreds of
    them; a line that is not an entry is skipped."""
    if not text:
        return {}
    if parsed is not None and text in parsed:
        return parsed[text]
    lines: dict[str, str] = {}
    for line in text.splitlines():
        colon = line.find(":")
        if line.startswith("- ") and colon > 2:
            lines.setdefault(line[2:colon].strip(), line.rstrip())
    if parsed is not None:
        parsed[text] = lines
    return lines
