"""What kind of note a note is, and whom and what the notes name: the user's profile at a glance.

A note's category is read from its words, never stored: ``credential`` (it looks like it holds a secret,
``policy.looks_secret``), ``decision`` (a choice made or a plan), ``preference`` (likes, dislikes, habits),
``skill`` (what the person can do or speaks), ``project`` (what they build or work on), ``identity`` (who they
are: name, home, work, family) and ``fact`` for anything else. The first that matches wins, in that order.
The patterns are English and German (the peer plugin's languages), a heuristic like the peer's: a note
can fit two kinds, and one that fits none is a fact.

Entities are the names the notes mention (capitalised words past the start of a sentence: "Rome", "Marco",
"Acme Corp"), counted over the notes, with the topics they appear in.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .policy import looks_secret

CATEGORIES: tuple[str, ...] = ("credential", "decision", "preference", "skill", "project", "identity", "fact")


def _words(*patterns: str) -> re.Pattern[str]:
    return re.compile(r"(?<![\w])(?:" + "|".join(patterns) + r")(?![\w])", re.IGNORECASE)


_KINDS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("decision", _words(r"decided", r"decides", r"decision", r"chose", r"chosen", r"will", r"going to", r"plans?",
                        r"planned", r"planning", r"intends?", r"agreed", r"entschieden", r"entscheidung",
                        r"geplant", r"plant", r"wird", r"werden", r"vorhaben")),
    ("preference", _words(r"prefers?", r"preferred", r"likes?", r"liked", r"loves?", r"enjoys?", r"hates?",
                          r"dislikes?", r"favou?rite", r"always", r"never", r"rather", r"avoids?", r"allergic",
                          r"vegan", r"vegetarian", r"drinks", r"eats", r"usually", r"every (?:day|morning|evening|night|week)",
                          r"bevorzugt?", r"bevorzuge", r"liebe", r"hasse", r"trinke", r"esse", r"mag", r"liebt", r"lieber", r"immer", r"nie",
                          r"hasst", r"lieblings\w*")),
    ("skill", _words(r"can", r"knows?", r"speaks?", r"fluent", r"skills?", r"skilled", r"experienced",
                     r"expert", r"good at", r"learning", r"learns?", r"kann", r"können", r"spricht", r"spreche", r"lerne", r"fähig",
                     r"beherrscht")),
    ("project", _words(r"projects?", r"building", r"builds?", r"deploys?", r"deployed", r"deploying", r"repo",
                       r"repository", r"working on", r"works on", r"launch(?:es|ed|ing)?", r"release",
                       r"projekt\w*", r"baut", r"entwickelt")),
    ("identity", _words(r"name", r"named", r"called", r"lives?", r"lived", r"born", r"birthday", r"age[ds]?",
                        r"years old", r"works? (?:as|at|for)", r"job", r"married", r"wife", r"husband",
                        r"partner", r"daughter", r"son", r"children", r"kids?", r"brother", r"sister",
                        r"mother", r"father", r"parents?", r"home", r"heißt", r"wohnt", r"geboren",
                        r"arbeitet", r"verheiratet", r"ich bin", r"i am", r"i'm", r"wohne", r"heiße", r"heisse",
                        r"arbeite", r"bin")),
)

#: Capitalised words that are not names, wherever they stand.
_NOT_NAMES = frozenset(["i", "i'm", "i've", "i'd", "i'll", "a", "an", "the", "this", "that", "these", "those", "my", "our", "your", "his", "her", "their", "its", "he", "she", "they", "we", "you", "it", "mr", "mrs", "ms", "dr", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday", "january", "february", "march", "april", "may", "june", "july", "august", "september", "october", "november", "december", "note", "notes", "also", "and", "but", "or", "if", "when", "then", "so", "yes", "no", "ok", "ich", "du", "er", "sie", "es", "wir", "ihr", "der", "die", "das", "ein", "eine", "mein", "meine", "und", "oder", "aber"])
#: Words a note often starts with that are no names ("Has a cat", "Usually walks"), beside the categories' own.
_STARTERS = frozenset(["has", "had", "is", "was", "are", "were", "be", "been", "wants", "needs", "uses", "used", "usually", "often", "sometimes", "rarely", "still", "currently", "now", "allergic", "brother", "sister", "mother", "father", "wife", "husband", "partner", "son", "daughter", "friend", "cat", "dog", "favourite", "favorite", "owns", "drives", "reads", "writes", "runs", "eats", "drinks", "goes", "went", "visits", "visited", "moved", "moving"])
_NAME = re.compile(r"\b[A-ZÀ-ÖØ-Þ][\w'’-]*(?:[ \t]+(?:of[ \t]+|de[ \t]+|von[ \t]+)?[A-ZÀ-ÖØ-Þ][\w'’-]*)*")
_HEADING = re.compile(r"(?m)^[ \t]*#+[ \t].*$")
_SENTENCE_END = re.compile(r"(?:^|[.!?]\s+|\n)\s*(?:[-*]\s*)?$")  # a sentence, a line or a list item


def _starts_sentence_only(word: str) -> bool:
    """Whether a capitalised first word of a sentence is capitalised only for that: a common word."""
    lower = word.lower()
    return (lower in _NOT_NAMES or lower in _STARTERS or lower.endswith(("ing", "ed"))
            or any(pattern.fullmatch(lower) for _, pattern in _KINDS))


def category_of(summary: str, details: str = "") -> str:
    """The kind of a note, read from its line and its details (see the module docstring)."""
    text = f"{summary}\n{details}"
    if looks_secret(text):
        return "credential"
    for kind, pattern in _KINDS:
        if pattern.search(summary) or (details and pattern.search(details)):
            return kind
    return "fact"


def names_in(text: str) -> list[str]:
    """The names ``text`` mentions: runs of capitalised words ("Rome", "Acme Corp"), leaving out a
    sentence's first word when it is a common word capitalised for that ("Likes tea" names nothing)."""
    found: list[str] = []
    text = _HEADING.sub("", text)  # a markdown heading is the file's structure, not a name
    for match in _NAME.finditer(text):
        words = match.group(0).split()
        # What stands just before the run says whether it starts a sentence (a short look, not a rescan).
        starts = match.start() == 0 or _SENTENCE_END.search(text, max(0, match.start() - 8), match.start())
        if words and starts and _starts_sentence_only(words[0]):
            words = words[1:]  # capitalised because it starts the sentence ("Likes tea", "Has a cat")
        while words and words[0].lower() in _NOT_NAMES:
            words = words[1:]
        name = " ".join(words).strip("'’-")
        if name and name.lower() not in _NOT_NAMES and len(name) > 1:
            found.append(name)
    return found


