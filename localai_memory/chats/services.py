"""Writes of chats, and the turn: one user message in, one reply out, with memory applied.

``turn_run`` reads the facts of the chat, asks ``memory.policy.decide_turn`` what the turn may read and
offer, builds the prompt (``chats.context``), calls the model (``chats.llm``) in a bounded tool loop
(``chats.tools``) and records what memory did on the assistant message. The user's message is stored with
the reply when the model has answered, and alone when the model fails. No transaction is held open while
the model thinks: each note written, proposal made or message stored is its own short transaction.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import Exists, OuterRef
from django.utils import timezone

from localai_memory.agents.selectors import access_agent
from localai_memory.core.after_response import after_response
from localai_memory.core.db import session_lock, unflushed_commit_cte
from localai_memory.core.errors import Conflict, Gone, InvalidInput, NotFound, UpstreamError
from localai_memory.memory import policy, providers
from localai_memory.memory.selectors import memory_state_of
from localai_memory.notes.paths import Scope

from . import context, llm, remember
from .models import Chat, Message, Origin, Role
from .selectors import TurnRead, access_chat, chat_scopes, read_memory_state, read_turn_memory, turn_facts
from .tools import ToolContext, new_report, run_deferred, run_tool

log = logging.getLogger(__name__)

#: Rounds of tool calls before the model must answer.
MAX_TOOL_ROUNDS = 6
#: Tool calls the host runs in one round; more are answered with an error.
MAX_CALLS_PER_ROUND = 8
#: Earlier messages of the chat sent as context.
HISTORY_MESSAGES = 40
MESSAGE_MAX_CHARS = 32 * 1024
TITLE_MAX_CHARS = 80


class ChatDeleted(Gone):
    """410 ``chat_deleted``: the chat was deleted (``chat_delete``) while a turn ran in it. The turn's message
    and reply are not stored, nor is anything suggested from it afterwards."""

    code = "chat_deleted"

    def __init__(self, message: str = "This chat was deleted while the model was answering: neither your "
                                      "message nor the reply was kept.", **kwargs: Any) -> None:
        super().__init__(message, **kwargs)


@dataclass(frozen=True)
class Sender:
    """Who wrote a message in a messaging chat: their id, a display name, whether they are paired with the
    owner, and whether they hold the permission "Confirm changes from the chat"."""

    sender_id: int
    display: str
    paired: bool
    can_confirm: bool


@dataclass(frozen=True)
class TurnResult:
    chat_id: int
    reply: str
    #: the stored messages' ids; None when the turn stores them after the response (``store_after_response``)
    user_message_id: int | None
    assistant_message_id: int | None
    memory: dict[str, Any]
    model: str = ""
    usage: dict[str, Any] | None = None
    #: milliseconds spent waiting for the model, and on recall, in this turn (``server_timing``)
    timings: dict[str, float] = field(default_factory=dict)
    #: a command the chat ran instead of asking the model (``remember``: ``/remember <fact>``), else None
    command: str | None = None
    #: the model's calls of the client's own tools (``ClientTools``): the turn ends with them, unanswered
    tool_calls: tuple[llm.ToolCall, ...] = ()
    #: why the model's last answer ended, as its server said (``stop``, ``length`` when cut off at
    #: ``max_tokens``, ``content_filter``…); ``tool_calls`` when it ends with the client's calls
    finish_reason: str = "stop"


@dataclass(frozen=True)
class ClientTools:
    """The tools an OpenAI client brings to ``/v1/chat/completions``. The model is offered them beside
    memory's; the host never runs them: a reply that calls one ends the turn with those calls (``tool_calls``),
    the client runs them and sends their results in its next request, which continues the turn. The host's
    own calls in the same reply are run (a note saved is saved)."""

    definitions: tuple[dict[str, Any], ...] = ()
    #: OpenAI's ``tool_choice``: None (``auto``), ``none`` (not offered), ``required``, or one named tool
    choice: str | dict[str, Any] | None = None
    parallel: bool | None = None

    @property
    def offered(self) -> list[dict[str, Any]]:
        return [] if self.choice == "none" else list(self.definitions)

    @property
    def names(self) -> frozenset[str]:
        return frozenset(tool["function"]["name"] for tool in self.definitions)


@dataclass(frozen=True)
class RecallRequest:
    """What a recall hook is given: the turn's chat, message, earlier messages, decision and scopes."""

    chat: Chat
    content: str
    history: list[dict[str, Any]]
    decision: policy.TurnDecision
    scopes: dict[str, Scope]
    #: how the new message was stored (None: recall reads it from the chat)
    typed_by_user: bool | None = None
    #: what the ``turn_read_hooks`` read with the settings (name → result), for every scope of the chat:
    #: a hook keeps only ``decision.read_scopes``
    prefetched: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class RecallContribution:
    """What a recall hook adds: a fenced block of data for the system prompt, and ``report["recall"]``."""

    text: str = ""
    report: dict[str, Any] = field(default_factory=dict)


#: Semantic recall plugs in here. A hook runs only while memory is on and the built-in provider serves it,
#: reads only ``decision.read_scopes``, and must present what it adds as data (fenced, under a header).
recall_hooks: list[Callable[[RecallRequest], RecallContribution | None]] = []

#: Reads other apps add to the turn's first round trip to the database (``selectors.read_turn_memory``), by
#: name: each gets the owner and every scope the chat can name (the policy has not decided yet) and returns
#: a ``TurnRead`` or None; the results reach the recall hooks as ``RecallRequest.prefetched``. Recall reads
#: the owner's notes and vectors this way, a round trip less per turn.
turn_read_hooks: dict[str, Callable[[int, dict[str, Scope]], TurnRead | None]] = {}


@dataclass(frozen=True)
class TurnAhead:
    """What a ``turn_ahead_hooks`` hook is given as a turn starts: the chat's owner, the new message, the earlier
    messages (the request's, or the chat's), and whether the person typed the message."""

    owner_id: int
    content: str
    history: list[dict[str, Any]]
    typed_by_user: bool


#: Work other apps start on their own threads as a turn starts, before its first round trip, for what the
#: turn will need later (recall embeds the turn's query while the turn reads the database). Run only where
#: the turn's reads run (``_turn_reads``), first on the message alone (before the chat's earlier messages are
#: read, or as a request that has yet to find its chat arrives: ``turn_arriving``); a hook must return at once
#: and never raise, and should not do twice what is on its way.
turn_ahead_hooks: list[Callable[[TurnAhead], None]] = []


def client_tools_check(client_tools: ClientTools, *, owner_id: int) -> None:
    """Refuse (400 ``tool_name_taken``) a client's tool named as one of the memory add-on's the user picked,
    before anything is written; the turn checks again against what it offers."""
    state = read_memory_state(owner_id=owner_id)
    names, _ = providers.addon_tool_names(state.provider_choice) if state is not None else ([], False)
    _refuse_taken_names(client_tools, names)


