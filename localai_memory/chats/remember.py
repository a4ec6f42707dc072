"""``/remember <fact>``: a note the person types in a chat, saved without asking the model.

Any chat that takes typed messages understands it (the web chat, ``POST /api/chats/{id}/messages``, the
OpenAI-compatible route and the bots), because ``chats.services.turn_run`` hands such a message here instead
of to the model. What happens to the note is the policy's (``memory.policy.decide_typed_note``): saved at
once with Undo when the person's own yes counts, a proposal when it waits for someone who may confirm, or
refused (memory off, a private chat, a chat that may not save). The answer is one line for the chat; the
turn's memory report carries the saved note (with its Undo) or the proposal, as for the model's notes.

The note's topic comes from the fact's first content words and its negations (``i live in Rome`` →
``live-rome``, ``I don't eat meat`` → ``dont-eat-meat``); a topic in use by another note gets a number. The
summary is the fact; a fact longer than an index line keeps its first words as the line and the whole text in
the topic file.
"""

from __future__ import annotations

import re

from django.db import transaction
from django.utils import timezone

from bridges.selectors import BOT_GONE_MESSAGE, bot_scope_gone
from localai_memory.agents.selectors import AGENT_GONE_MESSAGE, agent_scope_gone
from localai_memory.core.errors import InvalidInput
from localai_memory.memory import policy
from localai_memory.memory.models import Proposal
from localai_memory.memory.proposals import AlreadySaved
from localai_memory.memory.selectors import topics_in_use
from localai_memory.notes import paths
from localai_memory.notes import selectors as notes_selectors
from localai_memory.notes.models import ChangeSet
from localai_memory.notes.paths import SUMMARY_MAX_CHARS, Scope, clean_summary
from localai_memory.notes.services import (
    KEEP,
    CapExceeded,
    Forgotten,
    check_importance,
    importance_change,
    lock_owner,
    note_upsert,
)
from localai_memory.recall import service as recall_service
from localai_memory.recall.ranking import STOPWORDS

from .tools import ToolContext, already_saved, propose, refused

#: ``/remember`` then the fact. A command addressed to a bot by name (``/remember@my_bot`` in a Telegram
#: group) reaches here only as ``/remember`` when it named this bot: the adapter takes its own name off, and
#: a command for another bot is not for this one.
_COMMAND = re.compile(r"^\s*/remember(?=\s|$)(?P<fact>.*)\Z", re.IGNORECASE | re.DOTALL)
#: Words that say nothing about what a note is about, on top of recall's stopwords (a negation among them is
#: kept all the same: ``notes.paths.NEGATIONS``).
_FILLER = frozenset({"remember", "note", "that", "im", "ive", "id", "ill"})
_SKIP = STOPWORDS | _FILLER
TOPIC_MAX_CHARS = 40
USAGE = "Write what to remember after /remember, for example: /remember I live in Rome."


def parse(content: str) -> str | None:
    """The fact of a ``/remember`` message (``""`` when it names none), or None for any other message."""
    match = _COMMAND.match(content)
    return match["fact"].strip() if match else None


def topic_words(fact: str) -> list[str]:
    """The first content words of ``fact`` in ASCII lower case (accents dropped), with its negations
    (``notes.paths.topic_words``): a topic's parts."""
    return paths.topic_words(fact, skip=_SKIP, join_apostrophes=True)


def topic_for(fact: str, taken: set[str]) -> str:
    """A topic for ``fact`` that no other note of the scope uses: its first content words joined by dashes
    (``note`` when it has none; ``private-note`` when it looks like it holds a secret, which a topic, a file
    name shown everywhere, must not repeat), then ``-2``, ``-3``… when that topic is taken."""
    base = ("private-note" if policy.looks_secret(fact)
            else "-".join(topic_words(fact))[:TOPIC_MAX_CHARS].strip("-") or "note")
    taken = taken | {"index"}  # the index's own name
    topic, number = base, 1
    while topic in taken:
        number += 1
        suffix = f"-{number}"
        topic = base[:TOPIC_MAX_CHARS - len(suffix)].rstrip("-") + suffix
    return topic


