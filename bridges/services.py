"""Writes of the bridges: bindings and their credentials, senders, pairing, delivery claims and replies on
their way.

Services are keyword-only and atomic; the API, the admin, the bot core and runbridges all call these. Nothing
here talks to a platform: the adapters do, and report back with ``binding_report_*``.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final

from django.db import IntegrityError, transaction
from django.utils import timezone

from localai_memory.core.errors import Conflict, Gone, InvalidInput, NotFound, TooLarge

from . import crypto
from .models import (
    PLATFORM_MODES,
    Binding,
    BindingState,
    Delivery,
    PairingRequest,
    PairingStatus,
    PendingReply,
    Platform,
    Sender,
    SenderStatus,
)


class _Unset:
    def __repr__(self) -> str:
        return "UNSET"


UNSET: Final = _Unset()

#: A pairing code is valid this long.
PAIRING_TTL = timedelta(hours=1)
#: At most this many codes wait for the owner per binding; more unknown senders are told to try later.
MAX_PENDING_PAIRINGS = 5
#: Unambiguous letters and digits (no 0/O, 1/I/L).
_CODE_ALPHABET = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"
CODE_LENGTH = 6

#: Every credential a platform takes, and which of them each mode needs.
CREDENTIAL_KEYS: dict[str, tuple[str, ...]] = {
    Platform.TELEGRAM: ("token", "webhook_secret"),
    Platform.SLACK: ("bot_token", "signing_secret", "app_token"),
    Platform.DISCORD: ("token",),
}
REQUIRED_CREDENTIALS: dict[str, tuple[str, ...]] = {
    "polling": ("token",),
    "webhook": ("token",),
    "socket": ("bot_token", "app_token"),
    "http": ("bot_token", "signing_secret"),
    "gateway": ("token",),
}
_CREDENTIAL_FORMATS: dict[str, tuple[re.Pattern[str], str]] = {
    "bot_token": (re.compile(r"^xoxb-[\w-]{4,}\Z"), "a Slack bot token starts with xoxb-"),
    "app_token": (re.compile(r"^xapp-[\w-]{4,}\Z"), "a Slack app-level token starts with xapp-"),
    "token": (re.compile(r"^[\w.:-]{8,300}\Z"), "a bot token is 8-300 letters, digits and . : _ -"),
    "signing_secret": (re.compile(r"^[\w-]{8,200}\Z"), "a signing secret is 8-200 letters and digits"),
    "webhook_secret": (re.compile(r"^[A-Za-z0-9_-]{16,256}\Z"),
                       "a webhook secret is 16-256 letters, digits, _ or -"),
}


# --------------------------------------------------------------------------------------------------------
# Bindings
# --------------------------------------------------------------------------------------------------------


def _check_platform_mode(platform: object, mode: object) -> tuple[str, str]:
    if platform not in PLATFORM_MODES:
        raise InvalidInput(f"platform must be one of {', '.join(PLATFORM_MODES)}", code="invalid_platform")
    modes = PLATFORM_MODES[str(platform)]
    if mode is None:
        mode = modes[0]
    if mode not in modes:
        raise InvalidInput(f"a {platform} binding runs in one of these modes: {', '.join(modes)}",
                           code="invalid_mode")
    return str(platform), str(mode)


def _check_credentials(platform: str, mode: str, values: dict[str, Any]) -> dict[str, str]:
    if not isinstance(values, dict):
        raise InvalidInput("credentials must be an object", code="invalid_credentials")
    allowed = CREDENTIAL_KEYS[platform]
    unknown = sorted(set(values) - set(allowed))
    if unknown:
        raise InvalidInput(f"a {platform} binding takes these credentials: {', '.join(allowed)} "
                           f"(not {', '.join(unknown)})", code="invalid_credentials")
    cleaned: dict[str, str] = {}
    for key, value in values.items():
        if value is None or value == "":
            continue  # left out
        if not isinstance(value, str):
            raise InvalidInput(f"credentials.{key} must be text", code="invalid_credentials")
        value = value.strip()
        pattern, hint = _CREDENTIAL_FORMATS[key]
        if not pattern.match(value):
            raise InvalidInput(f"credentials.{key}: {hint}", code="invalid_credentials")
        cleaned[key] = value
    return cleaned


def _require(mode: str, values: dict[str, str]) -> None:
    missing = [key for key in REQUIRED_CREDENTIALS[mode] if not values.get(key)]
    if missing:
        raise InvalidInput(f"mode {mode} needs the credentials {', '.join(missing)}", code="missing_credentials")


def _check_agent(owner_id: int, agent_id: int | None) -> int | None:
    if agent_id is None:
        return None
    from localai_memory.agents.selectors import access_agent

    if isinstance(agent_id, bool) or not isinstance(agent_id, int):
        raise InvalidInput("agent must be an agent's id or null", code="invalid_agent")
    try:
        return access_agent(owner_id, agent_id).pk
    except NotFound:
        raise NotFound("No such agent.", code="agent_not_found") from None


def _check_name(name: object) -> str:
    if not isinstance(name, str) or not name.strip() or len(name.strip()) > 100:
        raise InvalidInput("name is 1-100 characters", code="invalid_name")
    return name.strip()


def _store(binding: Binding, values: dict[str, str]) -> None:
    if binding.platform == Platform.TELEGRAM and not values.get("webhook_secret"):
        # The secret Telegram sends back in X-Telegram-Bot-Api-Secret-Token; made here, never shown.
        values["webhook_secret"] = secrets.token_urlsafe(32)
    binding.credentials = crypto.encrypt(values)
    binding.credential_keys = sorted(k for k in values if k != "webhook_secret")


@transaction.atomic
def binding_create(*, owner_id: int, platform: str, name: str, credentials: dict[str, Any],
                   mode: str | None = None, agent_id: int | None = None, enabled: bool = True) -> Binding:
    """Connect a bot. Credentials are checked for shape, encrypted and never shown back."""
    platform, mode = _check_platform_mode(platform, mode)
    values = _check_credentials(platform, mode, credentials)
    _require(mode, values)
    binding = Binding(owner_id=owner_id, platform=platform, mode=mode, name=_check_name(name),
                      agent_id=_check_agent(owner_id, agent_id), enabled=bool(enabled))
    _store(binding, values)
    binding.save()
    return binding


@transaction.atomic
def binding_update(*, binding: Binding, name: Any = UNSET, credentials: Any = UNSET, mode: Any = UNSET,
                   agent_id: Any = UNSET, enabled: Any = UNSET) -> Binding:
    """Change a binding; a field left UNSET stays. New credentials are merged into the stored ones (a key set
    to "" or null keeps its value) and clear a "token refused" state, so the bot is tried again."""
    binding = Binding.objects.select_for_update().get(pk=binding.pk)
    if name is not UNSET:
        binding.name = _check_name(name)
    if mode is not UNSET:
        _, binding.mode = _check_platform_mode(binding.platform, mode)
    if agent_id is not UNSET:
        binding.agent_id = _check_agent(binding.owner_id, agent_id)
    stored = crypto.decrypt(binding.credentials) if credentials is not UNSET or mode is not UNSET else {}
    if credentials is not UNSET:
        stored.update(_check_credentials(binding.platform, binding.mode, credentials))
    if credentials is not UNSET or mode is not UNSET:
        _require(binding.mode, stored)
        _store(binding, stored)
    if credentials is not UNSET and binding.state != BindingState.OK:
        _set_state(binding, BindingState.OK, "", "")
    if enabled is not UNSET:
        _set_enabled(binding, bool(enabled))
    binding.save()
    return binding


def binding_check_changes(*, binding: Binding, mode: Any = UNSET, agent_id: Any = UNSET,
                          credentials: Any = UNSET) -> None:
    """Raise what ``binding_update`` would raise for this mode, agent or these credentials (a mode the platform
    does not offer, or whose credentials the binding would lack; an agent that is not the owner's; a
    credential the platform does not take or of the wrong shape), changing nothing: the admin's form shows it
    on the field before it saves."""
    if mode is not UNSET:
        _, mode = _check_platform_mode(binding.platform, mode)
    given = _check_credentials(binding.platform, binding.mode, credentials) if credentials is not UNSET else {}
    if mode is not UNSET and mode != binding.mode:
        _require(mode, {**crypto.decrypt(binding.credentials), **given})
    if agent_id is not UNSET:
        _check_agent(binding.owner_id, agent_id)


def _set_state(binding: Binding, state: str, code: str, reason: str) -> None:
    binding.state, binding.state_code, binding.state_reason = state, code, reason[:300]
    binding.state_changed_at = timezone.now()


def _set_enabled(binding: Binding, enabled: bool) -> None:
    if enabled and not binding.enabled and binding.state == BindingState.REVOKED:
        # The owner asks to try again (e.g. the token was restored on the platform).
        _set_state(binding, BindingState.OK, "", "")
    binding.enabled = enabled


@transaction.atomic
def binding_set_enabled(*, binding: Binding, enabled: bool) -> Binding:
    """The owner's on/off switch; runbridges picks the change up on its next look."""
    binding = Binding.objects.select_for_update().get(pk=binding.pk)
    _set_enabled(binding, enabled)
    binding.save()
    return binding