def _refuse_taken_names(client_tools: ClientTools, names: Iterable[str]) -> None:
    """400 ``tool_name_taken`` when a client's tool has the name of one of memory's offered here."""
    if taken := client_tools.names & set(names):
        raise InvalidInput(f"the tool name {min(taken)} is memory's own here; give your tool another name",
                           code="tool_name_taken")


#: A conversation is found by what was said only once its user messages hold this many characters: many open
#: with the same "hi", and two of them must not share a chat (an opening that short starts a new one).
THREAD_MIN_CHARS = 20


def _call_ids(message: dict[str, Any]) -> list[str]:
    calls = message.get("tool_calls") if message.get("role") == "assistant" else None
    return [str(call.get("id")) for call in calls if isinstance(call, dict)] if isinstance(calls, list) else []


def thread_key(messages: list[dict[str, Any]]) -> str:
    """A hash of a conversation's user and assistant messages (their text, trimmed, and the ids of the
    assistant's tool calls; system prompts and tool output left out, since clients rewrite them), for OpenAI
    clients that send the whole conversation but no chat id: the key of a chat after a reply equals the key
    of what the client sends before its next message (or with its tools' results), so that turn continues the
    chat instead of starting one per message."""
    digest = hashlib.sha256()
    for message in messages:
        if message.get("role") in ("user", "assistant"):
            text = message.get("content")
            entry: list[Any] = [message["role"], text.strip() if isinstance(text, str) else ""]
            if ids := _call_ids(message):
                entry.append(ids)
            digest.update(json.dumps(entry).encode())
    return digest.hexdigest()


def chat_of_thread(*, owner_id: int, agent_id: int | None, earlier: list[dict[str, Any]],
                   unanswered: list[dict[str, Any]] | None = None) -> tuple[Chat | None, bool]:
    """The owner's chat (with this agent) whose conversation so far is ``earlier``, if one is; the newest
    when several are (a conversation the client sent twice from the same point). With ``unanswered`` (the
    conversation this request sends), first the chat whose last turn was this very conversation and the model
    failed to answer it: a client retrying after a 502 continues that chat, which holds the question already
    (then the second value is True). One query either way."""
    keys = [thread_key([*unanswered, _UNANSWERED])] if unanswered is not None else []
    said = [m.get("content") for m in earlier if m.get("role") == "user"]
    said += [call_id for m in earlier for call_id in _call_ids(m)]  # the model's call ids tell threads apart
    # A first message starts a new conversation; "hi" / "Hello!" is too common an opening to tell two apart.
    if any(m.get("role") == "assistant" for m in earlier) and \
            sum(len(text.strip()) for text in said if isinstance(text, str)) >= THREAD_MIN_CHARS:
        keys.append(thread_key(earlier))
    if not keys:
        return None, False
    agent = {"agent_id": agent_id} if agent_id is not None else {"agent__isnull": True}
    found = list(Chat.objects.select_related("agent")
                 .filter(owner_id=owner_id, origin=Origin.WEB, thread_key__in=keys, **agent)
                 .order_by("-updated_at", "-id"))
    for key in keys:  # the failed turn's chat first
        chat = next((c for c in found if c.thread_key == key), None)
        if chat is not None:
            return chat, unanswered is not None and key == keys[0]
    return None, False


#: Stands for the answer a failed turn did not get in its chat's key: no real message has a NUL (a client's is
#: refused), so only a retry of that very conversation has the key.
_UNANSWERED = {"role": "assistant", "content": "\x00unanswered"}


def thread_continues(chat: Chat, conversation: list[dict[str, Any]], result: TurnResult) -> None:
    """Remember the conversation as it now is (what the client sent, and the reply), for the client's next
    turn: before the reply is sent (one UPDATE, for clients that send no chat id only), so a client that
    answers at once still finds the chat."""
    reply = {"role": "assistant", "content": result.reply,
             "tool_calls": [call.as_message_part() for call in result.tool_calls]}
    key = thread_key([*conversation, reply])
    Chat.objects.filter(pk=chat.pk).update(thread_key=key)


def check_answerable_here(chat: Chat) -> None:
    """Only a web (or API) chat takes a typed turn, as on the web chat page: a messaging app's conversation is
    answered in the app (its bot sends the replies; a turn typed here would read its notes and store messages
    nobody there sees), and a sub-agent's, trigger's or job's chat belongs to its run. 409
    ``answer_in_the_app``."""
    if chat.origin != Origin.WEB:
        where = "a messaging app" if chat.origin == Origin.MESSAGING else "a run"
        raise Conflict(f"This conversation comes from {where}; answer it there.", code="answer_in_the_app")


def completion_turn(*, user: Any, agent_id: int | None, chat_id: int | None, earlier: list[dict[str, Any]],
                    content: str, typed_by_user: bool, pending: list[dict[str, Any]],
                    client_tools: ClientTools | None, options: Mapping[str, Any] | None = None,
                    ) -> tuple[Chat, TurnResult]:
    """A turn of an OpenAI client (``POST /v1/chat/completions``): in the chat it names, or the one its
    conversation continues (``chat_of_thread``), or a new one; the client holds the conversation, so the chat's
    log is stored after the reply is sent. Coming back with its tools' results (``pending``) to the chat it
    asked in, the question is in that chat's log already. ``options``: the client's sampling
    (``llm.SAMPLING_OPTIONS``), for every model call of the turn. Returns the chat and the turn's result."""
    owner_id = user.pk
    if client_tools is not None:
        client_tools_check(client_tools, owner_id=owner_id)
    sent = [*earlier, {"role": "user", "content": content}, *pending]
    found: Chat | None = None
    retried = False
    if chat_id is not None:
        chat = found = access_chat(user, chat_id)
        check_answerable_here(chat)
        if agent_id is not None and chat.agent_id != agent_id:
            raise InvalidInput("this chat runs another agent", code="agent_mismatch")
    else:
        # What came before this request's news: the user's message, or (coming back with its tools' results,
        # which the key leaves out) all of it; or this very conversation, retried after the model failed it.
        found, retried = chat_of_thread(owner_id=owner_id, agent_id=agent_id, earlier=sent if pending else earlier,
                                        unanswered=None if pending else sent)
        chat = found or chat_create(owner_id=owner_id, agent_id=agent_id, origin=Origin.WEB, title=content)
    try:
        result = turn_run(chat=chat, content=content, history=earlier, typed_by_user=typed_by_user,
                          store_after_response=True, client_tools=client_tools, pending=pending,
                          message_stored=(bool(pending) or retried) and found is not None, options=options)
    except UpstreamError:
        if chat_id is None and not pending:  # the client will send the same conversation again
            Chat.objects.filter(pk=chat.pk).update(thread_key=thread_key([*sent, _UNANSWERED]))
        raise
    if chat_id is None:
        thread_continues(chat, sent, result)
    return chat, result



