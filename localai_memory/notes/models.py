"""The Memory files: current text, every version, change sets and the Trash.

Only ``notes.services`` writes these rows. A change set records every file it touched, before and after, so
Undo, the model's revert_change and the Files history all restore the exact earlier text.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models


class NoteFile(models.Model):
    """The current text of one file of one owner."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="note_files")
    path = models.CharField(max_length=200)
    content = models.TextField(blank=True)
    version = models.PositiveIntegerField(help_text="The version number of this text in the file's history.")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField()

    class Meta:
        ordering = ["path"]
        constraints = [models.UniqueConstraint(fields=["owner", "path"], name="one_file_per_owner_path")]

    def __str__(self) -> str:
        # What the row is, not its path (a topic names the note): the admin's pages and log show this.
        return f"note file {self.pk} v{self.version}"


class ChangeSet(models.Model):
    """One write: the files before and after. Undo makes a new change set that points back here."""

    class Source(models.TextChoices):
        FILES = "files", "Files page or API"
        MODEL = "model", "Saved by the model"
        PROPOSAL = "proposal", "Confirmed proposal"
        UNDO = "undo", "Undo"
        RESTORE = "restore", "Restore"
        TRASH = "trash", "Moved to Trash"
        FORGET = "forget", "Forget everything"
        IMPORT = "import", "Import"
        AGENT = "agent", "Agent deleted"
        CLI = "cli", "Terminal"
        CHAT = "chat", "Typed in a chat (/remember)"
        ADMIN = "admin", "Admin"
        #: A confirmed note handed to the memory add-on that serves: the audit's record of it (who, what, to
        #: which add-on). No files: the add-on keeps the note, and the host cannot undo it.
        ADDON = "addon", "Handed to a memory add-on"

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="change_sets")
    created_at = models.DateTimeField(db_index=True)
    source = models.CharField(max_length=20, choices=Source.choices)
    summary = models.CharField(max_length=300, blank=True)
    actor = models.CharField(max_length=200, blank=True, help_text="Who made it: you, the model, a sender.")
    automatic = models.BooleanField(default=False, help_text="Saved by the model without a confirmation.")
    undo_until = models.DateTimeField(null=True, blank=True, help_text="End of the chat Undo window.")
    chat_id = models.BigIntegerField(null=True, blank=True, db_index=True)
    proposal_id = models.BigIntegerField(null=True, blank=True)
    reverts = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="reverted_by")
    importance = models.JSONField(
        null=True, blank=True,
        help_text="The importances it gave notes: [{scope, topic, before, after}] (null: the writer's default).")

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["owner", "-created_at"])]

    def __str__(self) -> str:
        return f"change set {self.pk} ({self.source})"  # not its summary, which names notes


class FileChange(models.Model):
    """One file of a change set. ``before``/``after`` None means the file did not exist."""

    change_set = models.ForeignKey(ChangeSet, on_delete=models.CASCADE, related_name="files")
    path = models.CharField(max_length=200)
    before = models.TextField(null=True, blank=True)
    after = models.TextField(null=True, blank=True)
    before_version = models.PositiveIntegerField(null=True, blank=True)
    after_version = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["path"]
        constraints = [models.UniqueConstraint(fields=["change_set", "path"], name="one_change_per_file")]


class FileVersion(models.Model):
    """Every text a file ever had, numbered without gaps (from 1, or above the owner's ``VersionFloor`` after
    an erase); a delete is a version with ``deleted``."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="file_versions")
    path = models.CharField(max_length=200)
    version = models.PositiveIntegerField()
    content = models.TextField(blank=True)
    deleted = models.BooleanField(default=False)
    change_set = models.ForeignKey(ChangeSet, on_delete=models.CASCADE, related_name="versions")
    created_at = models.DateTimeField()

    class Meta:
        ordering = ["path", "-version"]
        constraints = [
            models.UniqueConstraint(fields=["owner", "path", "version"], name="one_version_number_per_file")
        ]


class VersionFloor(models.Model):
    """The highest version number any file of an owner had when their memory was erased for good
    (``memory_erase``). Every path's versions start above it afterwards, so a version a client held from
    before the erase is stale (a 409), never the number of a text written since. Only a number: no path or
    text of the erased notes is kept."""

    owner = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, primary_key=True,
                                 related_name="version_floor")
    version = models.PositiveIntegerField()

    def __str__(self) -> str:
        return f"{self.owner}: versions above {self.version}"


class TrashEntry(models.Model):
    """Files moved to the Trash together (one file, one note, an agent's folder, or everything on Forget).

    A note's entry holds its index line (under the index's path) and its topic file, if it had one."""

    class Kind(models.TextChoices):
        FILE = "file", "File"
        NOTE = "note", "Note"
        FOLDER = "folder", "Folder"
        FORGET = "forget", "Forget everything"
        AGENT = "agent", "Deleted agent's notes"

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="trash")
    kind = models.CharField(max_length=10, choices=Kind.choices)
    label = models.CharField(max_length=200)
    created_at = models.DateTimeField()
    change_set = models.ForeignKey(ChangeSet, on_delete=models.CASCADE, related_name="trash_entries")
    restored_at = models.DateTimeField(null=True, blank=True)
    restored_by = models.ForeignKey(ChangeSet, null=True, blank=True, on_delete=models.SET_NULL,
                                    related_name="restored_trash")
    #: The Undo of its restore, which put it back in the Trash (undone in turn, it is restored again).
    unrestored_by = models.ForeignKey(ChangeSet, null=True, blank=True, on_delete=models.SET_NULL,
                                      related_name="unrestored_trash")

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name_plural = "trash entries"

    def __str__(self) -> str:
        return f"Trash entry {self.pk} ({self.kind})"  # not its label, which names a note or a file


class TrashFile(models.Model):
    entry = models.ForeignKey(TrashEntry, on_delete=models.CASCADE, related_name="files")
    path = models.CharField(max_length=200)
    content = models.TextField(blank=True)

    class Meta:
        ordering = ["path"]


class NoteImportance(models.Model):
    """The importance its owner gave one note (0..1), in place of the one its writer gives it (you 0.8, an
    import 0.6, the assistant 0.4): the weight recall gives a note among others about as relevant. Kept by
    topic, so a note moved to the Trash and restored keeps it; erasing the owner's memory erases it."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="note_importances")
    scope_kind = models.CharField(max_length=10)
    scope_key = models.CharField(max_length=60, blank=True)
    topic = models.CharField(max_length=40)
    importance = models.FloatField()
    updated_at = models.DateTimeField()

    class Meta:
        ordering = ["scope_kind", "scope_key", "topic"]
        constraints = [
            models.UniqueConstraint(fields=["owner", "scope_kind", "scope_key", "topic"],
                                    name="one_importance_per_note"),
            models.CheckConstraint(condition=models.Q(importance__gte=0) & models.Q(importance__lte=1),
                                   name="importance_between_0_and_1"),
        ]

    def __str__(self) -> str:
        return f"importance {self.pk} ({self.scope_kind})"  # not its topic, which names a note
