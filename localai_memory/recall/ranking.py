"""Pure recall ranking: which of a user's notes (if any) belong in front of the model for this turn.

Given the candidate notes of the scopes a turn may read (already filtered by owner and scope), the turn's
recall query, its embedding (or none) and ``now``, ``rank_notes`` returns the notes that pass the relevance
gate, best first, with the scores that put them there and the reason semantic ranking was not used, if it
was not. It also holds the helpers around that decision: the recall-query builder, the degrade-reason
decision, the in-memory word-overlap scorer (lexical ranks themselves come from PostgreSQL full text,
``service.lexical_scores``) and the duplicate check.

Nothing here touches the database, the network, settings or the clock: every input is an argument, so the
same inputs always give the same answer. Vectors of different models or dimensions are never compared.
The thresholds below were measured on ``bench/recall/recall_set.json`` (65 notes of 5 people, 271 queries,
135 off-topic messages; tuned on its even half, checked on the held-out odd half). With the on-device
model: hit@1 0.862 tune / 0.842 held (0.852 overall), hit@3 0.88 / 0.87, off-topic false injection
1.4 % / 1.5 %. ``bench/recall/run.py`` reprints them (and the lexical figures); bench/recall/README.md
explains.
"""

from __future__ import annotations

import functools
import math
import re
import unicodedata
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any, Literal

import numpy as np

# --- what recall reports when it could not rank by meaning ------------------------------------------------


class DegradeReason(StrEnum):
    """Why this turn's recall fell back to lexical ranking (the ``X-Memory`` header carries the value)."""

    NO_EMBEDDER = "no_embedder"  # no provider configured or importable
    NO_VECTORS = "no_vectors"  # the candidate notes carry no vector yet
    LOW_COVERAGE = "low_coverage"  # too few candidates carry a vector of the current model
    DIM_MISMATCH = "dim_mismatch"  # vectors come from another model / dimension (a model switch)
    QUERY_EMBED_FAILED = "query_embed_failed"  # the provider failed on this turn's query


@dataclass(frozen=True, slots=True)
class VectorCoverage:
    """How many candidates carry a vector, and how many of those the current model can be compared with."""

    total: int
    with_vectors: int
    matching: int  # vectors made by the current model, with its dimension

    @property
    def fraction(self) -> float:
        return self.matching / self.total if self.total else 1.0


#: Below this fraction of candidates carrying a comparable vector, semantic ranking would silently ignore
#: too many notes, so the turn is lexical and says ``low_coverage`` (or ``dim_mismatch``).
DEFAULT_MIN_COVERAGE = 0.8


def choose_degrade_reason(
    *,
    embedder_present: bool,
    coverage: VectorCoverage,
    query_embed_failed: bool = False,
    min_coverage: float = DEFAULT_MIN_COVERAGE,
) -> DegradeReason | None:
    """The reason semantic ranking cannot be used this turn, or ``None`` when it can.

    Checked in this order, so the reason names the first thing to fix: no provider → ``no_embedder``;
    candidates but none with a vector → ``no_vectors``; fewer than ``min_coverage`` of the candidates with
    a vector of the current model → ``dim_mismatch`` when some of the others carry another model's or
    dimension's vector (a switch being re-embedded), else ``low_coverage``; then a failed query embedding
    → ``query_embed_failed``. With no candidates at all there is nothing to degrade: ``None``.
    Vectors of another model in a store that is otherwise covered are simply not compared.
    """
    if not embedder_present:
        return DegradeReason.NO_EMBEDDER
    if coverage.total == 0:
        return None
    if coverage.with_vectors == 0:
        return DegradeReason.NO_VECTORS
    if coverage.fraction < min_coverage:
        if coverage.with_vectors > coverage.matching:
            return DegradeReason.DIM_MISMATCH
        return DegradeReason.LOW_COVERAGE
    if query_embed_failed:
        return DegradeReason.QUERY_EMBED_FAILED
    return None


# --- inputs -----------------------------------------------------------------------------------------------

#: Sources written by a person (typed, or imported from their own files): they never decay with age.
UNDECAYING_SOURCES = frozenset({"user", "import"})

#: How much a note matters, by who wrote it: what the person typed or confirmed themselves most, what they
#: brought from elsewhere next, what the model saved on its own (or suggested from chats, the episodic
#: summaries among them) least. Importance only orders notes about as relevant (``relevance_span``).
IMPORTANCE_BY_SOURCE = {"user": 0.8, "import": 0.6, "model": 0.4}
#: Without a semantic signal, a first-person question that shares no word with any note ("what is my name?")
#: brings in at most this many of the notes the user typed or imported.
FIRST_PERSON_FALLBACK = 2


def importance_of(source: str) -> float:
    """A note's importance (0..1) from its source; an unknown source counts as the model's."""
    return IMPORTANCE_BY_SOURCE.get(source, IMPORTANCE_BY_SOURCE["model"])