@transaction.atomic
def chat_create(*, owner_id: int, agent_id: int | None = None, origin: str = "web",
                binding_id: int | None = None, conversation_key: str = "", one_to_one: bool | None = None,
                title: str = "") -> Chat:
    """A new chat. ``agent_id`` must be the owner's agent (404 otherwise); a messaging chat names its
    conversation with ``conversation_key`` (``notes.paths.channel_key``)."""
    if origin not in Origin.values:
        raise InvalidInput(f"origin must be one of {', '.join(Origin.values)}", code="invalid_origin")
    agent = access_agent(owner_id, agent_id) if agent_id is not None else None
    if conversation_key:
        Scope("channel", conversation_key)  # raises InvalidInput for a malformed key
    elif origin == Origin.MESSAGING:
        raise InvalidInput("a messaging chat needs its conversation_key (notes.paths.channel_key)",
                           code="invalid_conversation_key")
    if one_to_one not in (True, False, None):
        raise InvalidInput("one_to_one must be true, false or null", code="invalid_one_to_one")
    return Chat.objects.create(owner_id=owner_id, agent=agent, origin=origin, binding_id=binding_id,
                               conversation_key=conversation_key or "", one_to_one=one_to_one,
                               title=_clean_title(title))


def chat_start(*, owner_id: int, agent_id: int | None = None) -> Chat:
    """The chat the page's New chat opens: the owner's newest web chat with this agent (or none) that holds no
    message yet, no title and is not private, moved to the top of the list; else a new one. So New chat clicked
    again and again, with nothing sent, does not pile up empty chats. ``agent_id`` as for ``chat_create``."""
    agent = access_agent(owner_id, agent_id) if agent_id is not None else None
    empty = (Chat.objects.filter(owner_id=owner_id, origin=Origin.WEB, agent=agent, private=False, title="",
                                 thread_key="")
             .exclude(Exists(Message.objects.filter(chat=OuterRef("pk"))))
             .order_by("-updated_at", "-id").first())
    if empty is None:
        return chat_create(owner_id=owner_id, agent_id=agent_id)
    empty.save(update_fields=["updated_at"])  # the newest again, first in the list
    return empty


def _clean_title(title: object) -> str:
    if not isinstance(title, str):
        raise InvalidInput("title must be text", code="invalid_title")
    return " ".join(title.replace("\x00", " ").split())[:TITLE_MAX_CHARS]  # PostgreSQL text holds no NUL


@dataclass(frozen=True)
class ChatDeletion:
    """What ``chat_delete`` did: the chat's id and title, and how many of its suggestions it dropped."""

    chat_id: int
    title: str
    suggestions_dropped: int


@transaction.atomic
def chat_delete(*, owner_id: int, chat_id: int) -> ChatDeletion:
    """Delete the owner's chat: its messages, its consolidation watermark, and the suggestions still waiting
    that came from it (``proposals_drop_for_chat``: expired, "Dropped: its chat was deleted."). NotFound for
    another owner's chat (or one already deleted).

    What stays: the notes saved from it (they are the owner's notes, with their history and Undo; their
    change sets keep the chat's id as history), and the suggestions decided before. Any chat can go, a
    messaging app's or a run's too: a bot's conversation loses its chat (``Conversation.chat`` is set to
    null) and its next message starts a new one; its notes belong to the conversation and stay.

    Under the owner's note lock, as Forget everything and deleting an agent or a bot: a look through the chats
    that read this one while the model thought checks under the same lock and suggests nothing from it
    (``growth.consolidation``), and a proposal a turn makes in it after this is refused. The chat's row is
    locked first, so a turn storing its messages at the same moment either lands before (and is deleted
    with it) or finds the chat gone (``messages_add``: ``ChatDeleted``).
    """
    from localai_memory.memory.proposals import proposals_drop_for_chat
    from localai_memory.notes.services import lock_owner

    lock_owner(owner_id)
    chat = Chat.objects.select_for_update().filter(pk=chat_id, owner_id=owner_id).first()
    if chat is None:
        raise NotFound("No such chat.")
    dropped = proposals_drop_for_chat(owner_id=owner_id, chat_id=chat.pk)
    deletion = ChatDeletion(chat_id=chat.pk, title=str(chat), suggestions_dropped=dropped)
    chat.delete()  # its messages and its watermark (CASCADE); a bot's conversation keeps no chat (SET_NULL)
    return deletion


@transaction.atomic
def chat_set_private(*, owner_id: int, chat_id: int, private: bool) -> Chat:
    """The chat's Memory switch: private chats neither read nor save memory (other chats are unaffected)."""
    chat = access_chat(owner_id, chat_id)
    chat.private = bool(private)
    chat.save(update_fields=["private", "updated_at"])
    return chat


@transaction.atomic
def chat_update(*, owner_id: int, chat_id: int, title: str | None = None, one_to_one: bool | None = None) -> Chat:
    """Rename a chat, or (bridges) record what the platform said about one-to-one."""
    chat = access_chat(owner_id, chat_id)
    fields = ["updated_at"]
    if title is not None:
        chat.title = _clean_title(title)
        fields.append("title")
    if one_to_one is not None:
        chat.one_to_one = one_to_one
        fields.append("one_to_one")
    chat.save(update_fields=fields)
    return chat


def message_add(*, chat: Chat, role: str, content: str, typed_by_user: bool = False, sender_id: int | None = None,
                memory: dict[str, Any] | None = None, touch_chat: bool = True) -> Message:
    """Store one message (``messages_add`` with one); ``touch_chat`` also moves the chat to the top of the list."""
    (message,) = messages_add(chat=chat, messages=[Message(chat=chat, role=role, content=content,
                                                           typed_by_user=typed_by_user, sender_id=sender_id,
                                                           memory=memory or {})],
                              touch_chat=touch_chat)
    return message


