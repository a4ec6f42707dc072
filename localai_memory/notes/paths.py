"""Where notes live and what an index looks like (DESIGN §5). Pure: no database, no I/O.

Paths per owner:
    Memory/index.md, Memory/<topic>.md                         yours
    Memory/agents/<agent_id>/index.md, …/<topic>.md            one saved agent
    Memory/channels/<binding>-<hash>/index.md, …/<topic>.md    one messaging conversation
An index line is ``- <topic>: <one-line summary> -> <topic>.md``: the arrow, when there, names the topic's own
file. ``parse_index`` still reads a line that names another file (an older version let one through); a new
one is refused (``check_own_files``).
"""

from __future__ import annotations

import functools
import hashlib
import re
import unicodedata
from collections.abc import Collection
from dataclasses import dataclass
from typing import Literal

from localai_memory.core.errors import InvalidInput
from localai_memory.core.numbers import whole_number

ScopeKind = Literal["user", "agent", "channel"]
SCOPE_KINDS: tuple[ScopeKind, ...] = ("user", "agent", "channel")

ROOT = "Memory"
INDEX_NAME = "index.md"
#: The one name no topic may take: its file would be the index.
INDEX_TOPIC = "index"
INDEX_MAX_LINES = 40
INDEX_MAX_BYTES = 2 * 1024
TURN_INDEXES_MAX_BYTES = 6 * 1024
TOPIC_MAX_BYTES = 8 * 1024
SUMMARY_MAX_CHARS = 200
PATH_MAX_CHARS = 200

TOPIC_RE = re.compile(r"^[a-z0-9-]{1,40}\Z")
_AGENT_KEY_RE = re.compile(r"^[0-9]{1,18}\Z")
_CHANNEL_KEY_RE = re.compile(r"^[a-z0-9_]{1,40}-[0-9a-f]{6,16}\Z")
_INDEX_LINE_RE = re.compile(r"^- (?P<topic>[a-z0-9-]{1,40}): (?P<summary>.+?)(?: -> (?P<file>[a-z0-9-]{1,40})\.md)?$")


@dataclass(frozen=True)
class Scope:
    """One set of notes of an owner: theirs, one agent's, or one messaging conversation's."""

    kind: ScopeKind
    key: str = ""

    def __post_init__(self) -> None:
        if self.kind == "user" and self.key:
            raise InvalidInput("the user scope has no key", code="invalid_scope")
        if self.kind == "agent" and not _AGENT_KEY_RE.match(self.key):
            raise InvalidInput("an agent scope needs the agent's id", code="invalid_scope")
        if self.kind == "channel" and not _CHANNEL_KEY_RE.match(self.key):
            raise InvalidInput("a channel scope needs '<binding>-<hash>'", code="invalid_scope")
        if self.kind not in SCOPE_KINDS:
            raise InvalidInput(f"unknown scope {self.kind!r}", code="invalid_scope")

    @classmethod
    def parse(cls, raw: object) -> Scope:
        """``user``, ``agent:<id>`` or ``channel:<key>``, as clients name a scope; anything else is a 400."""
        if not isinstance(raw, str):
            raise InvalidInput("scope must be user, agent:<id> or channel:<key>", code="invalid_scope")
        kind, _, key = raw.partition(":")
        if kind not in SCOPE_KINDS:
            raise InvalidInput("scope must be user, agent:<id> or channel:<key>", code="invalid_scope")
        return cls(kind, key)  # type: ignore[arg-type]  # a ScopeKind by the check above

    @property
    def name(self) -> str:
        """How clients name the scope (what ``parse`` reads): ``user``, ``agent:<id>`` or ``channel:<key>``."""
        return "user" if self.kind == "user" else f"{self.kind}:{self.key}"

    @property
    def root(self) -> str:
        if self.kind == "user":
            return ROOT
        folder = "agents" if self.kind == "agent" else "channels"
        return f"{ROOT}/{folder}/{self.key}"

    @property
    def index_path(self) -> str:
        return f"{self.root}/{INDEX_NAME}"

    def topic_path(self, topic: str) -> str:
        return f"{self.root}/{check_topic(topic)}.md"

    @property
    def holder_id(self) -> int | None:
        """The id of the agent (``agent:<id>``) or the bot (``channel:<bot>-<hash>``) whose notes these are,
        as the id is written (no leading zero: ``agents/07`` names no agent); None for the user's notes."""
        if self.kind == "user":
            return None
        return whole_number(self.key if self.kind == "agent" else self.key.split("-", 1)[0], canonical=True)

    @property
    def label(self) -> str:
        return {"user": "your notes", "agent": f"agent {self.key}", "channel": f"conversation {self.key}"}[self.kind]

    @classmethod
    def user(cls) -> Scope:
        return cls("user")

    @classmethod
    def agent(cls, agent_id: int | str) -> Scope:
        return cls("agent", str(agent_id))

    @classmethod
    def channel(cls, binding_id: int | str, conversation_id: str) -> Scope:
        return cls("channel", channel_key(binding_id, conversation_id))


