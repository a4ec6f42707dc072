"""Memory settings of each user and the proposals that wait for a confirmation."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class SaveMode(models.TextChoices):
    AUTO = "auto", "Save it and tell me"
    ASK = "ask", "Ask me first"
    ALWAYS = "always", "Always confirm"
    NEVER = "never", "Never"


class MessagingSave(models.TextChoices):
    ASK = "ask", "Ask me first"
    PAIRED_PRIVATE = "paired_private", "Save it for a paired sender in a private chat"
    NEVER = "never", "Never"


class MemorySettings(models.Model):
    """One row per user who changed anything; without a row the defaults apply (on, ask, ask, built-in)."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memory_settings")
    enabled = models.BooleanField(default=True)
    enabled_set = models.BooleanField(default=False, help_text="The user chose on or off themselves.")
    save_mode = models.CharField(max_length=10, choices=SaveMode.choices, default=SaveMode.ASK)
    save_mode_set = models.BooleanField(default=False)
    messaging_save = models.CharField(max_length=20, choices=MessagingSave.choices, default=MessagingSave.ASK)
    provider = models.CharField(max_length=100, default="builtin",
                                help_text="builtin or an add-on's name; 'off' is the enabled switch.")
    addons_used = models.JSONField(
        default=list, blank=True,
        help_text="The memory add-ons the user picked at some time (names), which may still hold their notes: "
                  "Export and Forget everything go to each, whether it serves now or not.")
    legacy_addon_disabled = models.BooleanField(
        default=False, help_text="The user had disabled the old Memory add-on to stop memory and never chose since.")
    consolidation_enabled = models.BooleanField(default=True)
    mcp_propose_enabled = models.BooleanField(default=False)
    forgot_at = models.DateTimeField(
        null=True, blank=True, help_text="When the user last forgot everything (Forget everything, the terminal's "
                                         "clear): what a chat turn read before it is neither saved nor suggested.")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name_plural = "memory settings"
        constraints = [
            models.CheckConstraint(condition=models.Q(save_mode__in=SaveMode.values), name="save_mode_valid"),
            models.CheckConstraint(condition=models.Q(messaging_save__in=MessagingSave.values),
                                   name="messaging_save_valid"),
        ]

    def __str__(self) -> str:
        return f"{self.user}: {'on' if self.enabled else 'off'}, {self.save_mode}"


