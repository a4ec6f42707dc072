"""What kind of note a note is, and whom and what the notes name: the user's profile at a glance.

A note's category is read from its words, never stored: ``credential`` (it looks like it holds a secret,
``policy.looks_secret``), ``decision`` (a choice made or a plan), ``preference`` (likes, dislikes, habits),
``skill`` (what the person can do or speaks), ``project`` (what they build or work on), ``identity`` (who they
are: name, home, work, family) and ``fact`` for anything else. The first that matches wins, in that order.
The patterns are English and German (the peer plugin's languages), a heuristic like the peer's: a note
can fit two kinds, and one that fits none is a fact.

Entities are the names the notes mention (capitalised words past the start of a sentence: "Rome", "Marco",
"Acme Corp"), counted over the notes, with the topics they appear in. German capitalises every noun and,
like French, often starts a note with a verb, so in a note that reads as German or French (a few of their
common function words, ``_language``) a sentence's first word is a name only if some note also capitalises
it elsewhere, and in a German note a lone capitalised word only if two notes or more mention it or it looks
like a name by itself (after "heißt" or "in", or "BMW"); see ``names_in`` and ``profile``.
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
                          r"bevorzugt?", r"bevorzuge", r"liebe", r"hasse", r"trinke", r"trinkt", r"esse", r"isst", r"mag", r"liebt",
                          r"lieber", r"immer", r"nie", r"hasst", r"lieblings\w*", r"allergisch", r"vegetarisch",
                          r"vegetarier(?:in)?", r"meidet", r"normalerweise", r"meistens",
                          r"jeden (?:tag|morgen|abend)")),
    ("skill", _words(r"can", r"knows?", r"speaks?", r"fluent", r"skills?", r"skilled", r"experienced",
                     r"expert", r"good at", r"learning", r"learns?", r"kann", r"können", r"spricht", r"spreche", r"lerne",
                     r"lernt", r"fähig", r"beherrscht")),
    ("project", _words(r"projects?", r"building", r"builds?", r"deploys?", r"deployed", r"deploying", r"repo",
                       r"repository", r"working on", r"works on", r"launch(?:es|ed|ing)?", r"release",
                       r"projekt\w*", r"baut", r"entwickelt")),
    ("identity", _words(r"name", r"named", r"called", r"lives?", r"lived", r"born", r"birthday", r"age[ds]?",
                        r"years old", r"works? (?:as|at|for)", r"job", r"married", r"wife", r"husband",
                        r"partner", r"daughter", r"son", r"children", r"kids?", r"brother", r"sister",
                        r"mother", r"father", r"parents?", r"home", r"heißt", r"wohnt", r"geboren",
                        r"arbeitet", r"verheiratet", r"ich bin", r"i am", r"i'm", r"wohne", r"heiße", r"heisse",
                        r"arbeite", r"bin", r"lebt", r"lebe")),
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


#: Words of German and of French notes (as written, in lower case; none of them English): a note with one
#: reads as that language. German capitalises every noun, so a capitalised word there says little; in both, a
#: sentence's capitalised first word is as often a verb ("Trinkt morgens Kaffee", "Habite à Paris").
_GERMAN = frozenset(["und", "das", "dem", "ein", "eine", "einen", "einem", "einer", "ist", "sind", "mit",
                     "nicht", "kein", "keine", "keinen", "keinem", "keiner", "zum", "zur", "im", "vom", "beim",
                     "auf", "für", "gegen", "bei", "ich", "Ich", "sich", "sehr", "gern", "gerne", "auch", "oder",
                     "aber", "nach", "nur", "noch", "zu", "seit", "ohne"])
_FRENCH = frozenset(["à", "le", "la", "les", "du", "des", "une", "au", "aux", "avec", "chez", "pas", "ne",
                     "dans", "sur", "je", "il", "elle", "très", "est", "sont", "mon", "ma", "mes", "sa", "ses"])
#: Words after which a capitalised word of a German note is a name ("heißt Marco", "wohnt in Berlin").
_GERMAN_NAME_CUES = frozenset(["heißt", "heisst", "namens", "genannt", "in", "nach", "aus"])
_LETTERS = re.compile(r"[^\W\d_]+")
_LAST_WORD = re.compile(r"([^\W_]+)\W*$")


def _language(text: str) -> str:
    """``de``, ``fr`` or ``en`` (anything else): the note's function words say which."""
    words = set(_LETTERS.findall(text))
    if words & _GERMAN:
        return "de"
    return "fr" if words & _FRENCH else "en"


