"""Read-only admin of consolidation: what each pass did and how far each chat was read (no note text here).

Neither is deleted on its own: a chat's watermark gone, the next pass reads the chat again from its start and
writes its one summary a second time; a run gone, the passes' record of what was done and skipped has a hole.
Both go with the chat (``chats.services.chat_delete``) or the account."""

from __future__ import annotations

from django.contrib import admin

from localai_memory.accounts.adminlog import ReadOnlyAdmin

from .models import ChatWatermark, ConsolidationRun


@admin.register(ConsolidationRun)
class ConsolidationRunAdmin(ReadOnlyAdmin):
    list_display = ("owner", "trigger", "status", "reason", "started_at", "chats", "model_calls", "proposals")
    list_filter = ("trigger", "status")
    search_fields = ("owner__username",)


@admin.register(ChatWatermark)
class ChatWatermarkAdmin(ReadOnlyAdmin):
    list_display = ("chat_id", "owner", "facts_through", "summarised_at", "summary_outcome", "private_seen")
    search_fields = ("owner__username",)
