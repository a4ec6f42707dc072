"""Reads for memory growth: the stats and profile of a user's memory, who wrote a note, the facts of a run.

``memory_stats`` is what the Memory tab, ``GET /api/chats/memory/stats``, ``manage.py memory stats`` and the
MCP tool ``memory_stats`` show: per scope the lines and bytes against the caps, the topics, the proposals
waiting and the last change. Everything here is scoped to one owner.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Count, Q
from django.utils import timezone

from localai_memory.agents.selectors import agent_names
from localai_memory.core.errors import InvalidInput
from localai_memory.memory import policy
from localai_memory.memory.models import Proposal
from localai_memory.memory.selectors import MemoryState, memory_state
from localai_memory.notes.models import ChangeSet, FileChange, NoteFile, TrashEntry
from localai_memory.notes.paths import (
    INDEX_MAX_BYTES,
    INDEX_MAX_LINES,
    ROOT,
    TURN_INDEXES_MAX_BYTES,
    IndexEntry,
    Scope,
    index_size,
    parse_index,
)

from .models import ConsolidationRun

#: A note's author as trust is concerned: a person (typed, accepted, restored), the model on its own, an import.
Author = str  # "user" | "model" | "import"


@dataclass(frozen=True)
class NoteWritten:
    """Who last changed a note, its index line or its topic file, and when (``line_writers``).

    ``model_only``: the lookback shows who wrote the line, and every change it shows of the line or the file
    is the model's own; a note a person typed, imported, confirmed or restored, even only its details, is not.
    """

    author: Author
    at: datetime
    model_only: bool
    change_id: int = 0  # the change set of that last change


def written_json(last: NoteWritten | None) -> dict[str, str | None]:
    """A note's ``written_by`` (``user``, ``model`` or ``import``) and ``written_at`` (ISO 8601) for the API,
    the terminal's JSON and the MCP tools; both None when its history is too old to tell."""
    return {"written_by": last.author if last else None, "written_at": last.at.isoformat() if last else None}


def _scope_of_path(path: str) -> Scope:
    parts = path.split("/")
    if len(parts) == 2:
        return Scope.user()
    return Scope("agent" if parts[1] == "agents" else "channel", parts[2])


def owner_scopes(*, owner_id: int) -> list[Scope]:
    """Every scope of the owner that holds files, plus the user's own and each live agent's."""
    roots = {_scope_of_path(path) for path in NoteFile.objects.filter(owner_id=owner_id, path__startswith=ROOT + "/")
             .values_list("path", flat=True)}
    roots |= {Scope.user()} | {Scope.agent(key) for key in agent_names(owner_id)}
    order = {"user": 0, "agent": 1, "channel": 2}
    return sorted(roots, key=lambda s: (order[s.kind], len(s.key), s.key))


def _change_json(change: ChangeSet | None) -> dict[str, Any] | None:
    if change is None:
        return None
    return {"id": change.pk, "at": change.created_at.isoformat(), "source": change.source,
            "summary": change.summary, "actor": change.actor}


def _scope_files_filter(scope: Scope) -> Q:
    if scope.kind == "user":
        return Q(path__regex=r"^Memory/[^/]+$")
    return Q(path__startswith=scope.root + "/")


