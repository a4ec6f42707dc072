"""Admin of each person's memory settings and suggestions: shown, never written but through the services.

A suggestion is never deleted here (its history is the audit of what was decided; a confirmed one's change set
names it, which the invariants hold to); "Expire now" ends one still waiting, through
``proposals.proposals_drop_by_admin``, and the admin's log records it.
"""

from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from localai_memory.accounts.adminlog import ReadOnlyAdmin

from . import proposals
from .models import MemorySettings, Proposal


@admin.register(MemorySettings)
class MemorySettingsAdmin(ReadOnlyAdmin):
    """Shown, never changed or deleted: "the choice is yours alone", so an administrator sees each person's
    memory settings but cannot switch memory on, loosen how notes are saved, or pick a provider for them.
    (A deleted row would read as the defaults: memory on again for someone who turned it off.)"""

    list_display = ["user", "enabled", "save_mode", "messaging_save", "provider", "updated_at"]
    list_filter = ["enabled", "save_mode", "messaging_save", "provider"]
    search_fields = ["user__username"]
    readonly_fields = [f.name for f in MemorySettings._meta.fields]


@admin.register(Proposal)
class ProposalAdmin(ReadOnlyAdmin):
    list_display = ["id", "owner", "status", "topic", "scope_kind", "source", "origin", "created_at", "expires_at"]
    list_filter = ["status", "source", "origin", "scope_kind", "locked"]
    search_fields = ["topic", "summary", "owner__username"]
    readonly_fields = [f.name for f in Proposal._meta.fields]
    actions = ["expire_now"]

    @admin.action(description="Expire now")
    def expire_now(self, request: HttpRequest, queryset: QuerySet[Proposal]) -> None:
        dropped = proposals.proposals_drop_by_admin(proposal_ids=list(queryset.values_list("pk", flat=True)))
        for proposal in dropped:
            self.log_change(request, proposal, "Expired it now: dropped by an administrator.")
        skipped = queryset.count() - len(dropped)
        self.message_user(request, f"Expired {len(dropped)} proposal(s)."
                          + (f" {skipped} had been decided already and stay as they are." if skipped else ""),
                          messages.SUCCESS if dropped else messages.WARNING)
