"""Recall for a chat turn, semantic search, and the duplicate check: reads of one owner's recall rows.

Every read filters by owner and by the scopes the caller may read *first* (the B-tree of
``recall_one_row_per_passage``), fetches that owner's few hundred passages with their vectors (an index
line, and each part of a topic file: one for a short file), and ranks them exactly with
``ranking.rank_notes`` (relevance gate, relevance/recency/importance blend): a note counts by its best
passage, so a fact deep in a long file is found, and a note is one result however many of its parts match.
Nothing here decides which scopes may be read: the caller passes what ``memory.policy`` allowed. When
meaning cannot be used the ranking is lexical and the result says why (``no_embedder``, ``no_vectors``,
``low_coverage``, ``dim_mismatch``, ``query_embed_failed``): PostgreSQL full text ranks the same filtered
rows (``lexical_scores``), and ``rank_notes`` gates and blends those ranks as it does cosines.

``turn_recall`` is the hook registered in ``chats.services.recall_hooks``: it builds the recall query from
the new message and a short window of the user's earlier *typed* messages, puts the best topics' details in
front of the model as fenced data (``chats.context.recall_block``) and reports what it did.
"""

from __future__ import annotations

import functools
import logging
import struct
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
import psycopg
from django.db import connection
from django.utils import timezone

from localai_memory.core.errors import InvalidInput
from localai_memory.notes.models import NoteImportance
from localai_memory.notes.paths import SCOPE_KINDS, Scope

from . import index
from .embedders import Embedder
from .models import DETAILS, LINE, SOURCE_MODEL, SOURCE_USER, TEXT_SEARCH_CONFIG, NoteVector
from .ranking import (
    DEFAULT_CONFIG,
    STOPWORDS,
    Candidate,
    DegradeReason,
    DuplicateMatch,
    RecallConfig,
    RecallQuery,
    RecallWeights,
    ScoredNote,
    VectorCoverage,
    build_recall_query,
    choose_degrade_reason,
    content_terms,
    importance_of,
    is_duplicate,
    rank_notes,
)

if TYPE_CHECKING:
    from localai_memory.chats.selectors import TurnRead
    from localai_memory.chats.services import RecallContribution, RecallRequest, TurnAhead

log = logging.getLogger(__name__)

#: A search query longer than this is refused (a search box, not a document).
QUERY_MAX_CHARS = 500
SEARCH_LIMIT = 10
_UNSET: Any = object()


# --- the candidates of one owner --------------------------------------------------------------------------


#: A passage of a note: ``(LINE, 0)`` for its index line, ``(DETAILS, n)`` for part n of its topic file.
PassageKey = tuple[str, int]


class PassageVector(NamedTuple):
    """The stored embedding of one passage of a note, and the model that made it."""

    kind: str
    part: int
    model_id: str
    vector: np.ndarray


def lexical_rank(ranks: Mapping[PassageKey, float]) -> float:
    """A note's full-text rank from its passages' (``lexical_scores``): its index line's plus its best topic
    file part's. For a note with a short file (one part) that is the sum recall always ranked by; a long
    file counts by its best part, not by how many of its parts share a word with the message."""
    line = details = 0.0
    for (kind, _), rank in ranks.items():
        if kind == LINE:
            line = rank
        elif rank > details:
            details = rank
    return line + details


@dataclass
class Note:
    """One topic of one scope with its passages (index line, its topic file's parts) and their vectors."""

    scope: Scope
    topic: str
    summary: str | None = None
    details: str | None = None  # the whole topic file
    source: str = SOURCE_USER
    #: Its last write, or its last use in a turn when that came later (``notes_used``): what recency reads.
    updated_at: datetime | None = None
    #: The topic file's passages in order (``ranking.details_parts``; joined, they are ``details``).
    parts: list[str] = field(default_factory=list)
    #: The passages that have an embedding.
    vectors: list[PassageVector] = field(default_factory=list)
    #: Full-text rank per passage for this turn's query, when recall ranked lexically (``lexical_scores``).
    lexical: dict[PassageKey, float] | None = None
    #: The importance the owner gave the note (``notes.NoteImportance``), else None: its writer's.
    importance: float | None = None
    #: The oldest use of its passages in a turn (``notes_used``); None when one of them was never used.
    used_at: datetime | None = None

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.scope.kind, self.scope.key, self.topic)

    @property
    def path(self) -> str:
        return self.scope.topic_path(self.topic) if self.details is not None else self.scope.index_path

    @property
    def text(self) -> str:
        """What lexical ranking reads: ``topic: summary`` and the details."""
        head = f"{self.topic}: {self.summary or ''}".strip()
        return f"{head}\n{self.details.strip()}" if self.details else head

    @property
    def passages(self) -> list[PassageKey]:
        """The note's passages in order: its index line (if it has one), then its topic file's parts."""
        line: list[PassageKey] = [(LINE, 0)] if self.summary is not None else []
        return line + [(DETAILS, n) for n in range(len(self.details_parts))]

    @property
    def details_parts(self) -> list[str]:
        return self.parts or ([self.details] if self.details else [])

    def passage_text(self, passage: PassageKey) -> str:
        """The text of one passage: ``topic: summary`` for the line, else that part of the topic file."""
        kind, part = passage
        if kind == LINE:
            return f"{self.topic}: {self.summary or ''}"
        parts = self.details_parts
        return parts[part] if part < len(parts) else ""

    def details_offset(self, passage: PassageKey) -> int:
        """Where ``passage`` starts in ``details`` (0 for the index line and the first part)."""
        kind, part = passage
        return 0 if kind == LINE else sum(len(text) for text in self.details_parts[:part])

    def candidate(self, model_id: str | None) -> Candidate:
        """The ranking's view: the vectors of ``model_id`` if it has any, else those of another model (so
        coverage sees them) — never a mix of two models."""
        mine = [p.vector for p in self.vectors if p.model_id == model_id]
        other_model = next((p.model_id for p in self.vectors if p.model_id != model_id), None)
        if mine:
            vectors, used = np.stack(mine), model_id
        elif other_model is not None:
            vectors = np.stack([p.vector for p in self.vectors if p.model_id == other_model])
            used = other_model
        else:
            vectors, used = None, None
        return Candidate(id=self.key, text=self.text, updated_at=self.updated_at or timezone.now(),
                         scope=self.scope.kind, source=self.source,
                         importance=importance_of(self.source) if self.importance is None else self.importance,
                         vectors=vectors, model_id=used,
                         lexical=None if self.lexical is None else lexical_rank(self.lexical))