@transaction.atomic
def binding_delete(*, binding: Binding) -> None:
    """Disconnect a bot. Its conversations' notes stay in Memory/channels/ (the owner deletes them there); the
    suggestions still waiting for them are dropped, under the owner's note lock (no confirm writes there
    after the delete)."""
    from localai_memory.memory.proposals import proposals_drop_for_bot
    from localai_memory.notes.services import lock_owner

    lock_owner(binding.owner_id)
    proposals_drop_for_bot(owner_id=binding.owner_id, binding_id=binding.pk)
    Binding.objects.filter(pk=binding.pk).delete()


@transaction.atomic
def binding_report_revoked(*, binding_id: int, code: str, reason: str) -> None:
    """The platform refused the token: turn the binding off with a reason the owner sees, instead of looping."""
    binding = Binding.objects.select_for_update().filter(pk=binding_id).first()
    if binding is None:
        return
    binding.enabled = False
    _set_state(binding, BindingState.REVOKED, code, reason)
    binding.save()


def binding_report_error(*, binding_id: int, code: str, reason: str) -> None:
    """A passing failure (network, 5xx): shown to the owner while the bot retries. Does not touch updated_at,
    so runbridges does not restart the bot for it."""
    Binding.objects.filter(pk=binding_id).exclude(state=BindingState.REVOKED).update(
        state=BindingState.ERROR, state_code=code[:40], state_reason=reason[:300], state_changed_at=timezone.now())


