"""Admin of the bridges: look at bindings, senders and conversations; turn bindings on or off.

Bindings are created through the API or the web (their credentials are checked and encrypted there); the
admin never shows credentials, and its actions and deletes call the services (deleting a bot drops the
suggestions waiting for its conversations, as the API's delete does).
"""

from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from . import services
from .models import Binding, Conversation, PairingRequest, Sender


@admin.register(Binding)
class BindingAdmin(admin.ModelAdmin):
    list_display = ("name", "platform", "mode", "owner", "enabled", "state", "state_reason", "last_connected_at")
    list_filter = ("platform", "mode", "enabled", "state")
    search_fields = ("name", "owner__username", "bot_identity")
    exclude = ("credentials",)
    readonly_fields = ("owner", "platform", "credential_keys", "state", "state_code", "state_reason",
                       "state_changed_at", "last_connected_at", "bot_identity", "created_at", "updated_at")
    actions = ("turn_on", "turn_off")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # credentials are entered through the API or the web, where they are checked

    def delete_model(self, request: HttpRequest, obj: Binding) -> None:
        services.binding_delete(binding=obj)  # drops the suggestions waiting for its conversations' notes

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Binding]) -> None:
        for binding in queryset:
            services.binding_delete(binding=binding)

    @admin.action(description="Turn the selected bindings on")
    def turn_on(self, request: HttpRequest, queryset: QuerySet[Binding]) -> None:
        for binding in queryset:
            services.binding_set_enabled(binding=binding, enabled=True)
        self.message_user(request, "Turned on.", messages.SUCCESS)

    @admin.action(description="Turn the selected bindings off")
    def turn_off(self, request: HttpRequest, queryset: QuerySet[Binding]) -> None:
        for binding in queryset:
            services.binding_set_enabled(binding=binding, enabled=False)
        self.message_user(request, "Turned off.", messages.SUCCESS)


@admin.register(Sender)
class SenderAdmin(admin.ModelAdmin):
    list_display = ("label", "binding", "status", "can_confirm", "paired_at", "last_seen_at")
    list_filter = ("status", "can_confirm")
    search_fields = ("display", "name", "external_id")
    # "Confirm changes from the chat" is the owner's to give (the Bridges page, the API), not the operator's.
    readonly_fields = ("binding", "external_id", "display", "status", "can_confirm", "paired_at", "created_at",
                       "last_seen_at")


@admin.register(Conversation)
class ConversationAdmin(admin.ModelAdmin):
    list_display = ("__str__", "binding", "kind", "channel_key", "last_message_at")
    list_filter = ("kind",)
    readonly_fields = ("binding", "external_id", "kind", "channel_key", "chat", "created_at", "last_message_at")


@admin.register(PairingRequest)
class PairingRequestAdmin(admin.ModelAdmin):
    list_display = ("sender", "binding", "status", "created_at", "expires_at")
    list_filter = ("status",)
    readonly_fields = ("binding", "sender", "code", "status", "created_at", "expires_at", "decided_at")
