"""Best-effort reading of the small JSON a model answers consolidation with. Pure: no I/O.

Small local models are not airtight: the JSON may come bare, fenced (```json … ```), wrapped in chatter
("Sure! Here is the JSON: … Hope that helps"), as a bare list of facts, with single-line comments or trailing
commas. Everything that can be recovered is; what cannot is an empty reply (no facts, no summary), never an
exception. Whatever the model says is data: this module only reads fields, it never acts on them.
"""

from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import dataclass, field
from typing import Any

from localai_memory.core.parsers import json_loads
from localai_memory.memory.policy import looks_secret
from localai_memory.notes.paths import SUMMARY_MAX_CHARS, TOPIC_RE, printable_line, topic_words

ACTIONS = ("add", "update", "delete", "noop")
_ACTION_WORDS = {
    "add": "add", "new": "add", "create": "add", "insert": "add", "save": "add", "remember": "add",
    "update": "update", "change": "update", "modify": "update", "replace": "update", "edit": "update",
    "delete": "delete", "remove": "delete", "forget": "delete",
    "noop": "noop", "no_op": "noop", "no-op": "noop", "none": "noop", "keep": "noop", "skip": "noop",
}
_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_-]*)[ \t]*\n?(.*?)```", re.DOTALL)
_TRAILING_COMMA = re.compile(r",(\s*[}\]])")
_LINE_COMMENT = re.compile(r"^\s*//.*$", re.MULTILINE)
#: Words a topic made from a fact leaves out, in the languages people write notes in (as ``slugify`` folds
#: them to ASCII: "für" is "fur", "à" is "a"); none that also carries meaning in English ("die", "son", "war"),
#: and no negation: ``topic_words`` keeps those whatever this list says (``notes.paths.NEGATIONS``).
_STOP = frozenset([
    "a", "an", "the", "is", "are", "was", "be", "of", "to", "in", "on", "at", "for", "and", "or", "my", "i", "me",
    "user", "user's", "their", "his", "her",
    "m", "s", "re", "ve", "ll",  # what an apostrophe leaves of "I'm", "user's", "we're", "I've", "I'll"
    # German
    "ich", "mein", "meine", "meinen", "meinem", "meiner", "bin", "ist", "sind", "der", "das", "dem", "des", "ein",
    "eine", "einen", "einem", "und", "oder", "im", "am", "auf", "mit", "zu", "zum", "zur", "von", "vom", "fur",
    "bei", "nach",
    # French
    "je", "j", "mon", "ma", "mes", "le", "la", "les", "l", "un", "une", "du", "de", "d", "et", "ou", "est",
    "suis", "au", "aux", "en", "dans", "sur", "pour", "avec",
    # Spanish, Italian, Portuguese
    "yo", "mi", "mis", "el", "los", "las", "una", "y", "es", "soy", "estoy", "del", "con", "por", "para", "al",
    "io", "il", "lo", "gli", "di", "da", "sono", "mio", "mia", "eu", "o", "os", "um", "do", "na", "sou",
    "meu", "minha",
])
DETAILS_MAX_CHARS = 2000
#: The topic of a suggestion the reply gave no name for (``Candidate.topic``).
UNNAMED = ""


@dataclass(frozen=True)
class Candidate:
    """One fact the model suggests: what to do with which topic."""

    action: str  # add, update, delete, noop
    #: A valid slug; "" for an add whose reply named no topic and whose summary has no ASCII word to name it by
    #: (a fact written in Russian, Greek, Chinese…): the pass gives it a topic nothing holds (``UNNAMED``).
    topic: str
    summary: str  # one line ("" for a delete)
    details: str = ""


@dataclass(frozen=True)
class ParsedReply:
    candidates: list[Candidate] = field(default_factory=list)
    summary: str = ""  # the episodic one-liner, "" when none
    recovered: bool = False  # some JSON was found


def _loads(text: str) -> Any:
    try:
        return json_loads(text)
    except ValueError:
        pass
    cleaned = _TRAILING_COMMA.sub(r"\1", _LINE_COMMENT.sub("", text))
    return json_loads(cleaned)


def _json_values(text: str) -> list[Any]:
    """Every JSON object or list that can be read out of ``text``, the most likely first."""
    found: list[Any] = []
    attempts: list[str] = [text.strip()]
    attempts += [body.strip() for _, body in _FENCE.findall(text)]
    for attempt in attempts:
        if not attempt:
            continue
        try:
            found.append(_loads(attempt))
        except ValueError:
            continue
    if found:
        return found
    decoder = json.JSONDecoder()
    for start, char in enumerate(text):
        if char not in "{[":
            continue
        try:
            value, _ = decoder.raw_decode(text, start)
        except ValueError:
            # try once more with trailing commas and // comments dropped, up to the last matching bracket
            end = text.rfind("}" if char == "{" else "]")
            if end <= start:
                continue
            try:
                value = _loads(text[start:end + 1])
            except ValueError:
                continue
        if isinstance(value, (dict, list)):
            found.append(value)
            if isinstance(value, dict) and ("facts" in value or "summary" in value):
                break
    return found


def one_line(value: object, limit: int = SUMMARY_MAX_CHARS) -> str:
    """Text as one printable line, at most ``limit`` characters (cut at a word)."""
    if not isinstance(value, str):
        return ""
    text = printable_line(value).replace(" -> ", " → ")
    if len(text) > limit:
        text = text[: limit - 1].rsplit(" ", 1)[0].rstrip(" ,;:") + "…"
    return text


def slugify(value: object, fallback: str = "") -> str:
    """A topic slug (``[a-z0-9-]{1,40}``) from the model's topic, else from the first words of ``fallback``."""
    for source in (value, fallback):
        if not isinstance(source, str):
            continue
        if source is fallback:
            if looks_secret(source):  # a topic is a file name shown everywhere: never the secret's words
                return "private-note"
            words = topic_words(source, skip=_STOP)  # its negations kept: "dont-eat-meat", never "eat-meat"
        else:
            ascii_text = unicodedata.normalize("NFKD", source).encode("ascii", "ignore").decode().lower()
            words = re.findall(r"[a-z0-9]+", ascii_text)
        slug = "-".join(words)[:40].strip("-")
        if slug and slug != "index" and TOPIC_RE.match(slug):
            return slug
    return ""


def _candidate(raw: object) -> Candidate | None:
    if isinstance(raw, str):
        summary = one_line(raw)
        return Candidate("add", slugify(None, summary), summary) if summary else None
    if not isinstance(raw, dict):
        return None
    summary = one_line(raw.get("summary") or raw.get("fact") or raw.get("text") or raw.get("content") or "")
    topic = slugify(raw.get("topic") or raw.get("key") or raw.get("name"), summary)
    action = _ACTION_WORDS.get(str(raw.get("action") or raw.get("op") or raw.get("event") or "").strip().lower())
    if raw.get("delete") is True:
        action = "delete"
    details_raw = raw.get("details")
    details = details_raw.strip()[:DETAILS_MAX_CHARS] if isinstance(details_raw, str) else ""
    if not topic:
        # Nothing to name it by but a script a topic cannot hold: a new note still (it cannot name one to
        # change or forget), never a fact lost for its language. A delete or a noop names no note here.
        return Candidate("add", UNNAMED, summary, details) if summary and action in (None, "add", "update") else None
    if action == "delete":
        return Candidate("delete", topic, "", "")
    if action == "noop":
        return Candidate("noop", topic, summary, "")
    if not summary:
        return None
    return Candidate(action or "add", topic, summary, details)


def parse_reply(text: str | None) -> ParsedReply:
    """The candidate facts and the episodic summary in a model's reply; empty when nothing is readable."""
    if not text or not text.strip():
        return ParsedReply()
    for value in _json_values(text):
        facts_raw: object
        summary_raw: object = ""
        if isinstance(value, list):
            facts_raw = value
        elif isinstance(value, dict):
            facts_raw = value.get("facts", value.get("memories", value.get("candidates", [])))
            summary_raw = value.get("summary") or value.get("episode") or value.get("session_summary") or ""
            if isinstance(summary_raw, dict):
                summary_raw = summary_raw.get("text", "")
            if not isinstance(facts_raw, list) and ("topic" in value or "fact" in value):
                facts_raw = [value]
                summary_raw = ""
        else:
            continue
        candidates = [c for c in (_candidate(item) for item in (facts_raw if isinstance(facts_raw, list) else []))
                      if c is not None]
        return ParsedReply(candidates=candidates, summary=one_line(summary_raw, 160), recovered=True)
    return ParsedReply()