def binding_report_connected(*, binding_id: int, bot_identity: str = "") -> None:
    """The bot is connected and working (clears an error state; never a revoked one)."""
    now = timezone.now()
    fields: dict[str, Any] = {"last_connected_at": now}
    if bot_identity:
        fields["bot_identity"] = bot_identity[:200]
    Binding.objects.filter(pk=binding_id).update(**fields)
    Binding.objects.filter(pk=binding_id, state=BindingState.ERROR).update(
        state=BindingState.OK, state_code="", state_reason="", state_changed_at=now)


# --------------------------------------------------------------------------------------------------------
# Senders
# --------------------------------------------------------------------------------------------------------


def sender_seen(*, binding_id: int, external_id: str, display: str, now: datetime | None = None) -> Sender:
    """The sender ``external_id`` of a binding, created on first sight; its platform name kept current."""
    now = now or timezone.now()
    display = (display or "")[:200]
    sender, created = Sender.objects.get_or_create(
        binding_id=binding_id, external_id=str(external_id)[:200],
        defaults={"display": display, "last_seen_at": now})
    if not created:
        Sender.objects.filter(pk=sender.pk).update(display=display or sender.display, last_seen_at=now)
        sender.display, sender.last_seen_at = display or sender.display, now
    return sender


@transaction.atomic
def sender_update(*, sender: Sender, name: Any = UNSET, can_confirm: Any = UNSET) -> Sender:
    """Rename a sender, or grant/revoke "Confirm changes from the chat" (only a paired sender gets it)."""
    sender = Sender.objects.select_for_update().get(pk=sender.pk)
    if name is not UNSET:
        if not isinstance(name, str) or len(name.strip()) > 100:
            raise InvalidInput("name is at most 100 characters", code="invalid_name")
        sender.name = name.strip()
    if can_confirm is not UNSET:
        if can_confirm and not sender.paired:
            raise Conflict("Only a paired sender can confirm changes from the chat; pair them first.",
                           code="sender_not_paired")
        sender.can_confirm = bool(can_confirm)
    sender.save(update_fields=["name", "can_confirm"])
    return sender


@transaction.atomic
def sender_unpair(*, sender: Sender) -> Sender:
    """Unpair a sender: their messages stop reaching the model; writing again gets them a new code."""
    sender = Sender.objects.select_for_update().get(pk=sender.pk)
    sender.status, sender.can_confirm, sender.paired_at = SenderStatus.UNPAIRED, False, None
    sender.save(update_fields=["status", "can_confirm", "paired_at"])
    _close_pending(sender, PairingStatus.DENIED)
    return sender


@transaction.atomic
def sender_unblock(*, sender: Sender) -> Sender:
    """Take back a denied pairing: the bot no longer ignores the sender, and writing again gets them a new
    code (the owner approves or denies it as any). Conflict when they are not blocked."""
    sender = Sender.objects.select_for_update().get(pk=sender.pk)
    if sender.status != SenderStatus.BLOCKED:
        raise Conflict(f"{sender.label} is not blocked.", code="sender_not_blocked")
    sender.status = SenderStatus.UNPAIRED
    sender.save(update_fields=["status"])
    return sender