def _vector_from_send(raw: Any) -> np.ndarray | None:
    """pgvector's binary form (``vector_send``): two big-endian uint16 (dim, unused), then float32s."""
    if raw is None:
        return None
    data = bytes(raw)
    (dim,) = struct.unpack_from(">H", data)
    return np.frombuffer(data, dtype=">f4", count=dim, offset=4).astype(np.float32)


def _scope_filter(scopes: Sequence[Scope], table: str = "") -> tuple[str, list[Any]]:
    """The SQL condition "one of ``scopes``" on the columns of ``table`` (an alias, or none)."""
    column = f"{table}." if table else ""
    clauses, params = [], []
    for scope in scopes:
        clauses.append(f"({column}scope_kind = %s AND {column}scope_key = %s)")
        params += [scope.kind, scope.key]
    return " OR ".join(clauses), params


def owner_notes(*, owner_id: int, scopes: Sequence[Scope]) -> list[Note]:
    """The notes of ``scopes`` of one owner with their vectors (one indexed query; [] without scopes)."""
    scopes = list(dict.fromkeys(scopes))
    if not scopes:
        return []
    sql, params = _owner_notes_sql(owner_id, scopes)
    # A server-side-binding cursor with binary results: the vectors arrive as raw bytes, not hex text, which
    # halves the fetch (measured in bench/recall_turn). Same connection, so same transaction as Django's.
    connection.ensure_connection()
    # Django's wrapper turns psycopg's errors into django.db's (a server that went away is an
    # OperationalError, answered as a clean 503, never a 500).
    with connection.wrap_database_errors, psycopg.Cursor(connection.connection) as cursor:
        cursor.execute(sql, params, binary=True)
        rows = cursor.fetchall()
    return _notes_from_rows(rows, scopes)


def turn_notes_read(owner_id: int, scopes: dict[str, Scope]) -> TurnRead:
    """``owner_notes`` of every scope a chat can name, as a read of the turn's first round trip
    (``chats.services.turn_read_hooks``); ``turn_recall`` keeps only the scopes the turn may read."""
    from localai_memory.chats.selectors import TurnRead

    named = list(dict.fromkeys(scopes.values()))
    sql, params = _owner_notes_sql(owner_id, named)
    return TurnRead(sql=sql, params=params, binary=True, parse=lambda rows: _notes_from_rows(rows, named))


def _owner_notes_sql(owner_id: int, scopes: Sequence[Scope]) -> tuple[str, list[Any]]:
    where, params = _scope_filter(scopes, "v")
    # Each passage row carries its note's importance, if the owner gave it one (one indexed lookup per row).
    # A note's recency is its last write or use, whichever came later (GREATEST skips a NULL).
    sql = (f"SELECT v.scope_kind, v.scope_key, v.topic, v.kind, v.part, v.text, v.source, "
           f"GREATEST(v.updated_at, v.used_at), "
           f"v.model_id, vector_send(v.embedding), i.importance, v.used_at FROM {NoteVector._meta.db_table} v "
           f"LEFT JOIN {NoteImportance._meta.db_table} i ON i.owner_id = v.owner_id "
           f"AND i.scope_kind = v.scope_kind AND i.scope_key = v.scope_key AND i.topic = v.topic "
           f"WHERE v.owner_id = %s AND ({where})")
    return sql, [owner_id, *params]


