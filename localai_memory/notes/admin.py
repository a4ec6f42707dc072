"""Admin for the Memory files: read-only audit views; restores go through the notes services.

An administrator's restore is held to what the owner's is, and refused while the owner's memory is off
(``services.trash_restore_for_owner``): then only they decide what comes back."""

from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from localai_memory.accounts.adminlog import ReadOnlyAdmin
from localai_memory.core.errors import ApplicationError

from . import services
from .models import ChangeSet, FileChange, FileVersion, NoteFile, NoteImportance, TrashEntry, TrashFile


@admin.register(NoteFile)
class NoteFileAdmin(ReadOnlyAdmin):
    list_display = ["path", "owner", "version", "updated_at"]
    list_filter = ["updated_at"]
    search_fields = ["path", "owner__username"]
    readonly_fields = ["owner", "path", "content", "version", "created_at", "updated_at"]


@admin.register(NoteImportance)
class NoteImportanceAdmin(ReadOnlyAdmin):
    list_display = ["topic", "scope_kind", "scope_key", "owner", "importance", "updated_at"]
    list_filter = ["scope_kind"]
    search_fields = ["topic", "owner__username"]
    readonly_fields = ["owner", "scope_kind", "scope_key", "topic", "importance", "updated_at"]


class FileChangeInline(admin.TabularInline):
    model = FileChange
    extra = 0
    readonly_fields = ["path", "before", "after", "before_version", "after_version"]
    can_delete = False


@admin.register(ChangeSet)
class ChangeSetAdmin(ReadOnlyAdmin):
    list_display = ["id", "owner", "source", "summary", "automatic", "created_at"]
    list_filter = ["source", "automatic", "created_at"]
    search_fields = ["summary", "owner__username", "files__path"]
    readonly_fields = ["owner", "created_at", "source", "summary", "actor", "automatic", "undo_until", "chat_id",
                       "proposal_id", "reverts"]
    inlines = [FileChangeInline]


@admin.register(FileVersion)
class FileVersionAdmin(ReadOnlyAdmin):
    list_display = ["path", "version", "owner", "deleted", "created_at"]
    list_filter = ["deleted", "created_at"]
    search_fields = ["path", "owner__username"]


class TrashFileInline(admin.TabularInline):
    model = TrashFile
    extra = 0
    readonly_fields = ["path", "content"]
    can_delete = False


@admin.register(TrashEntry)
class TrashEntryAdmin(ReadOnlyAdmin):
    list_display = ["label", "owner", "kind", "created_at", "restored_at"]
    list_filter = ["kind", "created_at", "restored_at"]
    search_fields = ["label", "owner__username", "files__path"]
    inlines = [TrashFileInline]
    actions = ["restore"]

    @admin.action(description="Restore from the Trash")
    def restore(self, request: HttpRequest, queryset: QuerySet[TrashEntry]) -> None:
        for entry in queryset.filter(restored_at__isnull=True).select_related("owner"):
            try:
                change = services.trash_restore_for_owner(owner_id=entry.owner_id, entry_id=entry.pk,
                                                          actor=f"admin {request.user}")
            except ApplicationError as exc:
                self.message_user(request, f"{entry} of {entry.owner}: not restored. {exc.message}",
                                  messages.WARNING)
            else:
                self.log_change(request, entry, f"Restored it from the Trash (change set {change.pk}).")
                self.message_user(request, f"Restored {entry} of {entry.owner}.")