@dataclass(frozen=True, eq=False, slots=True)
class Candidate:
    """One note a turn may read: its index line (plus topic details if any) and where it came from.

    ``vectors`` holds one row per embedded passage (the index line, each part of the topic file), all made
    by ``model_id``; the note's similarity is its best passage's. ``source`` is who wrote it: ``"user"`` and
    ``"import"`` do not decay, anything else (``"model"``…) decays with age. ``lexical`` is the note's
    full-text rank for this turn's query when the caller ranked its rows in PostgreSQL (``recall.service
    .lexical_rank``: its index line's plus its best part's; 0 when it shares no word with the query):
    lexical ranking then uses it instead of counting shared content words in memory.
    """

    id: Hashable
    text: str
    updated_at: datetime
    scope: str = "user"
    source: str = "user"
    importance: float = 0.5
    vectors: Any = None  # array-like of shape (dim,) or (passages, dim), or None
    model_id: str | None = None
    lexical: float | None = None  # PostgreSQL full-text rank for this query; None: not ranked there

    def matrix(self) -> np.ndarray | None:
        """The vectors as unit rows of a 2-D float32 array, or ``None`` when there are none."""
        return _as_matrix(self.vectors)


def _as_matrix(vectors: Any) -> np.ndarray | None:
    if vectors is None:
        return None
    matrix = np.asarray(vectors, dtype=np.float32)
    if matrix.size == 0:
        return None
    if matrix.ndim == 1:
        matrix = matrix[None, :]
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.maximum(norms, 1e-12)


def vector_coverage(candidates: Sequence[Candidate], *, model_id: str | None, dim: int | None) -> VectorCoverage:
    """Count candidates with vectors, and those made by ``model_id`` with dimension ``dim`` (if known)."""
    with_vectors = matching = 0
    for candidate in candidates:
        matrix = candidate.matrix()
        if matrix is None:
            continue
        with_vectors += 1
        if candidate.model_id == model_id and (dim is None or matrix.shape[1] == dim):
            matching += 1
    return VectorCoverage(total=len(candidates), with_vectors=with_vectors, matching=matching)


# --- the recall query -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RecallQuery:
    """The newest user-typed message and up to a few earlier user-typed turns (oldest first)."""

    text: str
    context: tuple[str, ...] = ()

    @property
    def with_context(self) -> str:
        """Newest message first, so a 128-token cut keeps it whole; then earlier turns, newest first."""
        return "\n".join((self.text, *reversed(self.context)))

    def texts_to_embed(self) -> list[str]:
        """What to embed, in order: the newest message, then each earlier turn on its own (newest first).

        Each is a message the user typed, so the earlier ones were embedded when they were the newest: a
        turn usually embeds one short text (see ``query_rows`` for how they are combined)."""
        return [self.text, *reversed(self.context)]


def query_rows(vectors: Any) -> np.ndarray | None:
    """The rows ``rank_notes`` compares passages with, from the vectors of ``RecallQuery.texts_to_embed()``:
    the newest message, and with earlier turns also the newest message plus their mean, normalised (the
    conversation's direction). Measured on bench/recall: the same hit@1, hit@3 and false injection as
    embedding the joined text, at the cost of one short text per turn instead of two long ones."""
    matrix = _as_matrix(vectors)
    if matrix is None or matrix.shape[0] == 1:
        return matrix
    mixed = matrix[0] + matrix[1:].mean(axis=0)
    mixed = mixed / max(float(np.linalg.norm(mixed)), 1e-12)
    return np.stack([matrix[0], mixed.astype(np.float32)])


#: ``origin`` values a client may send for a message it did not let the user type (tool output, fetched
#: pages, the GUI's compaction prompt). Any non-empty origin other than "user" is treated the same way.
TYPED_ORIGINS = frozenset({"", "user"})


def _typed_by_user(message: Mapping[str, Any]) -> bool:
    return message.get("role") == "user" and str(message.get("origin") or "").lower() in TYPED_ORIGINS


def _message_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):  # OpenAI content parts: [{"type": "text", "text": "..."}, ...]
        parts = [part.get("text", "") for part in content if isinstance(part, Mapping)
                 and part.get("type", "text") == "text"]
        return "\n".join(p for p in parts if isinstance(p, str))
    return ""


def build_recall_query(
    messages: Iterable[Mapping[str, Any]],
    *,
    window: int = 2,
    max_chars: int = 600,
) -> RecallQuery | None:
    """The recall query for a turn from its chat messages (OpenAI shape: ``role``, ``content``, ``origin``).

    Only messages the user typed count: ``role == "user"`` and no ``origin`` (or ``origin == "user"``).
    The newest of them is the query; up to ``window`` earlier ones are its context, so a follow-up such as
    "yes, do that" keeps its topic. Each text is cut to ``max_chars``. ``None`` when the user typed nothing,
    or did not type the newest message (the client's own prompt, ``origin: "client"``, as when it compacts a
    long chat; a tool's output; a scheduled run's prompt): such a turn neither recalls nor reinforces notes,
    rather than recalling on something the user said earlier.
    """
    messages = list(messages)
    if messages and not _typed_by_user(messages[-1]):
        return None
    typed: list[str] = []
    for message in messages:
        if not _typed_by_user(message):
            continue
        text = _message_text(message.get("content")).strip()
        if text:
            typed.append(text[:max_chars])
    if not typed:
        return None
    earlier = typed[:-1][-window:] if window > 0 else []
    return RecallQuery(text=typed[-1], context=tuple(earlier))


