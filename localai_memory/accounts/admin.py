"""Admin of accounts: API tokens, and Django's own user admin with a delete that erases the person's memory.

Deleting a user goes through ``services.account_delete``: every note is erased for good first (as the
terminal's ``memory clear`` does), their memory add-on is told, then the account goes, and with it every
entry of the admin's log about them (``adminlog.admin_log_forget``); the log keeps only that an account was
deleted, by which administrator and when (``ACCOUNT_DELETED``, naming nobody): what an administrator did stays
accountable, and nothing of the person is left. The views of their other rows refuse a delete of one of them
alone (``adminlog.OwnedAdmin.delete_alone_refused``); the account's delete erases them by the service, so its
confirmation page lists them without asking for that permission.

A password an administrator sets (or password log-in turned off) revokes every API token of the user and ends
their sessions (``services.password_reset``): the Account page does so by default, and a reset is for an
account somebody else may hold.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.contrib.admin.models import DELETION, LogEntry
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import UserAdmin as DjangoUserAdmin
from django.contrib.auth.forms import AdminPasswordChangeForm
from django.contrib.contenttypes.models import ContentType
from django.db.models import Model, QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect

from . import services
from .adminlog import Logged, OwnedAdmin, log_write
from .models import ApiToken

User = get_user_model()

#: What the admin's log calls a deleted account (Recent actions: "Deleted: …", kind User): that one was deleted,
#: and by its entry who deleted it and when; never who it was (no id, no name), so nothing of them outlives it.
ACCOUNT_DELETED = "An account, deleted with everything in it; who it was is not kept"


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


class PasswordResetForm(AdminPasswordChangeForm):
    """Django's form for an administrator's new password (or password log-in off), saved by
    ``services.password_reset``, which revokes the tokens and ends the sessions with it."""

    #: What the page says above the form (``templates/accounts/admin_change_password.html``).
    note = ("Saving also revokes every API token of this user (REST, OpenAI clients, MCP) and logs them out of "
            "every browser: they log in again with the new password.")

    def save(self, commit: bool = True) -> Any:
        usable = self.cleaned_data["set_usable_password"]
        services.password_reset(user=self.user, password=self.cleaned_data["password1"] if usable else None)
        return self.user


admin.site.unregister(User)


@admin.register(User)
class UserAdmin(OwnedAdmin, DjangoUserAdmin):
    """Django's user admin; deleting a user erases their memory first (``services.account_delete``).

    Unticking "Active" suspends an account: it cannot log in or use its API tokens, and its bots stop."""

    change_password_form = PasswordResetForm
    change_user_password_template = "accounts/admin_change_password.html"

    def user_change_password(self, request: HttpRequest, id: str, form_url: str = "") -> HttpResponse:
        response = super().user_change_password(request, id, form_url)
        saved = isinstance(response, HttpResponseRedirect) and response.url != request.get_full_path()
        if request.method == "POST" and saved:  # (a form Django found conflicting comes back to this page)
            self.message_user(request, "Every API token of the user was revoked, and every session of theirs "
                                       "ended.", messages.SUCCESS)
        return response

    def log_deletions(self, request: HttpRequest, queryset: Any) -> list[LogEntry]:
        """One entry per account: that it was deleted, by this administrator, now, naming nobody
        (``ACCOUNT_DELETED``). ``account_delete`` deletes every entry about the person; this one is about none."""
        kind = ContentType.objects.get_for_model(User)
        return log_write(request=request, action_flag=DELETION,
                         rows=[Logged(kind, None, ACCOUNT_DELETED, None) for _ in queryset])

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
