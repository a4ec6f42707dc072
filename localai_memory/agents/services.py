"""Writes of saved agents: create, update, delete (with the agent's notes), import.

Every value is checked here, whoever calls (the API, the admin, an import file), so no path can store an
agent rule looser than the owner's level (``auto``/``ask``) or a memory choice the host does not know. What an
agent's choices *mean* for a turn is ``memory.policy``; the agent's notes are written only by ``notes.services``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Final, Literal

from django.db import transaction

from localai_memory.core.errors import InvalidInput
from localai_memory.memory.proposals import proposals_drop_for_agent
from localai_memory.memory.providers import AddonForget, addons_forget_namespace, namespaced_addons
from localai_memory.notes import services as notes_services
from localai_memory.notes.models import ChangeSet, TrashEntry

from . import selectors
from .models import Agent, AgentMemory, AgentMemorySave, DeletedAgent
from .selectors import EXPORT_FIELDS, EXPORT_FORMAT, EXPORT_VERSION

NAME_MAX_CHARS: Final = 100
INSTRUCTIONS_MAX_CHARS: Final = 20_000
LIST_MAX_ITEMS: Final = 50
#: A tool, add-on or grant name: lower case, so "Memory" can never silently mean "not memory".
ITEM_RE: Final = re.compile(r"^[a-z0-9][a-z0-9._:-]{0,63}\Z")

#: A new agent has the memory tool and the grant Remember things unless the client sends those lists.
DEFAULT_TOOLS: Final = ("memory",)
DEFAULT_ADDONS: Final = ()
DEFAULT_GRANTS: Final = ("memory.write",)

#: The agent rule's value that clears it ("Use my setting").
USE_MINE: Final = "use_mine"

#: What happens to an agent's notes when it is deleted.
DeleteMemory = Literal["keep", "export", "delete"]
DELETE_CHOICES: Final = ("keep", "export", "delete")

_EXPORT_TOP_KEYS: Final = frozenset({"format", "version", "exported_at", "agent"})


class _Unset:
    """Marks a field a PUT left out: the stored value stays."""

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Final = _Unset()

# --------------------------------------------------------------------------------------------------------
# Values
# --------------------------------------------------------------------------------------------------------


def _has_control(text: str, *, allow_newlines: bool) -> bool:
    allowed = {"\n", "\r", "\t"} if allow_newlines else set()
    return any((ord(c) < 32 or ord(c) == 127) and c not in allowed for c in text)


def clean_name(value: object) -> str:
    if not isinstance(value, str):
        raise InvalidInput("name must be text", code="invalid_name")
    name = value.strip()
    if not name or len(name) > NAME_MAX_CHARS:
        raise InvalidInput(f"name must be 1-{NAME_MAX_CHARS} characters", code="invalid_name")
    if _has_control(name, allow_newlines=False):
        raise InvalidInput("name may not contain control characters", code="invalid_name")
    return name


def clean_instructions(value: object) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise InvalidInput("instructions must be text", code="invalid_instructions")
    if len(value) > INSTRUCTIONS_MAX_CHARS or "\x00" in value:
        raise InvalidInput(f"instructions must be at most {INSTRUCTIONS_MAX_CHARS} characters, without NUL",
                           code="invalid_instructions")
    return value


def clean_names(field: str, value: object) -> list[str]:
    """A Tools, Add-ons or grants list: names, in order, each once."""
    if not isinstance(value, (list, tuple)):
        raise InvalidInput(f"{field} must be a list of names", code=f"invalid_{field}")
    if len(value) > LIST_MAX_ITEMS:
        raise InvalidInput(f"{field} may hold at most {LIST_MAX_ITEMS} names", code=f"invalid_{field}")
    names: list[str] = []
    for item in value:
        if not isinstance(item, str) or not ITEM_RE.match(item):
            raise InvalidInput(
                f"{field}: {item!r} is not a name (lower-case letters, digits and . _ : -, at most 64)",
                code=f"invalid_{field}",
            )
        if item not in names:
            names.append(item)
    return names


def clean_memory(value: object) -> str | None:
    """The agent's memory choice; None is "as before"."""
    if value is None:
        return None
    if value not in AgentMemory.values:
        raise InvalidInput(
            f"memory must be one of {', '.join(AgentMemory.values)}, or null for as before (not {value!r})",
            code="invalid_memory",
        )
    return str(value)


def clean_memory_save(value: object) -> str | None:
    """The agent's rule When it wants to save a note; None (or ``use_mine``) uses the owner's level."""
    if value is None or value == USE_MINE:
        return None
    if value in ("auto", "ask"):
        raise InvalidInput(
            f"memory_save cannot be {value!r}: an agent's rule can only be stricter than your own level. "
            "Use always, never, or use_mine to follow your setting.",
            code="memory_save_not_allowed",
        )
    if value not in AgentMemorySave.values:
        raise InvalidInput(f"memory_save must be always, never or use_mine (not {value!r})",
                           code="invalid_memory_save")
    return str(value)