def _notes_from_rows(rows: Sequence[Sequence[Any]], scopes: Sequence[Scope]) -> list[Note]:
    by_scope = {(s.kind, s.key): s for s in scopes}
    notes: dict[tuple[str, str, str], Note] = {}
    parts: dict[tuple[str, str, str], list[tuple[int, str]]] = {}
    never: set[tuple[str, str, str]] = set()  # notes one of whose passages no turn used yet
    for kind, key, topic, passage_kind, part, text, source, updated_at, model_id, raw, importance, used_at in rows:
        note = notes.get((kind, key, topic))
        if note is None:
            note = notes[(kind, key, topic)] = Note(scope=by_scope[(kind, key)], topic=topic, source=source,
                                                    updated_at=updated_at, importance=importance,
                                                    used_at=used_at)
        if used_at is None:
            never.add((kind, key, topic))
        elif note.used_at is None or used_at < note.used_at:
            note.used_at = used_at
        if passage_kind == LINE:
            note.summary = text
            note.source = source  # who wrote the index line is who wrote the note
        else:
            parts.setdefault((kind, key, topic), []).append((part, text))
        if note.updated_at is None or updated_at > note.updated_at:
            note.updated_at = updated_at
        vector = _vector_from_send(raw)
        if vector is not None:
            note.vectors.append(PassageVector(passage_kind, part, model_id, vector))
    for note_key in never:
        notes[note_key].used_at = None
    for note_key, texts in parts.items():
        note = notes[note_key]
        if len(texts) > 1:
            texts.sort()
        note.parts = [text for _, text in texts]
        note.details = "".join(note.parts)
    order = {kind: n for n, kind in enumerate(SCOPE_KINDS)}
    return sorted(notes.values(), key=lambda n: (order[n.scope.kind], n.scope.key, n.topic))


# --- lexical ranking: PostgreSQL full text ----------------------------------------------------------------

#: A tsquery that ORs the lexemes of the tsvector ``{vector}`` (NULL when it has none): a chat message is not
#: a boolean query, so a note that shares any one of its words matches. Each lexeme is quoted for the tsquery
#: parser (quotes and backslashes doubled), so no word of the user's is ever read as an operator.
_OR_QUERY = ("(SELECT string_agg('''' || replace(replace(l, E'\\\\', E'\\\\\\\\'), '''', '''''') || '''', ' | ')"
             "::tsquery FROM unnest(tsvector_to_array({vector})) AS l)")


