"""Reads of bindings, conversations, senders and pairing requests, always scoped to one owner."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime
from urllib.parse import urlparse

from django.db.models import QuerySet
from django.utils import timezone

from localai_memory.core.access import owned_or_404
from localai_memory.notes.paths import Scope

from . import crypto
from .models import Binding, Conversation, Mode, PairingRequest, PairingStatus, PendingReply, Sender


def access_binding(user: object, binding_id: object) -> Binding:
    """The binding ``binding_id`` of ``user``, or NotFound (another user's binding is a 404)."""
    return owned_or_404(Binding.objects.select_related("agent"), owner=user, pk=binding_id)


def access_conversation(user: object, conversation_id: object) -> Conversation:
    return owned_or_404(Conversation.objects.select_related("binding"), owner_field="binding__owner", owner=user,
                        pk=conversation_id)


def access_sender(user: object, sender_id: object) -> Sender:
    return owned_or_404(Sender.objects.select_related("binding"), owner_field="binding__owner", owner=user,
                        pk=sender_id)


def access_pairing(user: object, binding: Binding, pairing_id: object) -> PairingRequest:
    return owned_or_404(PairingRequest.objects.select_related("sender").filter(binding=binding),
                        owner_field="binding__owner", owner=user, pk=pairing_id)


def binding_list(*, owner_id: int) -> QuerySet[Binding]:
    return Binding.objects.filter(owner_id=owner_id).select_related("agent")


def binding_endpoint(*, binding: Binding) -> str | None:
    """The address the platform calls for a bot that is called (Telegram ``webhook``, Slack ``http``): runbridges
    registers Telegram's itself; the owner enters Slack's in the Slack app. None for the other modes."""
    if binding.mode == Mode.WEBHOOK:
        from .telegram.adapter import webhook_url

        return webhook_url(binding.pk)
    if binding.mode == Mode.HTTP:
        from .slack.adapter import events_url

        return events_url(binding.pk)
    return None


def endpoint_warning(*, binding: Binding) -> str | None:
    """Why the platform cannot call ``binding``'s endpoint: Telegram and Slack call only a public ``https://``
    address, and LOCALAI_MEMORY_PUBLIC_URL (http://127.0.0.1:8000 unless set) builds it. None when it may."""
    endpoint = binding_endpoint(binding=binding)
    if endpoint is None:
        return None
    host = urlparse(endpoint).hostname or ""
    if endpoint.startswith("https://") and host not in {"localhost", "127.0.0.1", "::1"}:
        return None
    platform = "Telegram" if binding.mode == Mode.WEBHOOK else "Slack"
    return (f"{platform} cannot call {endpoint}: it calls only a public https:// address. Set "
            "LOCALAI_MEMORY_PUBLIC_URL to the https address people reach this server at, then restart it.")


def binding_credentials(*, binding: Binding) -> dict[str, str]:
    """The decrypted credentials of ``binding`` (for the adapters only; never returned by the API)."""
    return crypto.decrypt(binding.credentials)


def conversation_list(*, binding: Binding) -> QuerySet[Conversation]:
    return binding.conversations.all()


def sender_list(*, binding: Binding) -> QuerySet[Sender]:
    return binding.senders.all()


def pairing_list(*, binding: Binding, now: datetime | None = None) -> QuerySet[PairingRequest]:
    """Pairing requests that still wait for the owner (expired ones are left out)."""
    now = now or timezone.now()
    return (binding.pairing_requests.filter(status=PairingStatus.PENDING, expires_at__gt=now)
            .select_related("sender"))


@dataclass(frozen=True)
class RunnableBinding:
    """What runbridges needs to know to decide whether a running bot must be (re)started."""

    id: int
    platform: str
    mode: str
    fingerprint: str
    """What the bot's connection is made of: its platform, mode and credentials (hashed). The name, the agent
    and the rest are read per message, so changing them never restarts the connection (a restart can cut
    off an answer on its way)."""


def runnable_bindings() -> list[RunnableBinding]:
    """Every enabled binding of an active account whose bot runs inside ``runbridges`` (webhook and Slack HTTP
    ones included: the process registers the webhook, and otherwise leaves them to the web). An account an
    administrator suspended (unticked "Active") has its bots stopped, as if each were switched off."""
    rows = Binding.objects.filter(enabled=True, owner__is_active=True).order_by("id").values_list("id", "platform", "mode", "credentials")
    return [RunnableBinding(id=pk, platform=platform, mode=mode,
                            fingerprint=f"{platform}:{mode}:{hashlib.sha256(credentials.encode()).hexdigest()}")
            for pk, platform, mode, credentials in rows]


def replies_left(*, binding_id: int) -> list[PendingReply]:
    """The replies a stopped ``runbridges`` left on their way for this binding, oldest first
    (``bridges.pending``); the web process's are not among them."""
    return list(PendingReply.objects.filter(binding_id=binding_id, holder__isnull=True))


def reply_holders() -> list[int]:
    """The keys of the web processes that hold replies on their way (``bridges.pending.Presence``)."""
    return [holder for holder in PendingReply.objects.filter(holder__isnull=False).order_by()
            .values_list("holder", flat=True).distinct() if holder is not None]


def replies_held(*, holders: list[int]) -> list[PendingReply]:
    """The replies on their way held by web processes ``holders``, with their bindings and owners, oldest
    first."""
    return list(PendingReply.objects.filter(holder__in=holders).select_related("binding__owner"))


def bot_scope_gone(*, owner_id: int, scope: Scope) -> bool:
    """Whether ``scope`` is a conversation's notes of a bot of ``owner_id`` that no longer exists (deleted while
    a turn of it ran). Ask under the owner's note lock: ``services.binding_delete`` holds it until it commits,
    so the answer is final for the write that follows (``agents.selectors.agent_scope_gone``'s twin)."""
    return scope.kind == "channel" and not (
        scope.holder_id is not None and Binding.objects.filter(pk=scope.holder_id, owner_id=owner_id).exists())


#: What a turn says when the bot whose conversation's notes it would write was deleted while it ran.
BOT_GONE_MESSAGE = "This conversation's bot was deleted, so nothing is saved for it."
