"""Admin of accounts: API tokens, and Django's own user admin with a delete that erases the person's memory.

Deleting a user goes through ``services.account_delete``: every note is erased for good first (as the
terminal's ``memory clear`` does), their memory add-on is told, then the account goes. The read-only views of
the notes (``notes.admin``) and the memory settings (``memory.admin``) refuse a delete of one of their rows,
which would make Django refuse the whole account; deleting an account erases those rows by the service, so
the confirmation page lists them without asking for that permission.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import UserAdmin as DjangoUserAdmin
from django.db.models import Model, QuerySet
from django.http import HttpRequest

from . import services
from .models import ApiToken

User = get_user_model()


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ["user", "name", "prefix", "created_at", "last_used_at"]
    search_fields = ["user__username", "name", "prefix"]
    list_filter = ["created_at"]
    readonly_fields = ["user", "prefix", "key_hash", "created_at", "last_used_at"]

    def has_add_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False


def _erased_with_the_account() -> set[str]:
    """The names (as the delete page lists them) of the rows whose own admin refuses a delete and which
    ``services.account_delete`` erases with the account."""
    from localai_memory.memory.models import MemorySettings
    from localai_memory.notes.models import ChangeSet, FileVersion, NoteFile, NoteImportance, TrashEntry

    return {str(model._meta.verbose_name)
            for model in (NoteFile, NoteImportance, ChangeSet, FileVersion, TrashEntry, MemorySettings)}


admin.site.unregister(User)


@admin.register(User)
class UserAdmin(DjangoUserAdmin):
    """Django's user admin; deleting a user erases their memory first (``services.account_delete``).

    Unticking "Active" suspends an account: it cannot log in or use its API tokens, and its bots stop."""

    def get_deleted_objects(self, objs: Any, request: HttpRequest) -> tuple[Any, Any, set[str], Any]:
        to_delete, model_count, perms_needed, protected = super().get_deleted_objects(objs, request)
        return to_delete, model_count, set(perms_needed) - _erased_with_the_account(), protected

    def delete_model(self, request: HttpRequest, obj: Any) -> None:
        self._delete(request, obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        for user in queryset:
            self._delete(request, user)

    def _delete(self, request: HttpRequest, user: Any) -> None:
        name = user.get_username()

        def told(answer: str) -> None:
            if answer == "failed":
                self.message_user(request, f"{name} was deleted, but their memory add-on could not forget "
                                           "their notes: remove them in the add-on itself.", messages.WARNING)

        services.account_delete(user_id=user.pk, told=told)