# --- lexical scoring --------------------------------------------------------------------------------------

#: Function words, chat filler and words so common in notes and requests that sharing one says nothing.
STOPWORDS = frozenset(["a", "about", "above", "after", "again", "against", "all", "also", "am", "an", "and", "any", "are", "aren", "as", "at", "be", "because", "been", "before", "being", "below", "between", "both", "but", "by", "can", "cannot", "could", "couldn", "did", "didn", "do", "does", "doesn", "doing", "don", "down", "during", "each", "few", "for", "from", "further", "had", "has", "have", "having", "he", "her", "here", "hers", "herself", "him", "himself", "his", "how", "i", "if", "in", "into", "is", "isn", "it", "its", "itself", "just", "let", "me", "might", "more", "most", "must", "my", "myself", "no", "nor", "not", "now", "of", "off", "on", "once", "only", "or", "other", "ought", "our", "ours", "ourselves", "out", "over", "own", "same", "shall", "she", "should", "so", "some", "such", "than", "that", "the", "their", "theirs", "them", "themselves", "then", "there", "these", "they", "this", "those", "through", "to", "too", "under", "until", "up", "very", "was", "wasn", "we", "were", "what", "when", "where", "which", "while", "who", "whom", "why", "will", "with", "won", "would", "you", "your", "yours", "yourself", "yourselves", "again", "ago", "already", "always", "another", "anything", "around", "away", "back", "else", "ever", "every", "get", "gets", "getting", "got", "go", "goes", "going", "gone", "good", "great", "hi", "hello", "hey", "ok", "okay", "please", "thanks", "thank", "yes", "yeah", "lol", "sure", "right", "well", "really", "still", "thing", "things", "want", "wants", "need", "needs", "like", "likes", "know", "tell", "give", "make", "makes", "made", "use", "uses", "using", "used", "help", "say", "says", "said", "let's", "lets", "one", "two", "three", "new", "old", "much", "many", "lot", "lots", "way", "ways", "something", "someone", "anyone", "everyone", "nothing", "can't", "i'm", "i've", "i'd", "i'll", "it's", "that's", "what's", "don't", "doesn't", "didn't", "isn't", "aren't", "won't", "day", "days", "week", "weeks", "year", "years", "time", "times", "today", "tomorrow", "tonight", "morning", "evening", "night", "usually", "currently", "write", "writes", "wrote", "written", "writing", "work", "works", "worked", "working", "name", "named", "first", "last", "learn", "explain", "idea", "ideas", "tip", "tips", "suggest", "suggestions", "recommend", "fun", "fact", "facts", "question", "questions", "wonder", "curious", "interesting", "stand", "large", "small", "big", "little", "best", "better", "quick"])

_WORD = re.compile(r"[^\W_]+(?:'[^\W_]+)?", re.UNICODE)


@functools.lru_cache(maxsize=65536)
def _stem(word: str) -> str:
    """A light English suffix stripper: enough that live/lives/lived/living meet; stems keep 3+ letters."""
    word = word.removesuffix("'s")
    if word.endswith("ies") and len(word) > 4:
        word = word[:-3] + "y"
    elif word.endswith(("sses", "shes", "ches", "xes", "zes")):
        word = word[:-2]
    elif word.endswith("s") and not word.endswith(("ss", "us", "is")) and len(word) > 3:
        word = word[:-1]
    elif word.endswith("ing") and len(word) >= 6:
        word = word[:-3]
        if word[-1] == word[-2] and word[-1] not in "aeioulsz":  # running -> run
            word = word[:-1]
    elif word.endswith("ed") and len(word) >= 5:
        word = word[:-2]
        if word[-1] == word[-2] and word[-1] not in "aeioulsz":  # planned -> plan
            word = word[:-1]
    if word.endswith("e") and len(word) > 3:  # live/lived/living all become "liv"
        word = word[:-1]
    return word


def content_terms(text: str) -> list[str]:
    """Lower-cased, stemmed words of ``text`` without stopwords (a hyphenated topic gives both parts)."""
    return list(_content_terms(text))


@functools.lru_cache(maxsize=8192)  # a user's notes are scored every turn; their terms do not change
def _content_terms(text: str) -> tuple[str, ...]:
    terms = []
    for raw in _WORD.findall(text.lower().replace("’", "'")):
        if raw in STOPWORDS or len(raw) < 2:
            continue
        term = _stem(raw)
        if term in STOPWORDS:
            continue
        terms.append(term)
    return tuple(terms)


_PERSONAL = re.compile(r"\b(?:i|i'm|i've|i'd|i'll|my|mine|myself|we|we're|we've|our|ours|us)\b", re.IGNORECASE)


_MINE = re.compile(r"\b(?:my|mine|myself|me)\b", re.IGNORECASE)
_I = re.compile(r"\bi\b", re.IGNORECASE)
#: A question about a fact of one's own starts so ("Where do I live?", "What is my name?").
_ASKS_A_FACT = re.compile(r"^\s*(?:what|what's|who|who's|where|where's|when|which|do|does|did|am|is|are|remind)\b",
                          re.IGNORECASE)