@functools.cache
def filler_lexemes() -> tuple[str, ...]:
    """``ranking.STOPWORDS`` as lexemes of ``TEXT_SEARCH_CONFIG``: words so common in chat and in notes
    ("want", "tonight", "work", "name"…) that sharing one says nothing; PostgreSQL's own stop words are only
    function words. Stemmed by PostgreSQL (once per process), so they meet the query's words exactly."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT tsvector_to_array(to_tsvector(%s::regconfig, %s))",
                       [TEXT_SEARCH_CONFIG, " ".join(sorted(STOPWORDS))])
        return tuple(cursor.fetchone()[0])


def configured() -> RecallConfig:
    """The recall knobs the server's settings give (``RECALL_WEIGHTS``, ``RECALL_DECAY_DAYS``,
    ``RECALL_MAX_NOTES``; the measured defaults otherwise)."""
    from django.conf import settings

    relevance, recency, importance = getattr(settings, "RECALL_WEIGHTS", (0.5, 0.3, 0.2))
    weights = RecallWeights(relevance=relevance, recency=recency, importance=importance)
    decay = float(getattr(settings, "RECALL_DECAY_DAYS", DEFAULT_CONFIG.decay_days))
    most = int(getattr(settings, "RECALL_MAX_NOTES", DEFAULT_CONFIG.max_items))
    if (weights, decay, most) == (DEFAULT_CONFIG.weights, DEFAULT_CONFIG.decay_days, DEFAULT_CONFIG.max_items):
        return DEFAULT_CONFIG
    return replace(DEFAULT_CONFIG, weights=weights, decay_days=decay, max_items=most)


def lexical_scores(*, owner_id: int, scopes: Sequence[Scope], query: RecallQuery | str,
                   config: RecallConfig | None = None,
                   ) -> dict[tuple[str, str, str], dict[PassageKey, float]]:
    """PostgreSQL full-text ranks of the owner's notes of ``scopes`` for ``query``, by note key and passage
    (``(LINE, 0)``, ``(DETAILS, part)``); a note that shares no word with the query is absent, and so is a
    passage. ``lexical_rank`` makes one note's rank of them.

    Words are lexemes of ``TEXT_SEARCH_CONFIG`` (stemmed: "cooking" meets "cook"), without stop words and
    ``filler_lexemes``. A passage matches when its ``search`` vector holds any word of the newest message
    or of the earlier turns; its rank is ``ts_rank`` against the newest message's words plus
    ``config.context_weight`` times ``ts_rank`` against the words only the earlier turns have, so the newest
    message wins a change of subject. Only the owner's rows of ``scopes`` are read (the B-tree that
    ``owner_notes`` uses), never a global text index.
    """
    config = config or configured()
    if isinstance(query, str):
        query = RecallQuery(text=query)
    scopes = list(dict.fromkeys(scopes))
    if not scopes or not query.text.strip():
        return {}
    where, scope_params = _scope_filter(scopes)
    newest = _OR_QUERY.format(vector="words.newest")
    earlier = _OR_QUERY.format(vector="ts_delete(words.earlier, tsvector_to_array(words.newest))")
    sql = (
        "WITH words AS (SELECT ts_delete(to_tsvector(%s::regconfig, %s), %s::text[]) AS newest,"
        " ts_delete(to_tsvector(%s::regconfig, %s), %s::text[]) AS earlier),"
        f" q AS (SELECT {newest} AS newest, {earlier} AS earlier FROM words)"
        " SELECT scope_kind, scope_key, topic, kind, part,"
        " coalesce(ts_rank(search, q.newest), 0) + %s * coalesce(ts_rank(search, q.earlier), 0)"
        f" FROM {NoteVector._meta.db_table}, q"
        f" WHERE owner_id = %s AND ({where}) AND (search @@ q.newest OR search @@ q.earlier)"
    )
    filler = list(filler_lexemes())
    params = [TEXT_SEARCH_CONFIG, query.text, filler, TEXT_SEARCH_CONFIG, "\n".join(query.context), filler,
              config.context_weight, owner_id, *scope_params]
    scores: dict[tuple[str, str, str], dict[PassageKey, float]] = {}
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        for kind, key, topic, passage_kind, part, rank in cursor.fetchall():
            scores.setdefault((kind, key, topic), {})[(passage_kind, part)] = float(rank)
    return scores


def notes_coverage(notes: Sequence[Note], *, model_id: str | None, dim: int | None) -> VectorCoverage:
    """``ranking.vector_coverage`` of the notes' candidates, counted from the stored vectors directly (the
    same answer without normalising every vector again): a note counts as matching when it has a vector of
    ``model_id`` (with dimension ``dim``, when given)."""
    with_vectors = matching = 0
    for note in notes:
        if not note.vectors:
            continue
        with_vectors += 1
        if any(p.model_id == model_id and (dim is None or p.vector.shape[0] == dim) for p in note.vectors):
            matching += 1
    return VectorCoverage(total=len(notes), with_vectors=with_vectors, matching=matching)


# --- recall -----------------------------------------------------------------------------------------------


@dataclass
class Recalled:
    note: Note
    scored: ScoredNote

    @property
    def score(self) -> float:
        return self.scored.score


@dataclass
class RecallOutcome:
    """What recall found for one query: the notes that passed the gate (best first), how, and how long."""

    items: list[Recalled]
    mode: str  # semantic | lexical
    degraded: str | None
    candidates: int
    model_id: str | None = None
    query_vectors: np.ndarray | None = None
    timings: dict[str, float] = field(default_factory=dict)  # ms: fetch, embed, rank
    notes: list[Note] = field(default_factory=list)  # every candidate, ranked or not


def recall_notes(
    *,
    owner_id: int,
    scopes: Sequence[Scope],
    query: RecallQuery | str | None,
    now: datetime | None = None,
    config: RecallConfig | None = None,
    embedder: Embedder | None = _UNSET,
    query_vectors: np.ndarray | None = None,
    notes: list[Note] | None = None,
) -> RecallOutcome:
    """Rank the owner's notes of ``scopes`` for ``query``. ``embedder`` defaults to the configured one;
    ``query_vectors`` (rows of ``query.texts_to_embed()``) skips embedding the query (benchmarks); ``notes``
    are the owner's notes already read (``turn_notes_read``), of which only ``scopes``' are ranked."""
    timings: dict[str, float] = {}
    started = time.perf_counter()
    config = config or configured()
    if isinstance(query, str):
        query = RecallQuery(text=query)
    if embedder is _UNSET:
        embedder = index.current_embedder()
    if notes is None:
        notes = owner_notes(owner_id=owner_id, scopes=scopes)
    else:
        allowed = {(scope.kind, scope.key) for scope in scopes}
        notes = [note for note in notes if (note.scope.kind, note.scope.key) in allowed]
    timings["fetch"] = (time.perf_counter() - started) * 1000
    model_id = embedder.model_id if embedder is not None else None
    candidates = [note.candidate(model_id) for note in notes]
    coverage = notes_coverage(notes, model_id=model_id, dim=None)
    degraded = choose_degrade_reason(embedder_present=embedder is not None, coverage=coverage,
                                     min_coverage=config.min_coverage)
    if degraded in (DegradeReason.NO_VECTORS, DegradeReason.LOW_COVERAGE, DegradeReason.DIM_MISMATCH):
        index.queue_catch_up(owner_id=owner_id)
    if query is None or not query.text.strip() or not candidates:
        return RecallOutcome([], "semantic" if degraded is None and embedder else "lexical",
                             str(degraded) if degraded else None, len(candidates), model_id, None, timings, notes)
    vectors = query_vectors
    if degraded is None and embedder is not None and vectors is None:
        t0 = time.perf_counter()
        vectors, _ = index.embed_query_texts(query.texts_to_embed(), embedder=embedder)
        timings["embed"] = (time.perf_counter() - t0) * 1000
        if vectors is None:
            degraded = DegradeReason.QUERY_EMBED_FAILED
    if degraded is None and vectors is not None:
        # Same model id but another dimension (a server that changed its output) is a mismatch too.
        sized = notes_coverage(notes, model_id=model_id, dim=int(np.asarray(vectors).shape[-1]))
        degraded = choose_degrade_reason(embedder_present=True, coverage=sized, min_coverage=config.min_coverage)
        if degraded is not None:
            index.queue_catch_up(owner_id=owner_id)
    if degraded is not None:  # lexical: PostgreSQL full text ranks the same rows
        t0 = time.perf_counter()
        scores = lexical_scores(owner_id=owner_id, scopes=scopes, query=query, config=config)
        for note in notes:
            note.lexical = scores.get(note.key, {})
        candidates = [note.candidate(model_id) for note in notes]
        timings["lexical"] = (time.perf_counter() - t0) * 1000
    t0 = time.perf_counter()
    result = rank_notes(candidates, query=query, now=now or timezone.now(),
                        query_vectors=vectors if degraded is None else None, query_model_id=model_id,
                        degrade_reason=degraded, config=config)
    timings["rank"] = (time.perf_counter() - t0) * 1000
    by_key = {note.key: note for note in notes}
    items = [Recalled(by_key[item.id], item) for item in result.items]  # type: ignore[index]
    return RecallOutcome(items, result.mode, str(result.degrade_reason) if result.degrade_reason else None,
                         len(candidates), model_id, vectors if degraded is None else None, timings, notes)


# --- the turn's hook --------------------------------------------------------------------------------------


def _typed(message: Mapping[str, Any]) -> bool:
    if message.get("typed_by_user") is False:
        return False
    return str(message.get("origin") or "").lower() in ("", "user")


def query_messages(request: RecallRequest) -> list[dict[str, Any]]:
    """The turn's messages as recall sees them: earlier ones keep the client's ``origin`` marks, and the new
    message is marked as not typed when the chat stored it so (a trigger, a job)."""
    typed = getattr(request, "typed_by_user", None)
    if typed is None:
        from localai_memory.chats.models import Message, Role

        typed = (Message.objects.filter(chat=request.chat, role=Role.USER).order_by("-id")
                 .values_list("typed_by_user", flat=True).first())
    return _query_messages(request.history, request.content, typed)


def _query_messages(history: Sequence[Any], content: str, typed: bool | None) -> list[dict[str, Any]]:
    messages = [dict(m) for m in history if isinstance(m, Mapping)]
    current: dict[str, Any] = {"role": "user", "content": content}
    if typed is False:
        current["origin"] = "host"
    messages.append(current)
    return [m if _typed(m) else {**m, "origin": m.get("origin") or "host"} for m in messages]


def readable_scopes(request: RecallRequest) -> list[Scope]:
    from localai_memory.chats.context import SCOPE_ORDER

    return [request.scopes[kind] for kind in SCOPE_ORDER
            if kind in request.decision.read_scopes and kind in request.scopes]


def turn_query_ahead(ahead: TurnAhead) -> None:
    """The turn's recall query, embedded while the turn reads the database (``chats.services.turn_ahead_hooks``,
    ``index.embed_ahead``): the query ``turn_recall`` will build from the same messages."""
    query = build_recall_query(_query_messages(ahead.history, ahead.content, ahead.typed_by_user))
    if query is not None:
        index.embed_ahead(query.texts_to_embed())


#: The name recall's read goes by in ``chats.services.turn_read_hooks`` and ``RecallRequest.prefetched``.
TURN_READ = "recall.notes"


def turn_recall(request: RecallRequest) -> RecallContribution | None:
    """The recall hook of a chat turn: the best topics of the allowed scopes as fenced data, and the report.
    Every note it brings into the chat (the report's ``count``, the "used N memories" chip and ``X-Memory``)
    is marked used once the response is sent (``notes_used``): one whose details the block shows, and one
    the block adds nothing for because its index line, with no topic file, is the whole note and already in
    the prompt."""
    from localai_memory.chats.services import RecallContribution, ahead_used
    from localai_memory.core.after_response import after_response

    scopes = readable_scopes(request)
    owner_id = request.chat.owner_id
    if not scopes:
        ahead_used(owner_id, False)
        return None
    text, report, outcome = recall_contribution(owner_id=owner_id, scopes=scopes,
                                          query=build_recall_query(query_messages(request)),
                                          notes=request.prefetched.get(TURN_READ))
    # The query's vectors were wanted when there were notes to rank by meaning: the next turn embeds ahead.
    ahead_used(owner_id, outcome.candidates > 0 and outcome.degraded is None)
    # A note shown again within USE_RESOLUTION of its last use is not written again (notes_used would
    # write nothing for it): a person chatting on about one thing costs no write per turn.
    recent = timezone.now() - USE_RESOLUTION
    used = [r.note.key for r in outcome.items
            if r.note.used_at is None or r.note.used_at < recent]
    if used:
        after_response(functools.partial(notes_used, owner_id=owner_id, notes=used))
    return RecallContribution(text=text, report=report)


#: A note's use is written at most once in this time: a turn that shows it again sooner writes nothing.
USE_RESOLUTION = timedelta(hours=1)


def notes_used(*, owner_id: int, notes: Sequence[tuple[str, str, str]], now: datetime | None = None) -> int:
    """Mark ``notes`` (scope kind, scope key, topic) as shown to the model in a turn: their recall rows'
    ``used_at``, which recall's recency and the suggestions to make room read (a note the assistant keeps
    needing stays fresh). Rows a note write holds are skipped, not waited for: that write renews the note
    anyway. Returns the number of rows marked."""
    if not notes:
        return 0
    now = now or timezone.now()
    table = NoteVector._meta.db_table
    rows = ", ".join(["(%s, %s, %s)"] * len(notes))
    sql = (f"UPDATE {table} SET used_at = %s WHERE id IN (SELECT id FROM {table} WHERE owner_id = %s "
           f"AND (scope_kind, scope_key, topic) IN ({rows}) AND (used_at IS NULL OR used_at < %s) "
           f"ORDER BY id FOR UPDATE SKIP LOCKED)")
    with connection.cursor() as cursor:
        cursor.execute(sql, [now, owner_id, *(value for note in notes for value in note), now - USE_RESOLUTION])
        return cursor.rowcount


@dataclass(frozen=True)
class NoteActivity:
    """Who wrote a note's passage that changed last, when, and when a turn last used it (recall's rows)."""

    written_by: str  # user, model or import
    written_at: datetime
    used_at: datetime | None
    #: every passage of it is the model's own (no person's or import's text in it)
    model_only: bool

    @property
    def last(self) -> datetime:
        """Its last write or use."""
        return max(self.written_at, self.used_at or self.written_at)



def notes_activity(*, owner_id: int, scope: Scope | None = None) -> dict[tuple[str, str, str], NoteActivity]:
    """Every note of the owner (or of ``scope``), by (scope kind, scope key, topic), from recall's rows in one
    indexed read: what the notes listing and the terminal show, and the first sieve of the notes the host may
    suggest forgetting. (The Memory tab reads the change history, ``growth.selectors.line_writers``.)"""
    rows = NoteVector.objects.filter(owner_id=owner_id)
    if scope is not None:
        rows = rows.filter(scope_kind=scope.kind, scope_key=scope.key)
    found: dict[tuple[str, str, str], NoteActivity] = {}
    for kind, key, topic, source, updated_at, used_at in rows.values_list(
            "scope_kind", "scope_key", "topic", "source", "updated_at", "used_at"):
        seen = found.get((kind, key, topic))
        if seen is None:
            found[(kind, key, topic)] = NoteActivity(source, updated_at, used_at, source == SOURCE_MODEL)
            continue
        newer = updated_at > seen.written_at
        found[(kind, key, topic)] = NoteActivity(
            source if newer else seen.written_by, updated_at if newer else seen.written_at,
            max((at for at in (used_at, seen.used_at) if at is not None), default=None),
            seen.model_only and source == SOURCE_MODEL)
    return found


def activity_json(activity: NoteActivity | None) -> dict[str, str | None]:
    """A note's ``written_by``, ``written_at`` and ``used_at`` as the listings give them (all None for a note
    recall has no row of)."""
    if activity is None:
        return {"written_by": None, "written_at": None, "used_at": None}
    return {"written_by": activity.written_by, "written_at": activity.written_at.isoformat(),
            "used_at": activity.used_at.isoformat() if activity.used_at else None}


def recall_contribution(*, owner_id: int, scopes: Sequence[Scope], query: RecallQuery | None,
                        embedder: Embedder | None = _UNSET, query_vectors: np.ndarray | None = None,
                        now: datetime | None = None, notes: list[Note] | None = None,
                        ) -> tuple[str, dict[str, Any], RecallOutcome]:
    """What recall adds to one turn: the fenced text, ``report["recall"]`` and the outcome behind them."""
    from localai_memory.chats import context

    outcome = recall_notes(owner_id=owner_id, scopes=scopes, query=query, embedder=embedder,
                           query_vectors=query_vectors, now=now, notes=notes)
    shown_lines = _index_lines_shown(owner_id, scopes, outcome)
    query_text = query.text if query is not None else ""
    recalled = [context.RecalledNote(kind=r.note.scope.kind, scope=r.note.scope, topic=r.note.topic,
                                     summary=r.note.summary, details=r.note.details,
                                     line_shown=(r.note.scope.kind, r.note.topic) in shown_lines,
                                     details_from=_details_from(r.note, outcome, query_text))
                for r in outcome.items]
    block = context.recall_block(recalled)
    report = {
        "count": len(outcome.items),
        "topics": [r.note.topic for r in outcome.items],
        "notes": [{"scope": r.note.scope.kind, "key": r.note.scope.key, "topic": r.note.topic,
                   "path": r.note.path, "score": round(r.score, 4),
                   "similarity": None if r.scored.cosine is None else round(r.scored.cosine, 4),
                   "shown": r.note.key in block.shown}
                  for r in outcome.items],
        "degraded": outcome.degraded,
        "mode": outcome.mode,
        "candidates": outcome.candidates,
    }
    return block.text, report, outcome


def _index_lines_shown(owner_id: int, scopes: Sequence[Scope], outcome: RecallOutcome) -> set[tuple[str, str]]:
    """Which recalled topics' index lines the turn's memory block shows: all of them, unless the indexes
    pass the turn's budget and the block was cut (then the block is rebuilt to see what it kept)."""
    from localai_memory.chats import context
    from localai_memory.notes import selectors as notes_selectors
    from localai_memory.notes.paths import TURN_INDEXES_MAX_BYTES

    wanted: set[tuple[str, str]] = {(r.note.scope.kind, r.note.topic) for r in outcome.items}
    if not wanted:
        return set()
    # An upper bound of the block's bytes: every line with its "-> topic.md" (neutralising only shortens).
    upper = sum(len(f"- {n.topic}: {n.summary} -> {n.topic}.md".encode()) + 1 for n in outcome.notes if n.summary)
    if upper <= TURN_INDEXES_MAX_BYTES:
        return wanted
    indexes = [context.IndexShown(scope.kind, scope, notes_selectors.index_text(owner_id=owner_id, scope=scope))
               for scope in scopes]
    lines = set(context.memory_block(indexes).text.splitlines())
    shown: set[tuple[str, str]] = set()
    for recalled in outcome.items:
        note = recalled.note
        for suffix in ("", f" -> {note.topic}.md"):
            if context.neutralise(f"- {note.topic}: {note.summary}{suffix}") in lines:
                shown.add((note.scope.kind, note.topic))
    return shown


