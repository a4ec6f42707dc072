"""Bot bindings and what they carry: conversations, senders, pairing requests, deliveries and notices.

A **binding** connects one bot (Telegram, Slack or Discord) to one owner's account and, optionally, the saved
agent that answers. Its credentials are stored encrypted (``bridges.crypto``) and never leave the server.
A **conversation** is one chat on the platform (a DM or a group); its notes live in
``Memory/channels/<binding>-<hash>/`` and its turns in one ``chats.Chat``. A **sender** is one person on the
platform; only a paired sender's messages ever reach the model. A **delivery** row makes a platform's retry of
the same update a no-op; a **pending reply** is an answer on its way, so one cut off by a restart is not lost
without a word. A **notice** remembers what the bot said about memory in a conversation (a question
about a proposal, or "saved, reply undo"), so a yes, no or undo in the chat finds what it answers.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models


class Platform(models.TextChoices):
    TELEGRAM = "telegram", "Telegram"
    SLACK = "slack", "Slack"
    DISCORD = "discord", "Discord"


class Mode(models.TextChoices):
    POLLING = "polling", "Telegram: long polling (runbridges)"
    WEBHOOK = "webhook", "Telegram: webhook to this server"
    SOCKET = "socket", "Slack: Socket Mode (runbridges)"
    HTTP = "http", "Slack: Events API to this server"
    GATEWAY = "gateway", "Discord: gateway (runbridges)"


#: The modes each platform offers; the first is the default.
PLATFORM_MODES: dict[str, tuple[str, ...]] = {
    Platform.TELEGRAM: (Mode.POLLING, Mode.WEBHOOK),
    Platform.SLACK: (Mode.SOCKET, Mode.HTTP),
    Platform.DISCORD: (Mode.GATEWAY,),
}


class BindingState(models.TextChoices):
    OK = "ok", "Working"
    REVOKED = "revoked", "Token refused by the platform"
    ERROR = "error", "Failing; retrying"


class Binding(models.Model):
    """One bot connected to one owner's account."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="bindings")
    platform = models.CharField(max_length=10, choices=Platform.choices)
    name = models.CharField(max_length=100)
    agent = models.ForeignKey("agents.Agent", null=True, blank=True, on_delete=models.SET_NULL,
                              related_name="bindings", help_text="The saved agent that answers; none: plain chat.")
    mode = models.CharField(max_length=10, choices=Mode.choices)
    enabled = models.BooleanField(default=True, help_text="The owner's switch; runbridges runs enabled bindings.")
    credentials = models.TextField(blank=True, help_text="Fernet token of the credentials (JSON); never shown.")
    credential_keys = models.JSONField(default=list, blank=True, help_text="Names of the stored credentials.")
    state = models.CharField(max_length=10, choices=BindingState.choices, default=BindingState.OK)
    state_code = models.CharField(max_length=40, blank=True)
    state_reason = models.CharField(max_length=300, blank=True, help_text="Why it is not working, for the owner.")
    state_changed_at = models.DateTimeField(null=True, blank=True)
    last_connected_at = models.DateTimeField(null=True, blank=True)
    bot_identity = models.CharField(max_length=200, blank=True, help_text="The bot's name as the platform says.")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name", "id"]
        constraints = [
            models.CheckConstraint(condition=models.Q(platform__in=Platform.values), name="binding_platform_valid"),
            models.CheckConstraint(condition=models.Q(mode__in=Mode.values), name="binding_mode_valid"),
            models.CheckConstraint(condition=models.Q(state__in=BindingState.values), name="binding_state_valid"),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.platform})"


class ConversationKind(models.TextChoices):
    ONE_TO_ONE = "one_to_one", "Direct message"
    GROUP = "group", "Group"
    UNKNOWN = "unknown", "Unknown (counts as a group)"


class Conversation(models.Model):
    """One chat on the platform: a direct message or a group. Its notes are ``channel_key``'s."""

    binding = models.ForeignKey(Binding, on_delete=models.CASCADE, related_name="conversations")
    external_id = models.CharField(max_length=200, help_text="The platform's id of the chat.")
    kind = models.CharField(max_length=12, choices=ConversationKind.choices, default=ConversationKind.UNKNOWN)
    title = models.CharField(max_length=200, blank=True)
    channel_key = models.CharField(max_length=60, help_text="'<binding>-<hash>': Memory/channels/<key>/.")
    chat = models.ForeignKey("chats.Chat", null=True, blank=True, on_delete=models.SET_NULL,
                             related_name="bridge_conversations")
    created_at = models.DateTimeField(auto_now_add=True)
    last_message_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-last_message_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["binding", "external_id"], name="one_conversation_per_platform_chat"),
            models.CheckConstraint(condition=models.Q(kind__in=ConversationKind.values),
                                   name="conversation_kind_valid"),
        ]

    def __str__(self) -> str:
        return self.title or self.external_id

    @property
    def one_to_one(self) -> bool | None:
        """What the platform said: True for a DM, False for a group, None when it did not say."""
        return {"one_to_one": True, "group": False}.get(self.kind)


class SenderStatus(models.TextChoices):
    UNPAIRED = "unpaired", "Not paired"
    PAIRED = "paired", "Paired"
    BLOCKED = "blocked", "Pairing denied"


