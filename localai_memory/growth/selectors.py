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
from localai_memory.notes.selectors import note_writers

from .models import ConsolidationRun

#: A note's author as trust is concerned: a person (typed, accepted), the model on its own, an import. A
#: restore or an Undo keeps the author of the text it gives back.
Author = str  # "user" | "model" | "import"


@dataclass(frozen=True)
class NoteWritten:
    """Who last changed a note, its index line or its topic file, and when (``line_writers``).

    ``model_only``: the lookback shows who wrote the line, and every change it shows of the line or the file
    is the model's own; a note a person typed, imported or confirmed, even only its details, is not. A restore
    or an Undo gives back the note as it was, its author included: a model's note restored stays the model's.
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
    (the profile: each index line), how many topic files, proposals waiting for its notes and its last
    change. ``totals`` adds them up; the indexes of one turn together hold at most ``turn_max_bytes``.
    A proposal waiting for a memory add-on (``Proposal.provider``) is about the add-on's own notes, never a
    scope's built-in ones, so it is counted apart: ``totals.addon_pending_proposals``.
    """
    state = state or memory_state(user_id=owner_id)
    names = agent_names(owner_id)
    files = list(NoteFile.objects.filter(owner_id=owner_id, path__startswith=ROOT + "/").only("path", "content"))
    now = timezone.now()
    pending = (Proposal.objects.filter(owner_id=owner_id, status=Proposal.Status.PENDING, expires_at__gt=now)
               .values("scope_kind", "scope_key", "provider").annotate(n=Count("id")))
    pending_by_scope: dict[tuple[str, str], int] = {}
    addon_pending = 0
    for row in pending:
        if row["provider"]:
            addon_pending += row["n"]
        else:
            key = (row["scope_kind"], row["scope_key"])
            pending_by_scope[key] = pending_by_scope.get(key, 0) + row["n"]
    scopes: list[dict[str, Any]] = []
    listed = owner_scopes(owner_id=owner_id)
    # A scope whose first note waits for the owner has no file yet: it is listed too, so the scopes' waiting
    # suggestions add up to the total.
    for kind, scope_key in sorted(pending_by_scope):
        try:
            waiting = Scope(kind, scope_key)  # type: ignore[arg-type]  # a str from the database: Scope checks it
        except InvalidInput:
            continue
        if waiting not in listed:
            listed.append(waiting)
    for scope in listed:
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
        # ``unavailable`` ({code, message}, as GET /api/chats/memory gives it): why memory that is switched on
        # does not serve (files off on the server, an add-on that does not run); absent when nothing stops it.
        "memory": {"enabled": state.enabled, "available": state.available, "save_mode": state.save_mode,
                   "consolidation_enabled": state.consolidation_enabled,
                   "mcp_propose_enabled": state.mcp_propose_enabled,
                   **({"unavailable": state.as_api()["unavailable"]} if "unavailable" in state.as_api() else {})},
        "scopes": scopes,
        "totals": {
            "scopes": sum(1 for s in scopes if s["files"]),
            "lines": sum(s["lines"] for s in scopes),
            "bytes": sum(s["bytes"] for s in scopes),
            "topics": sum(len(s["topics"]) for s in scopes),
            "files": len(files),
            "pending_proposals": sum(s["pending_proposals"] for s in scopes),
            "addon_pending_proposals": addon_pending,
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
    ``import`` or ``user`` (typed, accepted from a proposal); a restore or an Undo keeps the author of the text
    it gives back. None when no change set shows it (yet)."""
    written = line_writers(owner_id=owner_id, scope=scope, topics=[topic], lookback=lookback).get(topic)
    return written.author if written else None


def line_writers(*, owner_id: int, scope: Scope, topics: list[str], lookback: int = 200
                 ) -> dict[str, NoteWritten]:
    """Who last changed each of ``topics`` and when: its index line or its topic file, whichever changed
    later, from the last ``lookback`` changes of the scope's index and the last ``lookback`` changes of these
    topics' files (a topic none of them shows is left out: unknown). A restore or an Undo is dated by
    itself but keeps the author of the text it gives back (``notes.selectors.note_writers``)."""
    found: dict[str, NoteWritten] = {}
    for topic, writers in note_writers(owner_id=owner_id, scope=scope, topics=topics, lookback=lookback).items():
        last = writers.last
        if last is not None:
            found[topic] = NoteWritten(author=last.author, at=last.at, model_only=writers.model_only,
                                       change_id=last.change_id)
    return found


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
        addon_namespaces=state.addon_namespaces if state else False,
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
