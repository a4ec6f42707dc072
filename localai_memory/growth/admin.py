"""Read-only admin of consolidation: what each pass did and how far each chat was read (no note text here)."""

from __future__ import annotations

from django.contrib import admin
from django.db.models import Model
from django.http import HttpRequest

from .models import ChatWatermark, ConsolidationRun


@admin.register(ConsolidationRun)
class ConsolidationRunAdmin(admin.ModelAdmin):
    list_display = ("owner", "trigger", "status", "reason", "started_at", "chats", "model_calls", "proposals")
    list_filter = ("trigger", "status")
    search_fields = ("owner__username",)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False


@admin.register(ChatWatermark)
class ChatWatermarkAdmin(admin.ModelAdmin):
    list_display = ("chat", "owner", "facts_through", "summarised_at", "summary_outcome", "private_seen")
    search_fields = ("owner__username",)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False