def memory_stats(*, owner_id: int, state: MemoryState | None = None) -> dict[str, Any]:
    """The stats and profile of the owner's memory (works while memory is off).

    ``scopes``: per scope ``lines``/``bytes`` of its index against ``max_lines``/``max_bytes``, its topics
    (the profile: each index line), how many topic files, proposals waiting and its last change.
    ``totals`` adds them up; the indexes of one turn together hold at most ``turn_max_bytes``.
    """
    state = state or memory_state(user_id=owner_id)
    names = agent_names(owner_id)
    files = list(NoteFile.objects.filter(owner_id=owner_id, path__startswith=ROOT + "/").only("path", "content"))
    now = timezone.now()
    pending = (Proposal.objects.filter(owner_id=owner_id, status=Proposal.Status.PENDING, expires_at__gt=now)
               .values("scope_kind", "scope_key").annotate(n=Count("id")))
    pending_by_scope = {(row["scope_kind"], row["scope_key"]): row["n"] for row in pending}
    scopes: list[dict[str, Any]] = []
    for scope in owner_scopes(owner_id=owner_id):
        mine = [f for f in files if _scope_of_path(f.path) == scope]
        index = next((f for f in mine if f.path == scope.index_path), None)
        entries: list[IndexEntry] = []
        valid = True
        if index is not None:
            try:
                entries = parse_index(index.content)
            except InvalidInput:
                valid = False
        lines, size = index_size(index.content) if index is not None else (0, 0)
        sizes = {f.path: len(f.content.encode()) for f in mine}
        last_file = (FileChange.objects.filter(_scope_files_filter(scope), change_set__owner_id=owner_id)
                     .select_related("change_set").order_by("-change_set__created_at", "-change_set_id").first())
        last = last_file.change_set if last_file else None
        scopes.append({
            "kind": scope.kind,
            "key": scope.key,
            "label": "Yours" if scope.kind == "user" else names.get(scope.key, scope.label),
            "deleted_agent": scope.kind == "agent" and scope.key not in names,
            "index_path": scope.index_path,
            "lines": lines,
            "max_lines": INDEX_MAX_LINES,
            "bytes": size,
            "max_bytes": INDEX_MAX_BYTES,
            "full": lines >= INDEX_MAX_LINES or size >= INDEX_MAX_BYTES,
            "index_valid": valid,
            "topics": [{"topic": e.topic, "summary": e.summary,
                        "file": f"{e.file}.md" if e.file else None,
                        "file_bytes": sizes.get(scope.topic_path(e.file), 0) if e.file else 0} for e in entries],
            "files": len(mine),
            "files_bytes": sum(sizes.values()),
            "pending_proposals": pending_by_scope.get((scope.kind, scope.key), 0),
            "last_change": _change_json(last),
        })
    last_change = ChangeSet.objects.filter(owner_id=owner_id).order_by("-created_at", "-id").first()
    last_run = last_pass(owner_id=owner_id)
    return {
        "memory": {"enabled": state.enabled, "available": state.available, "save_mode": state.save_mode,
                   "consolidation_enabled": state.consolidation_enabled,
                   "mcp_propose_enabled": state.mcp_propose_enabled},
        "scopes": scopes,
        "totals": {
            "scopes": sum(1 for s in scopes if s["files"]),
            "lines": sum(s["lines"] for s in scopes),
            "bytes": sum(s["bytes"] for s in scopes),
            "topics": sum(len(s["topics"]) for s in scopes),
            "files": len(files),
            "pending_proposals": sum(pending_by_scope.values()),
            "trash_entries": TrashEntry.objects.filter(owner_id=owner_id, restored_at__isnull=True).count(),
            "turn_max_bytes": TURN_INDEXES_MAX_BYTES,
        },
        "last_change": _change_json(last_change),
        "last_consolidation": None if last_run is None else {
            "at": last_run.started_at.isoformat(), "trigger": last_run.trigger, "status": last_run.status,
            "reason": last_run.reason, "proposals": last_run.proposals, "summaries": last_run.summaries},
    }


#: Why a pass did not look through the chats, as the Memory tab says it (``consolidate_user``'s reasons).
PASS_REASONS = {
    "memory_off": "memory was off",
    "consolidation_off": "suggesting notes from your chats is off",
    "account_suspended": "an administrator switched your account off",
    "served_by_addon": "an add-on serves your memory",
    "settings_unreadable": "your memory settings could not be read",
    "another_pass_running": "another look was running",
    "model_unavailable": "the model server did not answer",
}


#: A pass still unfinished after this long was cut off (a worker killed or restarted), not still running.
PASS_LOOKS_STUCK_AFTER = timedelta(minutes=10)


def last_pass(*, owner_id: int) -> ConsolidationRun | None:
    """The owner's latest consolidation pass (running while its ``finished_at`` is empty)."""
    return ConsolidationRun.objects.filter(owner_id=owner_id).order_by("-started_at", "-id").first()


def pass_sentence(run: ConsolidationRun) -> str:
    """The latest pass in words for its owner: what it found, or why it found nothing."""
    if run.finished_at is None:
        if timezone.now() - run.started_at < PASS_LOOKS_STUCK_AFTER:
            return "looking through your chats now…"
        return "did not finish: it stopped on the way (the next look starts over)"
    if run.status == ConsolidationRun.Status.DONE:
        found = run.proposals
        if not found:
            return f"looked through {run.chats} chat{'s' if run.chats != 1 else ''}; nothing new to suggest"
        return (f"looked through {run.chats} chat{'s' if run.chats != 1 else ''}; {found} suggestion"
                f"{'s' if found != 1 else ''} in your inbox")
    why = PASS_REASONS.get(run.reason, run.reason or run.get_status_display().lower())
    return f"{'did not finish' if run.status == ConsolidationRun.Status.FAILED else 'did not look'}: {why}"


def note_author(*, owner_id: int, scope: Scope, topic: str, lookback: int = 200) -> Author | None:
    """Who last wrote ``topic`` (its index line or its topic file): ``model`` (saved by the model on its own),
    ``import`` or ``user`` (typed, accepted from a proposal, restored). None when no change set shows it (yet)."""
    written = line_writers(owner_id=owner_id, scope=scope, topics=[topic], lookback=lookback).get(topic)
    return written.author if written else None