def split_fact(fact: str) -> tuple[str, str | None]:
    """The index line and the topic file of ``fact``: the fact as the line when it fits, else its first
    words (cut at a word, with an ellipsis) as the line and the whole fact as the file."""
    line = " ".join(fact.split())
    if len(line) <= SUMMARY_MAX_CHARS:
        return clean_summary(line), None  # clean_summary: one line, no arrow; refuses an empty fact
    cut = line[:SUMMARY_MAX_CHARS - 1].rsplit(" ", 1)[0].rstrip(" ,;:.")
    return clean_summary(f"{cut}…"), fact + "\n"


def remember_run(*, ctx: ToolContext, fact: str) -> str:
    """Save, propose or refuse the typed ``fact`` as the policy says; the line the chat answers with. The
    turn's report (``ctx.report``) records the outcome as for a note of the model's."""
    if not fact:
        return USAGE
    sender = ctx.sender
    decision = policy.decide_typed_note(
        ctx.facts, policy.NoteFacts.of(fact, scope=None, saved_in_this_reply=0),
        sender_can_confirm=bool(sender and sender.can_confirm))
    if decision.outcome == "refuse" or decision.scope not in ctx.scopes:
        reason = decision.reason if decision.outcome == "refuse" else "scope_not_allowed"
        refused(ctx, None, reason, policy.MESSAGES[reason])
        return f"Nothing was saved. {policy.MESSAGES[reason]}"
    scope = ctx.scopes[decision.scope]
    summary, details = split_fact(fact)
    try:
        # The owner's lock from the first read to the write: two facts sent at once never get one topic, so
        # neither replaces the other.
        with transaction.atomic():
            lock_owner(ctx.chat.owner_id)
            return _save_or_propose(ctx, decision, scope, summary, details)
    except CapExceeded as exc:
        refused(ctx, None, exc.code, exc.message)
        return (f"Nothing was saved: {exc.message} Merge or forget a note on the Memory tab of your settings, "
                "then try again.")
    except InvalidInput as exc:  # a fact whose topic file would pass its cap
        refused(ctx, None, exc.code, exc.message)
        return f"Nothing was saved: {exc.message}"
    except Forgotten as exc:  # the person pressed Forget everything as this turn ran: it came first
        refused(ctx, None, exc.code, exc.message)
        return f"Nothing was saved. {exc.message}"


def _save_or_propose(ctx: ToolContext, decision: policy.NoteDecision, scope: Scope, summary: str,
                     details: str | None) -> str:
    owner_id = ctx.chat.owner_id
    if agent_scope_gone(owner_id=owner_id, scope=scope):  # deleted while this turn ran
        refused(ctx, None, "agent_deleted", AGENT_GONE_MESSAGE)
        return f"Nothing was saved. {AGENT_GONE_MESSAGE}"
    if bot_scope_gone(owner_id=owner_id, scope=scope):  # the same, for a bot's conversation
        refused(ctx, None, "bot_deleted", BOT_GONE_MESSAGE)
        return f"Nothing was saved. {BOT_GONE_MESSAGE}"
    entries = notes_selectors.index_entries(owner_id=owner_id, scope=scope)
    if details is None:
        same = next((e for e in entries if _same_words(e.summary, summary)), None)
        if same is not None:
            return _already(ctx, scope, same.topic, same.summary)
    taken = topics_in_use(owner_id=owner_id, scope=scope, entries=entries)
    topic = topic_for(summary if details is None else details, taken)
    duplicate = recall_service.find_duplicate(owner_id=owner_id, scope=scope, topic=topic, summary=summary,
                                              details=details)
    if duplicate is not None:
        return _already(ctx, scope, duplicate.topic, duplicate.summary)
    if decision.outcome == "save_now":
        return _save(ctx, scope, topic, summary, details)
    try:
        return _propose(ctx, decision, scope, topic, summary, details)
    except AlreadySaved as exc:
        return _already(ctx, scope, topic, summary, exc.message)