#: ... and these start how-to questions too ("How do I convert a file?"), so they need "my"/"me".
_ASKS_A_WAY = re.compile(r"^\s*(?:how|can|could|should)\b", re.IGNORECASE)


def asks_about_me(text: str) -> bool:
    """A question about the person themselves, in the newest message alone: "What is my name?", "Where do I
    live?", "How old is my cat?". Not a how-to question in the first person ("How do I convert a Word
    document?"), a request that merely says "me" ("Tell me a joke") or a remark ("My printer won't…")."""
    text = text.replace("’", "'")
    if _ASKS_A_FACT.search(text):
        return bool(_MINE.search(text) or _I.search(text))
    return bool(_ASKS_A_WAY.search(text) and _MINE.search(text))


def is_personal(query: RecallQuery) -> bool:
    """True when the user speaks about themselves in the message or its context ("my", "I", "we"…)."""
    return any(_PERSONAL.search(text.replace("’", "'")) for text in (query.text, *query.context))


def word_overlap_scores(query_terms: Mapping[str, float], documents: Sequence[Sequence[str]]) -> list[float]:
    """The in-memory lexical signal: for each tokenised document, the summed weights of the distinct query
    terms it holds (0 when it shares none). Recall ranks lexically in PostgreSQL full text
    (``Candidate.lexical``); this is only for candidates that were not ranked there."""
    scores = []
    for doc in documents:
        held = set(doc)
        scores.append(sum(weight for term, weight in query_terms.items() if term in held))
    return scores


def passage_text(topic: str, text: str) -> str:
    """The text embedded for one passage of a note: ``"my topic: text"``.

    The topic keeps a bare detail such as "Lessons on Tuesdays" on its subject. "my" says whose it is: a
    note is about its owner, and messages about one's own notes say "my…", "I…", "for me" where trivia and
    chit-chat do not, so the prefix lifts the right note's cosine and not an unrelated message's. On
    bench/recall it raised the tune half's AUC (right note's cosine against the best cosine for an off-topic
    message) from 0.935 to 0.949, and the right note's p10 cosine from 0.23 to 0.26 with the off-topic p90
    unchanged (0.24); "topic: text" alone, "the user's topic:", "about me, topic:" and "topic. text" did
    worse (bench/recall/README.md). A hyphenated topic reads the same either way: the tokenizer splits on "-".
    """
    return f"my {topic}: {text.strip()}"


def note_passages(topic: str, summary: str, details: str = "") -> list[str]:
    """The texts to embed for one note: its index line, and each passage of its topic file
    (``details_parts``: one for a file of up to ~80 words), each as ``passage_text``. The app stores one
    recall row per text (``recall.index.scope_passages``). On bench/recall, whose topic files are all short,
    the right note ranked first (before gating) for 0.80 of the queries with the line alone, 0.88 with one
    combined passage, 0.90 with these two (0.91 with the "my" prefix). One more passage per sentence of a
    short file did not help there: the file's passage already holds every sentence, and more passages gave
    off-topic messages more to match (gate fitted on one half, scored on the other: hit@1 0.82 against
    0.85, false injection 1.5 % against 0.7 %). So a file is split only where the model would stop reading
    it (128 tokens), into passages of about that size."""
    line = passage_text(topic, summary)
    if not details.strip():
        return [line]
    return [line, *(passage_text(topic, part) for part in details_parts(details))]


# --- a topic file's passages ------------------------------------------------------------------------------

#: A topic file's passage holds at most this many words and punctuation marks (``text_pieces``). The
#: on-device model reads 128 tokens, ``[CLS]`` and ``[SEP]`` among them (``embedders.DEFAULT_MAX_TOKENS``),
#: and its tokenizer makes about 1.07 tokens of a piece (p90 1.22 per text, measured on bench/recall's notes
#: and queries), where a word alone is 1.2 tokens (p90 1.5; a dated line such as "- 2025-06-01: …" 2.0).
#: 96 pieces leave room for the ``my <topic>: `` prefix and the wordpieces of rare words, and hold about 80
#: words of prose (fewer of dated lines, whose dashes and digits are pieces of their own).
PASSAGE_MAX_PIECES = 96

_PIECE = re.compile(r"[^\W_]+|[^\w\s]|_", re.UNICODE)
_WORD_SLICE = re.compile(r"\s*\S+\s*")
_HEADING = re.compile(r"[ \t]{0,3}#")


def text_pieces(text: str) -> int:
    """The words and punctuation marks of ``text``: what a passage is measured in, close to what the
    on-device tokenizer counts (it splits every punctuation mark off a word)."""
    return len(_PIECE.findall(text))


@dataclass(frozen=True, slots=True)
class _Unit:
    text: str
    pieces: int
    opens: bool  # the first line of a paragraph (after a blank line, or a markdown heading)