# --- search -----------------------------------------------------------------------------------------------


def check_query(raw: object, *, name: str = "query") -> str:
    """A search's text, stripped; InvalidInput naming the parameter as the caller's client spells it (``q``
    in the REST route, ``query`` for the model's and MCP's tools)."""
    if not isinstance(raw, str) or not raw.strip():
        raise InvalidInput(f"{name} is required: what to search for", code="invalid_query")
    if len(raw) > QUERY_MAX_CHARS:
        raise InvalidInput(f"{name} holds at most {QUERY_MAX_CHARS} characters", code="invalid_query")
    if "\x00" in raw:
        raise InvalidInput(f"{name} may not contain NUL characters", code="invalid_query")
    return raw.strip()


def _best_line(note: Note, query: str, passage: PassageKey) -> str:
    """The line of ``passage`` that shows best why the note matched: the index line, or the line of that
    part of the topic file holding the query (or most of its words; else the part's first line)."""
    if passage[0] == LINE:
        return f"{note.topic}: {note.summary or ''}"
    lines = [line.strip() for line in note.passage_text(passage).splitlines() if line.strip()]
    if not lines:
        return ""
    wanted = set(content_terms(query))
    needle = query.lower()
    return max(lines, key=lambda line: (needle in line.lower(), len(wanted & set(content_terms(line)))))