def messages_add(*, chat: Chat, messages: list[Message], touch_chat: bool = True) -> list[Message]:
    """Store a turn's messages (unsaved ``Message`` objects of ``chat``, in order; ``created_at`` is now unless
    set). ``touch_chat`` moves the chat to the top of the list (its ``updated_at``); a chat without a title is
    named after its first user message either way.

    One statement, one round trip to the database: the INSERT of the messages and the UPDATE of the chat's
    row together, so a turn's message and its reply are stored together or not at all. The statement locks
    the chat's row (the UPDATE, or ``FOR KEY SHARE``) and inserts only while the chat is there: in a chat
    deleted meanwhile (``chat_delete``) nothing is stored, and ``ChatDeleted`` (410) is raised. The UPDATE's
    lock (``touch_chat``, as every turn stores) also makes two stores in one chat draw their ids one after the
    other, so a turn's messages follow each other in the chat's order (by id). A message is
    the chat's log, not memory: outside a caller's transaction the statement commits without waiting for
    PostgreSQL to flush its write-ahead log (``synchronous_commit`` off for this statement's own transaction
    only), so a crash of the database server within a fraction of a second after it may lose the messages,
    and can never leave them half-written. Notes, change sets and proposals keep waiting for the flush.
    Measured under load (bench/load, py-spy): the flush and the round trips of a turn's messages were the
    largest part of a turn's time in the database.
    """
    now = timezone.now()
    chat_fields: dict[str, Any] = {}
    if touch_chat:
        chat_fields["updated_at"] = now
    first_user = next((m for m in messages if m.role == Role.USER), None)
    if not chat.title and first_user is not None:
        chat_fields.update(title=_clean_title(first_user.content), updated_at=now)
    connection = transaction.get_connection()
    memory_field = Message._meta.get_field("memory")
    columns = ["chat_id", "role", "content", "typed_by_user", "sender_id", "memory", "created_at", "arrived_at"]
    values: list[Any] = []
    for ordinal, message in enumerate(messages):
        message.chat = chat
        message.created_at = message.created_at or now
        values += [chat.pk, message.role, message.content, message.typed_by_user, message.sender_id,
                   memory_field.get_db_prep_save(message.memory or {}, connection), message.created_at,
                   message.arrived_at, ordinal]
    ctes = [unflushed_commit_cte(connection)]
    params: list[Any] = []
    # The chat's row, locked: the UPDATE that touches it, or a lock that only keeps it from being deleted
    # until this commits (a SELECT … FOR KEY SHARE beside an UPDATE of the same row would skip it).
    if chat_fields:
        assignments = ", ".join(f"{connection.ops.quote_name(name)} = %s" for name in chat_fields)
        ctes.append(f"chat_row AS (UPDATE {Chat._meta.db_table} SET {assignments} WHERE id = %s RETURNING id)")
        params += [*chat_fields.values(), chat.pk]
    else:
        ctes.append(f"chat_row AS (SELECT id FROM {Chat._meta.db_table} WHERE id = %s FOR KEY SHARE)")
        params.append(chat.pk)
    # Typed placeholders: a column that is NULL in every row (sender_id) must not be guessed as text.
    by_column = {f.column: f for f in Message._meta.concrete_fields}
    # Text columns are cast to text, not varchar(n): an explicit cast would cut a long value silently, while
    # the INSERT's own assignment refuses it.
    row = ", ".join(f"%s::{_column_type(by_column[name], connection)}" for name in columns)
    ordinals = ", ".join(f"({row}, %s)" for _ in messages)
    # The ordinal makes the INSERT take the rows in order, so the ids are in the messages' order.
    sql = (f"WITH {', '.join(ctes)}, rows ({', '.join(columns)}, n) AS (VALUES {ordinals}) "
           f"INSERT INTO {Message._meta.db_table} ({', '.join(columns)}) "
           f"SELECT {', '.join(f'rows.{c}' for c in columns)} FROM rows, settings, chat_row ORDER BY rows.n "
           f"RETURNING id")
    with connection.cursor() as cursor:
        cursor.execute(sql, [*params, *values])
        ids = sorted(row_[0] for row_ in cursor.fetchall())
    if not ids and messages:
        raise ChatDeleted()
    for message, pk in zip(messages, ids, strict=True):
        message.pk = pk
        message._state.adding = False
        message._state.db = connection.alias
    for name, value in chat_fields.items():
        setattr(chat, name, value)
    return messages


def _column_type(field: Any, connection: Any) -> str:
    if field.get_internal_type() in ("CharField", "TextField"):
        return "text"
    return field.cast_db_type(connection)


def _could_read(chat: Chat, sender: Sender | None) -> bool:
    """Whether the policy could let this turn read memory, before the owner's settings are read: the defaults
    stand in, and the policy sets them to their most open. False where memory stays off whatever the settings
    say (a private chat, a sub-agent, an agent whose Tools leave memory out)."""
    return policy.could_read(turn_facts(chat=chat, sender=sender, state=memory_state_of(None, user_id=chat.owner_id)))


#: Owners (``("owner", id)``) whose last turn in this process did not use the work ahead (``ahead_used``),
#: and chats (``("chat", id)``) whose last turn here could not read memory (``_could_read``): their next turn
#: starts none. At most this many are kept.
AHEAD_SKIPPED_MAX = 4096
_ahead_skipped: OrderedDict[tuple[str, int], None] = OrderedDict()
_ahead_lock = threading.Lock()


def _works_ahead(owner_id: int, chat_id: int | None = None) -> bool:
    with _ahead_lock:
        return ("owner", owner_id) not in _ahead_skipped and ("chat", chat_id) not in _ahead_skipped


def ahead_used(owner_id: int, used: bool) -> None:
    """Whether a turn of the owner's used the work started ahead (``turn_ahead_hooks``), and so whether their
    next turn in this process starts it: not after a turn with memory off by the settings or served by an
    add-on, nor after one whose recall had no notes to rank by meaning (said by recall). A turn that did
    without it (memory back on, a first note written in another process) does the work when it needs it,
    and tells: the turn after works ahead again."""
    _ahead_mark(("owner", owner_id), used)


def _ahead_mark(key: tuple[str, int], used: bool) -> None:
    with _ahead_lock:
        if used:
            _ahead_skipped.pop(key, None)
            return
        _ahead_skipped[key] = None
        _ahead_skipped.move_to_end(key)
        while len(_ahead_skipped) > AHEAD_SKIPPED_MAX:
            _ahead_skipped.popitem(last=False)


def turn_arriving(*, owner_id: int, chat_id: int | None, content: str) -> None:
    """A message the person typed, as soon as a request that has yet to find its chat (``chat_id``, when the
    request names it: the completions route) is read and checked: the ``turn_ahead_hooks`` start on the
    message alone, so recall's embedding of it runs while the request finds its chat and the turn reads
    (``turn_run`` does the same itself once the chat is known). Not for a ``/remember``, nor where this
    owner's or this chat's last turn in this process did without that work (``ahead_used``; a chat that
    cannot read memory, a private one), nor for a message the turn will refuse (``check_content``). A help:
    never raises."""
    try:
        check_content(content)
        if remember.parse(content) is None and _works_ahead(owner_id, chat_id):
            _start_ahead(TurnAhead(owner_id, content, [], True))
    except InvalidInput:
        return
    except Exception:
        log.exception("starting a turn's work ahead failed")