@transaction.atomic
def sender_delete(*, sender: Sender) -> None:
    """Forget a sender (a blocked one may then ask to pair again)."""
    Sender.objects.filter(pk=sender.pk).delete()


def _close_pending(sender: Sender, status: str) -> None:
    PairingRequest.objects.filter(sender=sender, status=PairingStatus.PENDING).update(
        status=status, decided_at=timezone.now())


# --------------------------------------------------------------------------------------------------------
# Pairing
# --------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PairingOffer:
    """What an unknown sender is told: a code (``None`` when too many wait already) and until when."""

    code: str | None
    expires_at: datetime | None


def _new_code() -> str:
    return "".join(secrets.choice(_CODE_ALPHABET) for _ in range(CODE_LENGTH))


@transaction.atomic
def pairing_offer(*, sender: Sender, now: datetime | None = None) -> PairingOffer:
    """A pairing code for an unpaired sender: their waiting one, or a new one while fewer than
    MAX_PENDING_PAIRINGS wait for this binding. Expired codes are marked on the way."""
    now = now or timezone.now()
    Binding.objects.select_for_update().filter(pk=sender.binding_id).first()  # serialise the count per binding
    PairingRequest.objects.filter(binding_id=sender.binding_id, status=PairingStatus.PENDING,
                                  expires_at__lte=now).update(status=PairingStatus.EXPIRED, decided_at=now)
    waiting = PairingRequest.objects.filter(sender=sender, status=PairingStatus.PENDING).first()
    if waiting is not None:
        return PairingOffer(waiting.code, waiting.expires_at)
    if PairingRequest.objects.filter(binding_id=sender.binding_id,
                                     status=PairingStatus.PENDING).count() >= MAX_PENDING_PAIRINGS:
        return PairingOffer(None, None)
    for _ in range(10):
        code = _new_code()
        try:
            with transaction.atomic():
                request = PairingRequest.objects.create(binding_id=sender.binding_id, sender=sender, code=code,
                                                        created_at=now, expires_at=now + PAIRING_TTL)
            return PairingOffer(request.code, request.expires_at)
        except IntegrityError:
            continue
    raise Conflict("Could not make a pairing code; try again.", code="retry")  # pragma: no cover


def _normalise_code(code: object) -> str:
    if not isinstance(code, str) or not code.strip():
        raise InvalidInput("code is required", code="invalid_code")
    cleaned = re.sub(r"[\s-]", "", code).upper()
    if len(cleaned) > 12:
        raise TooLarge("a pairing code is short", code="invalid_code")
    return cleaned


@transaction.atomic
def pairing_approve(*, binding: Binding, code: str, can_confirm: bool = False,
                    now: datetime | None = None) -> Sender:
    """Pair the sender who got ``code``. 404 for a code this binding never gave, 410 once it expired, 409 once
    it was decided."""
    now = now or timezone.now()
    request = (PairingRequest.objects.select_for_update().select_related("sender")
               .filter(binding=binding, code=_normalise_code(code)).order_by("-created_at").first())
    if request is None:
        raise NotFound("No pairing request has this code.", code="pairing_not_found")
    if request.status == PairingStatus.PENDING and request.expires_at <= now:
        request.status, request.decided_at = PairingStatus.EXPIRED, now
        request.save(update_fields=["status", "decided_at"])
    if request.status == PairingStatus.EXPIRED:
        raise Gone("This pairing code has expired; ask the sender to write to the bot again for a new one.",
                   code="pairing_expired")
    if request.status != PairingStatus.PENDING:
        raise Conflict(f"This pairing request was {request.status} already.", code="pairing_decided")
    request.status, request.decided_at = PairingStatus.APPROVED, now
    request.save(update_fields=["status", "decided_at"])
    sender = Sender.objects.select_for_update().get(pk=request.sender_id)
    sender.status, sender.paired_at, sender.can_confirm = SenderStatus.PAIRED, now, bool(can_confirm)
    sender.save(update_fields=["status", "paired_at", "can_confirm"])
    return sender


@transaction.atomic
def pairing_deny(*, request: PairingRequest, now: datetime | None = None) -> Sender:
    """Deny a pairing request: the sender is blocked (the bot ignores them until the owner forgets them)."""
    now = now or timezone.now()
    request = PairingRequest.objects.select_for_update().get(pk=request.pk)
    if request.status not in (PairingStatus.PENDING, PairingStatus.EXPIRED):
        raise Conflict(f"This pairing request was {request.status} already.", code="pairing_decided")
    request.status, request.decided_at = PairingStatus.DENIED, now
    request.save(update_fields=["status", "decided_at"])
    sender = Sender.objects.select_for_update().get(pk=request.sender_id)
    if not sender.paired:
        sender.status, sender.can_confirm = SenderStatus.BLOCKED, False
        sender.save(update_fields=["status", "can_confirm"])
    return sender


