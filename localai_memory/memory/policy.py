"""The memory policy: one pure decision of what a turn may read and offer, and what happens to a note.

Everything that decides "may this be read, proposed, saved, confirmed or reverted" calls this module: the
chat turn, the bots, the inbox, consolidation and the MCP server. The caller reads the facts (settings, the
agent, the chat, the sender), passes them in as a frozen ``TurnFacts``, and acts on the frozen answer.

This module must never touch the database, the clock, Django settings, files or the network, and it keeps
no state. Where a rule has a time limit (24 hours for a proposal, 30 minutes for Undo), the caller passes
the timestamps in. If a caller needs a rule that is not here, the rule belongs here, not in the caller.

Entry points:

* ``decide_turn(facts)``   what this turn reads, which memory tools and scopes the model is offered, and
  which level is off (for the one line "memory is off" and ``GET /api/chats/{id}/tools``).
* ``decide_note(facts, note)``  what happens to a note the model proposes: ``save_now`` (with Undo),
  ``ask``, ``locked`` (Always confirm) or ``refuse``.
* ``decide_typed_note(facts, note, ...)``  what happens to a note the person typed themselves with
  ``/remember``: the same four outcomes, where their own words count as their confirmation.
* ``decide_revert(facts)``  whether the model's ``revert_change`` may run.
* ``may_answer(facts, ...)``  whether a sender's yes/no in a messaging chat counts; ``answer_refusal`` says
  why not.
* ``looks_secret(text)``, ``proposal_expired(...)``, ``undo_open(...)``, ``strictest(...)``.

The rules are those of ``spec/short-memory.md`` with the readings fixed in ``DESIGN.md`` §6. Readings this
module adds where both are silent are marked "Reading:" in the comments below.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from itertools import pairwise
from types import MappingProxyType
from typing import Literal, get_args

__all__ = [
    "LEVELS",
    "LONG_NOTE_CHARS",
    "MAX_AUTO_SAVES_PER_REPLY",
    "MESSAGES",
    "PROPOSAL_TTL",
    "UNDO_WINDOW",
    "AgentMemory",
    "AgentRule",
    "BlockedBy",
    "Level",
    "MessagingSave",
    "NoteDecision",
    "NoteFacts",
    "Origin",
    "Outcome",
    "Provider",
    "RevertDecision",
    "Scope",
    "Tool",
    "TurnDecision",
    "TurnFacts",
    "answer_refusal",
    "could_read",
    "decide_note",
    "decide_revert",
    "decide_turn",
    "decide_typed_note",
    "looks_secret",
    "may_answer",
    "proposal_expired",
    "strictest",
    "undo_open",
]

# --------------------------------------------------------------------------------------------------------
# Vocabulary
# --------------------------------------------------------------------------------------------------------

#: How a note is saved. Strictest wins: auto < ask < always < never.
Level = Literal["auto", "ask", "always", "never"]
#: Where the turn comes from. ``trigger`` and ``job`` are runs that start by themselves.
Origin = Literal["web", "messaging", "subagent", "trigger", "job"]
#: A saved agent's memory choice. ``None`` on ``TurnFacts.agent_memory`` means "as before".
AgentMemory = Literal["own", "mine_and_own", "mine", "none"]
#: The agent's rule "When it wants to save a note". ``None`` means "use my setting".
AgentRule = Literal["always", "never"]
#: The user's "In messaging apps" row.
MessagingSave = Literal["ask", "paired_private", "never"]
#: Memory provider of the user. ``off`` is the same choice as the user's switch being off.
Provider = Literal["builtin", "off", "addon", "addon_unavailable"]
#: Whose notes: the user's, the saved agent's own, or one messaging conversation's.
Scope = Literal["user", "agent", "channel"]
#: The memory tools a model can be offered.
Tool = Literal["context_read", "propose_change", "revert_change", "memory_search"]
#: What happens to a proposed note.
Outcome = Literal["save_now", "ask", "locked", "refuse"]
#: The level that turned memory off, narrowest first: the run itself (a sub-agent), the chat (private),
#: the agent, the user, the server (files off), the provider (an add-on that is not available).
BlockedBy = Literal["run", "chat", "agent", "user", "server", "provider"]

#: The levels from loosest to strictest.
LEVELS: tuple[Level, ...] = ("auto", "ask", "always", "never")
_RANK: Mapping[str, int] = MappingProxyType({level: rank for rank, level in enumerate(LEVELS)})

#: A proposal waits this long for an answer, then expires.
PROPOSAL_TTL = timedelta(hours=24)
#: An automatic note can be undone with its Undo this long after it was saved; after that, Files history.
UNDO_WINDOW = timedelta(minutes=30)
#: One reply saves at most this many notes at once; the next ones wait for confirmation.
MAX_AUTO_SAVES_PER_REPLY = 5
#: A note longer than this (characters) waits for confirmation instead of saving at once.
LONG_NOTE_CHARS = 500

# --------------------------------------------------------------------------------------------------------
# Messages. Every code this module returns has one short sentence here, addressed to the user.
# --------------------------------------------------------------------------------------------------------

MESSAGES: Mapping[str, str] = MappingProxyType(
    {
        # Memory off (TurnDecision.code); the sentence is also TurnDecision.fix.
        "subagent": "Sub-agents do not read or save memory; ask in the main chat instead.",
        "private_chat": "This chat is private. Turn Memory on in the chat's Tools menu to use memory here.",
        "agent_tools_off": "This agent's Tools list turns memory off. Add Memory to its Tools list in the "
        "agent form.",
        "agent_memory_none": "This agent's memory choice is None. Pick another choice in the Memory section "
        "of the agent form.",
        "agent_addons_no_memory": "This agent has no memory choice (it was saved before there were any, or "
        "without one) and its Add-ons list does not name memory. Pick a memory choice in the agent form, or "
        "send memory with the agent.",
        "user_off": "Memory is off in your settings. Turn it on under Your settings, then Memory.",
        "user_setting_unreadable": "Your memory settings could not be read, so memory is off for this turn. "
        "Try again in a moment.",
        "server_files_off": "The server has files off, and notes are files. Ask the administrator to turn "
        "files on.",
        "memory_provider_unavailable": "The memory add-on you picked is not available. Pick it again once it "
        "runs, or pick Built-in under Memory provider.",
        "memory_provider_one_store": "Your memory add-on keeps one set of notes for all your chats, so it cannot "
        "keep to this agent's memory choice and does not serve its chats. Set the agent's memory to Mine in the "
        "agent form, or pick Built-in under Memory provider.",
        # Saving off while reading is on (TurnDecision.save_code).
        "scheduled_run": "Runs that start by themselves cannot save notes.",
        "no_write_grant": "This agent may not save notes: it does not have the grant Remember things.",
        "agent_rule_never": "This agent never saves notes: its rule When it wants to save a note is Never.",
        "messaging_never": "Saving notes from messaging apps is off in your settings (In messaging apps).",
        "save_mode_never": "Saving notes is off in your settings (Never).",
        # Notes (NoteDecision.reason).
        "save_and_tell": "Saved to memory. You can undo it for 30 minutes.",
        "paired_private": "Saved to this conversation's notes. You can undo it for 30 minutes.",
        "addon_no_undo": "Your memory add-on keeps its own notes, and the host cannot give a note there an Undo or "
        "an entry in the audit of changes, so the note waits for your confirmation.",
        "ask_first": "The note waits for your confirmation.",
        "settings_unreadable": "Your save setting could not be read, so the note waits for your confirmation.",
        "messaging_asks": "The note waits for confirmation: reply yes to save it or no to drop it.",
        "confirm_other_scope": "A note for more than this conversation waits until the paired sender who "
        "asked confirms it.",
        "always_confirm": "Always confirm is on: the note waits for your confirmation.",
        "looks_secret": "The note looks like it holds a secret, so it waits for your confirmation.",
        "too_long": "The note is long, so it waits for your confirmation.",
        "outside_text": "The assistant read text you did not type on this turn (a tool's result), so the note "
        "waits for your confirmation.",
        "reply_limit": "This reply already saved 5 notes, so this one waits for your confirmation.",
        "delete_needs_confirmation": "Forgetting an older note, or part of one, waits for your confirmation.",
        "make_room": "These notes are full. The assistant saved this one a month or more ago, and since then "
        "nobody has changed it and no chat has needed it: forgetting it makes room for new notes. Undo brings it "
        "back.",
        "unused": "The assistant saved this note three months ago or more, and since then nobody has changed it "
        "and no chat has needed it: forgetting it keeps your notes short. Undo brings it back.",
        "scope_not_allowed": "The note cannot be saved there: this chat may only save to the offered scopes.",
        "sender_not_paired": "Only a paired sender can save a note beyond this conversation.",
        # Suggestions an import of an export zip makes (growth.importing).
        "import_differs": "An import brought this note as the export has it, and your note says something else, "
        "so it waits for your answer. Don't save keeps your note as it is.",
        "import_deleted": "An import brought this note back, but you deleted it (it is in your Trash), so it waits "
        "for your answer. Don't save leaves it deleted.",
        # Notes typed with /remember (decide_typed_note).
        "typed_note": "You can undo it for 30 minutes.",
        "typed_addon": "Your memory add-on serves memory, and /remember saves only to the built-in notes. "
        "Ask the assistant to remember it instead.",
        "typed_needs_confirmer": "You cannot confirm notes in this chat, so the note waits for the owner or "
        "for someone the owner allows to confirm changes.",
        # Answers in a messaging chat (answer_refusal).
        "answer_outside_messaging": "Only a note suggested in a messaging chat can be answered in one; it waits for "
        "your confirmation.",
        "answer_needs_confirmer": "You cannot confirm notes in this chat, so the note waits for the owner. The owner "
        "can allow you to confirm changes from the chat.",
        "answer_requester_only": "Always confirm is on, so only the person who asked for this note can confirm it "
        "in the chat; otherwise it waits for the owner.",
        # Reverts (RevertDecision.reason).
        "revert_allowed": "The change can be reverted.",
        "revert_locked": "Always confirm is on, so revert_change is refused. Undo the note with its Undo.",
        "revert_outside_text": "The assistant read text you did not type on this turn (a tool's result), so it "
        "cannot take a note back now. Undo the note with its Undo.",
    }
)

# --------------------------------------------------------------------------------------------------------
# Inputs and outputs
# --------------------------------------------------------------------------------------------------------


def _check(name: str, value: object, allowed: tuple[object, ...]) -> None:
    if value not in allowed:
        raise ValueError(f"{name} must be one of {allowed!r}, not {value!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnFacts:
    """Everything that has a say on one turn, read by the caller. Unknown values raise ``ValueError``."""

    private_chat: bool
    """The chat's Memory switch in its Tools menu is off (a private chat)."""
    has_agent: bool
    """The chat runs a saved agent. Without one, every ``agent_*`` field is ignored."""
    agent_tools_memory: bool
    """The agent's Tools list has memory. False turns memory off for this agent's chats."""
    agent_addons_memory: bool
    """The agent's Add-ons list names memory. Only read for "as before" agents (``agent_memory is None``)."""
    agent_memory: AgentMemory | None
    """The agent's memory choice; ``None`` is "as before" (the agent was saved before the field existed)."""
    agent_memory_save: AgentRule | None
    """The agent's save rule; ``None`` is "Use my setting"."""
    agent_grant_write: bool
    """The agent has the grant Remember things (``memory.write``). False: it may read but never save."""
    user_enabled: bool | None
    """The user's Memory switch. ``None``: it could not be read; memory is then off for the turn."""
    save_mode: Level | None
    """The user's level. ``None``: it could not be read; it counts as ``ask``."""
    messaging_save: MessagingSave | None
    """The user's "In messaging apps" row. Only read for messaging chats; ``None`` counts as ``ask``."""
    server_files_on: bool
    """The server has files on (notes are files)."""
    provider: Provider
    """The user's memory provider: ``builtin``, ``off`` (the switch), a running ``addon``, or
    ``addon_unavailable`` (the picked add-on stopped, is disabled or was removed)."""
    origin: Origin
    """Where the turn comes from."""
    addon_namespaces: bool = False
    """The serving add-on keeps notes apart per namespace (the user's, each agent's, each conversation's), so
    the host can hand it the agent's choice. False: one store for all the user's chats, which serves only
    chats whose choice is the user's notes (no agent, or Mine). Read only when ``provider`` is ``addon``."""
    sender_paired: bool = False
    """Messaging only: the sender of this message is paired with the owner."""
    one_to_one: bool | None = None
    """Messaging only: the platform says the chat is one-to-one (a DM). ``None`` (unknown) counts as a group."""

    def __post_init__(self) -> None:
        _check("agent_memory", self.agent_memory, (*get_args(AgentMemory), None))
        _check("agent_memory_save", self.agent_memory_save, (*get_args(AgentRule), None))
        _check("user_enabled", self.user_enabled, (True, False, None))
        _check("save_mode", self.save_mode, (*LEVELS, None))
        _check("messaging_save", self.messaging_save, (*get_args(MessagingSave), None))
        _check("provider", self.provider, get_args(Provider))
        _check("origin", self.origin, get_args(Origin))
        _check("one_to_one", self.one_to_one, (True, False, None))


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnDecision:
    """What one turn may read and which memory tools the model is offered."""

    memory_on: bool
    """False: no notes in the prompt, no memory tools, and one line telling the model memory is off."""
    code: str | None
    """Why memory is off (a key of ``MESSAGES``; ``memory_provider_unavailable`` among them), else None."""
    blocked_by: BlockedBy | None
    """The narrowest level that is off, else None."""
    fix: str | None
    """One sentence telling the user what they can do about it, else None."""
    served_by: Literal["builtin", "addon"] | None
    """Who serves memory on this turn (an add-on replaces the built-in files and tools); None when off."""
    read_scopes: frozenset[Scope]
    """The notes put in the prompt and the scopes ``context_read``/``memory_search`` accept."""
    tools: frozenset[Tool]
    """The memory tools offered to the model."""
    propose_scopes: tuple[Scope, ...]
    """The scopes ``propose_change`` may name (the enum of its ``scope`` argument); empty without the tool.
    A note that names no scope goes to ``default_scope`` (the host fills it in)."""
    default_scope: Scope | None
    """Where a note that names no scope goes; None without ``propose_change``."""
    effective_level: Level
    """The strictest of everything for a note to ``default_scope``; ``never`` exactly when
    ``propose_change`` is not offered. In a messaging chat a note to another scope is at least ``ask``."""
    save_code: str | None
    """Why ``propose_change`` is not offered while memory is on (a key of ``MESSAGES``), else None.
    When memory is off it repeats ``code``."""
    save_message: str | None
    """The sentence for ``save_code``, for the model to say when asked to remember something."""