@dataclass(frozen=True)
class ProfileNote:
    scope: str
    topic: str
    summary: str
    details: str = ""


@dataclass(frozen=True)
class Profile:
    """Every kind (in ``CATEGORIES`` order, empty ones too) with its notes, and the names mentioned most."""

    categories: dict[str, list[dict[str, str]]]
    entities: list[dict[str, Any]]

    def as_dict(self) -> dict[str, Any]:
        return {"categories": self.categories, "entities": self.entities}


def profile(notes: Iterable[ProfileNote], *, entities: int = 30) -> Profile:
    """The notes by category and the ``entities`` names mentioned most, each with how many notes name it
    and their topics."""
    by_kind: dict[str, list[dict[str, str]]] = {kind: [] for kind in CATEGORIES}
    named: dict[str, tuple[str, list[str]]] = {}  # casefolded name → (name as first written, topics)
    for note in notes:
        by_kind[category_of(note.summary, note.details)].append(
            {"scope": note.scope, "topic": note.topic, "summary": note.summary})
        for name in dict.fromkeys(names_in(f"{note.summary}\n{note.details}")):
            named.setdefault(name.casefold(), (name, []))[1].append(note.topic)
    ranked = sorted(named.values(), key=lambda item: (-len(item[1]), item[0].casefold()))
    return Profile(categories=by_kind,
                   entities=[{"name": name, "notes": len(topics), "topics": topics} for name, topics in ranked[:entities]])
