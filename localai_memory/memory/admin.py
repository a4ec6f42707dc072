from __future__ import annotations

from django.contrib import admin
from django.db.models import Model, QuerySet
from django.http import HttpRequest
from django.utils import timezone

from . import proposals
from .models import MemorySettings, Proposal


@admin.register(MemorySettings)
class MemorySettingsAdmin(admin.ModelAdmin):
    """Shown, never changed or deleted: "the choice is yours alone", so an administrator sees each person's
    memory settings but cannot switch memory on, loosen how notes are saved, or pick a provider for them."""

    list_display = ["user", "enabled", "save_mode", "messaging_save", "provider", "updated_at"]
    list_filter = ["enabled", "save_mode", "messaging_save", "provider"]
    search_fields = ["user__username"]
    readonly_fields = [f.name for f in MemorySettings._meta.fields]

    def has_add_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False  # a deleted row reads as the defaults: memory on again for someone who turned it off


@admin.register(Proposal)
class ProposalAdmin(admin.ModelAdmin):
    list_display = ["id", "owner", "status", "topic", "scope_kind", "source", "origin", "created_at", "expires_at"]
    list_filter = ["status", "source", "origin", "scope_kind", "locked"]
    search_fields = ["topic", "summary", "owner__username"]
    readonly_fields = [f.name for f in Proposal._meta.fields]
    actions = ["expire_now"]

    def has_add_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    @admin.action(description="Expire now")
    def expire_now(self, request: HttpRequest, queryset: QuerySet[Proposal]) -> None:
        now = timezone.now()
        # announced by no sweep ("nobody answered within 24 hours" would not be true); the inbox and a later
        # answer in a messaging chat say an administrator dropped it
        count = queryset.filter(status=Proposal.Status.PENDING).update(
            status=Proposal.Status.EXPIRED, decided_at=now, decided_by=proposals.ADMIN_EXPIRED, expires_at=now,
            notified=True)
        self.message_user(request, f"Expired {count} proposal(s).")
