"""Keep the recall rows (``NoteVector``) in step with the notes store, in the writing transaction.

``notes.services`` sends ``notes_changed(owner_id, paths, change_set)`` inside every write, undo, restore,
move to the Trash and Forget; ``on_notes_changed`` re-reads each touched scope from ``NoteFile`` (as the
transaction sees it) and makes the scope's rows match: one row per index line and one per passage of a topic
file (one for a short file; a longer one is cut into parts of ~80 words by ``ranking.details_parts``, since
the embedder reads only a text's first 128 tokens). Only passages whose text changed are embedded, inline,
with the configured embedder (the on-device model takes a few milliseconds a passage); a part whose text
only moved (a paragraph added above it) takes the vector its text already had. Without an embedder, or when
it fails, the row is stored with no embedding and the Celery catch-up (``tasks.recall_catch_up``) embeds it
later; recall meanwhile reads its text lexically.
So a note that left the store leaves recall in the same commit, and one that came back returns with it.

This module never decides what a turn may read (that is ``memory.policy``) and never writes a note.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from localai_memory.core.errors import InvalidInput
from localai_memory.core.queues import BACKGROUND
from localai_memory.notes.models import ChangeSet, NoteFile
from localai_memory.notes.paths import ROOT, NotePath, Scope, check_topic, parse_index, parse_path
from localai_memory.notes.selectors import GIVES_BACK, author_of, note_writers

from .embedders import Embedder, EmbeddingError, OnDeviceEmbedder, get_embedder
from .models import DETAILS, LINE, SOURCE_USER, NoteVector
from .ranking import details_parts, passage_text

log = logging.getLogger(__name__)

#: Passages one write embeds inline at most; a bigger write (a restore of everything) leaves the rest to the
#: catch-up, so no transaction holds the owner's lock for long.
INLINE_MAX_PASSAGES = 128
#: After an embedder fails, writes and turns skip it this long (seconds), so a server that is down does not
#: add its timeout to every note write; the catch-up embeds what was skipped.
BREAKER_SECONDS = 15.0


def passage(topic: str, kind: str, text: str) -> str:
    """The text embedded for a row: ``"my topic: summary"`` or ``"my topic: <this part of the details>"``
    (``ranking.passage_text``, the same text ``ranking.note_passages`` gives the benchmarks)."""
    return passage_text(topic, text)


# --- a short memory of failing embedders ------------------------------------------------------------------

_breaker_lock = threading.Lock()
_open_until: dict[tuple[str, str], float] = {}


def _breaker_key(embedder: Embedder) -> tuple[str, str]:
    return embedder.model_id, str(getattr(embedder, "base_url", ""))


def embedder_resting(embedder: Embedder) -> bool:
    """True while ``embedder`` failed within the last ``BREAKER_SECONDS``."""
    with _breaker_lock:
        until = _open_until.get(_breaker_key(embedder))
    return until is not None and time.time() < until


def note_embedder_failed(embedder: Embedder) -> None:
    with _breaker_lock:
        _open_until[_breaker_key(embedder)] = time.time() + BREAKER_SECONDS


def note_embedder_worked(embedder: Embedder) -> None:
    with _breaker_lock:
        _open_until.pop(_breaker_key(embedder), None)


def reset_breakers() -> None:
    """Forget every failure (a configuration change, or a test that starts clean)."""
    with _breaker_lock:
        _open_until.clear()


def embed_texts(texts: Sequence[str], *, embedder: Embedder | None = None,
                respect_breaker: bool = True) -> tuple[np.ndarray | None, Embedder | None]:
    """``(unit vectors, the embedder)`` for ``texts``; ``(None, embedder)`` when it is resting or failed,
    ``(None, None)`` without one. Never raises."""
    if embedder is None:
        embedder = current_embedder()
    if embedder is None or not texts:
        return None, embedder
    if respect_breaker and embedder_resting(embedder):
        return None, embedder
    try:
        vectors = embedder.embed(list(texts))
    except EmbeddingError as exc:
        log.warning("embedding %d passage(s) with %s failed: %s", len(texts), embedder.model_id, exc)
        note_embedder_failed(embedder)
        return None, embedder
    note_embedder_worked(embedder)
    return vectors, embedder


# --- query vectors, remembered per process ---------------------------------------------------------------

#: Query texts whose on-device vectors a process remembers (a chat's earlier message is part of the next
#: turn's query, and clients resend the same message). 384 float32 each: 1.5 MB at most. Only the current
#: embedder's vectors are kept (a new embedder object, after a configuration change, starts empty).
QUERY_CACHE_MAX = 1024
_query_lock = threading.Lock()
_query_vectors: dict[int, tuple[Embedder, OrderedDict[str, np.ndarray]]] = {}


def embed_query_texts(texts: Sequence[str], *, embedder: Embedder) -> tuple[np.ndarray | None, Embedder]:
    """``embed_texts`` for a turn's query: the on-device model's vectors of texts embedded before are
    reused (the model is deterministic and local); only the others are embedded. Any other embedder (a
    server, which may fail or change) is asked every time, exactly as ``embed_texts``."""
    if not isinstance(embedder, OnDeviceEmbedder) or not texts:
        vectors, used = embed_texts(texts, embedder=embedder)
        return vectors, used or embedder
    if embedder_resting(embedder):
        return None, embedder
    rows = _remembered(texts, embedder)
    missing = list(dict.fromkeys(text for text in texts if text not in rows))
    if missing:  # those on their way (``embed_ahead``): waited for, then looked up again
        _wait_ahead(missing, embedder)
        rows.update(_remembered(missing, embedder))
        missing = [text for text in missing if text not in rows]
    if missing:
        fresh = _embed_and_remember(missing, embedder)
        if fresh is None:
            return None, embedder
        rows.update(fresh)
    return np.stack([rows[text] for text in texts]), embedder


#: A write of at most this many passages goes through the remembered vectors (a note's line and its file's
#: parts); a bigger one (an import, a restore, a long file) would only push the turns' query vectors out.
REMEMBER_WRITES_MAX = 8


def embed_written(texts: Sequence[str]) -> tuple[np.ndarray | None, Embedder | None]:
    """``embed_texts`` for the passages a write stores: a small write reuses and remembers the on-device
    model's vectors, so the line the duplicate check just embedded (``service.find_duplicate``, the same
    ``my <topic>: <summary>`` text) is not embedded again when the note is saved in the same turn."""
    embedder = current_embedder()
    if embedder is None or len(texts) > REMEMBER_WRITES_MAX:
        return embed_texts(texts, embedder=embedder)
    vectors, used = embed_query_texts(texts, embedder=embedder)
    return vectors, used


def _cache_of(embedder: OnDeviceEmbedder) -> OrderedDict[str, np.ndarray]:
    """The remembered vectors of ``embedder`` (call with ``_query_lock`` held)."""
    entry = _query_vectors.get(id(embedder))
    if entry is None or entry[0] is not embedder:
        _query_vectors.clear()  # never hold on to an embedder the configuration dropped
        entry = _query_vectors[id(embedder)] = (embedder, OrderedDict())
    return entry[1]


def _remembered(texts: Iterable[str], embedder: OnDeviceEmbedder) -> dict[str, np.ndarray]:
    """The remembered vectors among ``texts`` (most recently used last)."""
    with _query_lock:
        cache = _cache_of(embedder)
        rows = {text: cache[text] for text in texts if text in cache}
        for text in rows:
            cache.move_to_end(text)
    return rows


def _embed_and_remember(texts: list[str], embedder: OnDeviceEmbedder) -> dict[str, np.ndarray] | None:
    vectors, _ = embed_texts(texts, embedder=embedder)
    if vectors is None:
        return None
    fresh = {text: np.array(vectors[i], dtype=np.float32) for i, text in enumerate(texts)}
    for row in fresh.values():
        row.flags.writeable = False
    with _query_lock:
        entry = _query_vectors.get(id(embedder))
        if entry is not None and entry[0] is embedder:
            cache = entry[1]
            for text, row in fresh.items():
                cache[text] = row
            while len(cache) > QUERY_CACHE_MAX:
                cache.popitem(last=False)
    return fresh


# --- query vectors embedded ahead of their need ---------------------------------------------------------

#: Texts being embedded ahead (``embed_ahead``), each with the embedder its job runs and the event the job
#: sets once they are remembered (or failed).
_ahead: dict[str, tuple[Embedder, threading.Event]] = {}
_ahead_pool: ThreadPoolExecutor | None = None
#: Threads per process that embed ahead: a web worker's request threads each start at most one job a turn.
AHEAD_THREADS = 8
#: The longest a turn waits for a text embedded ahead before it embeds the text itself (seconds).
AHEAD_WAIT_SECONDS = 5.0


def embed_ahead(texts: Sequence[str]) -> None:
    """Start embedding ``texts`` with the on-device model on another thread of this process, so that a turn's
    query is embedded while the turn reads the database: ``embed_query_texts`` then waits for that thread
    instead of embedding the texts again. A text remembered already, or on its way, is not embedded twice.
    Nothing happens with an embedder on a server (asked when it is needed, as before), or one resting after
    a failure. Never raises: a job that fails leaves its texts to be embedded where they are needed (and the
    failure to be seen there)."""
    try:
        embedder = current_embedder()
        if not isinstance(embedder, OnDeviceEmbedder) or not texts or embedder_resting(embedder):
            return
        global _ahead_pool
        event = threading.Event()
        with _query_lock:  # one look at what is remembered and what is on its way
            cache = _cache_of(embedder)
            wanted = [text for text in dict.fromkeys(texts) if text not in cache
                      and (text not in _ahead or _ahead[text][0] is not embedder)]
            if not wanted:
                return
            for text in wanted:
                _ahead[text] = (embedder, event)
            if _ahead_pool is None:
                _ahead_pool = ThreadPoolExecutor(max_workers=AHEAD_THREADS, thread_name_prefix="embed-ahead")
            pool = _ahead_pool
        try:
            pool.submit(_embed_ahead, wanted, embedder, event)
        except RuntimeError:  # the pool was shut down: the process is ending
            _done_ahead(wanted, event)
    except Exception:  # a help, never a reason to fail the turn
        log.exception("embedding ahead failed")


def _embed_ahead(texts: list[str], embedder: OnDeviceEmbedder, event: threading.Event) -> None:
    try:
        _embed_and_remember(texts, embedder)
    except Exception:
        log.exception("embedding %d text(s) ahead failed", len(texts))
    finally:
        _done_ahead(texts, event)


def _done_ahead(texts: list[str], event: threading.Event) -> None:
    with _query_lock:
        for text in texts:
            if text in _ahead and _ahead[text][1] is event:
                del _ahead[text]
    event.set()


def _wait_ahead(texts: Sequence[str], embedder: Embedder) -> None:
    """Wait (``AHEAD_WAIT_SECONDS`` at most) for the jobs embedding any of ``texts`` ahead with ``embedder``."""
    with _query_lock:
        events = {id(entry[1]): entry[1] for text in texts
                  if (entry := _ahead.get(text)) is not None and entry[0] is embedder}
    deadline = time.monotonic() + AHEAD_WAIT_SECONDS
    for event in events.values():
        event.wait(max(0.0, deadline - time.monotonic()))


def _after_fork_in_child() -> None:
    """A forked child (gunicorn, Celery prefork) has none of its parent's threads: no job of the parent's will
    ever end there, and a lock one of them held would stay held."""
    global _ahead_pool, _query_lock
    _query_lock = threading.Lock()
    _ahead.clear()
    _ahead_pool = None


os.register_at_fork(after_in_child=_after_fork_in_child)


def forget_query_vectors() -> None:
    """Forget every remembered query vector (tests that swap models)."""
    with _query_lock:
        _query_vectors.clear()


def current_embedder() -> Embedder | None:
    """The configured embedder, or None (an unknown configuration value counts as none, and is logged)."""
    try:
        return get_embedder()
    except ValueError:
        log.exception("the embeddings configuration is not valid; recall is lexical")
        return None


# --- what a scope should hold -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Passage:
    topic: str
    kind: str
    path: str
    text: str
    part: int = 0

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.topic, self.kind, self.part)


def scope_of_path(path: str) -> Scope | None:
    try:
        return parse_path(path).scope
    except InvalidInput:
        return None


def _touched_files(owner_id: int, scope: Scope, touched: Touched, contents: Mapping[str, str | None] | None,
                   ) -> list[NoteFile]:
    paths = [scope.topic_path(topic) for topic in sorted(touched.topics)]
    if touched.index:
        paths.append(scope.index_path)
    if contents is not None and all(path in contents for path in paths):
        return [NoteFile(path=path, content=text) for path in paths if (text := contents[path]) is not None]
    return list(NoteFile.objects.filter(owner_id=owner_id, path__in=paths).only("path", "content"))


def _scope_files(owner_id: int, scope: Scope) -> list[NoteFile]:
    """The files directly in the scope's folder (the user's folder also holds the agents' and channels')."""
    files = NoteFile.objects.filter(owner_id=owner_id, path__startswith=scope.root + "/")
    if scope.kind == "user":
        files = files.exclude(path__startswith=f"{ROOT}/agents/").exclude(path__startswith=f"{ROOT}/channels/")
    return [f for f in files.only("path", "content") if "/" not in f.path[len(scope.root) + 1:]]


@dataclass(frozen=True)
class Touched:
    """What a write changed in one scope: its index (every line's row) and these topics' files."""

    index: bool
    topics: frozenset[str]

    @classmethod
    def of(cls, scope: Scope, paths: Iterable[str]) -> Touched:
        parsed = [p for p in (_parsed(path) for path in paths) if p is not None and p.scope == scope]
        return cls(any(p.is_index for p in parsed), frozenset(p.topic for p in parsed if p.topic is not None))


def _parsed(path: str) -> NotePath | None:
    try:
        return parse_path(path)
    except InvalidInput:
        return None


def scope_passages(owner_id: int, scope: Scope, touched: Touched | None = None,
                   contents: Mapping[str, str | None] | None = None) -> dict[tuple[str, str, int], Passage]:
    """The rows ``scope`` should have now, by (topic, kind, part): one per index line, and one per passage
    of each non-empty topic file (``ranking.details_parts``: one for a short file). With ``touched``, only the
    rows of what it names: the index's lines, and the passages of its topics' files, whose texts are taken
    from ``contents`` when it holds them all."""
    wanted: dict[tuple[str, str, int], Passage] = {}
    if touched is None:
        files = _scope_files(owner_id, scope)
    else:
        files = _touched_files(owner_id, scope, touched, contents)
    for note in files:
        name = note.path.rsplit("/", 1)[-1][:-3]
        if name == "index":
            try:
                entries = parse_index(note.content)
            except InvalidInput:  # an index that no longer parses keeps no lines in recall
                log.warning("recall skips %s of user %s: it does not parse", note.path, owner_id)
                continue
            for entry in entries:
                line = Passage(entry.topic, LINE, note.path, entry.summary)
                wanted[line.key] = line
        elif note.content.strip():
            try:
                topic = check_topic(name)
            except InvalidInput:
                continue
            for part, text in enumerate(details_parts(note.content)):
                item = Passage(topic, DETAILS, note.path, text, part)
                wanted[item.key] = item
    return wanted


def source_of(change_set: ChangeSet | None) -> str:
    """Who wrote the text a change set brought: the model on its own, an import, or a person (typed or
    accepted by them). A confirmed suggestion of consolidation counts as the model's. (A restore or an Undo
    gives back text somebody wrote before: ``given_back_sources`` says whose, and this is only its fallback.)"""
    if change_set is None:
        return SOURCE_USER
    came_from = None
    if change_set.source == ChangeSet.Source.PROPOSAL and change_set.proposal_id:
        from localai_memory.memory.models import Proposal

        came_from = Proposal.objects.filter(pk=change_set.proposal_id).values_list("source", flat=True).first()
    return author_of(change_set.source, str(came_from) if came_from else None)


def given_back_sources(owner_id: int, scope: Scope, change_set: ChangeSet | None,
                       topics: Iterable[str]) -> dict[tuple[str, str], str]:
    """For a change set that gives back earlier text (a Trash restore, a version restored, an Undo), the author
    of each of ``topics``' index line and topic file as the notes' history has it, by (topic, LINE or
    DETAILS): the text keeps its writer, so a note of the model's restored is the model's again. Empty for
    any other change set, and a piece whose writer is out of sight is left out (the change set's own)."""
    topics = list(dict.fromkeys(topics))
    if change_set is None or change_set.source not in GIVES_BACK or not topics:
        return {}
    found: dict[tuple[str, str], str] = {}
    for topic, writers in note_writers(owner_id=owner_id, scope=scope, topics=topics).items():
        for kind, piece in ((LINE, writers.line), (DETAILS, writers.file)):
            if piece.last is not None and piece.last.change_id == change_set.pk:
                found[(topic, kind)] = piece.last.author
    return found


def history_sources(owner_id: int, scope: Scope, topics: Iterable[str]) -> dict[tuple[str, str], tuple[str, datetime]]:
    """Who last wrote each of ``topics``' index line and topic file, and when, as the notes' history has it, by
    (topic, LINE or DETAILS); a piece whose writer is out of sight is left out."""
    topics = list(dict.fromkeys(topics))
    found: dict[tuple[str, str], tuple[str, datetime]] = {}
    for topic, writers in (note_writers(owner_id=owner_id, scope=scope, topics=topics).items() if topics else ()):
        for kind, piece in ((LINE, writers.line), (DETAILS, writers.file)):
            if piece.last is not None:
                found[(topic, kind)] = (piece.last.author, piece.last.at)
    return found


# --- keeping rows in step ---------------------------------------------------------------------------------


@dataclass
class SyncResult:
    created: int = 0
    updated: int = 0
    deleted: int = 0
    embedded: int = 0
    reused: int = 0  # new or changed rows that took the vector another row had for the same text
    waiting: int = 0  # rows left without a current embedding for the catch-up


def scopes_sync(*, owner_id: int, scopes: Iterable[Scope], change_set: ChangeSet | None = None,
                now: datetime | None = None, embed: bool = True, paths: Iterable[str] | None = None,
                contents: Mapping[str, str | None] | None = None) -> SyncResult:
    """Make the rows of ``scopes`` match the notes store. Caller holds the owner's lock (or owns the data).
    With ``paths`` (the files a write changed), only their rows are made to match: the index's lines when the
    index is among them, and the passages of the topic files among them; the scope's other rows stay as they
    are (a note write reads two files, not the scope's forty). ``contents`` (path → text, None: deleted) are
    what the write left in ``paths``, taken as they are instead of read back.

    Rows are matched by (topic, kind, part): a file that grew gets rows for its new parts, one that shrank
    loses the parts it no longer has. New or changed passages get ``change_set``'s author and time (a change
    set that gives back earlier text: that text's author, ``given_back_sources``); unchanged rows keep theirs.
    A new or changed row whose passage a row of the same note embedded before (a part that only moved, as
    when a paragraph is added above it) takes that row's vector, author and time instead of being embedded
    again. With ``embed`` the other changed passages are embedded
    inline (at most ``INLINE_MAX_PASSAGES``); otherwise, or on failure, they wait for the catch-up, which is
    queued after the commit.
    """
    now = now or (change_set.created_at if change_set is not None else timezone.now())
    source = source_of(change_set)
    result = SyncResult()
    pending: list[NoteVector] = []
    to_create: list[NoteVector] = []
    to_update: list[NoteVector] = []
    moved: dict[int, list[NoteVector]] = {}  # id of the row whose vector a new or changed row takes
    gone: list[int] = []
    written = list(paths) if paths is not None else None
    for scope in dict.fromkeys(scopes):
        touched = Touched.of(scope, written) if written is not None else None
        if touched is not None and not touched.index and not touched.topics:
            continue
        wanted = scope_passages(owner_id, scope, touched, contents)
        rows = NoteVector.objects.filter(owner_id=owner_id, scope_kind=scope.kind, scope_key=scope.key)
        if touched is not None:
            of_touched = Q(kind=DETAILS, topic__in=sorted(touched.topics))
            rows = rows.filter(of_touched | Q(kind=LINE) if touched.index else of_touched)
        existing = {(row.topic, row.kind, row.part): row for row in rows.defer("embedding", "search")}
        # Which row embedded each passage before this write, by whom, when, and when a turn last used it (rows
        # are changed below). By the embedded text: a part that only gained the blank line above it embeds the
        # same.
        with_vector = {(row.topic, row.kind, passage(row.topic, row.kind, row.text)):
                       (row.pk, row.source, row.updated_at, row.used_at) for row in existing.values() if row.model_id}
        gone += [row.pk for key, row in existing.items() if key not in wanted]
        changed = [key for key, item in wanted.items()
                   if (row := existing.get(key)) is None or row.text != item.text or row.path != item.path]
        changed_topics = [topic for topic, _kind, _part in changed]
        given_back = given_back_sources(owner_id, scope, change_set, changed_topics)
        # A rebuild (no change set: ``owner_reindex``) writes down who wrote each piece and when, from the notes'
        # history, not "the user, now": a note of the model's stays the model's, and its age its own.
        history = history_sources(owner_id, scope, changed_topics) if change_set is None else {}
        for key in changed:
            item, row = wanted[key], existing.get(key)
            written_by, written_at = history.get((item.topic, item.kind), (source, now))
            written_by = given_back.get((item.topic, item.kind), written_by)
            if row is None:
                row = NoteVector(owner_id=owner_id, scope_kind=scope.kind, scope_key=scope.key, topic=item.topic,
                                 kind=item.kind, part=item.part, path=item.path, text=item.text, source=written_by,
                                 updated_at=written_at, embedding=None, model_id="", dim=None)
                to_create.append(row)
            else:
                row.text, row.path, row.source, row.updated_at = item.text, item.path, written_by, written_at
                row.embedding, row.model_id, row.dim, row.used_at = None, "", None, None
                to_update.append(row)
            earlier = with_vector.get((item.topic, item.kind, passage(item.topic, item.kind, item.text)))
            if earlier is not None:
                pk, row.source, row.updated_at, row.used_at = earlier
                moved.setdefault(pk, []).append(row)
            else:
                pending.append(row)
    if moved:  # read before the rows that had them are deleted or changed
        for pk, vector, model_id, dim in (NoteVector.objects.filter(pk__in=list(moved))
                                          .values_list("pk", "embedding", "model_id", "dim")):
            for row in moved[pk]:
                row.embedding, row.model_id, row.dim = vector, model_id, dim
                result.reused += 1
    if gone:
        result.deleted = NoteVector.objects.filter(pk__in=gone).delete()[0]
    if pending and embed:
        inline = pending[:INLINE_MAX_PASSAGES]
        vectors, embedder = embed_written([passage(r.topic, r.kind, r.text) for r in inline])
        if vectors is not None and embedder is not None:
            for row, vector in zip(inline, vectors, strict=True):
                row.embedding, row.model_id, row.dim = vector, embedder.model_id, int(vector.shape[0])
            result.embedded = len(inline)
    if to_create:
        NoteVector.objects.bulk_create(to_create)
        result.created = len(to_create)
    if to_update:
        fields = ["text", "path", "source", "updated_at", "used_at", "embedding", "model_id", "dim"]
        if len(to_update) == 1:  # a note's line or file: a plain UPDATE, not bulk_update's CASE per field
            row = to_update[0]
            NoteVector.objects.filter(pk=row.pk).update(**{field: getattr(row, field) for field in fields})
        else:
            NoteVector.objects.bulk_update(to_update, fields)
        result.updated = len(to_update)
    result.waiting = len(pending) - result.embedded
    if result.waiting:
        queue_catch_up(owner_id=owner_id)
    return result


def on_notes_changed(sender: Any, *, owner_id: int, paths: Sequence[str], change_set: ChangeSet | None = None,
                     contents: Mapping[str, str | None] | None = None, **kwargs: Any) -> None:
    """The ``notes_changed`` receiver: re-sync every scope the write touched, in its transaction (``contents``:
    what the write left in each of ``paths``, None for a file deleted, so they are not read back)."""
    scopes = [scope for scope in (scope_of_path(p) for p in paths) if scope is not None]
    if scopes:
        scopes_sync(owner_id=owner_id, scopes=scopes, change_set=change_set, paths=paths, contents=contents)


def owner_scopes_with_notes(owner_id: int) -> list[Scope]:
    """Every scope of the owner that holds a file now or a recall row (rows of a vanished scope go too)."""
    found: dict[Scope, None] = {}
    for path in NoteFile.objects.filter(owner_id=owner_id, path__startswith=ROOT + "/").values_list("path",
                                                                                                   flat=True):
        scope = scope_of_path(path)
        if scope is not None:
            found[scope] = None
    for kind, key in (NoteVector.objects.filter(owner_id=owner_id).values_list("scope_kind", "scope_key")
                      .distinct()):
        try:
            # A str from the database, not a ScopeKind: Scope checks it (InvalidInput).
            found[Scope(kind, key)] = None  # type: ignore[arg-type]
        except InvalidInput:
            continue
    return list(found)


@transaction.atomic
def owner_reindex(*, owner_id: int, embed: bool = True) -> SyncResult:
    """Rebuild every recall row of the owner from the notes store (a repair; also what a backfill runs)."""
    from localai_memory.notes.services import lock_owner

    lock_owner(owner_id)
    return scopes_sync(owner_id=owner_id, scopes=owner_scopes_with_notes(owner_id), embed=embed)


# --- the catch-up -----------------------------------------------------------------------------------------


def queue_catch_up(*, owner_id: int | None = None) -> None:
    """Ask the worker to embed what waits, after this transaction commits (at most once a minute per owner).
    Never raises: with the queue down the scheduled sweep catches up."""

    def enqueue() -> None:
        try:
            from django.core.cache import cache

            if not cache.add(f"recall:catch-up:{owner_id or 'all'}", "1", timeout=60):
                return
            from .tasks import recall_catch_up

            recall_catch_up.apply_async(kwargs={"owner_id": owner_id}, priority=BACKGROUND)
        except Exception:
            log.warning("recall catch-up not queued for user %s", owner_id, exc_info=True)

    transaction.on_commit(enqueue)


@dataclass
class CatchUp:
    examined: int
    embedded: int
    failed: bool = False

    @property
    def done(self) -> bool:
        return self.examined == 0 and not self.failed


def _rows(owner_id: int | None) -> Any:
    return NoteVector.objects.all() if owner_id is None else NoteVector.objects.filter(owner_id=owner_id)


def next_stale_model(*, model_id: str, owner_id: int | None = None) -> str | None:
    """A model id (``""``: no vector yet) that some rows carry instead of ``model_id``; None when every row
    is current. Two probes of the (model_id, id) index, whatever the table's size."""
    rows = _rows(owner_id)
    lower = rows.filter(model_id__lt=model_id).order_by("model_id").values_list("model_id", flat=True).first()
    if lower is not None:
        return lower
    return rows.filter(model_id__gt=model_id).order_by("model_id").values_list("model_id", flat=True).first()


def catch_up_batch(*, limit: int = 128, owner_id: int | None = None, embedder: Embedder | None = None) -> CatchUp:
    """Embed up to ``limit`` rows that have no vector of the current model (none yet, or another model's).

    Embedded rows leave the stale set, so repeated batches need no cursor. A row whose text changed while it
    was being embedded is left alone (the write that changed it embedded it, or left it waiting), so a slow
    batch never stores a stale vector. ``failed`` when the embedder is missing or failed: the rows wait.
    """
    embedder = embedder or current_embedder()
    if embedder is None:
        return CatchUp(examined=0, embedded=0, failed=True)
    model_id = embedder.model_id
    stale_model = next_stale_model(model_id=model_id, owner_id=owner_id)
    if stale_model is None:
        return CatchUp(examined=0, embedded=0)
    batch = list(_rows(owner_id).filter(model_id=stale_model).order_by("id")
                 .values("id", "topic", "kind", "text")[:limit])
    if not batch:
        return CatchUp(examined=0, embedded=0)
    vectors, _ = embed_texts([passage(r["topic"], r["kind"], r["text"]) for r in batch], embedder=embedder,
                             respect_breaker=False)
    if vectors is None:
        return CatchUp(examined=len(batch), embedded=0, failed=True)
    embedded = 0
    with transaction.atomic():
        for row, vector in zip(batch, vectors, strict=True):
            embedded += NoteVector.objects.filter(pk=row["id"], text=row["text"], model_id=stale_model).update(
                embedding=vector, model_id=model_id, dim=int(vector.shape[0]))
    return CatchUp(examined=len(batch), embedded=embedded)


def waiting_count(*, owner_id: int | None = None, model_id: str | None = None) -> int:
    """Rows without a vector of ``model_id`` (default: the current embedder's), for status and tests."""
    if model_id is None:
        embedder = current_embedder()
        model_id = embedder.model_id if embedder else ""
    return _rows(owner_id).exclude(model_id=model_id).count()
