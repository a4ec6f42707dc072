from __future__ import annotations

from django.contrib import admin

from .models import ApiToken


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ["user", "name", "prefix", "created_at", "last_used_at"]
    search_fields = ["user__username", "name", "prefix"]
    list_filter = ["created_at"]
    readonly_fields = ["user", "prefix", "key_hash", "created_at", "last_used_at"]

    def has_add_permission(self, request, obj=None) -> bool:  # type: ignore[override]
        return False