def _start_ahead(ahead: TurnAhead) -> None:
    for start in turn_ahead_hooks:
        try:
            start(ahead)
        except Exception:
            log.exception("turn ahead hook %r failed", start)


def _turn_reads(chat: Chat, scopes: dict[str, Scope], ahead: TurnAhead | None = None) -> dict[str, TurnRead]:
    """The reads the ``turn_read_hooks`` add to the turn's first round trip, for a turn that could read memory
    (``_could_read``); a hook that fails adds none (recall then reads for itself, or degrades). They go out
    before the policy has decided with the owner's settings: when the settings turn memory off (the switch),
    what they read is dropped unused, and nothing of it reaches the model. The ``turn_ahead_hooks`` are handed
    ``ahead`` first, to start their work on other threads."""
    if ahead is not None:
        _start_ahead(ahead)
    reads: dict[str, TurnRead] = {}
    for name, hook in turn_read_hooks.items():
        try:
            read = hook(chat.owner_id, scopes)
        except Exception:
            log.exception("turn read hook %r failed", name)
            continue
        if read is not None:
            reads[name] = read
    return reads


def _keep(chat: Chat, message: Message) -> None:
    """Store a turn's message alone after the turn failed; if that fails too (the database went away), log
    it and let the turn's own error be the answer. A chat deleted meanwhile raises ChatDeleted: that, not
    the failure, is the answer (nothing was kept to ask again)."""
    try:
        messages_add(chat=chat, messages=[message])
    except ChatDeleted:
        log.info("chat %s was deleted during a failed turn; its message is not kept", chat.pk)
        raise
    except Exception:
        log.warning("the message of a failed turn in chat %s could not be kept", chat.pk, exc_info=True)


def _store_later(chat: Chat, messages: list[Message]) -> None:
    try:
        messages_add(chat=chat, messages=messages)
    except ChatDeleted:  # deleted while the model answered: the delete wins, the log is not brought back
        log.info("chat %s was deleted during a turn; its messages are not stored", chat.pk)
    except Exception:
        log.warning("the messages of a turn in chat %s, already answered, could not be stored", chat.pk,
                    exc_info=True)


def _store(chat: Chat, messages: list[Message], *, after: bool) -> None:
    """A turn's message and reply, stored now, or once the response has been sent (``store_after_response``).
    Stored now in a chat deleted meanwhile, ``ChatDeleted`` is raised; after the response, they are dropped."""
    if after:
        after_response(lambda: _store_later(chat, messages))
    else:
        messages_add(chat=chat, messages=messages)


def check_content(content: object) -> str:
    if not isinstance(content, str) or not content.strip():
        raise InvalidInput("content must be a non-empty text", code="invalid_content")
    if "\x00" in content:
        raise InvalidInput("content may not contain NUL characters", code="invalid_content")
    if len(content) > MESSAGE_MAX_CHARS:
        raise InvalidInput(f"a message holds at most {MESSAGE_MAX_CHARS} characters", code="message_too_long")
    return content


def _history(chat: Chat) -> list[dict[str, Any]]:
    """The chat's last ``HISTORY_MESSAGES`` user and assistant messages, oldest first (read before the new
    message is stored, so it is not among them)."""
    rows = list(Message.objects.filter(chat=chat, role__in=[Role.USER, Role.ASSISTANT])
                .order_by("-id").values_list("role", "content")[:HISTORY_MESSAGES])
    return [{"role": role, "content": text} for role, text in reversed(rows)]