# --------------------------------------------------------------------------------------------------------
# Create, update
# --------------------------------------------------------------------------------------------------------


@transaction.atomic
def agent_create(
    *,
    owner_id: int,
    name: str,
    instructions: str = "",
    tools: list[str] | None = None,
    addons: list[str] | None = None,
    grants: list[str] | None = None,
    memory: str | None = None,
    memory_save: str | None = None,
) -> Agent:
    """A new agent. ``tools``/``grants`` left out (None) get the memory tool and ``memory.write``;
    ``memory`` left out is "as before" (the web form sends ``mine_and_own``). Raises InvalidInput."""
    return Agent.objects.create(
        owner_id=owner_id,
        name=clean_name(name),
        instructions=clean_instructions(instructions),
        tools=clean_names("tools", list(DEFAULT_TOOLS) if tools is None else tools),
        addons=clean_names("addons", list(DEFAULT_ADDONS) if addons is None else addons),
        grants=clean_names("grants", list(DEFAULT_GRANTS) if grants is None else grants),
        memory=clean_memory(memory),
        memory_save=clean_memory_save(memory_save),
    )


@transaction.atomic
def agent_update(
    *,
    owner_id: int,
    agent_id: int,
    name: Any = UNSET,
    instructions: Any = UNSET,
    tools: Any = UNSET,
    addons: Any = UNSET,
    grants: Any = UNSET,
    memory: Any = UNSET,
    memory_save: Any = UNSET,
) -> Agent:
    """Change the fields given; a field left out (UNSET) keeps its stored value, so an older client that does
    not know ``memory``/``memory_save`` cannot loosen an agent. ``memory=None`` is "as before";
    ``memory_save="use_mine"`` (or None) clears the rule. Raises NotFound (another owner's agent) or
    InvalidInput."""
    agent = selectors.access_agent(owner_id, agent_id, for_update=True)
    changes: dict[str, Any] = {}
    if name is not UNSET:
        changes["name"] = clean_name(name)
    if instructions is not UNSET:
        changes["instructions"] = clean_instructions(instructions)
    for field, value in (("tools", tools), ("addons", addons), ("grants", grants)):
        if value is not UNSET:
            changes[field] = clean_names(field, value)
    if memory is not UNSET:
        changes["memory"] = clean_memory(memory)
    if memory_save is not UNSET:
        changes["memory_save"] = clean_memory_save(memory_save)
    for field, value in changes.items():
        setattr(agent, field, value)
    agent.save(update_fields=[*changes, "updated_at"])
    return agent


# --------------------------------------------------------------------------------------------------------
# Delete
# --------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AgentDeleted:
    """What a delete did. ``memory`` is ``none`` when the agent had no notes and no choice was given."""

    agent_id: int
    name: str
    memory: Literal["keep", "export", "delete", "none"]
    files: int
    """How many note files the agent had."""
    trash_id: int | None
    """The Trash entry holding the notes (export, delete), else None."""
    archive: bytes | None
    """The zip of the notes (export only), taken under the same lock as the move to the Trash."""
    addons: tuple[AddonForget, ...] = ()
    """What each memory add-on that keeps namespaces answered when asked to drop the agent's notes."""
    kept_in: tuple[str, ...] = ()
    """The memory add-ons (labels) that keep namespaces and were not asked to drop the agent's notes: they may
    still hold them (Keep, Export then delete, or no choice)."""

    @property
    def message(self) -> str:
        if self.memory == "keep" and self.files:
            said = "The agent is deleted. Its notes stay; they show on the Memory tab under Deleted agents."
        elif self.memory in ("delete", "export") and self.files:
            said = "The agent is deleted and its notes are in the Trash; restore them from Files."
        elif self.addons or self.kept_in:
            said = "The agent is deleted."
        else:
            said = "The agent is deleted. It had no notes."
        kept = [f"The memory add-on “{label}” keeps any notes of the agent it holds; deleting the agent with "
                f"its notes (Delete) would have asked it to drop them." for label in self.kept_in]
        return " ".join([said, *kept, *(answer.message for answer in self.addons)])