def pairings_expire_due(*, now: datetime | None = None) -> int:
    """Mark codes past their time as expired (tidying; approval checks the time itself)."""
    now = now or timezone.now()
    return PairingRequest.objects.filter(status=PairingStatus.PENDING, expires_at__lte=now).update(
        status=PairingStatus.EXPIRED, decided_at=now)


# --------------------------------------------------------------------------------------------------------
# Deliveries
# --------------------------------------------------------------------------------------------------------


def delivery_claim(*, binding_id: int, key: str, now: datetime | None = None) -> bool:
    """Claim one platform delivery. False when it was claimed before (a retry or a duplicate)."""
    with transaction.atomic():
        try:
            Delivery.objects.create(binding_id=binding_id, key=key[:200], received_at=now or timezone.now())
        except IntegrityError:
            return False
    return True


def delivery_release(*, binding_id: int, key: str) -> None:
    """Give a claim back after the handling failed, so the platform's retry is handled."""
    Delivery.objects.filter(binding_id=binding_id, key=key[:200]).delete()


def deliveries_prune(*, older_than: timedelta = timedelta(days=3), now: datetime | None = None) -> int:
    """Forget claims older than any platform retries (Slack retries for about an hour)."""
    cutoff = (now or timezone.now()) - older_than
    deleted, _ = Delivery.objects.filter(received_at__lt=cutoff).delete()
    return deleted


# --------------------------------------------------------------------------------------------------------
# Replies on their way (runbridges)
# --------------------------------------------------------------------------------------------------------


def reply_pending_open(*, binding_id: int, conversation_id: str, said: str, now: datetime | None = None) -> int:
    """Write down a message the bot is about to answer (committed at once, before the turn); returns its id."""
    [pending_id] = replies_pending_open(rows=[(binding_id, conversation_id, said)], now=now)
    return pending_id


def replies_pending_open(*, rows: list[tuple[int, str, str]], holder: int | None = None,
                         now: datetime | None = None) -> list[int]:
    """Write down messages the bot is about to answer, each (binding id, conversation id, what was said), in one
    statement committed at once, held by the web process ``holder`` (None: runbridges); returns their ids in
    order."""
    now = now or timezone.now()
    return [pending.pk for pending in PendingReply.objects.bulk_create(
        PendingReply(binding_id=binding_id, conversation_id=str(conversation_id)[:200], said=_said(said),
                     created_at=now, holder=holder)
        for binding_id, conversation_id, said in rows)]


def _said(text: str) -> str:
    """The beginning of a message, to name it: one line of at most 80 characters."""
    said = " ".join(text.split())
    return said[:79].rstrip() + "\u2026" if len(said) > 80 else said


def reply_pending_answered(*, pending_id: int, messages: list[dict[str, Any]]) -> None:
    """The answer of a written-down message, as the bot is about to send it."""
    PendingReply.objects.filter(pk=pending_id).update(messages=messages)


def reply_pending_close(*, pending_id: int) -> None:
    """The answer was sent (or there was none to send)."""
    PendingReply.objects.filter(pk=pending_id).delete()


def replies_pending_prune(*, older_than: timedelta, now: datetime | None = None) -> int:
    """Drop written-down messages older than ``older_than`` (``pending.TELL_FOR``, past which they are never
    told anyway): a bot whose ``runbridges`` never starts again (deleted from the process's bindings, the
    process no longer run) would keep its rows forever, as they are otherwise only read at its start."""
    deleted, _ = PendingReply.objects.filter(created_at__lt=(now or timezone.now()) - older_than).delete()
    return deleted


def replies_pending_move(*, ids: list[int], holder: int) -> None:
    """The web process holding the replies ``ids`` now holds them under the key ``holder``: its presence's
    connection was lost, and with it the lock of the key they had (``bridges.pending.Presence``)."""
    PendingReply.objects.filter(pk__in=ids).update(holder=holder)


def reply_pending_let_go(*, pending_id: int) -> None:
    """The web process is done with the reply without having sent its answer (the send failed): nobody works
    on it any more, so Celery beat tells it at its next round (``PendingReply.LET_GO``), if it is still here."""
    PendingReply.objects.filter(pk=pending_id).update(holder=PendingReply.LET_GO)