def turn_run(*, chat: Chat, content: str, sender: Sender | None = None,
             history: list[dict[str, Any]] | None = None, typed_by_user: bool = True,
             store_after_response: bool = False, client_tools: ClientTools | None = None,
             pending: list[dict[str, Any]] | None = None, message_stored: bool = False,
             options: Mapping[str, Any] | None = None) -> TurnResult:
    """One turn: decide memory, call the model with its tools, store the message and the reply, return it.

    ``history`` replaces the chat's stored messages as context (the OpenAI-compatible route sends its own).
    Raises InvalidInput for an empty message (or a client tool named as memory's, before anything is kept)
    and ModelUnavailable / ModelBadResponse (502, 504 on a timeout) when the model server fails; the user's
    message is kept either way (unless the log holds it already: ``message_stored``), and the error's details
    name it and hold what memory did before the failure.

    The message and the reply are stored together once the model answered (one statement; the message keeps
    the time it arrived), or the message alone when anything else went wrong after it arrived (then the
    original error is raised). So the message is in the chat once the turn has ended, not while the model
    is still thinking: a page reloaded meanwhile does not show it yet, and two turns sent to one chat at the
    same moment do not see each other's message in their context. The chat lists its messages in the order
    they were stored (``Message.Meta.ordering``), so such turns show one after the other, each reply right after
    its message, in the order they ended (not message, message, reply, reply, as by their times). A process killed in the middle of a turn
    (a deploy) loses that message, which its sender never got an answer to.

    A chat deleted while the model thinks (``chat_delete``) stays deleted: the turn raises ``ChatDeleted``
    (410 ``chat_deleted``) instead of storing its message and reply, so a person who deleted a chat in one
    tab never finds a turn of another tab bring it back, and the bot's next message starts a new chat. What
    the turn saved before the delete stays, as any note saved from the chat; a suggestion it would make
    after the delete is refused the same way (``memory.proposals.proposal_create``).

    Forget everything (or the terminal's clear) while the model thinks does not end the turn: it answers
    and is stored as any other, but a note it would save or suggest after the forget is refused (``forgotten``,
    and the model is told why), as is a ``/remember``; nothing it read or was told before the forget comes
    back. Its message, said before the forget, is not read for suggestions either (``growth.consolidation``).

    ``store_after_response`` stores the message and the reply once the response has been sent (a round trip
    the reply does not wait for; the result then has no message ids). For the OpenAI-compatible route, whose
    client sends the conversation itself every turn: what memory did (notes saved, proposals) is written
    during the turn either way; only the chat's log follows the reply, and is lost if the database fails
    in that millisecond (logged), or dropped quietly when the chat was deleted meanwhile.

    ``client_tools`` are an OpenAI client's own tools (``ClientTools``): a reply calling one ends the turn
    with those calls (the message is stored, and the reply only if it says something or memory did
    something). ``pending`` is what follows ``content`` when the client comes back with its tools' results
    (the assistant's calls and the results): the turn continues that message (recall still reads it; it is
    not a ``/remember``), and ``message_stored`` says the chat's log holds it already (the chat the first
    half ran in), so only the reply is stored.
    """
    content = check_content(content)
    continues = bool(pending)
    user_message = Message(chat=chat, role=Role.USER, content=content, typed_by_user=typed_by_user,
                           sender_id=sender.sender_id if sender else None, created_at=timezone.now())
    arrived_clock = time.monotonic()
    scopes = chat_scopes(chat=chat)
    fact = remember.parse(content) if typed_by_user and not continues else None
    could_read = _could_read(chat, sender)
    _ahead_mark(("chat", chat.pk), could_read)
    works_ahead = could_read and fact is None and _works_ahead(chat.owner_id)
    if works_ahead and history is None:  # the message first, while the chat's earlier messages are read
        _start_ahead(TurnAhead(chat.owner_id, content, [], typed_by_user))
    # The chat's earlier messages are read before the turn's memory, so recall can embed what its query needs
    # of them while that read runs (a "/remember" needs neither).
    earlier = (history if history is not None else _history(chat)) if fact is None else []
    ahead = TurnAhead(chat.owner_id, content, earlier, typed_by_user) if works_ahead else None
    reads = _turn_reads(chat, scopes, ahead) if could_read else {}
    state, index_files, prefetched, arrived = read_turn_memory(owner_id=chat.owner_id, scopes=scopes, extra=reads,
                                                               arrived=arrived_clock)
    facts = turn_facts(chat=chat, sender=sender, state=state)
    decision = policy.decide_turn(facts)
    if could_read and not (decision.memory_on and decision.served_by == "builtin"):
        ahead_used(chat.owner_id, False)  # with memory on, recall tells
    # The turn's message was said as it arrived, and the notes it read are from after the last Forget
    # everything that read found (when it found any): a note or a suggestion it makes is refused once the
    # owner forgot everything after the earlier of the two (``ToolContext.read_after``). Both times are the
    # database's clock, as the forget's is: this frontend's clock may differ from the one that forgot.
    read_after = min(state.forgot_at, arrived) if state is not None else arrived
    # Stored with the message, for consolidation to compare with a later forget on that same clock (its
    # ``created_at``, this host's clock, orders the chat).
    user_message.arrived_at = arrived
    if fact is not None:  # "/remember <fact>": the person's own note, no model call
        return _remember_turn(chat=chat, user_message=user_message, fact=fact, facts=facts, decision=decision,
                              scopes=scopes, sender=sender, store_after_response=store_after_response,
                              message_stored=message_stored, read_after=read_after)
    indexes: list[context.IndexShown] = []
    if decision.memory_on and decision.served_by == "builtin":
        indexes = [context.IndexShown(kind, scopes[kind], index_files.get(scopes[kind].index_path, ""))
                   for kind in context.SCOPE_ORDER if kind in decision.read_scopes and kind in scopes]
    # An OpenAI client's own system messages (its prompt, context it adds along the way) become the
    # instructions of the one system message, in their order: many chat templates refuse a second one, or one
    # that is not first.
    client_instructions = "\n\n".join(str(m["content"]).strip() for m in earlier
                                      if m["role"] == "system" and m["content"])
    earlier = [m for m in earlier if m["role"] != "system"]
    recall_request = RecallRequest(chat=chat, content=content, history=earlier, decision=decision, scopes=scopes,
                                   typed_by_user=typed_by_user, prefetched=prefetched)
    addon = None
    if decision.memory_on and decision.served_by == "addon" and state is not None:
        # The add-on reads what the agent's choice reads (its namespaces), as the built-in notes would.
        namespaces = [scopes[kind].name for kind in context.SCOPE_ORDER
                      if kind in decision.read_scopes and kind in scopes]
        addon = providers.addon_turn(state.provider_choice, user_id=chat.owner_id, message=content,
                                     namespaces=namespaces)
    tools = context.offered_tools(decision, topics=context.topic_count(indexes))
    if addon is not None and addon.writes and "propose_change" in decision.tools:
        tools = ["propose_change"]  # the host's own: each write of the add-on's passes the save level
    definitions = context.tool_definitions(decision, tools) + (addon.tools if addon is not None else [])
    if client_tools is not None:  # checked again against what this turn offers
        _refuse_taken_names(client_tools, (d["function"]["name"] for d in definitions))
    block = context.memory_block(indexes)
    instructions = "\n\n".join(part for part in (chat.agent.instructions if chat.agent is not None else "",
                                                  client_instructions) if part.strip())
    system = context.system_prompt(instructions=instructions, decision=decision, block=block, tools=tools,
                                   addon=addon)
    started = time.perf_counter()
    recall_text, recall_report = _recall(recall_request)
    timings = {"recall": (time.perf_counter() - started) * 1000, "model": 0.0}
    if recall_text:
        system += "\n\n" + recall_text
    messages: list[dict[str, Any]] = [{"role": "system", "content": system}, *map(_for_model, earlier),
                                      {"role": "user", "content": content}, *map(_for_model, pending or ())]
    report = new_report(decision)
    report["read"] = block.read
    report["recall"] = recall_report
    if block.truncated:
        report["truncated"] = True
    if addon is not None:
        report["addon"] = {"name": addon.name, "notes": bool(addon.notes.strip()), "tools": addon.tool_names}
    # A client's tool results, or messages it marked as not typed (a fetched page), now or earlier in the
    # conversation, may tell the model what to remember.
    outside = not typed_by_user or any(m["role"] == "tool" or m.get("origin", "user") != "user"
                                       for m in (*earlier, *(pending or ())))
    ctx = ToolContext(chat=chat, facts=facts, decision=decision, scopes=scopes, tools=tools, sender=sender,
                      report=report, addon=addon, outside_text=outside, read_after=read_after, prefetched=prefetched)
    try:
        reply = _loop(messages, definitions, ctx, timings, client_tools, options)
    except UpstreamError as exc:
        if not message_stored:
            _keep(chat, user_message)
        exc.details = {"chat_id": chat.pk, "user_message_id": user_message.pk, "memory": report}
        raise
    except Exception:
        if not message_stored:
            _keep(chat, user_message)
        raise
    text = (reply.content or "").replace("\x00", "")  # PostgreSQL text holds no NUL; a model may send one
    # The reply's time is when it came, not when it is stored (after the response, on another thread).
    assistant = Message(chat=chat, role=Role.ASSISTANT, content=text, memory=report, created_at=timezone.now())
    # The log holds what was said, the message once, and what memory did; a reply that only calls the
    # client's tools, with memory idle, is left out.
    did = any(report[key] for key in ("saved", "proposed", "refused", "reverted"))
    stored = ([] if message_stored else [user_message]) + (
        [assistant] if text.strip() or did or not reply.tool_calls else [])
    if stored:
        _store(chat, stored, after=store_after_response)
    if typed_by_user and not continues:
        from localai_memory.growth.consolidation import consolidation_schedule_after_turn

        owner_id = chat.owner_id
        after_response(lambda: consolidation_schedule_after_turn(owner_id))
    return TurnResult(chat_id=chat.pk, reply=text, user_message_id=user_message.pk,
                      assistant_message_id=assistant.pk, memory=report, model=reply.model, usage=reply.usage,
                      timings=timings, tool_calls=reply.tool_calls,
                      finish_reason="tool_calls" if reply.tool_calls else _finish_reason(reply.finish_reason))