def agent_delete(*, owner_id: int, agent_id: int, memory: str | None = None) -> AgentDeleted:
    """Delete an agent and do ``memory`` with its notes (``_agent_delete``). On an explicit Delete, each memory
    add-on the owner used that keeps namespaces is asked, once the delete is committed, to drop the agent's
    namespace (``agent:<id>``), which no chat reads any more. One that is not running, or fails, is named in
    the answer (``AgentDeleted.addons``), never counted as done, and the request is kept for the owner to ask
    again (``memory.services.addon_forgets_record``). Without a choice, Keep and Export then delete
    leave the add-on's notes (the spec's default is Keep, and the add-on's notes are not in the Trash: a forget
    there cannot be undone; its own export holds them; Forget everything clears them), also for an agent with
    no built-in notes, whose notes may all be in the add-on."""
    deleted = _agent_delete(owner_id=owner_id, agent_id=agent_id, memory=memory)
    from localai_memory.memory.selectors import addons_used
    from localai_memory.memory.services import addon_forgets_record
    from localai_memory.notes.paths import Scope

    if deleted.memory != "delete":  # said, so nobody believes nothing of the agent is left
        return replace(deleted, kept_in=tuple(namespaced_addons(addons_used(user_id=owner_id))))
    namespace = Scope.agent(deleted.agent_id).name
    whose = f"the notes of the agent “{deleted.name}”"
    answers = addons_forget_namespace(addons_used(user_id=owner_id), user_id=owner_id, namespace=namespace,
                                      whose=whose)
    addon_forgets_record(owner_id=owner_id, namespace=namespace, whose=whose, answers=answers)
    return replace(deleted, addons=tuple(answers))


def check_delete_memory(value: object) -> DeleteMemory | None:
    if value is None:
        return None
    if value not in DELETE_CHOICES:
        raise InvalidInput(f"memory must be keep, export or delete (not {value!r})", code="invalid_memory_choice")
    return value  # type: ignore[return-value]


@transaction.atomic
def _agent_delete(*, owner_id: int, agent_id: int, memory: str | None = None) -> AgentDeleted:
    """Delete an agent and do ``memory`` with its notes (``Memory/agents/<id>/``): ``keep`` leaves them (they
    list as a deleted agent's notes), ``delete`` moves them to the Trash, ``export`` zips them and then moves
    them to the Trash. Without a choice the notes are kept, as the spec's default. Raises NotFound for
    another owner's agent."""
    choice = check_delete_memory(memory)
    agent = selectors.access_agent(owner_id, agent_id, for_update=True)
    folder = selectors.agent_notes_folder(agent.pk)
    # The owner's note lock: nothing can add a note to the folder between counting, zipping and trashing.
    notes_services.lock_owner(owner_id)
    files = selectors.agent_note_count(owner_id=owner_id, agent_id=agent.pk)
    if files and choice is None:  # the spec's default: Keep (nothing is lost; they list under Deleted agents)
        choice = "keep"
    archive = notes_services.memory_export(owner_id=owner_id, folder=folder) if choice == "export" else None
    trash_id = None
    if files and choice in ("export", "delete"):
        entry = notes_services.folder_trash(owner_id=owner_id, folder=folder, kind=TrashEntry.Kind.AGENT,
                                            label=f"Notes of the deleted agent {agent.name}",
                                            source=ChangeSet.Source.AGENT)
        trash_id = entry.pk if entry else None
    deleted = AgentDeleted(agent_id=agent.pk, name=agent.name, memory=choice or "none", files=files,
                           trash_id=trash_id, archive=archive)
    proposals_drop_for_agent(owner_id=owner_id, agent_id=agent.pk)  # its waiting suggestions go with it
    # kept notes, and notes restored from the Trash later, still say whose they were
    DeletedAgent.objects.get_or_create(owner_id=owner_id, agent_id=agent.pk, defaults={"name": agent.name})
    agent.delete()
    return deleted


# --------------------------------------------------------------------------------------------------------
# Import
# --------------------------------------------------------------------------------------------------------


@transaction.atomic
def agent_import(*, owner_id: int, document: object) -> Agent:
    """A NEW agent from an export file (``selectors.agent_export``): the same name, instructions, lists and
    memory choices, and no notes (the original's notes stay with it). A file that is not an agent export of
    a version this server reads, or that holds an unknown field or value, is InvalidInput."""
    if not isinstance(document, Mapping):
        raise InvalidInput("an agent file is a JSON object", code="invalid_agent_file")
    if document.get("format") != EXPORT_FORMAT:
        raise InvalidInput(f"not an agent export file (its format must be {EXPORT_FORMAT!r})",
                           code="invalid_agent_file")
    version = document.get("version")
    if isinstance(version, bool) or version != EXPORT_VERSION:
        raise InvalidInput(f"agent file version {version!r} is not supported; this server reads version "
                           f"{EXPORT_VERSION}", code="unsupported_agent_file")
    unknown = sorted(set(document) - _EXPORT_TOP_KEYS)
    if unknown:
        raise InvalidInput(f"unknown field(s) in the agent file: {', '.join(map(str, unknown))}",
                           code="invalid_agent_file")
    fields = document.get("agent")
    if not isinstance(fields, Mapping):
        raise InvalidInput("the agent file has no agent object", code="invalid_agent_file")
    unknown = sorted(set(fields) - set(EXPORT_FIELDS))
    if unknown:
        raise InvalidInput(f"unknown field(s) in the agent: {', '.join(map(str, unknown))}",
                           code="invalid_agent_file")
    if "name" not in fields:
        raise InvalidInput("the agent in the file has no name", code="invalid_name")
    return agent_create(owner_id=owner_id, **dict(fields))