def channel_key(binding_id: int | str, conversation_id: str) -> str:
    """``<binding>-<hash>``: a short stable hash of the platform's conversation id."""
    digest = hashlib.sha256(str(conversation_id).encode()).hexdigest()[:12]
    return f"{binding_id}-{digest}"


#: Words that turn a note into its opposite, in the languages people write notes in, as ``topic_words`` reads
#: them (ASCII, "n't" closed up: "don't" is "dont", "não" is "nao"). A topic made from a note's words keeps
#: every one, wherever a stop-word list would drop it: "I don't eat meat" is ``dont-eat-meat``, never
#: ``eat-meat``; "I am not married" ``not-married``; "I no longer live in Rome" ``no-longer-live-rome``. With
#: them the few words that say a fact no longer holds: "I used to smoke" is ``used-smoke``, not ``smoke``.
#: Portuguese "no" ("in the") is kept too: a topic that reads "no" once too often says nothing false.
NEGATIONS = frozenset([
    # English
    "no", "not", "nor", "never", "neither", "none", "nothing", "nobody", "nowhere", "without", "cannot", "cant",
    "dont", "doesnt", "didnt", "isnt", "arent", "wasnt", "werent", "wont", "wouldnt", "shouldnt", "couldnt",
    "hasnt", "havent", "hadnt", "mustnt", "neednt", "aint", "used", "formerly", "anymore",
    # German
    "nicht", "kein", "keine", "keinen", "keinem", "keiner", "keines", "nie", "niemals", "nichts", "ohne", "weder",
    # French: "ne" (and "n'", read as "n") too, since without it "ne … plus" (no more) reads as "plus" (more)
    "ne", "n", "pas", "jamais", "rien", "aucun", "aucune", "sans", "ni",
    # Spanish, Italian, Portuguese
    "nunca", "jamas", "sin", "nada", "nadie", "ningun", "ninguna", "tampoco", "non", "mai", "senza", "niente",
    "nessun", "nessuno", "nessuna", "nao", "sem", "nenhum", "nenhuma", "nem",
])
#: How many words besides its negations name a topic made from a note.
TOPIC_WORDS = 3
_TOPIC_WORD = re.compile(r"[a-z0-9]+")


def topic_words(text: str, *, skip: Collection[str], join_apostrophes: bool = False) -> list[str]:
    """The words a topic made from ``text`` is named with: in ASCII lower case (accents dropped; a letter
    with no ASCII form, as in 我 or 🐶, cannot be in a topic, ``TOPIC_RE``), the first ``TOPIC_WORDS`` that
    are not in ``skip``, with every negation among and right after them (``NEGATIONS``), so the topic never
    says the opposite of the note. "n't" is closed up ("don't" is "dont"); ``join_apostrophes`` closes up
    every other apostrophe too ("i'm" is "im"), else it splits a word ("j'habite" is "j", "habite")."""
    ascii_text = unicodedata.normalize("NFKD", text.replace("\u2019", "'")).encode("ascii", "ignore").decode().lower()
    ascii_text = ascii_text.replace("n't", "nt")
    if join_apostrophes:
        ascii_text = ascii_text.replace("'", "")
    words: list[str] = []
    named = 0
    for word in _TOPIC_WORD.findall(ascii_text):
        if word in NEGATIONS:
            words.append(word)
        elif named == TOPIC_WORDS:
            break
        elif word not in skip:
            words.append(word)
            named += 1
    return words


def check_topic(topic: object) -> str:
    if not isinstance(topic, str) or not TOPIC_RE.match(topic) or topic == INDEX_TOPIC:
        raise InvalidInput(
            "a topic is 1-40 of the ASCII lower-case letters a-z, digits 0-9 or dashes (and not 'index')",
            code="invalid_topic",
        )
    return topic


@dataclass(frozen=True)
class NotePath:
    """A parsed memory path: its scope and either the index or one topic."""

    scope: Scope
    topic: str | None  # None: the index

    @property
    def path(self) -> str:
        return self.scope.index_path if self.topic is None else self.scope.topic_path(self.topic)

    @property
    def is_index(self) -> bool:
        return self.topic is None