def _finish_reason(said: str | None) -> str:
    """The model server's ``finish_reason`` for an answer of text, as OpenAI names them; anything else
    (missing, or ``tool_calls`` for memory's own calls, which the host ran) is ``stop``."""
    return said if said in ("length", "content_filter") else "stop"


def _for_model(message: dict[str, Any]) -> dict[str, Any]:
    """A message as the model gets it: role and content, and the tool calls and call id of a client's tools;
    recall's ``origin`` marks are ours, not the protocol's."""
    shown = {"role": message["role"], "content": message["content"]}
    for key in ("tool_calls", "tool_call_id"):
        if key in message:
            shown[key] = message[key]
    return shown


#: The advisory lock namespace of "Ask again" ("LR"; the notes store's is "LM").
_RETRY_LOCK_NAMESPACE = 0x4C52


def turn_retry(*, chat: Chat, message_id: object) -> TurnResult:
    """Ask the model again about the chat's last message, kept unanswered when the model failed: the same
    turn, with the message stored once (a resend would store it twice). InvalidInput when it is not the chat's
    last message or was answered."""
    last = Message.objects.filter(chat=chat).order_by("-id").first()
    if last is None or str(last.pk) != str(message_id) or last.role != Role.USER:
        raise InvalidInput("Only the chat's last message, still unanswered, can be asked again.",
                           code="not_retryable")
    # One answer per message: a second "Ask again" (another tab, a double submit) while the first runs waits
    # for nobody and is refused. The claim is a session lock of the database, not a cache key with a time-out:
    # a worker killed in the middle of it (a deploy, a crash) frees it at once.
    with session_lock(_RETRY_LOCK_NAMESPACE, str(last.pk)) as claimed:  # ids outgrow a 4-byte key
        if not claimed:
            raise Conflict("This message is being asked again already.", code="retry_running")
        history = _history(chat)[:-1]  # without the message itself, which the turn sends as the new one
        return turn_run(chat=chat, content=last.content, history=history, typed_by_user=last.typed_by_user,
                        message_stored=True)


def _remember_turn(*, chat: Chat, user_message: Message, fact: str, facts: policy.TurnFacts,
                   decision: policy.TurnDecision, scopes: dict[str, Scope], sender: Sender | None,
                   store_after_response: bool, read_after: datetime, message_stored: bool = False) -> TurnResult:
    """A ``/remember`` message (``chats.remember``): the note saved, proposed or refused, and one line of
    answer stored as the assistant's reply, with the turn's memory report, as any turn's."""
    report = new_report(decision)
    ctx = ToolContext(chat=chat, facts=facts, decision=decision, scopes=scopes, tools=[], sender=sender,
                      report=report, read_after=read_after)
    try:
        text = remember.remember_run(ctx=ctx, fact=fact)
    except Exception:
        if not message_stored:
            _keep(chat, user_message)
        raise
    assistant = Message(chat=chat, role=Role.ASSISTANT, content=text, memory=report, created_at=timezone.now())
    _store(chat, [assistant] if message_stored else [user_message, assistant], after=store_after_response)
    return TurnResult(chat_id=chat.pk, reply=text, user_message_id=user_message.pk,
                      assistant_message_id=assistant.pk, memory=report, command="remember")


def _recall(request: RecallRequest) -> tuple[str, dict[str, Any]]:
    if not recall_hooks or not request.decision.memory_on or request.decision.served_by != "builtin":
        return "", {}
    texts: list[str] = []
    report: dict[str, Any] = {}
    for hook in recall_hooks:
        try:
            contribution = hook(request)
        except Exception:  # recall is a help, never a reason to fail the turn
            log.exception("recall hook %r failed", hook)
            report["degraded"] = "recall_failed"
            continue
        if contribution is not None:
            if contribution.text:
                texts.append(contribution.text)
            report.update(contribution.report)
    return "\n\n".join(texts), report


def _loop(messages: list[dict[str, Any]], definitions: list[dict[str, Any]], ctx: ToolContext,
          timings: dict[str, float], client: ClientTools | None = None,
          options: Mapping[str, Any] | None = None) -> llm.ModelReply:
    """Call the model; run its tool calls and call it again, at most MAX_TOOL_ROUNDS times; then it answers.
    A reply calling the client's tools ends the loop with those calls (after the host's of the same reply
    ran). ``timings["model"]`` adds up the milliseconds spent waiting for the model; the reply's usage is
    that of every call."""
    spent: dict[str, int] = {}
    last = _loop_rounds(messages, definitions, ctx, timings, client, options, spent)
    return replace(last, usage={**last.usage, **spent}) if spent else last


def _usage_add(spent: dict[str, int], usage: Mapping[str, Any]) -> None:
    for key in ("prompt_tokens", "completion_tokens", "total_tokens"):
        value = usage.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            spent[key] = spent.get(key, 0) + value


