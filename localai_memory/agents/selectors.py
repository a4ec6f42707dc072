"""Reads of saved agents, always scoped to one owner: another user's agent is a 404, never a 403."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.utils import timezone

from localai_memory.core.access import owned_or_404
from localai_memory.memory import policy
from localai_memory.memory.selectors import MemoryState
from localai_memory.notes.models import NoteFile
from localai_memory.notes.paths import Scope

from .models import Agent, DeletedAgent

#: The export file: a marker and a version, so an import can refuse what it does not understand.
EXPORT_FORMAT = "localai-memory.agent"
EXPORT_VERSION = 1
EXPORT_FIELDS = ("name", "instructions", "tools", "addons", "grants", "memory", "memory_save")

#: The read-only line of the agent form while the owner's switch is off.
MEMORY_OFF_IN_SETTINGS = "Memory is off in your settings"


def access_agent(user_id: Any, agent_id: object, *, for_update: bool = False) -> Agent:
    """The agent ``agent_id`` if ``user_id`` owns it, else NotFound. ``user_id`` may also be a user."""
    owner_id = getattr(user_id, "pk", user_id)
    queryset = Agent.objects.select_for_update() if for_update else Agent.objects.all()
    return owned_or_404(queryset, owner_field="owner_id", owner=owner_id, pk=agent_id)


def agent_scope_gone(*, owner_id: int, scope: Scope) -> bool:
    """Whether ``scope`` is the notes of an agent that no longer exists (deleted while a turn of its chat ran).
    Ask under the owner's note lock: ``agent_delete`` holds it until it commits, so the answer is final for
    the write that follows."""
    return scope.kind == "agent" and not Agent.objects.filter(pk=int(scope.key), owner_id=owner_id).exists()


#: What a turn says when the agent whose notes it would write was deleted while it ran.
AGENT_GONE_MESSAGE = "This agent was deleted while the chat was answering, so nothing was saved to its notes."


def agent_list(*, owner_id: int) -> QuerySet[Agent]:
    """The owner's agents, by name."""
    return Agent.objects.filter(owner_id=owner_id).order_by("name", "id")


def agent_names(owner_id: int) -> dict[str, str]:
    """The names of the owner's agents, by id (as their note folders name them)."""
    return {str(pk): name for pk, name in agent_list(owner_id=owner_id).values_list("pk", "name")}


def deleted_agent_names(owner_id: int) -> dict[str, str]:
    """The names the owner's deleted agents had, by id (as their note folders name them)."""
    return {str(agent_id): name for agent_id, name in
            DeletedAgent.objects.filter(owner_id=owner_id).values_list("agent_id", "name")}


def agent_name(*, owner_id: int, agent_id: int) -> str | None:
    """The name of the owner's agent ``agent_id``, or the one it had if it was deleted; None if neither."""
    name = Agent.objects.filter(owner_id=owner_id, pk=agent_id).values_list("name", flat=True).first()
    if name is None:
        name = DeletedAgent.objects.filter(owner_id=owner_id, agent_id=agent_id).values_list("name", flat=True).first()
    return name


def agent_notes_folder(agent_id: int) -> str:
    """``Memory/agents/<id>``: the folder of the agent's own notes."""
    return Scope.agent(agent_id).root


def agent_note_count(*, owner_id: int, agent_id: int) -> int:
    """How many note files the agent has (any file under its folder, index or topic)."""
    prefix = agent_notes_folder(agent_id) + "/"
    return NoteFile.objects.filter(owner_id=owner_id, path__startswith=prefix).count()


def agent_memory_effective(*, agent: Agent, state: MemoryState) -> dict:
    """What the agent's memory choices mean for a web chat now, from the one policy function: read-only hints
    for the agent form ("Memory is off in your settings", what it reads, where a note goes)."""
    turn = policy.decide_turn(policy.TurnFacts(
        private_chat=False,
        has_agent=True,
        agent_tools_memory=agent.tools_memory,
        agent_addons_memory=agent.addons_memory,
        agent_memory=agent.memory,  # type: ignore[arg-type]
        agent_memory_save=agent.memory_save,  # type: ignore[arg-type]
        agent_grant_write=agent.grant_write,
        user_enabled=state.enabled,
        save_mode=state.save_mode,  # type: ignore[arg-type]
        messaging_save=state.messaging_save,  # type: ignore[arg-type]
        server_files_on=state.server_files_on,
        provider=state.provider_state,  # type: ignore[arg-type]
        addon_namespaces=state.addon_namespaces,
        origin="web",
    ))
    off_in_settings = not state.enabled
    return {
        "on": turn.memory_on,
        "code": turn.code,
        "blocked_by": turn.blocked_by,
        "fix": turn.fix,
        "memory_off_in_settings": off_in_settings,
        "notice": MEMORY_OFF_IN_SETTINGS if off_in_settings else None,
        "reads": sorted(turn.read_scopes),
        "saves_to": list(turn.propose_scopes),
        "save_level": turn.effective_level,
        "save_code": turn.save_code,
        "save_message": turn.save_message,
    }


def agent_export(*, agent: Agent) -> dict:
    """The export file of an agent: its fields, its memory choices, a format marker and a version. It holds
    no notes and no id: an import makes a new agent."""
    return {
        "format": EXPORT_FORMAT,
        "version": EXPORT_VERSION,
        "exported_at": timezone.now().isoformat(),
        "agent": agent_fields(agent),
    }


def agent_fields(agent: Agent) -> dict:
    """What a person chose for an agent (its name, instructions, tools, add-ons, grants and memory): the body
    of an export, and the editable part of the API's agent."""
    return {
        "name": agent.name,
        "instructions": agent.instructions,
        "tools": list(agent.tools or []),
        "addons": list(agent.addons or []),
        "grants": list(agent.grants or []),
        "memory": agent.memory,
        "memory_save": agent.memory_save,
    }