@transaction.atomic
def note_add(*, owner_id: int, scope: Scope, summary: object, details: str | None = None,
             importance: object = KEEP, source: str, actor: str = "you") -> tuple[ChangeSet | None, str]:
    """A note its owner adds without naming a topic (the Memory tab, ``memory add "<fact>"``, ``POST
    /api/chats/memory/notes``): saved at once, as any note the owner writes, under a topic made from its
    first content words as for ``/remember`` (chosen under the owner's lock, so two notes added at once never
    share one), with ``importance`` in the same change set when one is given. Returns the change set and the
    topic; ``(None, topic)`` when the scope has this line already (nothing is written). Bad text or a bad
    importance is a 400 before anything is written, past a cap the store's 422."""
    weight = None if importance is KEEP else check_importance(importance)
    summary = clean_summary(summary)
    lock_owner(owner_id)
    entries = notes_selectors.index_entries(owner_id=owner_id, scope=scope)
    same = next((e for e in entries if _same_words(e.summary, summary)), None)
    if same is not None:
        return None, same.topic
    topic = topic_for(summary, topics_in_use(owner_id=owner_id, scope=scope, entries=entries))
    change = note_upsert(owner_id=owner_id, scope=scope, topic=topic, summary=summary, details=details,
                         source=source, actor=actor)
    if weight is not None:
        importance_change(owner_id=owner_id, scope=scope, topic=topic, importance=weight, change=change,
                          source=source, actor=actor)
    return change, topic


def _same_words(one: str, other: str) -> bool:
    """Two lines in the same words: case, spacing and the full stop at the end aside."""

    def words(text: str) -> str:
        return " ".join(text.casefold().split()).rstrip(" .!")

    return words(one) == words(other)


def free_topic(owner_id: int, scope: Scope, text: str) -> str:
    """A topic for a new note of ``text`` that no note, stray topic file or waiting proposal of the scope
    holds (``topic_for``)."""
    entries = notes_selectors.index_entries(owner_id=owner_id, scope=scope)
    return topic_for(text, topics_in_use(owner_id=owner_id, scope=scope, entries=entries))


def _already(ctx: ToolContext, scope: Scope, topic: str, summary: str, message: str = "") -> str:
    message = message or f"That is already in memory: \u201c{summary}\u201d ({topic})."
    return already_saved(ctx, scope.kind, topic, summary, message)["message"]


def _actor(ctx: ToolContext) -> str:
    return f"{ctx.sender.display} with /remember" if ctx.sender else "you with /remember"


def _save(ctx: ToolContext, scope: Scope, topic: str, summary: str, details: str | None) -> str:
    """Save the typed note at once. Its change set records the end of the chat's Undo that the answer
    promises (``undo_until``, 30 minutes), as the audit shows it; it is not ``automatic`` (the model's own
    save without a confirmation): the person typed it, so it can still be undone later, as their own edit."""
    undo_until = timezone.now() + policy.UNDO_WINDOW
    change = note_upsert(owner_id=ctx.chat.owner_id, scope=scope, topic=topic, summary=summary, details=details,
                         source=ChangeSet.Source.CHAT, actor=_actor(ctx), chat_id=ctx.chat.pk,
                         read_after=ctx.read_after, undo_until=undo_until)
    ctx.report["saved"].append({"change_id": change.pk, "topic": topic, "scope": scope.kind, "summary": summary,
                                "undo_until": undo_until.isoformat(), "typed": True,
                                "before": None})  # a typed note takes a topic no note holds: it replaces none
    return f"Saved to memory: \u201c{summary}\u201d ({topic}). {policy.MESSAGES['typed_note']}"


def _propose(ctx: ToolContext, decision: policy.NoteDecision, scope: Scope, topic: str, summary: str,
             details: str | None) -> str:
    propose(ctx, decision, scope, topic, summary, details, False, source=Proposal.Source.CHAT)
    return f"Not saved yet: \u201c{summary}\u201d ({topic}). {decision.message}"