def _loop_rounds(messages: list[dict[str, Any]], definitions: list[dict[str, Any]], ctx: ToolContext,
                 timings: dict[str, float], client: ClientTools | None, options: Mapping[str, Any] | None,
                 spent: dict[str, int]) -> llm.ModelReply:
    theirs = client.offered if client is not None else []
    names = frozenset(tool["function"]["name"] for tool in theirs)

    def handed_back(reply: llm.ModelReply, calls: tuple[llm.ToolCall, ...]) -> llm.ModelReply:
        # Ids of our own making: unique, so the conversation they are in is told from any other (thread_key).
        minted = tuple(replace(call, id=f"call_{secrets.token_hex(12)}") for call in calls)
        return replace(reply, tool_calls=minted, finish_reason="tool_calls")

    def begin(tools: list[dict[str, Any]], choice: str | dict[str, Any] | None = None, *,
              kept_only: bool = False) -> tuple[llm.Asked, float] | None:
        # ``kept_only`` under the owner's note lock: sent only over a connection kept open, never after a new
        # one's DNS, TCP and TLS (None: the next round asks once the notes committed, as without the overlap).
        asked = llm.chat_completion_begin(messages=messages, tools=tools or None, tool_choice=choice,
                                          parallel_tool_calls=client.parallel if client and theirs else None,
                                          options=options, kept_only=kept_only)
        return (asked, time.perf_counter()) if asked is not None else None

    def answer(asked: tuple[llm.Asked, float]) -> llm.ModelReply:
        try:
            reply = asked[0].reply()
            _usage_add(spent, reply.usage)
            return reply
        finally:
            timings["model"] = timings.get("model", 0.0) + (time.perf_counter() - asked[1]) * 1000

    def ask(tools: list[dict[str, Any]], choice: str | dict[str, Any] | None = None) -> llm.ModelReply:
        asked = begin(tools, choice)
        assert asked is not None  # only kept_only answers None
        return answer(asked)

    # The client's tool_choice ("required", or one of its tools by name) goes with the first round only. A
    # call of memory's meets "required" too, so forcing every round would push the model into calling memory's
    # tools round after round, up to the limit: after memory's calls ran, the model chooses ("auto"). The call
    # the client required is then asked for, if the model answered without one, with the client's tools alone.
    required = client.choice if client is not None and theirs else None
    choice = required
    ahead: tuple[llm.Asked, float] | None = None  # the next call, sent while the last calls' notes commit
    mispredicted = False  # a note's write answered otherwise than the model was told (it was asked again)
    for round_ in range(MAX_TOOL_ROUNDS):
        reply = answer(ahead) if ahead is not None else ask(definitions + theirs, choice)
        ahead = None
        if not reply.tool_calls:
            if required is not None and choice is None:
                break  # words where the client required a call of its tools
            return reply
        for_client = tuple(call for call in reply.tool_calls if call.name in names)
        calls = [call for call in reply.tool_calls if call.name not in names]
        # A reply's one call proposing a note: the model is asked with the result its write gives when nothing
        # stands in the way, and the note is written while the model thinks (``ToolContext.speculate``).
        ctx.speculate = (not mispredicted and ctx.addon is None and not for_client
                         and [call.name for call in calls] == ["propose_change"])
        try:
            with _while_the_model_thinks(ctx, calls):
                try:
                    ran = _run_calls(ctx, calls)
                finally:
                    ctx.speculate = False
                if for_client:  # the client runs these, and comes back with their results
                    return handed_back(reply, for_client)
                messages.append(reply.as_message())
                messages.extend(ran)
                choice = None
                # Enough of memory's tools after this round: the last call offers the client's tools only.
                last = round_ == MAX_TOOL_ROUNDS - 1
                ahead = (begin(theirs, required, kept_only=True) if last
                         else begin(definitions + theirs, kept_only=True))
                if ctx.deferred is not None:
                    told = ran[0]["content"]
                    ran[0]["content"] = json.dumps(run_deferred(ctx), ensure_ascii=False)
                    if ran[0]["content"] != told:  # asked with another result: ask again
                        mispredicted = True  # and ask after the write for the rest of the turn
                        if ahead is not None:
                            ahead[0].abandon()
                            ahead = None
        except BaseException:
            ctx.deferred = None
            if ahead is not None:  # the notes did not commit: the model's answer to them is not read
                ahead[0].abandon()
            raise
    # Enough of memory's tools (or the required call still to make): the model answers from what it has, with
    # the client's tools only, under the client's tool_choice (a forced call can only be one of the client's).
    final = answer(ahead) if ahead is not None else ask(theirs, required)
    if for_client := tuple(call for call in final.tool_calls if call.name in names):
        return handed_back(final, for_client)
    if theirs and final.tool_calls and not (final.content or "").strip():
        final = ask([])  # it called memory's tools, which are not offered now: it answers without any
    return replace(final, tool_calls=())


#: The tools whose calls write notes or proposals (``_while_the_model_thinks``).
_WRITING_TOOLS = frozenset({"propose_change", "revert_change"})


@contextlib.contextmanager
def _while_the_model_thinks(ctx: ToolContext, calls: list[llm.ToolCall]) -> Iterator[None]:
    """One transaction around a reply's host tool calls that write, committed after the next model call has
    been sent: the commit (a wait for the disk) runs while the model thinks, not before it is asked. The
    model's answer is read only once the commit succeeded; if the calls or the commit fail, nothing of them
    stays (the turn's report forgets them too) and the answer is never read. Calls of an add-on's tools talk
    to the add-on and run as they are, outside any transaction, as do calls that only read."""
    if ctx.addon is not None or not any(call.name in _WRITING_TOOLS for call in calls):
        yield
        return
    kept = {key: list(ctx.report[key]) for key in ("saved", "proposed", "refused", "reverted")}
    saved_now = ctx.saved_now
    try:
        with transaction.atomic():
            yield
    except BaseException:
        ctx.report.update(kept)
        ctx.saved_now = saved_now
        raise


def _run_calls(ctx: ToolContext, calls: list[llm.ToolCall]) -> list[dict[str, Any]]:
    """Run the host's tool calls of one reply (at most MAX_CALLS_PER_ROUND); their results as tool messages."""
    results = []
    for number, call in enumerate(calls):
        if number < MAX_CALLS_PER_ROUND:
            result = run_tool(ctx, call.name, call.arguments)
        else:
            result = {"status": "error", "error": "too_many_calls",
                      "message": f"At most {MAX_CALLS_PER_ROUND} tool calls are run per round."}
        results.append({"role": "tool", "tool_call_id": call.id, "name": call.name,
                        "content": json.dumps(result, ensure_ascii=False)})
    return results


def server_timing(timings: dict[str, float]) -> str:
    """The turn's part of the ``Server-Timing`` header: ``model;dur=…, recall;dur=…`` (milliseconds)."""
    return ", ".join(f"{name};dur={value:.1f}" for name, value in timings.items())


def memory_header(report: dict[str, Any]) -> str:
    """The compact ``X-Memory`` header of the OpenAI-compatible route: counts, topics, degrade reason."""
    recall = report.get("recall") or {}
    compact = {
        "on": report.get("on"),
        "code": report.get("code"),
        "blocked_by": report.get("blocked_by"),
        "read": len(report.get("read", [])),
        "topics": [item["topic"] for item in report.get("topics_read", [])][:20],
        "saved": len([s for s in report.get("saved", []) if s.get("change_id")]),
        "proposed": len(report.get("proposed", [])),
        "refused": len(report.get("refused", [])),
        "degraded": recall.get("degraded") or recall.get("degrade_reason"),
        "recalled": recall.get("count", 0),
        "recalled_topics": list(recall.get("topics", []))[:20],
        "recall_mode": recall.get("mode"),
    }
    if report.get("saved"):
        compact["saved_topics"] = [s["topic"] for s in report["saved"]][:20]
    if report.get("proposed"):
        compact["proposal_ids"] = [p["proposal_id"] for p in report["proposed"]][:20]
    text = json.dumps(compact, separators=(",", ":"), ensure_ascii=True)
    return text if len(text) <= 4000 else json.dumps({k: compact[k] for k in ("on", "code", "read", "saved",
                                                                               "proposed", "refused")},
                                                      separators=(",", ":"))