class Sender(models.Model):
    """One person on the platform who wrote to the bot."""

    binding = models.ForeignKey(Binding, on_delete=models.CASCADE, related_name="senders")
    external_id = models.CharField(max_length=200, help_text="The platform's id of the person.")
    display = models.CharField(max_length=200, blank=True, help_text="The name the platform gave.")
    name = models.CharField(max_length=100, blank=True, help_text="The owner's name for them.")
    status = models.CharField(max_length=10, choices=SenderStatus.choices, default=SenderStatus.UNPAIRED)
    can_confirm = models.BooleanField(default=False, help_text="Confirm changes from the chat.")
    paired_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_seen_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-last_seen_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["binding", "external_id"], name="one_sender_per_platform_person"),
            models.CheckConstraint(condition=models.Q(status__in=SenderStatus.values), name="sender_status_valid"),
            models.CheckConstraint(condition=models.Q(can_confirm=False) | models.Q(status="paired"),
                                   name="only_paired_senders_confirm"),
        ]

    def __str__(self) -> str:
        return self.label

    @property
    def label(self) -> str:
        return self.name or self.display or self.external_id

    @property
    def paired(self) -> bool:
        return self.status == SenderStatus.PAIRED


class PairingStatus(models.TextChoices):
    PENDING = "pending", "Waiting for the owner"
    APPROVED = "approved", "Approved"
    DENIED = "denied", "Denied"
    EXPIRED = "expired", "Expired"


class PairingRequest(models.Model):
    """A short code an unknown sender got; the owner approves or denies it."""

    binding = models.ForeignKey(Binding, on_delete=models.CASCADE, related_name="pairing_requests")
    sender = models.ForeignKey(Sender, on_delete=models.CASCADE, related_name="pairing_requests")
    code = models.CharField(max_length=12)
    status = models.CharField(max_length=10, choices=PairingStatus.choices, default=PairingStatus.PENDING)
    created_at = models.DateTimeField()
    expires_at = models.DateTimeField(db_index=True)
    decided_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["binding", "code"], condition=models.Q(status="pending"),
                                    name="one_pending_code_per_binding"),
            models.UniqueConstraint(fields=["sender"], condition=models.Q(status="pending"),
                                    name="one_pending_request_per_sender"),
            models.CheckConstraint(condition=models.Q(status__in=PairingStatus.values),
                                   name="pairing_status_valid"),
        ]

    def __str__(self) -> str:
        return f"{self.code} ({self.status})"


class Delivery(models.Model):
    """One update the platform delivered, claimed once (Telegram update_id, Slack event_id, Discord id)."""

    binding = models.ForeignKey(Binding, on_delete=models.CASCADE, related_name="deliveries")
    key = models.CharField(max_length=200)
    received_at = models.DateTimeField(db_index=True)

    class Meta:
        verbose_name_plural = "deliveries"
        constraints = [models.UniqueConstraint(fields=["binding", "key"], name="one_delivery_per_key")]


class PendingReply(models.Model):
    """A message a bot is answering: written when it arrives, given the answer once the core has made it,
    deleted once that was sent. One still here when its bot starts again (``runbridges``' rows), or whose web
    process is gone (``holder``), was cut off by a process that stopped (a deploy past its grace, a crash):
    the person is then told (``bridges.pending``)."""

    #: The ``holder`` of a web process's reply it is done with, its answer unsent (the send failed): no
    #: process holds this key (a presence's is never 0), so Celery beat tells it at its next round.
    LET_GO = 0

    binding = models.ForeignKey(Binding, on_delete=models.CASCADE, related_name="pending_replies")
    conversation_id = models.CharField(max_length=200, help_text="The platform's id of the chat to answer in.")
    said = models.CharField(max_length=200, blank=True, help_text="The beginning of the message, to name it.")
    messages = models.JSONField(null=True, blank=True,
                                help_text="The answer as the bot would send it; empty while the turn runs.")
    created_at = models.DateTimeField()
    holder = models.IntegerField(null=True, blank=True,
                                 help_text="The key of the session lock the web process that answers it holds while "
                                           "it lives (bridges.pending.Presence); empty: runbridges answers it.")

    class Meta:
        ordering = ["created_at", "id"]


class NoticeKind(models.TextChoices):
    QUESTION = "question", "Asked to confirm a proposal"
    SAVED = "saved", "Told about an automatic save"


class Notice(models.Model):
    """What the bot said about memory in a conversation, so an answer in the chat finds what it answers."""

    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="notices")
    kind = models.CharField(max_length=10, choices=NoticeKind.choices)
    proposal_id = models.BigIntegerField(null=True, blank=True, db_index=True)
    change_id = models.BigIntegerField(null=True, blank=True)
    undo_until = models.DateTimeField(null=True, blank=True)
    sender = models.ForeignKey(Sender, null=True, blank=True, on_delete=models.SET_NULL, related_name="notices",
                               help_text="The sender whose message led to it.")
    topic = models.CharField(max_length=40, blank=True)
    summary = models.CharField(max_length=300, blank=True)
    message_ref = models.CharField(max_length=64, blank=True, default="",
                                   help_text="The platform's id of the message that asked (a reply to it answers it).")
    created_at = models.DateTimeField()
    asked_at = models.DateTimeField(
        null=True, blank=True,
        help_text="A question: when the bot last asked for a yes or no to it (asked, or named as still waiting); "
                  "a plain yes or no answers it only while its sender had no turn with the model since. Empty: "
                  "when it was made.")
    closed_at = models.DateTimeField(null=True, blank=True, help_text="Answered, undone or announced expired.")

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(condition=models.Q(kind__in=NoticeKind.values), name="notice_kind_valid"),
        ]