def _units(text: str, max_pieces: int) -> list[_Unit]:
    """``text`` as lines (blank lines go with the line after them, so a paragraph added at the end leaves
    the passage before it as it was), and a line longer than a passage as its words. The units join back
    into ``text`` exactly."""
    units: list[_Unit] = []
    blank = ""  # blank lines before the next line
    for line in text.splitlines(keepends=True):
        if not line.strip():
            blank += line
            continue
        opens = bool(blank) or not units or bool(_HEADING.match(line))
        line, blank = blank + line, ""
        pieces = text_pieces(line)
        if pieces <= max_pieces:
            units.append(_Unit(line, pieces, opens))
            continue
        for n, word in enumerate(_WORD_SLICE.findall(line)):
            units.append(_Unit(word, text_pieces(word), opens and n == 0))
    if blank and units:  # blank lines at the end of the file
        last = units[-1]
        units[-1] = _Unit(last.text + blank, last.pieces, last.opens)
    return units


def details_parts(text: str, *, max_pieces: int = PASSAGE_MAX_PIECES) -> list[str]:
    """A topic file's text as the passages recall embeds, in order; they join back into ``text`` exactly.

    A file of at most ``max_pieces`` words and punctuation marks (``text_pieces``; about 80 words) is one
    passage, the whole text. A longer one is cut between lines, from the top: a passage takes lines while
    they fit, and once it is half full a new paragraph (after a blank line, or at a ``#`` heading) starts
    the next one, so a passage holds one subject where the file has them apart; a line longer than a
    passage is cut between its words. A last passage that is the end of a paragraph begun in the passage
    before, and less than a quarter of a passage (~20 words), is evened out with that passage (the cut
    moves to where the two are closest in size), so the words "…and so on." do not make a passage of their
    own. A short last paragraph does: a fact of its own, like the one-line topic files of bench/recall,
    matches best alone (bench/recall/README.md, "Long files").

    Pure and deterministic, and filled from the top: an edit re-cuts only its own passage and the ones
    after it (and not even those while its passage keeps its lines), so a write re-embeds the passages
    whose text changed (``recall.index.scopes_sync``). A line added at the top (``recent-chats``, newest
    first) moves every cut: those passages are embedded again (15 to 20 for a full 8 KiB file).
    """
    if text_pieces(text) <= max_pieces:
        return [text]
    groups: list[list[_Unit]] = [[]]
    size = 0
    for unit in _units(text, max_pieces):
        if groups[-1] and (size + unit.pieces > max_pieces or (unit.opens and size >= max_pieces / 2)):
            groups.append([])
            size = 0
        groups[-1].append(unit)
        size += unit.pieces
    if len(groups) > 1 and not groups[-1][0].opens and size < max_pieces / 4:
        groups[-2:] = _share_evenly(groups[-2] + groups[-1], max_pieces)
    return ["".join(unit.text for unit in group) for group in groups]


def _share_evenly(units: list[_Unit], max_pieces: int) -> list[list[_Unit]]:
    """The units of two passages cut in two where the halves are closest in size (both within a passage)."""
    total = sum(unit.pieces for unit in units)
    best: tuple[float, int] | None = None
    before = 0
    for cut in range(1, len(units)):
        before += units[cut - 1].pieces
        if before <= max_pieces and total - before <= max_pieces:
            gap = abs(total - 2 * before)
            if best is None or gap < best[0]:
                best = (gap, cut)
    cut = best[1] if best is not None else len(units) - 1
    return [units[:cut], units[cut:]]


# --- the gate, weights and result -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SemanticGate:
    """Cosine bars for one embedding model. A note passes on meaning alone at ``alone``; at ``with_overlap``
    when it also shares a content word with the query; at ``personal`` when the user speaks about
    themselves ("my", "I", "we"…), because such a message is far more likely to be about their notes
    than a general question ("who painted the Mona Lisa?") is."""

    alone: float
    with_overlap: float
    personal: float

    def passes(self, cosine: float, *, shares_word: bool, personal: bool) -> bool:
        return (cosine >= self.alone or (shares_word and cosine >= self.with_overlap)
                or (personal and cosine >= self.personal))

    @property
    def floor(self) -> float:
        """The lowest cosine that can pass."""
        return min(self.alone, self.with_overlap, self.personal)


#: Measured per model on bench/recall (see the module docstring). Scales differ between models, so a gate
#: is never reused across unrelated models; an unknown model gets DEFAULT_GATE and ``bench/recall/run.py
#: --sweep`` prints a calibration for it.
MINILM_GATE = SemanticGate(alone=0.339, with_overlap=0.259, personal=0.259)
DEFAULT_GATE = MINILM_GATE
KNOWN_GATES: dict[str, SemanticGate] = {
    "all-MiniLM-L6-v2-onnx-int8": MINILM_GATE,
    "all-MiniLM-L6-v2-onnx-int8-matmulnbits8": MINILM_GATE,
}


def gate_for(model_id: str | None) -> SemanticGate:
    """The measured gate for a model id (MiniLM by name from any provider), else ``DEFAULT_GATE``."""
    if model_id in KNOWN_GATES:
        return KNOWN_GATES[model_id]
    name = (model_id or "").lower()
    if "minilm-l6" in name:
        return MINILM_GATE
    return DEFAULT_GATE