def parse_path(raw: object) -> NotePath:
    """Validate a file path from a client. Only memory files exist; anything else is a clear 400."""
    if not isinstance(raw, str) or not raw:
        raise InvalidInput("path is required", code="invalid_path")
    if len(raw) > PATH_MAX_CHARS or "\x00" in raw or "\\" in raw:
        raise InvalidInput("path is too long or holds a forbidden character", code="invalid_path")
    parts = raw.strip("/").split("/")
    if any(part in ("", ".", "..") for part in parts):
        raise InvalidInput("path may not contain empty, '.' or '..' parts", code="invalid_path")
    if parts[0] != ROOT:
        raise InvalidInput("notes live under Memory/", code="invalid_path")
    rest = parts[1:]
    if len(rest) == 1:
        scope = Scope.user()
    elif len(rest) == 3 and rest[0] in ("agents", "channels"):
        try:
            scope = Scope("agent" if rest[0] == "agents" else "channel", rest[1])
        except InvalidInput:
            raise InvalidInput(f"{rest[0]}/{rest[1]} is not a valid folder", code="invalid_path") from None
    else:
        raise InvalidInput(
            "a note path is Memory/<name>.md, Memory/agents/<id>/<name>.md or Memory/channels/<key>/<name>.md",
            code="invalid_path",
        )
    name = rest[-1]
    if not name.endswith(".md"):
        raise InvalidInput("a note file ends in .md", code="invalid_path")
    stem = name[:-3]
    if stem == INDEX_TOPIC:
        return NotePath(scope, None)
    try:
        return NotePath(scope, check_topic(stem))
    except InvalidInput:
        raise InvalidInput(f"{name!r} is not a topic file name (lower-case letters, digits, dashes)",
                           code="invalid_path") from None


def parse_folder(raw: object) -> str:
    """A folder for listings: ``Memory``, ``Memory/agents``, ``Memory/channels`` or a scope root
    (``Memory/agents/3``, ``Memory/channels/<key>``). Anything else is a 400, never a silent empty list."""
    if raw in (None, "", "/"):
        return ROOT
    if not isinstance(raw, str) or len(raw) > PATH_MAX_CHARS or "\x00" in raw or ".." in raw.split("/"):
        raise InvalidInput("not a folder path", code="invalid_path")
    cleaned = raw.strip("/")
    parts = cleaned.split("/")
    if parts[0] != ROOT:
        raise InvalidInput("notes live under Memory/", code="invalid_path")
    if len(parts) == 1:
        return cleaned
    if parts[1] in ("agents", "channels") and len(parts) == 2:
        return cleaned
    if parts[1] in ("agents", "channels") and len(parts) == 3:
        try:
            Scope("agent" if parts[1] == "agents" else "channel", parts[2])
        except InvalidInput:
            raise InvalidInput(f"{parts[1]}/{parts[2]} is not a valid folder", code="invalid_path") from None
        return cleaned
    raise InvalidInput("a folder is Memory, Memory/agents/<id> or Memory/channels/<key>", code="invalid_path")


@dataclass(frozen=True)
class IndexEntry:
    topic: str
    summary: str
    file: str | None  # the topic file named by the line, if any

    def line(self) -> str:
        tail = f" -> {self.file}.md" if self.file else ""
        return f"- {self.topic}: {self.summary}{tail}"

    def as_dict(self) -> dict:
        return {"topic": self.topic, "summary": self.summary, "file": f"{self.file}.md" if self.file else None}


def printable_line(text: str) -> str:
    """``text`` as one line that shows what it says: control characters (C0, DEL, C1, so no terminal escape
    sequence or bell), lone surrogates and line or paragraph separators become spaces; format characters go
    (bidi embeddings, overrides and isolates such as U+202E, zero-width spaces, the BOM), so a line cannot
    read differently from what it holds, except a zero-width (non-)joiner inside a word; runs of white
    space become one space."""
    return " ".join(printable_text(text).split())