class Proposal(models.Model):
    """A change to memory that waits for the owner (or a permitted sender) to confirm it."""

    class Status(models.TextChoices):
        PENDING = "pending", "Waiting"
        CONFIRMED = "confirmed", "Saved"
        REJECTED = "rejected", "Dropped"
        EXPIRED = "expired", "Expired"

    class Source(models.TextChoices):
        MODEL = "model", "The model in a chat"
        CONSOLIDATION = "consolidation", "Grown from your chats"
        IMPORT = "import", "Import"
        MCP = "mcp", "An MCP client"
        CHAT = "chat", "Typed in a chat (/remember)"

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="proposals")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING, db_index=True)
    source = models.CharField(max_length=20, choices=Source.choices, default=Source.MODEL)
    kind = models.CharField(max_length=20, default="memory")
    scope_kind = models.CharField(max_length=10)  # user, agent, channel
    scope_key = models.CharField(max_length=60, blank=True)
    topic = models.CharField(max_length=40)
    summary = models.CharField(max_length=300, blank=True)
    details = models.TextField(blank=True)
    # A note to forget. Its column keeps the name ``delete``; the field is ``is_delete`` so that it does not hide
    # Model.delete() (the API and the tools still say ``delete``).
    is_delete = models.BooleanField(default=False, db_column="delete")
    # An index line written in Files can be longer than a summary the store writes: text, not a short column.
    old_summary = models.TextField(blank=True, help_text="The line as it was when proposed.")
    old_details = models.TextField(blank=True)
    seen = models.JSONField(null=True, blank=True, help_text="The note as a refused confirm showed it "
                            "({summary, details}): it changed after the proposal, and a confirm over this "
                            "text is the person's, having seen it.")
    correction = models.BooleanField(default=False, help_text="Changes a note the user typed.")
    locked = models.BooleanField(default=False, help_text="Always confirm: only the owner, or the paired sender "
                                                          "who asked, can confirm.")
    requester_only = models.BooleanField(default=False, help_text="In a messaging chat only the paired sender "
                                                                  "who asked may answer it.")
    reason = models.CharField(max_length=40, blank=True, help_text="Why it waits (ask, secret, long, …).")
    makes_room_for = models.JSONField(
        null=True, blank=True, default=None,
        help_text="A delete suggested to make room in a full index: the note that did not fit ({topic, summary, "
                  "details}), suggested in its turn once this delete is confirmed.")
    importance = models.FloatField(
        null=True, blank=True, default=None,
        help_text="The importance (0..1) an export gave the note it suggests (an import's): the note takes it when "
                  "the suggestion is confirmed; empty: the one its writer gives it.")
    origin = models.CharField(max_length=20, default="web")
    chat_id = models.BigIntegerField(null=True, blank=True, db_index=True)
    conversation_id = models.BigIntegerField(null=True, blank=True, db_index=True)
    requested_by_sender_id = models.BigIntegerField(null=True, blank=True)
    fingerprint = models.CharField(max_length=64, db_index=True)
    provider = models.CharField(max_length=100, blank=True, default="",
                                help_text="The add-on that serves memory and writes this note when it is "
                                          "confirmed; empty: the built-in notes.")
    created_at = models.DateTimeField()
    expires_at = models.DateTimeField(db_index=True)
    decided_at = models.DateTimeField(null=True, blank=True)
    decided_by = models.CharField(max_length=200, blank=True)
    change_set = models.ForeignKey("notes.ChangeSet", null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="proposals")
    notified = models.BooleanField(default=False, help_text="Expiry was announced where it was asked.")

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["owner", "status", "-created_at"])]
        constraints = [
            # "not made twice": one pending proposal per identical change (expired ones are marked first).
            models.UniqueConstraint(fields=["owner", "fingerprint"], condition=models.Q(status="pending"),
                                    name="one_pending_proposal_per_change"),
            models.CheckConstraint(condition=models.Q(status__in=["pending", "confirmed", "rejected", "expired"]),
                                   name="proposal_status_valid"),
            models.CheckConstraint(condition=models.Q(importance__isnull=True)
                                   | models.Q(importance__gte=0) & models.Q(importance__lte=1),
                                   name="proposal_importance_between_0_and_1"),
        ]

    def __str__(self) -> str:
        # What the row is, not the note it suggests: the admin's log keeps this name after the row is gone.
        return f"proposal {self.pk} ({self.status})"

    @property
    def shown_before(self) -> tuple[str, str]:
        """The note (line, topic file) as the person last saw it beside the suggestion: when it was proposed,
        or as a confirm it refused showed it (``seen``)."""
        if isinstance(self.seen, dict):
            return str(self.seen.get("summary") or ""), str(self.seen.get("details") or "")
        return self.old_summary, self.old_details


class AddonForgetRequest(models.Model):
    """A memory add-on that was to drop one namespace of the owner's notes (a deleted agent's ``agent:<id>``)
    and could not be asked (not running) or failed: it may still hold them. The Memory tab and
    ``/api/chats/memory/addon-forgets`` offer to ask it again; the row goes once it forgot (or the owner's
    Forget everything made it forget all), or once it can no longer be asked (no longer installed)."""

    class Answer(models.TextChoices):
        NOT_RUNNING = "not_running", "It was not running"
        FAILED = "failed", "It failed"

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                              related_name="addon_forget_requests")
    addon = models.CharField(max_length=100, help_text="The add-on's name.")
    namespace = models.CharField(max_length=100, help_text="What it is to drop: agent:<id>.")
    whose = models.CharField(max_length=300, help_text="The notes as the messages name them: the notes of the "
                                                       "agent “Chef”.")
    answer = models.CharField(max_length=20, choices=Answer.choices, help_text="What the last ask got.")
    created_at = models.DateTimeField(auto_now_add=True)
    asked_at = models.DateTimeField(help_text="When it was last asked.")

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [
            models.UniqueConstraint(fields=["owner", "addon", "namespace"], name="one_addon_forget_per_namespace"),
            models.CheckConstraint(condition=models.Q(answer__in=["not_running", "failed"]),
                                   name="addon_forget_answer_valid"),
        ]

    def __str__(self) -> str:
        return f"{self.addon}: {self.namespace} ({self.answer})"