@dataclass(frozen=True, slots=True)
class RecallWeights:
    """The blend ``relevance·w + recency·w + importance·w`` that orders the notes passing the gate. How
    much relevance a note loses for being less similar than the best one is ``RecallConfig.relevance_span``."""

    relevance: float = 0.5
    recency: float = 0.3
    importance: float = 0.2


@dataclass(frozen=True, slots=True)
class RecallConfig:
    """Tunable knobs; the defaults are the measured ones. ``gate=None`` picks the model's measured gate."""

    weights: RecallWeights = field(default_factory=RecallWeights)
    gate: SemanticGate | None = None
    decay_days: float = 30.0
    undecaying_sources: frozenset[str] = UNDECAYING_SOURCES
    max_items: int = 6
    min_coverage: float = DEFAULT_MIN_COVERAGE
    #: How much the earlier turns count: the with-context similarity is scaled by it, as are the earlier
    #: turns' words in lexical scoring, so the newest message wins a topic switch.
    context_weight: float = 0.85
    #: Semantic relevance is 1 for the most similar passing note and falls to 0 at this many cosine points
    #: below it, so recency and importance reorder notes whose similarity is close, and cannot lift a
    #: fresher but clearly less similar note over the right one. (Before, relevance spread over the whole
    #: gap between the gate and the best note, often 0.05-0.10 wide, and a month-old note saved by the
    #: model could lose to a newer one 0.02 less similar.) Chosen on the tune half of bench/recall:
    #: 0.02-0.04 gave the same hit@1, 0.05 one query less, the old spreading two less.
    relevance_span: float = 0.03


DEFAULT_CONFIG = RecallConfig()

Mode = Literal["semantic", "lexical"]


@dataclass(frozen=True, slots=True)
class ScoredNote:
    """A note that passed the gate, with the parts of its score (all in 0..1 except ``cosine``/``words``).
    ``words`` is the lexical evidence: the full-text rank, or the shared content words counted in memory."""

    id: Hashable
    score: float
    relevance: float
    recency: float
    importance: float
    cosine: float | None
    words: float
    matched_by: Literal["semantic", "lexical", "both"]
    candidate: Candidate


@dataclass(frozen=True, slots=True)
class RecallResult:
    items: tuple[ScoredNote, ...]
    mode: Mode
    degrade_reason: DegradeReason | None

    @property
    def ids(self) -> list[Hashable]:
        return [item.id for item in self.items]


def recency_of(candidate: Candidate, *, now: datetime, config: RecallConfig = DEFAULT_CONFIG) -> float:
    """1.0 for notes a person wrote (they never decay); else ``exp(-age / decay_days)``."""
    if candidate.source in config.undecaying_sources:
        return 1.0
    age_days = max((now - candidate.updated_at).total_seconds(), 0.0) / 86400.0
    return math.exp(-age_days / config.decay_days)