def printable_text(text: str, *, keep: str = "") -> str:
    """``text`` by the rule of ``printable_line``, character by character, with its white space as it is:
    control characters (but those in ``keep``, such as a newline), lone surrogates and line or paragraph
    separators become spaces; format characters go, except a zero-width (non-)joiner inside a word."""
    kept: list[str] = []
    for index, char in enumerate(text):
        category = unicodedata.category(char)
        if category == "Cf":
            # The zero-width non-joiner and joiner spell words (Persian می‌خواهم, Indic conjuncts) and join
            # emoji: kept between two visible characters, dropped anywhere else.
            if char in "\u200c\u200d" and 0 < index < len(text) - 1 and not text[index - 1].isspace() \
                    and not text[index + 1].isspace():
                kept.append(char)
            continue
        if char in keep:
            kept.append(char)
            continue
        kept.append(" " if category in ("Cc", "Cs", "Zl", "Zp") else char)
    return "".join(kept)


def closed_details(details: str) -> str:
    """A topic file's text with its closing newline, unless the newline would take it past TOPIC_MAX_BYTES:
    the newline is the store's, and never makes details the Files page takes too large."""
    if details.endswith("\n") or len(details.encode()) >= TOPIC_MAX_BYTES:
        return details
    return details + "\n"


def clean_summary(summary: object) -> str:
    """One printable line (``printable_line``), no arrow that would confuse the parser. A summary cleaned is
    its own cleaning (arrows side by side, ``a -> -> b``, share a space: one pass leaves the second)."""
    if not isinstance(summary, str):
        raise InvalidInput("summary must be text", code="invalid_summary")
    text = printable_line(summary)
    while " -> " in text:
        text = text.replace(" -> ", " → ")
    if not text:
        raise InvalidInput("summary is empty", code="invalid_summary")
    if len(text) > SUMMARY_MAX_CHARS:
        raise InvalidInput(f"summary is longer than {SUMMARY_MAX_CHARS} characters; put details in the topic file",
                           code="summary_too_long")
    return text


def parse_index(text: str) -> list[IndexEntry]:
    """The entries of an index. Raises InvalidInput naming the first line that is not an entry.

    One write reads the same index text several times (the policy's look at the note, the write, recall's
    rows), and a turn reads the one its chat's index holds: the entries of recent texts are remembered per
    process (a 40-line index takes ~90 µs to parse). A new list each call; the entries are frozen."""
    return list(_parsed_index(text))


@functools.lru_cache(maxsize=256)
def _parsed_index(text: str) -> tuple[IndexEntry, ...]:
    entries: list[IndexEntry] = []
    seen: set[str] = set()
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        match = _INDEX_LINE_RE.match(line.rstrip())
        if not match:
            raise InvalidInput(
                f"line {number} is not an index entry; write '- topic: summary -> topic.md'",
                code="invalid_index_line",
            )
        topic = match["topic"]
        if topic in seen:
            raise InvalidInput(f"line {number}: topic {topic!r} is listed twice", code="duplicate_topic")
        seen.add(topic)
        entries.append(IndexEntry(topic, match["summary"].strip(), match["file"]))
    return tuple(entries)


def check_own_files(text: str, *, kept: Collection[IndexEntry] = ()) -> None:
    """Refuse (400 ``invalid_index_line``, naming the line) an index line whose arrow names another topic's
    file, as ``- alpha: … -> beta.md``: a note's details are its own topic file, ``<topic>.md``, the one every
    reader opens (the model's ``context_read``, recall, Undo, the Trash), so such a line would leave the note
    without its details and the file without its note. Lines in ``kept`` (the stored index's own) pass: one
    an older version let through must not block every other edit. (A line naming ``index.md`` has a
    refusal of its own.)"""
    for number, raw in enumerate(text.splitlines(), start=1):
        match = _INDEX_LINE_RE.match(raw.rstrip())
        if match is None or match["file"] in (None, match["topic"], INDEX_TOPIC):
            continue
        topic, file = match["topic"], match["file"]
        if IndexEntry(topic, match["summary"].strip(), file) in kept:
            continue
        raise InvalidInput(
            f"line {number}: the note {topic!r} names {file}.md, but a note's details are its own topic file, "
            f"{topic}.md; end the line with '-> {topic}.md' (the file named so), or leave the arrow out",
            code="invalid_index_line", details={"line": number, "topic": topic, "file": f"{file}.md"})


def render_index(entries: list[IndexEntry]) -> str:
    return "".join(entry.line() + "\n" for entry in entries)


def index_size(text: str) -> tuple[int, int]:
    """(lines, bytes) of an index as the caps count them: non-blank lines, UTF-8 bytes."""
    return sum(1 for line in text.splitlines() if line.strip()), len(text.encode())


def index_over_caps(lines: int, size: int) -> bool:
    """Whether an index of ``lines`` lines and ``size`` bytes (``index_size``) is past one of its caps."""
    return lines > INDEX_MAX_LINES or size > INDEX_MAX_BYTES