@dataclass(frozen=True, slots=True)
class _Mention:
    """A capitalised word or run in one note. ``first``: alone at a sentence's start in a German or French
    note, so perhaps a verb ("Habite"); ``common``: one word of a German note that may be any noun ("Kaffee")."""

    name: str
    first: bool = False
    common: bool = False


def _mentions(text: str) -> list[_Mention]:
    found: list[_Mention] = []
    text = _HEADING.sub("", text)  # a markdown heading is the file's structure, not a name
    language = _language(text)
    for match in _NAME.finditer(text):
        words = match.group(0).split()
        # What stands just before the run says whether it starts a sentence (a short look, not a rescan).
        starts = match.start() == 0 or bool(_SENTENCE_END.search(text, max(0, match.start() - 8), match.start()))
        before = _LAST_WORD.search(text, max(0, match.start() - 20), match.start())
        previous = before.group(1) if before else ""
        if words and starts and _starts_sentence_only(words[0]):
            previous = words.pop(0)  # capitalised because it starts the sentence ("Likes tea", "Has a cat")
            starts = False
        while words and words[0].lower() in _NOT_NAMES:
            previous, starts = words.pop(0), False
        if words and starts and language != "en" and (len(words) == 1 or language == "de"):
            found.append(_Mention(words[0], first=True, common=language == "de"))
            previous = words.pop(0)
        name = " ".join(words).strip("'’-")
        if not name or name.lower() in _NOT_NAMES or len(name) < 2:
            continue
        common = (language == "de" and len(words) == 1 and previous.lower() not in _GERMAN_NAME_CUES
                  and not any(char.isupper() or char.isdigit() for char in name[1:]))
        found.append(_Mention(name, common=common))
    return [mention for mention in found if mention.name.lower() not in _NOT_NAMES and len(mention.name) > 1]


def names_in(text: str) -> list[str]:
    """The names ``text`` mentions: runs of capitalised words ("Rome", "Acme Corp"), leaving out a
    sentence's first word when it is a common word capitalised for that ("Likes tea" names nothing).

    In a German or French note (``_language``) a sentence's first word is left out when it stands alone (in
    German also when it starts a run), and in a German note a lone capitalised word is a name only after
    "heißt", "namens", "genannt", "in", "nach" or "aus", or with a capital or a digit past its first letter
    ("BMW"). ``profile`` gives such words a second look across all the notes."""
    return [mention.name for mention in _mentions(text) if not mention.first and not mention.common]


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
    mentions: list[tuple[str, list[_Mention]]] = []
    noted: dict[str, int] = {}  # casefolded word → how many notes mention it, counted or not
    inside: set[str] = set()  # casefolded words capitalised somewhere not as a sentence's first word
    for note in notes:
        by_kind[category_of(note.summary, note.details)].append(
            {"scope": note.scope, "topic": note.topic, "summary": note.summary})
        found = _mentions(f"{note.summary}\n{note.details}")
        mentions.append((note.topic, found))
        for key in {mention.name.casefold() for mention in found}:
            noted[key] = noted.get(key, 0) + 1
        inside.update(mention.name.casefold() for mention in found if not mention.first)
    named: dict[str, tuple[str, list[str]]] = {}  # casefolded name → (name as first written, topics)
    for topic, found in mentions:
        counted: set[str] = set()
        for mention in found:
            key = mention.name.casefold()
            # A sentence's first word only where it is capitalised elsewhere too, a German word that may
            # be any noun only where two notes or more mention it.
            if key in counted or (mention.first and key not in inside) or (mention.common and noted[key] < 2):
                continue
            counted.add(key)
            named.setdefault(key, (mention.name, []))[1].append(topic)
    ranked = sorted(named.values(), key=lambda item: (-len(item[1]), item[0].casefold()))
    return Profile(categories=by_kind,
                   entities=[{"name": name, "notes": len(topics), "topics": topics} for name, topics in ranked[:entities]])