def _best_passage(note: Note, outcome: RecallOutcome, query: str) -> PassageKey:
    """Which passage of the note matched ``query`` best: its index line or a part of its topic file.

    By meaning when the outcome ranked by meaning (against the newest message), else by the full-text rank
    PostgreSQL gave each passage, else by the query's content words it holds. A tie goes to the index line,
    then to the earlier part."""
    passages = note.passages
    if len(passages) <= 1:
        return passages[0] if passages else (LINE, 0)
    if outcome.query_vectors is not None:
        q = np.asarray(outcome.query_vectors, dtype=np.float32)[0]
        sims = {(p.kind, p.part): float(p.vector @ q) for p in note.vectors if p.model_id == outcome.model_id}
        if sims:
            return max(passages, key=lambda passage: sims.get(passage, -2.0))
    if note.lexical:  # ranked by full text: the passage PostgreSQL ranked highest
        lexical = note.lexical
        return max(passages, key=lambda passage: lexical.get(passage, 0.0))
    wanted = set(content_terms(query))
    return max(passages, key=lambda passage: len(wanted & set(content_terms(note.passage_text(passage)))))


def _details_from(note: Note, outcome: RecallOutcome, query: str) -> int:
    """Where in a long topic file the part that matched starts (0: the file's start, or a short file), so
    the memory block can show that part when the whole file does not fit (``chats.context.recall_block``)."""
    if len(note.parts) < 2:
        return 0
    return note.details_offset(_best_passage(note, outcome, query))


