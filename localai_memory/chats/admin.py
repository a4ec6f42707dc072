"""Admin of chats and messages: for looking, not for writing (turns run through the services).

A chat is deleted as its owner deletes it (``services.chat_delete``: the suggestions waiting from it are
dropped, and its messages and consolidation watermark go with it). A message is never deleted on its own: the
suggestion made from it would stay, and a look through the chats would read the chat as if it never held it.
The admin's log names a chat by its id, not its title (the first words said in it).
"""

from __future__ import annotations

from django.contrib import admin
from django.db.models import Model, QuerySet
from django.http import HttpRequest

from localai_memory.accounts.adminlog import OwnedAdmin, ReadOnlyAdmin

from . import services
from .models import Chat, Message

_MESSAGE_FIELDS = ("created_at", "role", "content", "typed_by_user", "sender_id", "memory")


class MessageInline(admin.TabularInline):
    model = Message
    fields = _MESSAGE_FIELDS
    readonly_fields = _MESSAGE_FIELDS
    extra = 0
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False


@admin.register(Chat)
class ChatAdmin(OwnedAdmin):
    list_display = ["id", "owner", "title", "agent", "origin", "private", "one_to_one", "updated_at"]
    list_filter = ["origin", "private", "one_to_one"]
    search_fields = ["title", "owner__username", "conversation_key"]
    list_select_related = ["owner", "agent"]
    readonly_fields = [f.name for f in Chat._meta.fields]
    inlines = [MessageInline]
    date_hierarchy = "created_at"

    def has_add_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def log_repr(self, obj: Chat) -> str:
        return f"chat {obj.pk}"  # its __str__ is its title, which the owner's pages show

    # A delete goes through the service, as a person's does: the suggestions waiting from the chat are dropped
    # and a look through the chats that is reading it suggests nothing from it.
    def delete_model(self, request: HttpRequest, obj: Chat) -> None:
        services.chat_delete(owner_id=obj.owner_id, chat_id=obj.pk)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Chat]) -> None:
        for chat in queryset:
            services.chat_delete(owner_id=chat.owner_id, chat_id=chat.pk)


@admin.register(Message)
class MessageAdmin(ReadOnlyAdmin):
    list_display = ["id", "chat", "role", "short_content", "typed_by_user", "sender_id", "created_at"]
    list_filter = ["role", "typed_by_user", "chat__origin"]
    search_fields = ["content", "chat__title", "chat__owner__username"]
    list_select_related = ["chat"]
    readonly_fields = [f.name for f in Message._meta.fields]

    @admin.display(description="content")
    def short_content(self, obj: Message) -> str:
        return obj.content[:80]
