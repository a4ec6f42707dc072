from __future__ import annotations

from django.contrib import admin
from django.db.models import Model
from django.http import HttpRequest

from .models import ApiToken


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ["user", "name", "prefix", "created_at", "last_used_at"]
    search_fields = ["user__username", "name", "prefix"]
    list_filter = ["created_at"]
    readonly_fields = ["user", "prefix", "key_hash", "created_at", "last_used_at"]

    def has_add_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False
