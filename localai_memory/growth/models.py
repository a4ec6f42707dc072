"""What consolidation remembers between passes: how far each chat was read, and what each pass did.

Neither table holds any text of a note or of a chat: a watermark is message ids and timestamps, a run is
counts and a reason. The suggestions themselves are ``memory.Proposal`` rows (source ``consolidation``),
and a rejected one stays there, which is how the next pass knows not to propose it again.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models


class ChatWatermark(models.Model):
    """How far consolidation has read one chat, and whether its episodic summary was made (exactly once)."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="chat_watermarks")
    chat = models.OneToOneField("chats.Chat", on_delete=models.CASCADE, related_name="growth_watermark")
    facts_through = models.BigIntegerField(default=0, help_text="The id of the last message read for facts.")
    summarised_at = models.DateTimeField(null=True, blank=True, help_text="When its one summary was made "
                                                                          "(or skipped for good).")
    summary_outcome = models.CharField(max_length=20, blank=True, help_text="proposed, cap, private, …")
    private_seen = models.BooleanField(default=False, help_text="A pass found memory off for this chat (private, "
                                                                "its agent, or the user's switch): it is never "
                                                                "summarised.")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        indexes = [models.Index(fields=["owner", "summarised_at"])]

    def __str__(self) -> str:
        return f"chat {self.chat_id}: through {self.facts_through}"


class ConsolidationRun(models.Model):
    """One pass of consolidation for one user: why it ran, what it did, or why it was skipped."""

    class Trigger(models.TextChoices):
        AFTER_TURN = "after_turn", "After a chat"
        MANUAL = "manual", "Synthesize now"
        SCHEDULE = "schedule", "Schedule"

    class Status(models.TextChoices):
        DONE = "done", "Done"
        SKIPPED = "skipped", "Skipped"
        BUSY = "busy", "Another pass was running"
        FAILED = "failed", "The model failed"

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="consolidation_runs")
    trigger = models.CharField(max_length=20, choices=Trigger.choices)
    status = models.CharField(max_length=10, choices=Status.choices)
    reason = models.CharField(max_length=60, blank=True)
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    chats = models.PositiveIntegerField(default=0)
    model_calls = models.PositiveIntegerField(default=0)
    candidates = models.PositiveIntegerField(default=0)
    proposals = models.PositiveIntegerField(default=0)
    summaries = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["-started_at", "-id"]
        indexes = [models.Index(fields=["owner", "-started_at"])]

    def __str__(self) -> str:
        return f"{self.owner} {self.trigger} {self.status}"