@dataclass(frozen=True, slots=True, kw_only=True)
class NoteFacts:
    """One note the model proposes with ``propose_change`` (kind ``memory``)."""

    scope: Scope | None
    """The scope the model named, or None (the host fills in ``TurnDecision.default_scope``)."""
    length: int
    """Characters of the note (its summary line and details together)."""
    looks_secret: bool
    """The text looks like it holds a secret (see ``looks_secret``)."""
    saved_in_this_reply: int
    """How many notes this reply has already saved at once."""
    is_delete: bool = False
    """The change deletes an older note (``delete: true``) or shortens it (drops lines of its topic file)."""
    makes_room: bool = False
    """A delete the host suggests itself: a full index, and a note the model saved long ago."""
    unused: bool = False
    """A delete the host suggests itself: a note the model saved long ago that no chat has needed since."""
    outside_text: bool = False
    """The turn read text the person did not type: the results of an OpenAI client's own tools (a page, a
    search), which may tell the model what to remember."""

    def __post_init__(self) -> None:
        _check("scope", self.scope, (*get_args(Scope), None))
        if self.length < 0 or self.saved_in_this_reply < 0:
            raise ValueError("length and saved_in_this_reply cannot be negative")

    @classmethod
    def of(
        cls, text: str, *, scope: Scope | None, saved_in_this_reply: int, is_delete: bool = False,
        makes_room: bool = False, unused: bool = False, outside_text: bool = False, topic: str = "",
    ) -> NoteFacts:
        """The facts of a note whose whole text (summary and details) is ``text``. ``topic``, the slug the
        model named, is checked for a secret too (it is the start of the note's index line, in every prompt)
        but not counted in the length: as it is (``sk-…``), and with its dashes read as spaces (``pin-4821``
        as ``pin 4821``)."""
        return cls(
            scope=scope,
            length=len(text),
            looks_secret=looks_secret(text) or topic_looks_secret(topic),
            saved_in_this_reply=saved_in_this_reply,
            is_delete=is_delete,
            makes_room=makes_room,
            unused=unused,
            outside_text=outside_text,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class NoteDecision:
    """What happens to one proposed note."""

    outcome: Outcome
    """``save_now``: saved at once, with Undo. ``ask``: a proposal the owner (or, in a messaging chat, a
    sender with the permission to confirm) answers. ``locked``: Always confirm; a proposal only the owner or
    the paired sender who asked may confirm. ``refuse``: nothing is saved or proposed."""
    scope: Scope | None
    """Where the note goes (the default filled in); None when refused."""
    reason: str
    """A key of ``MESSAGES`` saying why."""
    message: str
    """The sentence for ``reason``."""
    requester_only: bool
    """In a messaging chat only the paired sender who asked may answer yes/no (pass to ``may_answer``).
    True for ``locked`` and for a messaging note to the agent's or the user's notes."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RevertDecision:
    """Whether the model's ``revert_change`` may run."""

    allowed: bool
    reason: str
    """A key of ``MESSAGES``."""
    message: str


# --------------------------------------------------------------------------------------------------------
# Levels and time
# --------------------------------------------------------------------------------------------------------


def strictest(*levels: Level) -> Level:
    """The strictest of ``levels`` (auto < ask < always < never); ``auto`` for none."""
    return max(levels, key=_RANK.__getitem__, default="auto")


def proposal_expired(*, created_at: datetime, now: datetime) -> bool:
    """A proposal made at ``created_at`` can no longer be confirmed at ``now`` (24 hours, ``PROPOSAL_TTL``)."""
    return now - created_at >= PROPOSAL_TTL


def undo_open(*, saved_at: datetime, now: datetime) -> bool:
    """An automatic note saved at ``saved_at`` can still be undone with its Undo at ``now`` (30 minutes)."""
    return now - saved_at < UNDO_WINDOW


# --------------------------------------------------------------------------------------------------------
# The turn
# --------------------------------------------------------------------------------------------------------


def _off_code(facts: TurnFacts) -> tuple[str, BlockedBy] | None:
    """The narrowest level that turns memory off, or None. Order per DESIGN §6, with the run first."""
    if facts.origin == "subagent":
        # "Sub-agents get no notes and cannot save." Narrower than any switch: turning one on would not help.
        return "subagent", "run"
    if facts.private_chat:
        return "private_chat", "chat"
    if facts.has_agent:
        if not facts.agent_tools_memory:
            return "agent_tools_off", "agent"
        if facts.agent_memory == "none":
            return "agent_memory_none", "agent"
        if facts.agent_memory is None and not facts.agent_addons_memory:
            # "An agent that never had the field keeps reading and saving exactly as it did": without the
            # memory add-on it had no memory at all.
            return "agent_addons_no_memory", "agent"
    if facts.user_enabled is False or facts.provider == "off":
        return "user_off", "user"
    if facts.user_enabled is None:
        # Reading: an unreadable switch fails closed. The user may have turned memory off to keep notes out
        # of a chat; showing them anyway would widen their choice.
        return "user_setting_unreadable", "user"
    if not facts.server_files_on:
        return "server_files_off", "server"
    if facts.provider == "addon_unavailable":
        return "memory_provider_unavailable", "provider"
    if facts.provider == "addon" and not facts.addon_namespaces and facts.has_agent and facts.agent_memory != "mine":
        # "The host enforces it": an add-on of one store for every chat cannot keep an agent's notes apart, so
        # it serves no chat whose choice reads or saves beyond the user's notes, rather than mix them.
        return "memory_provider_one_store", "provider"
    return None


def _choice_reads(facts: TurnFacts) -> frozenset[Scope]:
    """The notes the agent's choice reads outside messaging (memory is on)."""
    if not facts.has_agent:
        return frozenset({"user"})
    reads: dict[AgentMemory | None, frozenset[Scope]] = {
        "own": frozenset({"agent"}),
        "mine_and_own": frozenset({"user", "agent"}),
        "mine": frozenset({"user"}),
        None: frozenset({"user", "agent"}),  # as before, with memory in its Add-ons list
    }
    return reads[facts.agent_memory]


def _choice_writes(facts: TurnFacts) -> tuple[Scope, ...]:
    """The scopes the agent's choice lets a note go to outside the conversation (memory is on)."""
    if not facts.has_agent:
        return ("user",)
    return {
        "own": ("agent",),
        "mine_and_own": ("agent",),
        "mine": ("user",),
        None: ("user", "agent"),  # as before: the model chooses, as it did
    }[facts.agent_memory]


def _level(facts: TurnFacts) -> tuple[Level, str | None]:
    """The strictest level for a note to the default scope, and the save code when it is ``never``."""
    if facts.origin in ("trigger", "job"):
        return "never", "scheduled_run"
    if facts.has_agent and not facts.agent_grant_write:
        return "never", "no_write_grant"
    user: Level = facts.save_mode if facts.save_mode is not None else "ask"
    agent: Level = facts.agent_memory_save if facts.has_agent and facts.agent_memory_save else "auto"
    if facts.origin == "messaging":
        # With auto/ask the row decides; always/never cannot be loosened by it. Reading: an unreadable
        # level stays a floor of ask, since the real one might be always or never.
        floor: Level = user if user in ("always", "never") or facts.save_mode is None else "auto"
        row = facts.messaging_save or "ask"
        if row == "never":
            row_level: Level = "never"
        elif row == "paired_private" and facts.sender_paired and facts.one_to_one is True:
            row_level = "auto"
        else:
            row_level = "ask"
        level = strictest(floor, agent, row_level)
    else:
        row_level = "auto"
        level = strictest(user, agent)
    if level != "never":
        return level, None
    if agent == "never":
        return level, "agent_rule_never"
    if row_level == "never" and user != "never":
        return level, "messaging_never"
    return level, "save_mode_never"


def could_read(facts: TurnFacts) -> bool:
    """Whether any choice of the owner's settings (the switch, the provider, the server's files) would let
    this turn read notes: not in a private chat, a sub-agent's run, or an agent whose Tools leave memory out.
    The host asks before it has read the settings, to skip reading notes a turn could never show."""
    most_open = replace(facts, user_enabled=True, provider="builtin", server_files_on=True)
    turn = decide_turn(most_open)
    return turn.memory_on and bool(turn.read_scopes)


def decide_turn(facts: TurnFacts) -> TurnDecision:
    """What this turn reads and which memory tools and scopes the model is offered."""
    off = _off_code(facts)
    if off is not None:
        code, blocked_by = off
        return TurnDecision(
            memory_on=False,
            code=code,
            blocked_by=blocked_by,
            fix=MESSAGES[code],
            served_by=None,
            read_scopes=frozenset(),
            tools=frozenset(),
            propose_scopes=(),
            default_scope=None,
            effective_level="never",
            save_code=code,
            save_message=MESSAGES[code],
        )

    messaging = facts.origin == "messaging"
    if messaging:
        # A messaging chat reads the user's notes and its conversation's, plus the agent's per its choice.
        conversation: frozenset[Scope] = frozenset({"user", "channel"})
        reads = conversation | (_choice_reads(facts) & {"agent"})
        # The conversation first; another scope only from a paired sender, where the choice allows it.
        writes: tuple[Scope, ...] = ("channel", *(_choice_writes(facts) if facts.sender_paired else ()))
    else:
        reads = _choice_reads(facts)
        writes = _choice_writes(facts)

    level, save_code = _level(facts)
    tools: set[Tool] = {"context_read", "memory_search"}
    if level != "never":
        tools.add("propose_change")
    if level not in ("never", "always"):
        # Under Always confirm "revert_change is refused, and you undo with the Undo of the note": it is not
        # offered either (``decide_revert`` still refuses a call the model makes anyway).
        tools.add("revert_change")
    return TurnDecision(
        memory_on=True,
        code=None,
        blocked_by=None,
        fix=None,
        served_by="addon" if facts.provider == "addon" else "builtin",
        read_scopes=reads,
        tools=frozenset(tools),
        propose_scopes=writes if level != "never" else (),
        default_scope=writes[0] if level != "never" else None,
        effective_level=level,
        save_code=save_code,
        save_message=MESSAGES[save_code] if save_code else None,
    )


# --------------------------------------------------------------------------------------------------------
# A note, a revert, an answer
# --------------------------------------------------------------------------------------------------------


def _note(
    outcome: Outcome, scope: Scope | None, reason: str, *, requester_only: bool = False
) -> NoteDecision:
    return NoteDecision(
        outcome=outcome,
        scope=scope,
        reason=reason,
        message=MESSAGES[reason],
        requester_only=requester_only,
    )


def decide_note(facts: TurnFacts, note: NoteFacts) -> NoteDecision:
    """What happens to a note the model proposes on a turn with ``facts``. A delete the host suggests itself
    (to make room, or of a note nobody needs) waits as any delete does (asked, or locked under Always
    confirm, who may answer unchanged), and whenever it waits it says why it was suggested."""
    decision = _decide_note(facts, note)
    why = "make_room" if note.makes_room else "unused" if note.unused else None
    if why and note.is_delete and decision.outcome in ("ask", "locked"):
        return replace(decision, reason=why, message=MESSAGES[why])
    return decision


def _decide_note(facts: TurnFacts, note: NoteFacts) -> NoteDecision:
    turn = decide_turn(facts)
    if "propose_change" not in turn.tools:
        assert turn.save_code is not None
        return _note("refuse", None, turn.save_code)

    scope = note.scope if note.scope is not None else turn.default_scope
    assert scope is not None
    if scope not in turn.propose_scopes:
        if (
            facts.origin == "messaging"
            and not facts.sender_paired
            and scope in decide_turn(replace(facts, sender_paired=True)).propose_scopes
        ):
            return _note("refuse", None, "sender_not_paired")
        return _note("refuse", None, "scope_not_allowed")

    level = turn.effective_level
    # An add-on of one store for every chat (no namespaces): in a messaging chat that is more than the
    # conversation.
    addon = turn.served_by == "addon"
    one_store = addon and not facts.addon_namespaces
    other_scope = facts.origin == "messaging" and (scope != "channel" or one_store)
    if other_scope:
        # "a note for another scope never saves at once", and only the sender who asked confirms it.
        level = strictest(level, "ask")
    if level == "always":
        return _note("locked", scope, "always_confirm", requester_only=True)
    if level == "ask":
        if other_scope:
            reason = "confirm_other_scope"
        elif facts.origin == "messaging":
            reason = "messaging_asks"
        elif facts.save_mode is None:
            reason = "settings_unreadable"
        else:
            reason = "ask_first"
        return _note("ask", scope, reason, requester_only=other_scope)

    # auto: saved at once, unless the note is one the owner should see first.
    if note.is_delete:
        return _note("ask", scope, "delete_needs_confirmation")
    if note.looks_secret:
        return _note("ask", scope, "looks_secret")
    if note.length > LONG_NOTE_CHARS:
        return _note("ask", scope, "too_long")
    if note.saved_in_this_reply >= MAX_AUTO_SAVES_PER_REPLY:
        return _note("ask", scope, "reply_limit")
    if note.outside_text:
        return _note("ask", scope, "outside_text")
    if addon:
        # "An automatic note is one change set like any other. The Undo on the chat, the model's revert_change
        # and the Files history restore the earlier text. Every automatic note is in the audit of changes." The
        # add-on keeps its notes itself and offers no way to read the earlier text back, so the host can give
        # its note neither: the note waits for confirmation instead.
        return _note("ask", scope, "addon_no_undo")
    return _note("save_now", scope, "paired_private" if facts.origin == "messaging" else "save_and_tell")


def decide_typed_note(facts: TurnFacts, note: NoteFacts, *, sender_can_confirm: bool = False) -> NoteDecision:
    """What happens to a note the person typed with ``/remember <fact>`` on a turn with ``facts``.

    Reading: typing the note is the person's own yes, so it saves at once (with Undo) wherever their yes
    would count: the owner in their own chat, under every save level but Never, as the Memory tab's Add does; in a
    messaging chat a sender whose yes answers a note there (``may_answer``), and wherever the model's note
    would save at once (a paired sender in a one-to-one chat under ``paired_private``). Anyone else's waits for
    confirmation, as a proposal. A chat that may not save at all (memory off, a private chat, a run, an
    agent or a row that never saves) refuses, as it would the model's note. A note that looks like a secret
    or is long waits for a confirmation on the card first, whoever typed it: notes go into every prompt.
    It goes to the chat's default scope (the conversation's notes in a messaging chat)."""
    turn = decide_turn(facts)
    if "propose_change" not in turn.tools:
        assert turn.save_code is not None
        return _note("refuse", None, turn.save_code)
    if turn.served_by == "addon":
        return _note("refuse", None, "typed_addon")
    scope = turn.default_scope
    assert scope is not None
    # Under Always confirm a note that waits is locked, as the model's is: only its requester or the inbox.
    waits: Outcome = "locked" if turn.effective_level == "always" else "ask"
    locked = waits == "locked"
    if note.looks_secret:
        return _note(waits, scope, "looks_secret", requester_only=locked)
    if note.length > LONG_NOTE_CHARS:
        return _note(waits, scope, "too_long", requester_only=locked)
    if facts.origin != "messaging":
        return _note("save_now", scope, "typed_note")
    # Where the model's note would save at once, or where their own yes counts.
    if _decide_note(facts, note).outcome == "save_now" or may_answer(
            facts, requester_only=False, answerer_paired=facts.sender_paired,
            answerer_can_confirm=sender_can_confirm, answerer_is_requester=True, scope=scope):
        return _note("save_now", scope, "typed_note")
    return _note(waits, scope, "typed_needs_confirmer", requester_only=locked)


def decide_revert(facts: TurnFacts, *, outside_text: bool = False) -> RevertDecision:
    """Whether the model's ``revert_change`` may run on this turn: refused under Always confirm, and on a turn
    that read text the person did not type (``outside_text``, as for notes: a web page must not make memory
    forget; the person's own Undo still can)."""
    turn = decide_turn(facts)
    if turn.effective_level == "always":  # not offered, and refused when called anyway
        return RevertDecision(allowed=False, reason="revert_locked", message=MESSAGES["revert_locked"])
    if "revert_change" not in turn.tools:
        assert turn.save_code is not None
        return RevertDecision(allowed=False, reason=turn.save_code, message=MESSAGES[turn.save_code])
    if outside_text:
        return RevertDecision(allowed=False, reason="revert_outside_text", message=MESSAGES["revert_outside_text"])
    return RevertDecision(allowed=True, reason="revert_allowed", message=MESSAGES["revert_allowed"])


def may_answer(
    facts: TurnFacts,
    *,
    requester_only: bool,
    answerer_paired: bool,
    answerer_can_confirm: bool,
    answerer_is_requester: bool,
    scope: Scope | None = None,
) -> bool:
    """Whether a sender's yes/no in a messaging chat answers a pending note.

    ``facts`` are the conversation's facts now (its current settings; the answerer's pairing is taken from
    ``answerer_paired``). ``requester_only`` is the note's ``NoteDecision.requester_only``; ``scope`` the
    note's scope, when known. Expiry is the caller's (``proposal_expired``). An answer that does not count is
    ignored and the note waits for the owner in the web inbox, whose own confirmation this does not govern.
    Why it does not count is ``answer_refusal``.
    """
    return answer_refusal(facts, requester_only=requester_only, answerer_paired=answerer_paired,
                          answerer_can_confirm=answerer_can_confirm, answerer_is_requester=answerer_is_requester,
                          scope=scope) is None


def answer_refusal(
    facts: TurnFacts,
    *,
    requester_only: bool,
    answerer_paired: bool,
    answerer_can_confirm: bool,
    answerer_is_requester: bool,
    scope: Scope | None = None,
    locked: bool = False,
) -> str | None:
    """Why a sender's yes/no in a messaging chat does not answer a pending note (a key of ``MESSAGES``), or
    None when it does (``may_answer``, with the same arguments). ``locked``: the note was proposed under
    Always confirm (``requester_only`` is then true as well); it names the reason when the level is looser
    now.

    The first reason that holds, widest first: the chat is no messaging chat; memory or saving is off there
    now (the turn's ``save_code``: ``user_off``, ``messaging_never``, ``save_mode_never``…); the note's scope
    is not one this chat may save to now (``sender_not_paired`` for an unpaired answerer, else
    ``scope_not_allowed``); the answerer is not paired or lacks the permission Confirm changes from the chat
    (``answer_needs_confirmer``); only the paired sender who asked may answer (``answer_requester_only``
    under Always confirm, ``confirm_other_scope`` for a note beyond the conversation)."""
    if facts.origin != "messaging":
        return "answer_outside_messaging"
    turn = decide_turn(replace(facts, sender_paired=answerer_paired))
    # Memory off, or saving off since the note was proposed: the chat cannot save it; the owner still can.
    if "propose_change" not in turn.tools:
        return turn.save_code or "save_mode_never"
    if scope is not None and scope not in turn.propose_scopes:
        return "scope_not_allowed" if answerer_paired else "sender_not_paired"
    if not (answerer_paired and answerer_can_confirm):
        return "answer_needs_confirmer"
    always = locked or turn.effective_level == "always"
    if (requester_only or always) and not answerer_is_requester:
        return "answer_requester_only" if always else "confirm_other_scope"
    return None


# --------------------------------------------------------------------------------------------------------
# Secrets
# --------------------------------------------------------------------------------------------------------

#: The names of a secret that people write before its value (each pattern below adds its own), in the
#: languages people write notes in: "Passwort"/"Kennwort", "mot de passe", "contraseña", "senha",
#: "wachtwoord", "lösenord", "hasło", "şifre", "пароль", "パスワード", "密码", "비밀번호", "كلمة المرور"…
_PASSWORD_NAMES = (r"[a-zäöü]*(?:passwort|kennwort)|password|passwd|passphrase|passcode|pwd|mot[ -]de[ -]passe|contrase[ñn]a|"
                   r"senha|wachtwoord|l[öo]senord|adgangskode|passord|salasana|has[łl]o|heslo|jelsz[óo]|[şs]ifre|"
                   r"пароль|парол|パスワード|暗証番号|密码|密碼|비밀번호|كلمة (?:المرور|السر)|סיסמ[הא]")
_KEY_NAMES = r"api[ _-]?key|secret[ _-]?key|access[ _-]?key|private[ _-]?key|client[ _-]?secret"
_TOKEN_NAMES = r"(?:access|auth|bearer|refresh)[ _-]?token"
_WIFI_NAMES = r"(?:wi-?fi|wlan)[ _-]?(?:key|code|password|passwort|schl[üu]ssel|cl[ée])"
#: "is" between the name of a secret and its value: "Passwort ist …", "mot de passe est …", "contraseña
#: es …", "senha é …", "lösenord är …", "パスワードは…"
_IS = r"(?:\b(?:is|was|ist|war|lautet|est|était|es|era|é|è|är|er|jest|je)\b|は|是|[은는]|[—–])"

_SECRET_PATTERNS: tuple[re.Pattern[str], ...] = tuple(
    re.compile(pattern)
    for pattern in (
        r"\bsk-(?:[A-Za-z0-9]+-)*[A-Za-z0-9_]{16,}",  # OpenAI, Anthropic (sk-ant-…), sk-proj-…
        r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})",  # GitHub
        r"\bxox[abposr]-[A-Za-z0-9-]{10,}",  # Slack
        r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b",  # AWS access key id
        r"\bAIza[0-9A-Za-z_-]{35}",  # Google API key
        r"\bglpat-[A-Za-z0-9_-]{20,}",  # GitLab
        r"\b[rs]k_(?:live|test)_[A-Za-z0-9]{16,}",  # Stripe
        r"\beyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}",  # JWT
        r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----",  # PEM, OpenSSH, PGP
        r"(?<![0-9A-Fa-f])[0-9A-Fa-f]{32,}(?![0-9A-Fa-f])",  # a long hex token
        # "password: hunter2", "my passphrase is …", "PIN code = 1234", "Passwort: …"
        (
            rf"(?i)(?<![a-z])(?:{_PASSWORD_NAMES}|{_KEY_NAMES}|{_TOKEN_NAMES})"
            rf"s?\s*(?:[:=：]|{_IS})\s*\S+"
        ),
        rf"(?i)(?<![a-z])pin(?:[ _-]?code)?\s*(?:[:=：]|{_IS})\s*\d{{4,}}",
        # "my password for netflix is swordfish", "Mein Netflix-Passwort ist …": a few words between the name
        # of the secret and its value
        (
            rf"(?i)(?<![a-z])(?:{_PASSWORD_NAMES}|{_KEY_NAMES}|{_WIFI_NAMES})s?(?![a-z])"
            rf"(?:[ \t]+[^\s.;]+){{0,4}}?[ \t]*(?:[ \t](?:{_IS})|[=:：])[ \t]*\S+"
        ),
        # "my password hunter2", "bank PIN 4821", "wifi key abcd1234": such a name, and within a few words a
        # value with a digit in it
        (
            rf"(?i)(?<![a-z])(?:{_PASSWORD_NAMES}|pins?|pin[ _-]?(?:code|number)|{_KEY_NAMES}|"
            rf"{_WIFI_NAMES}|network[ _-]?key|security[ _-]?code|cvv|cvc|"
            rf"{_TOKEN_NAMES})s?(?![a-z])" r"[^\n.;]{0,40}?(?<![^\s:=(\"'])"
            r"(?!(?:19|20)\d\d(?![^\s,;]))(?=[^\s,;]*\d)[^\s,;]{4,}"  # a year is no value ("pins since 2019")
        ),
        r"(?i)(?<![a-z])pw\s*[:=]\s*\S+",  # "wifi pw: …"
        r"(?i)(?:login|user(?:name)?|account|e-?mail|wi-?fi)\b[^\n]{0,40}?(?<![a-z])pass\s*[:=]\s*\S+",  # "login: bob / pass: …"
        # "AWS_SECRET_ACCESS_KEY=…", "token: …": an identifier naming a secret, assigned a value
        r"(?i)(?<![a-z])[a-z_]*(?:secret|token|api_?key|access_?key)[a-z_]*\s*[:=]\s*\S{6,}",
        r"(?i)\bbearer\s+[A-Za-z0-9._~+/-]{20,}",
    )
)
# A long run of base64/url-safe characters that looks generated: its character class (upper, lower, digit,
# other) changes at almost every other character, or it changes often and holds a cluster of five
# consonants of one case. Words, paths, camelCase and SNAKE_CASE names do neither. A heuristic: it misses
# about 1 in 300 random 32-character tokens that carry no label such as "token:".
_TOKEN_RUN = re.compile(r"[A-Za-z0-9+/_=-]{24,}")
_CONSONANTS = re.compile(r"[b-df-hj-np-tv-xz]{5,}|[B-DF-HJ-NP-TV-XZ]{5,}")
_CARD_RUN = re.compile(r"(?<!\d)\d(?:[ -]?\d){12,18}(?!\d)")