def rank_notes(
    candidates: Sequence[Candidate],
    *,
    query: RecallQuery | str,
    now: datetime,
    query_vectors: Any = None,
    query_model_id: str | None = None,
    degrade_reason: DegradeReason | None = None,
    config: RecallConfig = DEFAULT_CONFIG,
) -> RecallResult:
    """Gate and rank ``candidates`` for ``query``; at most ``config.max_items`` notes, best first.

    Semantic mode needs ``query_vectors`` (the rows of ``query.texts_to_embed()``, from the model named
    ``query_model_id``) and no ``degrade_reason``; a candidate is compared only when its vectors come from
    that model with that dimension, and one without such vectors is judged lexically. Otherwise every
    note is judged lexically and the result carries ``degrade_reason``: by its PostgreSQL full-text rank
    (``Candidate.lexical``) when the caller gives one, else by the content words it shares with the query.
    A note passes the gate when it shares a content word with the query (lexical), or when its cosine
    reaches the model's gate (semantic: see ``SemanticGate``). Lexically, when nothing passes and the user
    speaks about themselves, at most ``FIRST_PERSON_FALLBACK`` notes they typed or imported come instead.
    Passing notes are ordered by ``relevance·w + recency·w + importance·w``; a semantic note's relevance
    is 1 at the best cosine and 0 at ``config.relevance_span`` below it (ties: the higher cosine first).
    """
    if isinstance(query, str):
        query = RecallQuery(text=query)
    weights = config.weights
    query_matrix = query_rows(query_vectors) if degrade_reason is None else None
    mode: Mode = "semantic" if query_matrix is not None else "lexical"
    if not candidates or not query.text.strip():
        return RecallResult(items=(), mode=mode, degrade_reason=degrade_reason)

    # Lexical evidence: the full-text rank PostgreSQL gave a candidate (``Candidate.lexical``), else the
    # query's content words it holds, the earlier turns' words counting for less.
    newest_terms = content_terms(query.text)
    term_weights: dict[str, float] = {}
    for text in query.context:
        for term in content_terms(text):
            term_weights[term] = max(term_weights.get(term, 0.0), config.context_weight)
    for term in newest_terms:
        term_weights[term] = 1.0
    in_memory = word_overlap_scores(term_weights, [
        _content_terms(candidate.text) if candidate.lexical is None else () for candidate in candidates])
    words = [in_memory[i] if candidate.lexical is None else max(float(candidate.lexical), 0.0)
            for i, candidate in enumerate(candidates)]
    best_words = max(words) if words else 0.0

    # Semantic evidence: the best passage's cosine against the newest message, or the scaled with-context one.
    cosines: list[float | None] = [None] * len(candidates)
    if query_matrix is not None:
        q_dim = query_matrix.shape[1]
        scale = np.ones(query_matrix.shape[0], dtype=np.float32)
        scale[1:] = config.context_weight
        # Every comparable passage of every candidate in one product (a user has a few hundred), then the
        # best passage and query row per candidate.
        blocks: list[np.ndarray] = []
        owners: list[int] = []
        for index, candidate in enumerate(candidates):
            if candidate.vectors is None or candidate.model_id != query_model_id:
                continue
            matrix = np.asarray(candidate.vectors, dtype=np.float32)
            matrix = matrix[None, :] if matrix.ndim == 1 else matrix
            if matrix.size == 0 or matrix.shape[1] != q_dim:
                continue
            blocks.append(matrix)
            owners.extend([index] * matrix.shape[0])
        if blocks:
            passages = np.concatenate(blocks)
            passages /= np.maximum(np.linalg.norm(passages, axis=1, keepdims=True), 1e-12)
            best = ((passages @ query_matrix.T) * scale).max(axis=1)  # per passage
            per_note = np.full(len(candidates), -np.inf, dtype=np.float32)
            np.maximum.at(per_note, np.asarray(owners), best)
            for index in set(owners):
                cosines[index] = float(per_note[index])
    gate = config.gate or gate_for(query_model_id)

    personal = is_personal(query)
    passed: list[tuple[int, float, Literal["semantic", "lexical", "both"]]] = []
    for index, candidate in enumerate(candidates):
        overlap = words[index] > 0
        cosine = cosines[index]
        if cosine is not None:
            if gate.passes(cosine, shares_word=overlap, personal=personal):
                passed.append((index, cosine, "both" if overlap else "semantic"))
        elif overlap:
            passed.append((index, -1.0, "lexical"))
    limit = config.max_items
    if not passed and mode == "lexical" and asks_about_me(query.text):
        # No semantic signal and no shared word, but the user asks about themselves ("what is my name?"):
        # the best of the notes they typed or imported, at most FIRST_PERSON_FALLBACK, by recency and
        # importance, rather than nothing.
        passed = [(index, -1.0, "lexical") for index, candidate in enumerate(candidates)
                  if candidate.source in ("user", "import")]
        limit = min(limit, FIRST_PERSON_FALLBACK)
    if not passed:
        return RecallResult(items=(), mode=mode, degrade_reason=degrade_reason)

    # Relevance in 0..1 relative to this turn's best evidence, so weights mean the same thing every turn:
    # semantically, 1 for the most similar note, 0 from ``relevance_span`` below it.
    semantic_cosines = [cos for _, cos, how in passed if how != "lexical"]
    top = max(semantic_cosines) if semantic_cosines else gate.floor
    span = max(config.relevance_span, 1e-6)
    scored: list[ScoredNote] = []
    for index, cosine, how in passed:
        candidate = candidates[index]
        if how == "lexical":
            relevance = words[index] / best_words if best_words else 0.0
            if semantic_cosines:  # a note without a vector this turn ranks below matching embedded notes
                relevance *= 0.5
        else:
            relevance = min(max(1.0 - (top - cosine) / span, 0.0), 1.0)
        recency = recency_of(candidate, now=now, config=config)
        importance = min(max(float(candidate.importance), 0.0), 1.0)
        score = weights.relevance * relevance + weights.recency * recency + weights.importance * importance
        scored.append(ScoredNote(
            id=candidate.id, score=score, relevance=relevance, recency=recency, importance=importance,
            cosine=None if how == "lexical" else cosine, words=words[index], matched_by=how,
            candidate=candidate,
        ))
    scored.sort(key=lambda item: (-item.score, -item.relevance,
                                  -(item.cosine if item.cosine is not None else -1.0), str(item.id)))
    return RecallResult(items=tuple(scored[:limit]), mode=mode, degrade_reason=degrade_reason)


# --- duplicates -------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DuplicateMatch:
    """The existing note a proposed one repeats, and how that was decided."""

    id: Hashable
    text: str
    similarity: float
    by: Literal["exact", "semantic", "lexical"]


