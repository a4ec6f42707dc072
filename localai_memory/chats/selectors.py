"""Reads of chats, and the facts of a turn that the policy decides on.

``turn_facts`` is the one place that reads everything with a say on a chat's memory (the chat, its agent,
the owner's memory settings, the sender) into the policy's frozen ``TurnFacts``; what cannot be read is
passed as unknown, and the policy counts it as "ask".
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from contextlib import ExitStack, nullcontext
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, cast

import psycopg
from django.db import DatabaseError, connection, transaction
from django.db.models import QuerySet

from localai_memory.core.access import owned_row_or_404
from localai_memory.memory import policy, providers
from localai_memory.memory.models import MemorySettings
from localai_memory.memory.selectors import MemoryState, memory_state, memory_state_of
from localai_memory.notes.paths import Scope

from .models import Chat, Message, Role

if TYPE_CHECKING:
    from .services import Sender

log = logging.getLogger(__name__)


def access_chat(user_id: object, chat_id: object) -> Chat:
    """The chat ``chat_id`` if ``user_id`` (an id or a user) owns it, else NotFound."""
    owner_id = getattr(user_id, "pk", user_id)
    return owned_row_or_404(Chat, join="agent", owner=owner_id, pk=chat_id)  # every turn starts here


def chat_list(*, owner_id: int) -> QuerySet[Chat]:
    return Chat.objects.filter(owner_id=owner_id).select_related("agent").order_by("-updated_at", "-id")


def chat_messages(*, chat: Chat) -> QuerySet[Message]:
    """A chat's messages in the order they were stored (``Message.Meta.ordering``): each reply right after its
    message, also when two turns of the chat ran at the same moment (``chats.services.messages_add``)."""
    return Message.objects.filter(chat=chat).order_by("id")


def answered_since(*, owner_id: int, binding_id: int, conversation_key: str, since: datetime) -> bool:
    """Whether the assistant answered in a messaging conversation after ``since``: in any of its chats (one
    started afresh with /new, or anew for another agent, is the same conversation)."""
    return Message.objects.filter(chat__owner_id=owner_id, chat__binding_id=binding_id,
                                  chat__conversation_key=conversation_key, role=Role.ASSISTANT,
                                  created_at__gt=since).exists()


def sender_spoke_at(*, owner_id: int, binding_id: int, conversation_key: str, sender_id: int) -> datetime | None:
    """When the latest message of messaging sender ``sender_id`` in a conversation arrived (in any of its
    chats), or None when they have none there. A turn stores its message with the model's answer (one the
    model failed is kept alone, after the bot said so): the bot has answered them since then."""
    return (Message.objects.filter(chat__owner_id=owner_id, chat__binding_id=binding_id,
                                   chat__conversation_key=conversation_key, role=Role.USER, sender_id=sender_id)
            .order_by("-created_at").values_list("created_at", flat=True).first())


def read_memory_state(*, owner_id: int) -> MemoryState | None:
    """The owner's memory settings, or None when they cannot be read (the policy then asks first)."""
    try:
        return memory_state(user_id=owner_id)
    except DatabaseError:
        log.warning("memory settings of user %s could not be read", owner_id, exc_info=True)
        return None


@dataclass(frozen=True)
class TurnRead:
    """A read another app adds to the turn's first round trip to the database (``services.turn_read_hooks``):
    one SELECT, whether its results come in binary, and what to make of its rows."""

    sql: str
    params: list[Any]
    parse: Callable[[list[tuple[Any, ...]]], Any]
    binary: bool = False