def _char_class(char: str) -> int:
    return 0 if char.isupper() else 1 if char.islower() else 2 if char.isdigit() else 3


def _looks_generated(run: str) -> bool:
    classes = [_char_class(char) for char in run]
    if len({c for c in classes if c < 3}) < 2:
        return False
    changes = sum(1 for left, right in pairwise(classes) if left != right) / (len(run) - 1)
    return changes >= 0.4 or (changes >= 0.25 and _CONSONANTS.search(run) is not None)


def _card_prefix(digits: str) -> bool:
    """Starts like a payment card: Amex, Diners, JCB (3), Visa (4), Mastercard (51-55, 2221-2720), Discover,
    UnionPay, Maestro (6). Keeps a row of years or a phone number from counting as a card."""
    return (digits[0] in "3456" and digits[:2] != "50") or "2221" <= digits[:4] <= "2720"


def _luhn(digits: str) -> bool:
    total = 0
    for position, char in enumerate(reversed(digits)):
        value = int(char)
        if position % 2 == 1:
            value = value * 2 - 9 if value > 4 else value * 2
        total += value
    return total % 10 == 0


def topic_looks_secret(topic: str) -> bool:
    """Whether a note's topic (a slug, the start of its index line) holds a secret: as it is (``sk-…``), or with
    its dashes read as spaces (``pin-4821`` as ``pin 4821``)."""
    return bool(topic) and (looks_secret(topic) or looks_secret(topic.replace("-", " ")))


def looks_secret(text: str) -> bool:
    """Whether ``text`` looks like it holds a secret: an API key or token, a password, a private key, or a
    card number that passes the Luhn check. Errs towards "yes": a false alarm only asks first."""
    if any(pattern.search(text) for pattern in _SECRET_PATTERNS):
        return True
    if any(_looks_generated(run) for run in _TOKEN_RUN.findall(text)):
        return True
    for run in _CARD_RUN.findall(text):
        digits = re.sub(r"\D", "", run)
        if 13 <= len(digits) <= 19 and _card_prefix(digits) and _luhn(digits):
            return True
    return False