#: Measured on bench/recall/dedup_set.json (paraphrases of one fact vs. the same topic with a changed fact),
#: both lines embedded as the app embeds them (``passage_text``: "my diet: vegan" vs "my diet: vegetarian…"
#: scores 0.854, so 0.86 is the lowest bar with no false duplicate on the tune half).
DUPLICATE_COSINE = 0.86
DUPLICATE_JACCARD = 0.75
#: Whole words that negate a statement. English, then German, French, Spanish, Italian, Portuguese and Dutch:
#: "trinkt keinen Kaffee" is the opposite of "trinkt Kaffee", however similar the two lines look.
_NEGATIONS = frozenset({
    "not", "no", "never", "none", "nobody", "nothing", "stopped", "quit", "without",
    "doesn", "don", "didn", "isn", "aren", "wasn", "won", "cannot", "can't", "n't",
    "doesn't", "don't", "didn't", "isn't", "aren't", "wasn't", "won't", "no longer",
    "nicht", "nichts", "kein", "keine", "keinen", "keinem", "keiner", "keines", "nie", "niemals",  # German
    "ne", "pas", "jamais", "plus", "rien",  # French ("ne … plus" is "no longer")
    "nunca", "jamás", "nada",  # Spanish ("no" is above)
    "non", "mai",  # Italian
    "não", "nao", "nem",  # Portuguese (also "nunca", "nada")
    "niet", "geen", "nooit",  # Dutch
})
_NUMBER = re.compile(r"\d+(?:[.,]\d+)?")
#: A word, or one character that is neither a word character nor a space (kept only when it is a symbol).
_TOKEN = re.compile(r"[^\W_]+(?:'[^\W_]+)?|[^\w\s]")


def _is_symbol(char: str) -> bool:
    """An emoji or another non-ASCII symbol (🐱, €, °, →): it carries meaning, unlike punctuation."""
    return not char.isascii() and unicodedata.category(char) in ("So", "Sc", "Sm")


def _tokens(text: str) -> list[str]:
    """The words and symbols of ``text`` in order, lower-cased (NFC, so a decomposed "não" is one word)."""
    folded = unicodedata.normalize("NFC", text).lower().replace("’", "'")
    return [token for token in _TOKEN.findall(folded)
            if len(token) > 1 or token.isalnum() or _is_symbol(token)]


def _symbols(text: str) -> set[str]:
    return {token for token in _tokens(text) if len(token) == 1 and _is_symbol(token)}


def _normalised(text: str) -> str:
    """The text as compared for "the same words": case and punctuation ignored, emoji and symbols kept."""
    return " ".join(_tokens(text))


def same_words(a: str, b: str) -> bool:
    """Whether two lines say the same words and symbols, ignoring case and punctuation (the ``exact`` match)."""
    return _normalised(a) == _normalised(b)


def _negated(text: str) -> bool:
    return bool(set(_tokens(text)) & _NEGATIONS) or "n't" in text.lower()


def _facts_differ(a: str, b: str) -> bool:
    """Same topic, changed fact: different numbers, one side negated, or different emoji or symbols on both
    sides (🐱 → 🐶). Similarity cannot see these."""
    if set(_NUMBER.findall(a)) != set(_NUMBER.findall(b)):
        return True
    symbols_a, symbols_b = _symbols(a), _symbols(b)
    if symbols_a and symbols_b and symbols_a != symbols_b:
        return True
    return _negated(a) != _negated(b)


def is_duplicate(
    new_text: str,
    existing: Sequence[Candidate],
    *,
    new_vector: Any = None,
    model_id: str | None = None,
    cosine_threshold: float = DUPLICATE_COSINE,
    jaccard_threshold: float = DUPLICATE_JACCARD,
) -> DuplicateMatch | None:
    """The existing note that ``new_text`` repeats, or ``None``.

    Same words and symbols (ignoring case and punctuation, not emoji) → ``exact``. With ``new_vector`` from ``model_id``: the
    most similar existing note with a comparable vector at or above ``cosine_threshold`` → ``semantic``.
    Without vectors: Jaccard of content words and symbols at or above ``jaccard_threshold`` → ``lexical``.
    A changed number, a negation on one side only (in English, German, French, Spanish, Italian, Portuguese
    or Dutch: ``_NEGATIONS``) or other emoji is never a duplicate (it is an update, which needs its own
    handling), since embeddings score "deadlift 140 kg" and "deadlift 150 kg" as near-identical.
    """
    wanted = _normalised(new_text)
    for candidate in existing:
        if _normalised(candidate.text) == wanted and wanted:
            return DuplicateMatch(id=candidate.id, text=candidate.text, similarity=1.0, by="exact")
    best: DuplicateMatch | None = None
    new_matrix = _as_matrix(new_vector)
    new_terms = set(content_terms(new_text)) | _symbols(new_text)
    for candidate in existing:
        if _facts_differ(new_text, candidate.text):
            continue
        matrix = candidate.matrix()
        if new_matrix is not None and matrix is not None and candidate.model_id == model_id \
                and matrix.shape[1] == new_matrix.shape[1]:
            similarity = float((matrix @ new_matrix.T).max())
            if similarity >= cosine_threshold and (best is None or similarity > best.similarity):
                best = DuplicateMatch(id=candidate.id, text=candidate.text, similarity=similarity, by="semantic")
            continue
        terms = set(content_terms(candidate.text)) | _symbols(candidate.text)
        if new_terms and terms:
            jaccard = len(new_terms & terms) / len(new_terms | terms)
            if jaccard >= jaccard_threshold and (best is None or jaccard > best.similarity):
                best = DuplicateMatch(id=candidate.id, text=candidate.text, similarity=jaccard, by="lexical")
    return best