def read_turn_memory(*, owner_id: int, scopes: dict[str, Scope], extra: Mapping[str, TurnRead] | None = None,
                     arrived: float | None = None,
                     ) -> tuple[MemoryState | None, dict[str, str], dict[str, Any], datetime]:
    """What a turn reads before it decides, in one round trip to the database: the owner's memory settings
    (None when the stored row cannot be understood: the policy then asks first), the index file of each
    scope the chat can name (path → text; a scope without notes is missing), and the ``extra`` reads (name →
    parsed result; recall's notes). The statements go out together in psycopg's pipeline mode and come back
    together. An extra read that fails is left out (its reader reads for itself, or degrades): the turn is
    read again without the extras, and only a database that cannot answer that either raises (a 503). The
    turn shows only what its decision lets it read.

    The fourth value is when the turn's message arrived (``arrived``, a ``time.monotonic()`` reading of this
    process; None: at the read), on the database's clock, the one Forget everything is recorded by
    (``MemorySettings.forgot_at``): the read's own ``statement_timestamp()`` less the time that passed here
    from the arrival until its answer came back. So it is never later than the arrival, and two frontends
    whose clocks differ from each other (or from the database's) compare a turn with a forget alike."""
    from localai_memory.notes.models import NoteFile

    fields = list(MemorySettings._meta.concrete_fields)
    columns = ", ".join(f"s.{connection.ops.quote_name(f.column)}" for f in fields)
    sql = (f"SELECT statement_timestamp(), files.paths, files.texts, {columns} "
           f"FROM (SELECT array_agg(path) AS paths, array_agg(content) AS texts FROM {NoteFile._meta.db_table} "
           f"      WHERE owner_id = %s AND path = ANY(%s)) AS files "
           f"LEFT JOIN {MemorySettings._meta.db_table} s ON s.user_id = %s")
    paths = sorted({scope.index_path for scope in scopes.values()})
    extra = dict(extra or {})
    try:
        # Inside a caller's transaction a failed statement would spoil it: try under a savepoint there.
        with transaction.atomic() if connection.in_atomic_block and extra else nullcontext():
            read_at, found_paths, texts, values, results = _pipelined(sql, [owner_id, paths, owner_id], extra)
    except DatabaseError:
        if not extra:
            raise
        log.warning("the turn's reads %s failed; reading without them", sorted(extra), exc_info=True)
        read_at, found_paths, texts, values, results = _pipelined(sql, [owner_id, paths, owner_id], {})
    if arrived is not None:
        read_at -= timedelta(seconds=max(0.0, time.monotonic() - arrived))
    files = dict(zip(found_paths or [], texts or [], strict=True))
    try:
        row = None if values[0] is None else MemorySettings.from_db(
            connection.alias, [f.attname for f in fields], values)
        return memory_state_of(row, user_id=owner_id), files, results, read_at
    except (DatabaseError, ValueError, TypeError):
        log.warning("memory settings of user %s could not be read", owner_id, exc_info=True)
        return None, files, results, read_at


def _pipelined(sql: str, params: list[Any], extra: Mapping[str, TurnRead],
               ) -> tuple[datetime, list[str] | None, list[str] | None, list[Any], dict[str, Any]]:
    connection.ensure_connection()
    raw = connection.connection
    # Django's wrapper turns psycopg's errors into django.db's (a database that went away is a clean 503).
    with connection.wrap_database_errors, ExitStack() as cursors, raw.pipeline():
        # psycopg's own cursors (server-side binding), not Django's client-side ones: they can pipeline and
        # take binary results.
        main = cursors.enter_context(psycopg.Cursor(raw))
        main.execute(sql, params)
        others = {}
        for name, read in extra.items():
            others[name] = cursors.enter_context(psycopg.Cursor(raw))
            others[name].execute(read.sql, read.params, binary=read.binary)
        # One row: the aggregate subquery always has one, and the settings are LEFT JOINed to it.
        read_at, found_paths, texts, *values = cast("tuple[Any, ...]", main.fetchone())
        rows = {name: cursor.fetchall() for name, cursor in others.items()}
    results: dict[str, Any] = {}
    for name, read in extra.items():
        try:
            results[name] = read.parse(rows[name])
        except Exception:
            log.exception("the turn's read %r could not be parsed", name)
    return read_at, found_paths, texts, values, results