def search(*, owner_id: int, scopes: Sequence[Scope], query: str, limit: int = SEARCH_LIMIT,
           now: datetime | None = None) -> dict[str, Any]:
    """Semantic search of the owner's notes in ``scopes``: the notes that pass the relevance gate, best
    first, with their score (the recall blend), similarity (cosine; None when matched by words) and where
    they matched (``in``: the index line or the topic file; ``line``: the index line, or the line of the
    file's best matching part that holds the query's words). One result per note, however many of its
    passages match. Without usable vectors it is recall's lexical ranking (PostgreSQL full text), and
    ``mode``/``degraded`` say so. Raises InvalidInput for an empty or oversized query."""
    query = check_query(query)
    config = replace(configured(), max_items=max(1, min(int(limit), 50)))
    outcome = recall_notes(owner_id=owner_id, scopes=scopes, query=RecallQuery(text=query), now=now,
                           config=config)
    results = []
    for recalled in outcome.items:
        note = recalled.note
        passage = _best_passage(note, outcome, query)
        results.append({
            "scope": note.scope.kind, "key": note.scope.key, "topic": note.topic, "path": note.path,
            "summary": note.summary, "details": note.details, "in": "index" if passage[0] == LINE else "details",
            "line": _best_line(note, query, passage),
            "score": round(recalled.score, 4),
            "similarity": None if recalled.scored.cosine is None else round(recalled.scored.cosine, 4),
            "matched_by": recalled.scored.matched_by,
        })
    return {"query": query, "mode": outcome.mode, "degraded": outcome.degraded, "results": results}


