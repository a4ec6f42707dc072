"""Proposals: a change to memory that waits for the owner (or a permitted sender) to confirm it.

Services (writes) and selectors (reads) of ``Proposal``. The 24-hour life of a proposal is a timestamp checked
under a row lock at the moment somebody confirms or rejects, so nothing wrong is saved while the Celery worker
is down; the sweep (``proposals_expire_due``) only marks and tells. Confirming twice (two tabs, a yes in the
chat and a click in the inbox) saves once: the loser of the race gets a 409. Whether a sender in a messaging
chat may answer is the policy's ``may_answer``; nothing here re-implements a rule. The note itself is written
by ``notes.services.note_upsert`` only.

Other parts register callables in ``expiry_listeners`` (called with each expired proposal once, e.g. a bot
posting "that proposal expired"), ``undo_closed_listeners`` (called with each automatic change set whose
Undo window closed) and ``confirm_listeners`` (called with each proposal as it is confirmed, e.g. growth
suggesting the note a make-room delete made room for).
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, cast

from django.db import InterfaceError, OperationalError, transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from localai_memory.core.access import owned_or_404
from localai_memory.core.db import listed_after, next_id_unless
from localai_memory.core.errors import ApplicationError, Conflict, Forbidden, Gone, InvalidInput, NotFound
from localai_memory.notes import selectors as notes_selectors
from localai_memory.notes.models import ChangeSet
from localai_memory.notes.paths import (
    TOPIC_MAX_BYTES,
    IndexEntry,
    Scope,
    check_topic,
    clean_summary,
    closed_details,
    index_over_caps,
    index_size,
    render_index,
)
from localai_memory.notes.services import (
    CapExceeded,
    cap_error,
    check_importance,
    check_not_forgotten,
    importance_change,
    lock_owner,
    note_upsert,
    topic_too_large,
)

from . import policy
from .models import Proposal

if TYPE_CHECKING:
    from localai_memory.chats.services import Sender

log = logging.getLogger(__name__)

#: Called with each proposal the sweep found expired (once per proposal, after the expiry is committed).
expiry_listeners: list[Callable[[Proposal], None]] = []
#: Called with each automatic change set whose 30-minute Undo window closed since the last sweep.
undo_closed_listeners: list[Callable[[ChangeSet], None]] = []
#: Called with each proposal as it is confirmed, inside the confirming transaction, so what a listener writes
#: is committed with the confirm or not at all. A listener that fails is rolled back alone and logged: the
#: confirm stands.
confirm_listeners: list[Callable[[Proposal], None]] = []

#: Expired proposals older than this are no longer announced (a listener that keeps failing gives up).
NOTIFY_WINDOW = timedelta(days=7)
STATUSES = tuple(Proposal.Status.values)


class AlreadySaved(Conflict):
    """Memory already holds exactly this note: no proposal is made."""

    code = "already_saved"


def _tidy_details(details: str | None) -> str:
    if details is None or not details.strip():
        return ""
    return closed_details(details)


def proposal_fingerprint(*, owner_id: int, scope: Scope, topic: str, summary: str, details: str,
                         delete: bool) -> str:
    """Identical changes have the same fingerprint (so one is not proposed twice while it waits)."""
    key = json.dumps([owner_id, scope.kind, scope.key, topic, bool(delete), "" if delete else summary,
                      "" if delete else details], ensure_ascii=True)
    return hashlib.sha256(key.encode()).hexdigest()


def proposal_scope(proposal: Proposal) -> Scope:
    return Scope(proposal.scope_kind, proposal.scope_key)  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------------------------
# Selectors
# --------------------------------------------------------------------------------------------------------


def access_proposal(user_id: object, proposal_id: object) -> Proposal:
    """The proposal if ``user_id`` (an id or a user) owns it, else NotFound."""
    owner_id = getattr(user_id, "pk", user_id)
    return owned_or_404(Proposal.objects.all(), owner_field="owner_id", owner=owner_id, pk=proposal_id)


def proposal_list(*, owner_id: int, status: str | None = "pending", now: datetime | None = None,
                  before: int | None = None) -> QuerySet[Proposal]:
    """The inbox, newest first. ``pending`` holds only proposals that can still be confirmed; one past its 24
    hours counts as ``expired`` even before the sweep marks it. ``None`` or ``all``: every proposal. With
    ``before`` (a proposal's id) only those listed after it (another's or none is a 400 ``invalid_before``)."""
    now = now or timezone.now()
    rows = listed_after(Proposal.objects.filter(owner_id=owner_id), before=before,
                        owned=Proposal.objects.filter(owner_id=owner_id), what="proposals")
    if status in (None, "", "all"):
        return rows
    if status not in STATUSES:
        raise InvalidInput(f"status must be one of {', '.join(STATUSES)} or all", code="invalid_status")
    if status == Proposal.Status.PENDING:
        return rows.filter(status=status, expires_at__gt=now)
    if status == Proposal.Status.EXPIRED:
        return rows.filter(Q(status=status) | Q(status=Proposal.Status.PENDING, expires_at__lte=now))
    return rows.filter(status=status)


def proposal_status(proposal: Proposal, *, now: datetime | None = None) -> str:
    """The status as a person sees it: a pending proposal past its life is expired."""
    now = now or timezone.now()
    if proposal.status == Proposal.Status.PENDING and _is_expired(proposal, now):
        return "expired"
    return str(proposal.status)


def _is_expired(proposal: Proposal, now: datetime) -> bool:
    return now >= proposal.expires_at or policy.proposal_expired(created_at=proposal.created_at, now=now)


# --------------------------------------------------------------------------------------------------------
# Services
# --------------------------------------------------------------------------------------------------------


@transaction.atomic
def proposal_create(
    *,
    owner_id: int,
    scope: Scope,
    topic: str,
    summary: str = "",
    details: str | None = None,
    delete: bool = False,
    reason: str = "ask_first",
    locked: bool = False,
    requester_only: bool = False,
    origin: str = "web",
    source: str = "model",
    chat_id: int | None = None,
    conversation_id: int | None = None,
    requested_by_sender_id: int | None = None,
    correction: bool = False,
    makes_room_for: dict[str, str] | None = None,
    read_after: datetime | None = None,
    importance: float | None = None,
    at: datetime | None = None,
    pk: int | None = None,
) -> Proposal:
    """Propose a change of one topic; it waits 24 hours (``policy.PROPOSAL_TTL``) for an answer.

    ``makes_room_for`` (a delete only): the note, ``{topic, summary, details}``, that did not fit the full
    index this delete makes room in; a ``confirm_listeners`` listener suggests it once the delete is confirmed.
    ``read_after``: the change is made of what a chat turn read after that time (``chats.tools.ToolContext``).
    ``importance`` (a note, not a delete): the importance (0..1) the note takes when confirmed, as an export
    gave it (an import's suggestion); None leaves the note's as it is. ``at``: when it was proposed (now when
    None); ``pk``: the id taken for it beforehand (``chats.tools.ToolContext.speculate``), None for a new one.

    Not made twice: while an identical proposal waits, that one is returned (with ``duplicate = True`` on
    the instance). Raises AlreadySaved (409) when the index line (and topic file) already say exactly this,
    NotFound (404, ``unknown_topic``) to forget a topic that does not exist, CapExceeded (422, listing the
    current entries so a model can merge) when a new line would pass the index caps, InvalidInput (400),
    ``chats.services.ChatDeleted`` (410) when ``chat_id`` names a chat that was deleted meanwhile, and
    ``notes.services.Forgotten`` (410 ``forgotten``) when the owner forgot everything after ``read_after``.
    """
    topic = check_topic(topic)
    text = "" if delete else clean_summary(summary)
    body = _checked_details(details, delete)
    _check_details_size(owner_id, scope, topic, body)
    weight = None if delete else check_importance(importance)
    now = at or timezone.now()
    lock_owner(owner_id)  # the index cannot change between this check and the insert
    _check_chat_there(owner_id, chat_id)
    check_not_forgotten(owner_id, read_after)
    entries = notes_selectors.index_entries(owner_id=owner_id, scope=scope)
    current = next((entry for entry in entries if entry.topic == topic), None)
    current_details = notes_selectors.topic_text(owner_id=owner_id, scope=scope, topic=topic)
    if delete:
        if current is None and current_details is None:
            raise NotFound(f"There is no note {topic!r} in {scope.label}.", code="unknown_topic",
                           details={"entries": [entry.as_dict() for entry in entries]})
    else:
        if current is not None and already_holds(current.summary, current_details, text, body):
            raise AlreadySaved(f"Memory already says this: {current.line()}",
                               details={"topic": topic, "summary": text, "scope": scope.kind})
        # The index as the confirmed change would write it (as ``note_upsert`` builds it): a new line, or a
        # longer line for a topic that is there, that passes a cap is refused now, listing the entries so a
        # model can merge, instead of waiting as a proposal that could never be confirmed.
        new_entry = IndexEntry(topic, text, topic if body or current_details is not None else None)
        grown = ([new_entry if entry.topic == topic else entry for entry in entries] if current is not None
                 else [*entries, new_entry])
        lines, size = index_size(render_index(grown))
        if index_over_caps(lines, size):
            raise cap_error(scope.index_path, grown, lines, size, current=entries)
    fingerprint = proposal_fingerprint(owner_id=owner_id, scope=scope, topic=topic, summary=text, details=body,
                                       delete=delete)
    waiting = _waiting_twin(owner_id, fingerprint, now)
    if waiting is not None:
        # Proposed again now: the card shows the note as it is now (as a refused confirm would), so a confirm
        # made having seen it saves over it.
        as_now = (current.summary if current else "", current_details or "")
        if as_now != waiting.shown_before:
            waiting.seen = {"summary": as_now[0], "details": as_now[1]}
            waiting.save(update_fields=["seen"])
        if weight is not None and waiting.importance != weight:  # the same note, weighed by the export anew
            waiting.importance = weight
            waiting.save(update_fields=["importance"])
        return waiting
    proposal = Proposal.objects.create(
        pk=pk, owner_id=owner_id, status=Proposal.Status.PENDING, source=source, kind="memory", scope_kind=scope.kind,
        scope_key=scope.key, topic=topic, summary=text, details=body, is_delete=delete,
        old_summary=current.summary if current else "", old_details=current_details or "", correction=correction,
        locked=locked, requester_only=requester_only or locked, reason=reason[:40], origin=origin,
        chat_id=chat_id, conversation_id=conversation_id, requested_by_sender_id=requested_by_sender_id,
        fingerprint=fingerprint, created_at=now, expires_at=now + policy.PROPOSAL_TTL,
        makes_room_for=makes_room_for if delete else None, importance=weight,
    )
    proposal.duplicate = False  # type: ignore[attr-defined]
    return proposal


@transaction.atomic
def addon_proposal_create(*, owner_id: int, provider: str, topic: str, summary: str = "", details: str | None = None,
                          delete: bool = False, reason: str = "ask_first", locked: bool = False,
                          requester_only: bool = False, origin: str = "web", chat_id: int | None = None,
                          requested_by_sender_id: int | None = None, read_after: datetime | None = None,
                          scope: Scope | None = None) -> Proposal:
    """A proposal of a note for the add-on ``provider`` that serves memory: it waits in the inbox as any other,
    and its confirm hands the note to the add-on (``providers.addon_write``) for ``scope``'s namespace (the
    user's notes when None). The add-on keeps its own notes, so nothing is checked against the built-in index;
    an identical waiting proposal is returned instead. Raises as ``proposal_create`` for a deleted chat and
    for ``read_after``."""
    scope = scope or Scope.user()
    topic = check_topic(topic)
    text = "" if delete else clean_summary(summary)
    body = _checked_details(details, delete)
    if len(body.encode()) > TOPIC_MAX_BYTES:  # the add-on keeps its own notes: there is no current text to show
        raise topic_too_large(topic, body, None)
    now = timezone.now()
    lock_owner(owner_id)
    _check_chat_there(owner_id, chat_id)
    check_not_forgotten(owner_id, read_after)
    if not addon_chosen(owner_id=owner_id, provider=provider):  # another provider was picked while the turn ran
        raise ProviderChanged(DROPPED[PROVIDER_CHANGED].refusal)
    fingerprint = proposal_fingerprint(owner_id=owner_id, scope=scope, topic=topic, summary=text,
                                       details=f"{provider}\n{body}", delete=delete)
    waiting = _waiting_twin(owner_id, fingerprint, now)
    if waiting is not None:
        return waiting
    proposal = Proposal.objects.create(
        owner_id=owner_id, status=Proposal.Status.PENDING, source=Proposal.Source.MODEL, kind="memory",
        scope_kind=scope.kind, scope_key=scope.key, topic=topic, summary=text, details=body, is_delete=delete,
        locked=locked, requester_only=requester_only or locked, reason=reason[:40], origin=origin, chat_id=chat_id,
        requested_by_sender_id=requested_by_sender_id, fingerprint=fingerprint, provider=provider,
        created_at=now, expires_at=now + policy.PROPOSAL_TTL,
    )
    proposal.duplicate = False  # type: ignore[attr-defined]
    return proposal


def _check_chat_there(owner_id: int, chat_id: int | None) -> None:
    """A suggestion made in a chat needs the chat still there (checked under the owner's note lock, which
    ``chats.services.chat_delete`` holds): one the model makes in a turn whose chat was deleted meanwhile
    would wait in the inbox for a chat that is gone. ``ChatDeleted`` (410) ends that turn."""
    if chat_id is None:
        return
    from localai_memory.chats.models import Chat

    if not Chat.objects.filter(pk=chat_id, owner_id=owner_id).exists():
        from localai_memory.chats.services import ChatDeleted

        raise ChatDeleted()


def _checked_details(details: object, delete: bool) -> str:
    """A proposal's details as stored (tidied; empty for a deletion), or InvalidInput."""
    if details is not None and not isinstance(details, str):
        raise InvalidInput("details must be text", code="invalid_details")
    body = "" if delete else _tidy_details(details)
    if "\x00" in body:
        raise InvalidInput("details may not contain NUL characters", code="invalid_details")
    return body


def _check_details_size(owner_id: int, scope: Scope, topic: str, body: str) -> None:
    """400 ``topic_too_large`` (with the topic file's current text) when the details pass a topic file's cap."""
    if len(body.encode()) > TOPIC_MAX_BYTES:
        path = scope.topic_path(topic)
        raise topic_too_large(path, body, notes_selectors.topic_text(owner_id=owner_id, scope=scope, topic=topic))


def already_holds(line: str, details: str | None, summary: str, body: str) -> bool:
    """Whether a note whose index line says ``line`` (and its topic file ``details``) already says what a
    proposal of ``summary`` and ``body`` (its tidied details; empty keeps the file) would save."""
    return line == summary and (not body or body == (details or ""))


def proposal_id_unless_waiting(*, owner_id: int, scope: Scope, topic: str, summary: str = "",
                               details: str | None = None, delete: bool = False) -> int | None:
    """An id for this proposal, taken from the table's sequence now (``proposal_create(pk=…)``), or None when an
    identical one waits within its time: ``proposal_create`` would answer with that one. One past its time
    does not count (``proposal_create`` replaces it). One round trip. Raises InvalidInput as
    ``proposal_create`` does for details it would refuse."""
    fingerprint = proposal_fingerprint(owner_id=owner_id, scope=scope, topic=topic,
                                       summary="" if delete else clean_summary(summary),
                                       details=_checked_details(details, delete), delete=delete)
    waiting = (f"SELECT 1 FROM {Proposal._meta.db_table} WHERE owner_id = %s AND fingerprint = %s "
               f"AND status = %s AND expires_at > %s")
    return next_id_unless(Proposal, waiting, [owner_id, fingerprint, Proposal.Status.PENDING.value,
                                                  timezone.now()])


def _waiting_twin(owner_id: int, fingerprint: str, now: datetime) -> Proposal | None:
    """The identical proposal still waiting (marked ``duplicate``), if any; identical ones past their 24 hours
    are marked expired on the way. Call with the owner's lock held."""
    for waiting in Proposal.objects.select_for_update().filter(owner_id=owner_id, fingerprint=fingerprint,
                                                               status=Proposal.Status.PENDING):
        if _is_expired(waiting, now):
            _mark_expired(waiting, now)
        else:
            waiting.duplicate = True  # type: ignore[attr-defined]
            return waiting
    return None


def _mark_expired(proposal: Proposal, now: datetime) -> None:
    proposal.status, proposal.decided_at, proposal.decided_by = Proposal.Status.EXPIRED, now, "expired"
    proposal.save(update_fields=["status", "decided_at", "decided_by"])


def _locked_pending(*, owner_id: int, proposal_id: object) -> Proposal:
    """The proposal row, locked; NotFound for another owner's, 409 once decided. Expiry is the caller's."""
    proposal: Proposal = owned_or_404(Proposal.objects.select_for_update(), owner_field="owner_id",
                                      owner=owner_id, pk=proposal_id)
    if proposal.status == Proposal.Status.EXPIRED:
        return proposal
    if proposal.status != Proposal.Status.PENDING:
        raise Conflict(_decided_already(proposal), code="proposal_decided",
                       details={"status": proposal.status, "decided_by": proposal.decided_by})
    return proposal


def rejected_text(proposal: Proposal) -> str:
    """What a rejected proposal is called wherever a person reads it (the web card, the API's message, the
    bots, the terminal): "Dropped", the spec's word for the no ("Reply yes to save it or no to drop it"), and
    "Kept" for a note a proposal to forget was answered no. The stored status stays ``rejected``; one that
    something ended before its time (``DROPPED``) is expired, and says why."""
    return "Kept: nothing was forgotten." if proposal.is_delete else "Dropped: nothing was saved."


def _decided_already(proposal: Proposal) -> str:
    """What an answer to a proposal answered before is told, in the words its card used: confirmed, it was
    saved (or forgotten); rejected, it was dropped (or the note kept) and nothing changed."""
    if proposal.status == Proposal.Status.CONFIRMED:
        return ("This proposal to forget the note was confirmed already." if proposal.is_delete
                else "This proposal was saved already.")
    return ("This proposal to forget the note was answered already: the note was kept." if proposal.is_delete
            else "This proposal was dropped already: nothing was saved.")


def _check_answer(proposal: Proposal, sender: Sender | None) -> None:
    """A sender's yes/no in a messaging chat counts only if the policy's may-answer rule says so. The 403's
    ``details.reason`` is the policy's reason (``policy.answer_refusal``: a key of ``policy.MESSAGES``)."""
    if sender is None:
        return  # the owner, in the web inbox or the API
    reason = proposal_answer_refusal(proposal, sender)
    if reason is not None:
        raise Forbidden("This sender cannot answer this proposal; it waits for the owner in the inbox.",
                        code="may_not_answer", details={"reason": reason, "message": policy.MESSAGES[reason]})


def proposal_may_answer(proposal: Proposal, sender: Sender) -> bool:
    """Whether ``sender``'s yes/no in a messaging chat would count for ``proposal`` now (the policy's
    may-answer rule, with the conversation's settings now). A read: it neither locks nor checks the status
    or the expiry, which the confirm and reject do."""
    return proposal_answer_refusal(proposal, sender) is None


def proposal_answer_refusal(proposal: Proposal, sender: Sender) -> str | None:
    """Why ``sender``'s yes/no in a messaging chat would not count for ``proposal`` now (``policy
    .answer_refusal``: a key of ``policy.MESSAGES``), or None when it would. A read, as ``proposal_may_answer``."""
    from localai_memory.chats.models import Chat
    from localai_memory.chats.selectors import turn_facts

    # chat_id None matches no chat (the stubs want a value for pk): then the answer is not allowed.
    chat = (Chat.objects.select_related("agent")
            .filter(pk=proposal.chat_id, owner_id=proposal.owner_id)  # type: ignore[misc]
            .first())
    if chat is None:
        return "answer_outside_messaging"
    return policy.answer_refusal(
        turn_facts(chat=chat, sender=sender),
        requester_only=proposal.requester_only or proposal.locked,
        locked=proposal.locked,
        answerer_paired=sender.paired,
        answerer_can_confirm=sender.can_confirm,
        answerer_is_requester=proposal.requested_by_sender_id is not None
        and sender.sender_id == proposal.requested_by_sender_id,
        scope=proposal.scope_kind,  # type: ignore[arg-type]
    )


_EXPIRED = object()
_PROVIDER_CHANGED = object()
#: ``decided_by`` of a suggestion whose agent was deleted while it waited (``proposals_drop_for_agent``).
AGENT_DELETED = "the agent was deleted"
#: ``decided_by`` of a suggestion dropped when everything was forgotten (``proposals_drop_for_forget``).
FORGOTTEN = "everything was forgotten"
#: ``decided_by`` of a suggestion whose bot was deleted while it waited (``proposals_drop_for_bot``).
BOT_DELETED = "the bot was deleted"
#: ``decided_by`` of a suggestion whose chat was deleted while it waited (``proposals_drop_for_chat``).
CHAT_DELETED = "the chat was deleted"
#: ``decided_by`` of a suggestion an administrator ended (the admin's "Expire now").
ADMIN_EXPIRED = "an administrator"
#: ``decided_by`` of a suggestion for a memory add-on that no longer serves: the person picked another
#: provider (``proposals_drop_for_provider``).
PROVIDER_CHANGED = "another memory provider was picked"


@dataclass(frozen=True)
class Dropped:
    """A suggestion something ended before its time (it did not expire): what the inbox and the API say of it,
    and the 410 an answer to it gets."""

    listed: str
    code: str
    refusal: str


#: Each way a suggestion is dropped, by its ``decided_by``.
DROPPED = {
    FORGOTTEN: Dropped("Dropped: everything in memory was forgotten after it was suggested.", "forgotten",
                       "Everything in memory was forgotten after this was suggested, so it was dropped."),
    AGENT_DELETED: Dropped("Dropped: its agent was deleted.", "agent_deleted",
                           "Its agent was deleted, so this note can no longer be saved."),
    BOT_DELETED: Dropped("Dropped: its bot was deleted.", "bot_deleted",
                         "Its bot was deleted, so this note can no longer be saved."),
    CHAT_DELETED: Dropped("Dropped: its chat was deleted.", "chat_deleted",
                          "Its chat was deleted, so this note can no longer be saved."),
    ADMIN_EXPIRED: Dropped("Dropped by an administrator.", "admin_dropped", "An administrator dropped this suggestion."),
    PROVIDER_CHANGED: Dropped(
        "Dropped: it was for a memory add-on, and you picked another memory provider.", "provider_changed",
        "This note was for a memory add-on that no longer serves your memory (you picked another provider), so "
        "it was dropped: a note is never saved somewhere you did not choose."),
}
DROPPED_BECAUSE = {decided_by: dropped.listed for decided_by, dropped in DROPPED.items()}
#: The codes of the 410s of dropped suggestions (a bot says their refusal as it is).
DROPPED_CODES = frozenset(dropped.code for dropped in DROPPED.values())


def proposals_drop_for_forget(*, owner_id: int) -> int:
    """End the suggestions still waiting when the owner forgets everything (for the built-in notes and for
    the add-on, which is asked to forget too): a clean slate, not one that a confirm fills again. They count
    as expired, with nothing announced; an answer to one is told why. Call inside the forget's transaction,
    under the owner's note lock. Returns how many."""
    return Proposal.objects.filter(owner_id=owner_id, status=Proposal.Status.PENDING).update(
        status=Proposal.Status.EXPIRED, decided_at=timezone.now(), decided_by=FORGOTTEN, notified=True)


def proposals_drop_for_provider(*, owner_id: int, provider: str) -> int:
    """End the suggestions still waiting for a memory add-on other than ``provider``, the one the owner just
    picked ("One serves at a time"): confirmed later, one would be saved into an add-on that no longer serves,
    while the built-in notes or another add-on do. Notes for the built-in notes stay: they are files the person
    reads and edits on the Memory tab whatever serves. They count as expired, with nothing announced
    (``PROVIDER_CHANGED``); an answer to one is told why. Call inside the pick's transaction, under the owner's
    note lock. Returns how many it ended."""
    return Proposal.objects.filter(owner_id=owner_id, status=Proposal.Status.PENDING).exclude(provider="").exclude(
        provider=provider).update(status=Proposal.Status.EXPIRED, decided_at=timezone.now(),
                                  decided_by=PROVIDER_CHANGED, notified=True)


def addon_chosen(*, owner_id: int, provider: str) -> bool:
    """Whether ``provider`` is the memory add-on the owner chose (switched on or off: Off keeps the choice).
    Ask under the owner's note lock, which ``memory.services.provider_pick`` holds while it changes it."""
    from .models import MemorySettings
    from .providers import BUILTIN, canonical

    choice = MemorySettings.objects.filter(user_id=owner_id).values_list("provider", flat=True).first()
    return canonical(choice or BUILTIN) == provider


class ProviderChanged(Gone):
    """410 ``provider_changed``: the memory add-on a note was for no longer serves the owner's memory."""

    code = "provider_changed"


def proposals_drop_for_bot(*, owner_id: int, binding_id: int) -> int:
    """End the suggestions still waiting for the notes of the conversations of bot ``binding_id``, which is
    being deleted: confirmed later, one would write into a folder no chat reads. As for a deleted agent, they
    count as expired with nothing announced (``AGENT_DELETED``'s twin, ``BOT_DELETED``)."""
    return Proposal.objects.filter(
        owner_id=owner_id, status=Proposal.Status.PENDING, scope_kind="channel",
        scope_key__startswith=f"{binding_id}-",
    ).update(status=Proposal.Status.EXPIRED, decided_at=timezone.now(), decided_by=BOT_DELETED, notified=True)


def proposals_drop_for_chat(*, owner_id: int, chat_id: int) -> int:
    """End the suggestions still waiting that came from chat ``chat_id``, which is being deleted: what was said
    there is taken back, and a suggestion made of it with it (a look through the chats, the model in a turn, a
    ``/remember`` waiting for a yes). A suggestion to forget a note nobody needs (reason ``unused``) only
    names the chat whose look found it, and stays. They count as expired, with nothing announced
    (``CHAT_DELETED``); an answer to one is told its chat was deleted. Call inside the delete's transaction,
    under the owner's note lock. Returns how many it ended."""
    return Proposal.objects.filter(owner_id=owner_id, status=Proposal.Status.PENDING, chat_id=chat_id).exclude(
        reason="unused").update(status=Proposal.Status.EXPIRED, decided_at=timezone.now(), decided_by=CHAT_DELETED,
                                notified=True)


def proposals_drop_for_agent(*, owner_id: int, agent_id: int) -> int:
    """End the suggestions still waiting for the notes of agent ``agent_id``, which is being deleted: confirmed
    later, one would write a file into its folder and bring back a Deleted agents tab. They count as expired,
    with nothing announced (nobody let 24 hours pass); an answer to one is told its agent was deleted. Call
    inside the delete's transaction, under the owner's note lock. Returns how many it ended."""
    now = timezone.now()
    return Proposal.objects.filter(
        owner_id=owner_id, status=Proposal.Status.PENDING, scope_kind="agent", scope_key=str(agent_id),
    ).update(status=Proposal.Status.EXPIRED, decided_at=now, decided_by=AGENT_DELETED, notified=True)


@transaction.atomic
def proposals_drop_by_admin(*, proposal_ids: list[int]) -> list[Proposal]:
    """An administrator's "Expire now": end the suggestions among ``proposal_ids`` still waiting, whoever's.
    They count as expired with nothing announced ("nobody answered within 24 hours" would not be true;
    ``ADMIN_EXPIRED``); the inbox and an answer to one say an administrator dropped it. Each row is locked
    first, so a confirm or reject at the same moment decides it or leaves it to this. Returns those it ended.

    The only way the admin ends a suggestion: a delete would leave no trace of the decision, let consolidation
    suggest a rejected note again, and, of a confirmed one, leave its change set naming nothing."""
    now = timezone.now()
    waiting = list(Proposal.objects.select_for_update().filter(pk__in=proposal_ids, status=Proposal.Status.PENDING)
                   .order_by("pk"))
    for proposal in waiting:
        proposal.status, proposal.decided_at, proposal.decided_by = Proposal.Status.EXPIRED, now, ADMIN_EXPIRED
        proposal.expires_at, proposal.notified = now, True
        proposal.save(update_fields=["status", "decided_at", "decided_by", "expires_at", "notified"])
    return waiting


def proposal_confirm(*, owner_id: int, proposal_id: object, actor: str, sender: Sender | None = None
                     ) -> ChangeSet | None:
    """Save the proposed change as one change set (Undo restores the earlier text).

    The row is locked, so two confirms save once (the second gets 409 ``proposal_decided``). Raises Gone (410,
    ``proposal_expired``) once its 24 hours have passed (and marks it expired), Forbidden (403,
    ``may_not_answer``) when ``sender`` may not answer it, CapExceeded (422) when the index is full (it stays
    pending, so the owner can make room and confirm again), NotFound for another owner's, Conflict (409,
    ``changed_since``) when the note changed after it was proposed: it would overwrite what the person did not
    see, so the proposal now shows the note as it is, and a second confirm saves it. Returns None when memory
    already held exactly this note (the proposal counts as confirmed), and for a note handed to a memory add-on
    (the audit of changes records that hand-over as a change set of its own that cannot be undone).
    A note for a memory add-on that is no longer the owner's choice raises ProviderChanged (410
    ``provider_changed``) and is dropped; one for the add-on chosen that is down, ServiceUnavailable (503), and
    it keeps waiting.
    """
    result = _confirm(owner_id=owner_id, proposal_id=proposal_id, actor=actor, sender=sender)
    if result is _EXPIRED:
        raise Gone("This proposal expired: a proposal waits 24 hours. Ask again in the chat.",
                   code="proposal_expired")
    if result is _PROVIDER_CHANGED:
        raise ProviderChanged(DROPPED[PROVIDER_CHANGED].refusal)
    if isinstance(result, _Changed):
        now = (f"it now says \u201c{result.summary}\u201d" if result.summary
               else "it was forgotten" if not result.details else "its details changed")
        raise Conflict(f"The note \u201c{result.topic}\u201d changed since this was suggested: {now}. Confirm "
                       "again to save the suggestion over it.", code="changed_since",
                       details={"topic": result.topic, "current": {"summary": result.summary or None,
                                                                   "details": result.details or None}})
    return result  # type: ignore[return-value]


def _same_text(one: str, other: str) -> bool:
    """Two topic files alike but for the line break at the end (the store adds one)."""
    return one.rstrip("\n") == other.rstrip("\n")


class _Changed:
    """What ``_confirm`` found instead of the note the proposal was made over."""

    def __init__(self, topic: str, summary: str, details: str) -> None:
        self.topic, self.summary, self.details = topic, summary, details


def _answerable(*, owner_id: int, proposal_id: object, sender: Sender | None, now: datetime) -> Any:
    """The pending proposal, locked, that ``sender`` may answer now, or ``_EXPIRED`` (marked so if its 24
    hours just ran out). Raises as ``_locked_pending`` and ``_check_answer`` do. Runs in the caller's
    transaction."""
    # The owner's note lock first, as proposal_create and every note write take it: the same order
    # everywhere, so a confirm racing the model's proposal of the same note cannot deadlock.
    lock_owner(owner_id)
    proposal = _locked_pending(owner_id=owner_id, proposal_id=proposal_id)
    dropped = DROPPED.get(proposal.decided_by) if proposal.status == Proposal.Status.EXPIRED else None
    if dropped is not None:
        raise Gone(dropped.refusal, code=dropped.code)
    if proposal.status == Proposal.Status.EXPIRED:
        return _EXPIRED
    if _is_expired(proposal, now):
        _mark_expired(proposal, now)
        return _EXPIRED
    _check_answer(proposal, sender)
    return proposal


@transaction.atomic
def _confirm(*, owner_id: int, proposal_id: object, actor: str, sender: Sender | None) -> object:
    now = timezone.now()
    proposal = _answerable(owner_id=owner_id, proposal_id=proposal_id, sender=sender, now=now)
    if proposal is _EXPIRED:
        return _EXPIRED
    if proposal.provider and not addon_chosen(owner_id=owner_id, provider=proposal.provider):
        # "Memory does not move … so a note is never saved somewhere you did not choose": one made before the
        # switch (or missed by it) is dropped now, and the 410 says why.
        proposal.status, proposal.decided_at, proposal.decided_by = Proposal.Status.EXPIRED, now, PROVIDER_CHANGED
        proposal.notified = True
        proposal.save(update_fields=["status", "decided_at", "decided_by", "notified"])
        return _PROVIDER_CHANGED
    change: ChangeSet | None = None
    if not proposal.provider:  # the built-in notes: the note must be as it was when proposed
        scope = proposal_scope(proposal)
        line = next((entry for entry in notes_selectors.index_entries(owner_id=owner_id, scope=scope)
                     if entry.topic == proposal.topic), None)
        now_summary = line.summary if line else ""
        now_details = notes_selectors.topic_text(owner_id=owner_id, scope=scope, topic=proposal.topic) or ""
        gone = not now_summary and not now_details
        # Forgetting what is gone already, or saving what it says already, changes nothing anybody saw.
        settled = (gone if proposal.is_delete else now_summary == proposal.summary
                   and (not proposal.details or _same_text(proposal.details, now_details)))
        if not settled and not any(now_summary == summary and _same_text(now_details, details)
                                   for summary, details in {(proposal.old_summary, proposal.old_details),
                                                            proposal.shown_before}):
            proposal.seen = {"summary": now_summary, "details": now_details}
            proposal.save(update_fields=["seen"])
            return _Changed(proposal.topic, now_summary, now_details)
    if proposal.provider:  # the add-on serving memory keeps this note; the host keeps no copy of it
        from .providers import addon_write

        addon_write(proposal.provider, user_id=owner_id, topic=proposal.topic, summary=proposal.summary,
                    details=proposal.details or None, delete=proposal.is_delete,
                    namespace=proposal_scope(proposal).name)
        _audit_handed(proposal, actor=actor, now=now)
        proposal.status, proposal.decided_at, proposal.decided_by = Proposal.Status.CONFIRMED, now, actor[:200]
        proposal.save(update_fields=["status", "decided_at", "decided_by"])
        _tell_confirmed(proposal)
        return None
    try:
        with transaction.atomic():
            change = note_upsert(
                owner_id=owner_id, scope=proposal_scope(proposal), topic=proposal.topic,
                summary=None if proposal.is_delete else proposal.summary,
                details=None if proposal.is_delete or not proposal.details else proposal.details,
                delete=proposal.is_delete, source=ChangeSet.Source.PROPOSAL, actor=actor, automatic=False,
                chat_id=proposal.chat_id, proposal_id=proposal.pk,
            )
    except CapExceeded:
        raise
    except Conflict as exc:
        if exc.code != "no_change":
            raise
        change = None
    except NotFound as exc:
        if exc.code != "unknown_topic":
            raise
        change = None  # forgetting a note that is gone already: nothing left to do
    if proposal.importance is not None and not proposal.is_delete:
        # the importance the export gave the note (an import's suggestion), in the confirm's change set so
        # that its Undo takes it back with the text (one of its own when the text was there already)
        _, weighed = importance_change(owner_id=owner_id, scope=proposal_scope(proposal), topic=proposal.topic,
                                       importance=proposal.importance, change=change,
                                       source=ChangeSet.Source.PROPOSAL, actor=actor)
        change = change or weighed
    proposal.status, proposal.decided_at, proposal.decided_by = Proposal.Status.CONFIRMED, now, actor[:200]
    proposal.change_set = change
    proposal.save(update_fields=["status", "decided_at", "decided_by", "change_set"])
    _tell_confirmed(proposal)
    return change


def _audit_handed(proposal: Proposal, *, actor: str, now: datetime) -> ChangeSet:
    """The audit's entry of a note handed to a memory add-on on confirm: who confirmed it (``actor``), what was
    handed over (the summary names the topic and the line, or the forget; ``proposal_id`` leads to the whole
    suggestion) and to which add-on. A change set of no files, with source ``addon``: the add-on keeps the
    note, so the host has no earlier text to restore and its Undo refuses (``notes.services.change_undo``)."""
    from localai_memory.notes.selectors import scope_label

    from .providers import addon_label

    label = addon_label(proposal.provider)
    what = (f"forget {proposal.topic}" if proposal.is_delete else f"{proposal.topic}: {proposal.summary}")
    # whose notes, as the Memory tab names them: an agent by its name, not its namespace ("agent:3")
    where = ("" if proposal.scope_kind == "user"
             else f" ({scope_label(owner_id=proposal.owner_id, scope=proposal_scope(proposal))})")
    return ChangeSet.objects.create(
        owner_id=proposal.owner_id, created_at=now, source=ChangeSet.Source.ADDON, actor=actor[:200],
        summary=f"Handed to the memory add-on “{label}” ({proposal.provider}){where}: {what}"[:300],
        chat_id=proposal.chat_id, proposal_id=proposal.pk)


def _tell_confirmed(proposal: Proposal) -> None:
    """Each of ``confirm_listeners``, in the confirm's transaction, each behind its own savepoint: the owner's
    confirm never fails for what follows it, unless the database is gone (then nothing was saved)."""
    _call_listeners(confirm_listeners, proposal, savepoint=True)


def proposal_confirm_read(*, owner_id: int, proposal_id: object, actor: str) -> tuple[Proposal, ChangeSet | None]:
    """``proposal_confirm``, then the decided proposal and its change set (files and undo loaded) read in the
    same transaction: if the database goes away before they are read, nothing was saved, so the error the
    caller reports tells the truth (read after the commit, a 503 could hide a saved note; seen in
    bench/faults). A refusal (410 expired, 409, 422…) leaves the transaction normally, so what was decided
    before it (an expiry mark) stays."""
    refusal: ApplicationError | None = None
    with transaction.atomic():
        try:
            change = proposal_confirm(owner_id=owner_id, proposal_id=proposal_id, actor=actor)
        except ApplicationError as exc:
            refusal = exc
        else:
            # proposal_confirm found the row by this id, so it is one the lookup takes.
            proposal = Proposal.objects.get(owner_id=owner_id, pk=cast("int | str", proposal_id))
            if change is not None:
                change = ChangeSet.objects.prefetch_related("files", "reverted_by").get(pk=change.pk)
    if refusal is not None:
        raise refusal
    return proposal, change


def proposal_reject(*, owner_id: int, proposal_id: object, actor: str, sender: Sender | None = None) -> Proposal:
    """Drop a proposal; nothing is written. Same 404/409/410/403 rules as ``proposal_confirm``."""
    result = _reject(owner_id=owner_id, proposal_id=proposal_id, actor=actor, sender=sender)
    if result is _EXPIRED:
        raise Gone("This proposal expired already: a proposal waits 24 hours.", code="proposal_expired")
    return result  # type: ignore[return-value]


@transaction.atomic
def _reject(*, owner_id: int, proposal_id: object, actor: str, sender: Sender | None) -> object:
    now = timezone.now()
    proposal = _answerable(owner_id=owner_id, proposal_id=proposal_id, sender=sender, now=now)
    if proposal is _EXPIRED:
        return _EXPIRED
    proposal.status, proposal.decided_at, proposal.decided_by = Proposal.Status.REJECTED, now, actor[:200]
    proposal.save(update_fields=["status", "decided_at", "decided_by"])
    return proposal


@transaction.atomic
def proposals_expire_due(*, now: datetime | None = None) -> list[Proposal]:
    """The sweep: mark every pending proposal past its life as expired; returns those it marked.

    Rows another transaction holds (somebody confirming right now) are skipped; the confirm decides them.
    """
    now = now or timezone.now()
    due = list(Proposal.objects.select_for_update(skip_locked=True)
               .filter(Q(expires_at__lte=now) | Q(created_at__lte=now - policy.PROPOSAL_TTL),
                       status=Proposal.Status.PENDING))
    for proposal in due:
        _mark_expired(proposal, now)
    return due


def proposals_notify_expired(*, now: datetime | None = None) -> list[Proposal]:
    """Tell each listener about every expired proposal not announced yet; returns those announced.

    A proposal is marked ``notified`` only when every listener took it, so a bot that was down hears of it
    at the next sweep (for ``NOTIFY_WINDOW``).
    """
    now = now or timezone.now()
    waiting = list(Proposal.objects.filter(status=Proposal.Status.EXPIRED, notified=False,
                                           decided_at__gte=now - NOTIFY_WINDOW).order_by("decided_at", "id"))
    announced: list[Proposal] = []
    for proposal in waiting:
        if not _call_listeners(expiry_listeners, proposal):
            continue
        if Proposal.objects.filter(pk=proposal.pk, notified=False).update(notified=True) == 1:
            proposal.notified = True
            announced.append(proposal)
    return announced


def undo_windows_closed(*, since: datetime, until: datetime) -> list[ChangeSet]:
    """Automatic change sets whose Undo window closed in (since, until] and that were not undone; each is
    passed to ``undo_closed_listeners``."""
    closed = list(ChangeSet.objects.filter(automatic=True, undo_until__gt=since, undo_until__lte=until,
                                           reverted_by__isnull=True).order_by("undo_until", "id"))
    for change in closed:
        _call_listeners(undo_closed_listeners, change)
    return closed


def _call_listeners(listeners: list[Callable[[Any], None]], item: Any, *, savepoint: bool = False) -> bool:
    """Each listener with ``item``; one that fails is logged and the rest still run (False then), behind a
    savepoint of its own with ``savepoint``. A database that is gone ends it all: the caller's transaction
    fails (a sweep retries next time; a confirm saved nothing)."""
    ok = True
    for listener in list(listeners):
        try:
            if savepoint:
                with transaction.atomic():
                    listener(item)
            else:
                listener(item)
        except (OperationalError, InterfaceError):
            raise
        except Exception:
            log.exception("memory listener %r failed on %r", listener, item)
            ok = False
    return ok