def line_writers(*, owner_id: int, scope: Scope, topics: list[str], lookback: int = 200
                 ) -> dict[str, NoteWritten]:
    """Who last changed each of ``topics`` and when: its index line or its topic file, whichever changed
    later, from the last ``lookback`` changes of the scope's index and the last ``lookback`` changes of these
    topics' files (a topic none of them shows is left out: unknown).

    At most three queries whatever the number of topics: the index's changes, the files' changes (without
    their text) and the sources of the proposals whose confirmation wrote any of them.
    """
    if not topics:
        return {}
    columns = ("change_set_id", "change_set__created_at", "change_set__source", "change_set__proposal_id")
    changes = FileChange.objects.filter(change_set__owner_id=owner_id).order_by("-change_set__created_at",
                                                                                 "-change_set_id")
    index_rows = list(changes.filter(path=scope.index_path).values_list("before", "after", *columns)[:lookback])
    topic_of = {path: topic for topic in topics if (path := _topic_path(scope, topic))}
    file_rows = list(changes.filter(path__in=list(topic_of)).values_list("path", *columns)[:lookback])
    proposal_ids = {proposal_id for *_, source, proposal_id in [*index_rows, *file_rows]
                    if source == ChangeSet.Source.PROPOSAL and proposal_id}
    came_from: dict[int, str] = dict(
        Proposal.objects.filter(owner_id=owner_id, pk__in=proposal_ids).values_list("pk", "source")
    ) if proposal_ids else {}

    latest: dict[str, tuple[datetime, int, Author]] = {}
    first_line_change: dict[str, tuple[datetime, int]] = {}
    people: set[str] = set()

    def saw(topic: str, change_id: int, at: datetime, source: str, proposal_id: int | None) -> None:
        author = _author_of(source, came_from.get(proposal_id) if proposal_id else None)
        if topic not in latest or (at, change_id) > latest[topic][:2]:
            latest[topic] = (at, change_id, author)
        if author != "model":
            people.add(topic)

    wanted = set(topics)
    parsed: dict[str, dict[str, str]] = {}  # one change's "before" is usually the next older one's "after"
    for before, after, *change in index_rows:
        old, new = _lines_of(before, parsed), _lines_of(after, parsed)
        for topic in wanted & (old.keys() | new.keys()):
            if old.get(topic) != new.get(topic):
                saw(topic, *change)
                first_line_change[topic] = (change[1], change[0])  # the rows come newest first
    for path, *change in file_rows:
        saw(topic_of[path], *change)
    # The files' history was cut at ``lookback``: for a line first seen before that cut, a person's earlier
    # edit of its file could be out of sight, so it is not known to be the model's alone.
    files_from = (file_rows[-1][2], file_rows[-1][1]) if len(file_rows) == lookback else None

    def model_only(topic: str) -> bool:
        first = first_line_change.get(topic)
        return (first is not None and topic not in people
                and (files_from is None or first >= files_from))

    return {topic: NoteWritten(author=author, at=at, model_only=model_only(topic), change_id=change_id)
            for topic, (at, change_id, author) in latest.items()}


def _topic_path(scope: Scope, topic: str) -> str | None:
    try:
        return scope.topic_path(topic)
    except InvalidInput:
        return None


def _author_of(source: str, proposal_source: str | None) -> Author:
    """``proposal_source``: where the proposal came from, for a change set that confirmed one."""
    if source == ChangeSet.Source.PROPOSAL and proposal_source:
        # An accepted suggestion: the user approved it, but typed it only if it came from their chat.
        source = {"consolidation": "model", "import": "import"}.get(proposal_source, source)
    if source == ChangeSet.Source.MODEL:
        return "model"
    if source == ChangeSet.Source.IMPORT:
        return "import"
    return "user"


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


@dataclass(frozen=True)
class OwnerContext:
    """The facts of a run that belongs to no chat (the terminal, an import, an MCP client)."""

    state: MemoryState | None
    facts: policy.TurnFacts
    decision: policy.TurnDecision


def owner_context(*, owner_id: int, agent: Any = None, origin: policy.Origin = "web") -> OwnerContext:
    """The policy's view of the owner acting outside any chat (optionally with one of their agents).

    Reads what has a say (the owner's memory settings, the agent) exactly as a chat of theirs would; what
    cannot be read is passed as unknown, and the policy counts it as "ask".
    """
    from localai_memory.chats.selectors import read_memory_state

    state = read_memory_state(owner_id=owner_id)
    facts = policy.TurnFacts(
        private_chat=False,
        has_agent=agent is not None,
        agent_tools_memory=agent.tools_memory if agent is not None else True,
        agent_addons_memory=agent.addons_memory if agent is not None else False,
        agent_memory=agent.memory if agent is not None else None,
        agent_memory_save=agent.memory_save if agent is not None else None,
        agent_grant_write=agent.grant_write if agent is not None else True,
        user_enabled=state.enabled if state else None,
        save_mode=state.save_mode if state else None,  # type: ignore[arg-type]
        messaging_save=state.messaging_save if state else None,  # type: ignore[arg-type]
        server_files_on=state.server_files_on if state else True,
        provider=state.provider_state if state else "builtin",  # type: ignore[arg-type]
        origin=origin,
    )
    return OwnerContext(state=state, facts=facts, decision=policy.decide_turn(facts))


def read_scopes(*, decision: policy.TurnDecision, agent_id: int | None = None,
                channel_key: str | None = None) -> list[Scope]:
    """The concrete scopes a decision lets a run read (narrowest first, like the turn)."""
    scopes: list[Scope] = []
    if "channel" in decision.read_scopes and channel_key:
        scopes.append(Scope("channel", channel_key))
    if "agent" in decision.read_scopes and agent_id is not None:
        scopes.append(Scope.agent(agent_id))
    if "user" in decision.read_scopes:
        scopes.append(Scope.user())
    return scopes