def turn_facts(*, chat: Chat, sender: Sender | None = None, state: MemoryState | None = None,
               sender_paired: bool | None = None) -> policy.TurnFacts:
    """Everything with a say on this chat's memory now, for ``memory.policy``."""
    if state is None:
        state = read_memory_state(owner_id=chat.owner_id)
    agent = chat.agent
    paired = sender_paired if sender_paired is not None else bool(sender and sender.paired)
    return policy.TurnFacts(
        private_chat=chat.private,
        has_agent=agent is not None,
        agent_tools_memory=agent.tools_memory if agent else True,
        agent_addons_memory=agent.addons_memory if agent else False,
        agent_memory=agent.memory if agent else None,  # type: ignore[arg-type]
        agent_memory_save=agent.memory_save if agent else None,  # type: ignore[arg-type]
        agent_grant_write=agent.grant_write if agent else True,
        user_enabled=state.enabled if state else None,
        save_mode=state.save_mode if state else None,  # type: ignore[arg-type]
        messaging_save=state.messaging_save if state else None,  # type: ignore[arg-type]
        server_files_on=state.server_files_on if state else True,
        provider=state.provider_state if state else "builtin",  # type: ignore[arg-type]
        addon_namespaces=state.addon_namespaces if state else False,
        origin=chat.origin,  # type: ignore[arg-type]
        sender_paired=paired if chat.origin == "messaging" else False,
        one_to_one=chat.one_to_one if chat.origin == "messaging" else None,
    )


def chat_scopes(*, chat: Chat) -> dict[str, Scope]:
    """The notes scopes this chat can name: always the user's; the agent's with an agent; the conversation's
    for a messaging chat that knows its conversation key. The policy picks which of them a turn may use."""
    scopes: dict[str, Scope] = {"user": Scope.user()}
    if chat.agent_id is not None:
        scopes["agent"] = Scope.agent(chat.agent_id)
    if chat.origin == "messaging" and chat.conversation_key:
        scopes["channel"] = Scope("channel", chat.conversation_key)
    return scopes


def memory_status(*, chat: Chat) -> dict:
    """``GET /api/chats/{id}/tools``: the memory object ({on, code, blocked_by, fix}), the tools offered and
    the scopes, from the policy's turn decision for this chat now."""
    from localai_memory.notes import selectors as notes_selectors

    from .context import BUILTIN_TOOLS, SCOPE_ORDER, IndexShown, offered_tools, topic_count

    state = read_memory_state(owner_id=chat.owner_id)
    decision = policy.decide_turn(turn_facts(chat=chat, state=state))
    scopes = chat_scopes(chat=chat)
    shown = [IndexShown(kind, scopes[kind], notes_selectors.index_text(owner_id=chat.owner_id, scope=scopes[kind]))
             for kind in SCOPE_ORDER if decision.memory_on and kind in decision.read_scopes and kind in scopes]
    tools = offered_tools(decision, topics=topic_count(shown))
    if decision.memory_on and decision.served_by == "addon" and state is not None:  # as the turn offers them
        names, writes = providers.addon_tool_names(state.provider_choice)
        tools = (["propose_change"] if writes and "propose_change" in decision.tools else []) + names
    return {
        "memory": {"on": decision.memory_on, "code": decision.code, "blocked_by": decision.blocked_by,
                   "fix": decision.fix, "served_by": decision.served_by},
        "private": chat.private,
        "tools": tools,
        "builtin_tools": list(BUILTIN_TOOLS),
        "scopes": {
            "read": [kind for kind in SCOPE_ORDER if kind in decision.read_scopes and kind in scopes],
            "propose": [kind for kind in decision.propose_scopes if kind in scopes],
            "default": decision.default_scope,
        },
        "saving": {"level": decision.effective_level, "code": decision.save_code,
                   "message": decision.save_message},
    }
