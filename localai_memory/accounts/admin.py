"""Admin of accounts: API tokens, and Django's own user admin with a delete that erases the person's memory.

Deleting a user goes through ``services.account_delete``: every note is erased for good first (as the
terminal's ``memory clear`` does), their memory add-on is told, then the account goes, and with it every
entry of the admin's log about them (``adminlog.admin_log_forget``); the log keeps only that an account was
deleted, naming nobody. The views of their other rows refuse a delete of one of them alone
(``adminlog.OwnedAdmin.delete_alone_refused``); the account's delete erases them by the service, so its
confirmation page lists them without asking for that permission.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.contrib.admin.models import DELETION, LogEntry
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import UserAdmin as DjangoUserAdmin
from django.contrib.contenttypes.models import ContentType
from django.db.models import Model, QuerySet
from django.http import HttpRequest

from . import services
from .adminlog import Logged, OwnedAdmin, log_write
from .models import ApiToken

User = get_user_model()


@admin.register(ApiToken)
class ApiTokenAdmin(OwnedAdmin):
    """Looked at, and revoked (a delete, as the Account page's Revoke: ``services.token_revoke``)."""

    list_display = ["user", "name", "prefix", "created_at", "last_used_at"]
    search_fields = ["user__username", "name", "prefix"]
    list_filter = ["created_at"]
    readonly_fields = ["user", "name", "prefix", "key_hash", "created_at", "last_used_at"]

    def has_add_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def delete_model(self, request: HttpRequest, obj: ApiToken) -> None:
        services.token_revoke(token=obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[ApiToken]) -> None:
        for token in queryset:
            services.token_revoke(token=token)


admin.site.unregister(User)


@admin.register(User)
class UserAdmin(OwnedAdmin, DjangoUserAdmin):
    """Django's user admin; deleting a user erases their memory first (``services.account_delete``).

    Unticking "Active" suspends an account: it cannot log in or use its API tokens, and its bots stop."""

    def log_deletions(self, request: HttpRequest, queryset: Any) -> list[LogEntry]:
        """That an account was deleted, naming nobody (no id, no name): ``account_delete`` deletes every entry
        about the person, and nothing of them is left after."""
        kind = ContentType.objects.get_for_model(User)
        return log_write(request=request, action_flag=DELETION,
                         rows=[Logged(kind, None, "an account, with everything of it", None) for _ in queryset])

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
