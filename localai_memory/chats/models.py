"""Chats and their messages.

A chat belongs to one owner, may run one saved agent, and comes from one origin (the web, a messaging app, a
sub-agent, a trigger or a job). Its ``private`` flag is the Memory switch of its Tools menu. A chat from a
messaging app also carries the binding and the conversation key that name its notes
(``Memory/channels/<binding>-<hash>/``). The assistant message of each turn stores what memory did on it.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models


class Origin(models.TextChoices):
    WEB = "web", "Web or API"
    MESSAGING = "messaging", "Messaging app"
    SUBAGENT = "subagent", "Sub-agent"
    TRIGGER = "trigger", "Trigger"
    JOB = "job", "Job"


class Chat(models.Model):
    """One conversation of an owner with the model."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="chats")
    agent = models.ForeignKey("agents.Agent", null=True, blank=True, on_delete=models.SET_NULL,
                              related_name="chats")
    origin = models.CharField(max_length=10, choices=Origin.choices, default=Origin.WEB)
    private = models.BooleanField(default=False, help_text="The chat's Memory switch is off: it neither reads "
                                                           "nor saves memory.")
    title = models.CharField(max_length=200, blank=True)
    binding_id = models.BigIntegerField(null=True, blank=True, help_text="The messaging binding (bot) it came "
                                                                         "through.")
    conversation_key = models.CharField(max_length=60, blank=True, db_index=True,
                                        help_text="The channel scope key '<binding>-<hash>' of its notes.")
    one_to_one = models.BooleanField(null=True, blank=True, help_text="The platform said it is a direct "
                                                                      "message; unknown counts as a group.")
    thread_key = models.CharField(max_length=64, blank=True, help_text="For an OpenAI client that sends no chat "
                                  "id: a hash of the conversation as of its last reply, so the next turn of the same "
                                  "conversation finds this chat (services.thread_key).")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-updated_at", "-id"]
        indexes = [models.Index(fields=["owner", "-updated_at"]),
                   models.Index(fields=["owner", "thread_key"], condition=~models.Q(thread_key=""),
                                name="chat_thread_key")]
        constraints = [
            models.CheckConstraint(condition=models.Q(origin__in=Origin.values), name="chat_origin_valid"),
        ]

    def __str__(self) -> str:
        return self.title or f"Chat {self.pk}"


class Role(models.TextChoices):
    USER = "user", "User"
    ASSISTANT = "assistant", "Assistant"
    SYSTEM = "system", "System"


class Message(models.Model):
    """One message of a chat. ``memory`` (assistant messages) is the turn's memory report."""

    chat = models.ForeignKey(Chat, on_delete=models.CASCADE, related_name="messages")
    role = models.CharField(max_length=10, choices=Role.choices)
    content = models.TextField(blank=True)
    typed_by_user = models.BooleanField(default=False, help_text="A person typed it (not a tool or a run).")
    sender_id = models.BigIntegerField(null=True, blank=True, help_text="The messaging sender who wrote it.")
    memory = models.JSONField(default=dict, blank=True, help_text="What memory did on this turn.")
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    arrived_at = models.DateTimeField(
        null=True, blank=True,
        help_text="When a turn's message arrived, on the database's clock (the one Forget everything is recorded "
                  "by), not this host's, as created_at is; empty for a reply, and for a message stored before.")

    class Meta:
        # The order they were stored: a turn stores its message and reply together (``services.messages_add``),
        # so each reply follows its message, also when two turns of a chat ran at once; by ``created_at``
        # (their times) two such turns read message, message, reply, reply.
        ordering = ["id"]

    def __str__(self) -> str:
        # What the row is, never its words: the admin's log keeps this name after the message is gone.
        return f"message {self.pk} of chat {self.chat_id}"