def owner_scopes(*, owner_id: int) -> list[Scope]:
    """Every scope of the owner that recall holds rows for (the user's own first)."""
    keys = NoteVector.objects.filter(owner_id=owner_id).values_list("scope_kind", "scope_key").distinct()
    scopes = {Scope.user()}
    for kind, key in keys:
        try:
            # A str from the database, not a ScopeKind: Scope checks it (InvalidInput).
            scopes.add(Scope(kind, key))  # type: ignore[arg-type]
        except InvalidInput:
            continue
    order = {kind: n for n, kind in enumerate(SCOPE_KINDS)}
    return sorted(scopes, key=lambda s: (order[s.kind], len(s.key), s.key))


# --- duplicates -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Duplicate:
    """An existing index line that a proposed note repeats."""

    scope: Scope
    topic: str
    summary: str
    similarity: float
    by: str

    @property
    def line(self) -> str:
        return f"- {self.topic}: {self.summary}"

    def as_dict(self) -> dict[str, Any]:
        return {"scope": self.scope.kind, "topic": self.topic, "summary": self.summary, "line": self.line,
                "similarity": round(self.similarity, 4), "by": self.by}


#: Content words a proposed line shares with another (Jaccard) from which it may be that line's duplicate
#: by words alone: such a line is checked before a turn tells the model anything (``chats.tools``).
REPEAT_JACCARD = 0.25


def may_repeat(summary: str, lines: Sequence[str]) -> bool:
    """Whether one of ``lines`` is close enough in words to ``summary`` that the duplicate check may name it:
    the same words, or content words in common by ``REPEAT_JACCARD`` (a changed number or a negation is never
    a duplicate, as in the check). A look without the embedder, in microseconds."""
    now = timezone.now()
    candidates = [Candidate(id=number, text=line, updated_at=now) for number, line in enumerate(lines) if line]
    return is_duplicate(summary, candidates, jaccard_threshold=REPEAT_JACCARD) is not None


def find_duplicate(*, owner_id: int, scope: Scope, topic: str, summary: str,
                   details: str | None = None, notes: Sequence[Note] | None = None) -> Duplicate | None:
    """The line of another topic in ``scope`` that means the same as the proposed ``summary``, or None.

    The proposal's own topic is never its duplicate: writing it is an update (or "already saved"). Numbers
    or a negation that differ are never duplicates (``ranking.is_duplicate``). Proposed details that the
    matching note does not hold are new information, so such a note is not a duplicate either. Without an
    embedder the check is lexical: the lines compared are those that share a full-text word with the
    proposal (``lexical_scores``, the words lexical recall matches on), by content-word overlap.

    ``notes`` are the owner's notes a turn read at its start (``turn_notes_read``, every scope its chat can
    name), compared instead of reading them again: the check is a help against repeating a line, and a note
    written elsewhere while the model thought is at worst not named as the duplicate (the turn's own writes
    are not in that read, so a turn that saved a note reads afresh: ``chats.tools``).
    """
    if not summary or not summary.strip():
        return None
    if notes is None:
        notes = owner_notes(owner_id=owner_id, scopes=[scope])
    notes = [n for n in notes if n.scope == scope and n.topic != topic and n.summary]
    if not notes:
        return None
    embedder = index.current_embedder()
    if embedder is None:  # lexical: compare the lines that share a full-text word with the proposal
        matched = lexical_scores(owner_id=owner_id, scopes=[scope], query=summary)
        # None sharing one: a summary of stop words only can still repeat a line word for word.
        notes = [n for n in notes if (LINE, 0) in matched.get(n.key, {})] or notes
    model_id = embedder.model_id if embedder is not None else None
    # Remembered: when the note is saved in this turn, its line passage is this same text.
    vectors, _ = index.embed_query_texts([index.passage(topic, LINE, summary)], embedder=embedder) \
        if embedder is not None else (None, None)
    candidates = []
    for note in notes:
        line_vectors = [p.vector for p in note.vectors if p.kind == LINE and p.model_id == model_id]
        candidates.append(Candidate(id=note.topic, text=note.summary or "", updated_at=timezone.now(),
                                    vectors=line_vectors[0] if line_vectors else None,
                                    model_id=model_id if line_vectors else None))
    match: DuplicateMatch | None = is_duplicate(summary, candidates, new_vector=vectors, model_id=model_id)
    if match is None:
        return None
    existing = next(n for n in notes if n.topic == match.id)
    if details and details.strip() and (existing.details or "").strip() != details.strip():
        return None
    return Duplicate(scope=scope, topic=existing.topic, summary=existing.summary or "",
                     similarity=match.similarity, by=match.by)
