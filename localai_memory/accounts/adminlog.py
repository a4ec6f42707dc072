"""The admin's log of what administrators did (``django_admin_log``), and the admin's base for a person's rows.

The log keeps its entries after the row they name is gone, and the admin's index lists the latest under
"Recent actions". So nothing of a person may outlive their account there:

* an entry names a row by what it is ("message 9 of chat 3": ``OwnedAdmin.log_repr``), never by its words,
  which may be a note's or a chat's;
* each entry records whose row it is (``AdminLogOwner``), so deleting the account deletes every entry about
  the person and their rows (``admin_log_forget``), also of rows deleted before.

Every ModelAdmin of a person's rows derives from ``OwnedAdmin`` (a test holds every registered one to it). A
row whose delete on its own would go around the product's rules (``delete_alone_refused``: a chat's message,
a suggestion, how far consolidation read a chat) is never deleted by itself, but it goes with the row whose
service deletes it too (the chat, the account): that delete page does not ask for the permission the row's
own admin refuses.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from django.contrib import admin
from django.contrib.admin.models import ADDITION, CHANGE, DELETION, LogEntry
from django.contrib.auth import get_user_model
from django.contrib.contenttypes.models import ContentType
from django.db import models
from django.db.models import CharField, Q
from django.db.models.functions import Cast
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse

from localai_memory.core.invariants import owner_path

from .models import AdminLogOwner


def owner_of(obj: models.Model) -> int | None:
    """The id of the person ``obj`` belongs to (a user belongs to themselves); None for a row of nobody's."""
    if isinstance(obj, get_user_model()):
        return int(obj.pk)
    path = owner_path(type(obj))
    if path is None:
        return None
    if "__" not in path:
        return getattr(obj, path)
    return type(obj)._default_manager.filter(pk=obj.pk).values_list(path, flat=True).first()


@dataclass(frozen=True)
class Logged:
    """One row as its log entry names it."""

    content_type: ContentType
    object_id: str | None
    repr: str
    owner_id: int | None


def log_write(*, request: HttpRequest, rows: Sequence[Logged], action_flag: int,
              change_message: str | list[Any] = "") -> list[LogEntry]:
    """Write one log entry per row, by the request's administrator, and whose row each is about."""
    message = json.dumps(change_message) if isinstance(change_message, list) else change_message
    user_id = request.user.pk
    assert user_id is not None, "the admin's views serve logged-in staff only"
    entries = LogEntry.objects.bulk_create([
        LogEntry(user_id=user_id, content_type=row.content_type, object_id=row.object_id,
                 object_repr=row.repr[:200], action_flag=action_flag, change_message=message)
        for row in rows])
    AdminLogOwner.objects.bulk_create([AdminLogOwner(entry=entry, owner_id=row.owner_id)
                                       for entry, row in zip(entries, rows, strict=True)
                                       if row.owner_id is not None])
    return entries


def admin_log_forget(*, user_id: int) -> int:
    """Delete every admin log entry about the person: their account's, and every one of their rows' (those
    an ``OwnedAdmin`` logged, whether the row is still there or not; any other while its row is there).

    Call before their rows go, in the transaction that deletes them. Returns how many entries went."""
    about = Q(pk__in=AdminLogOwner.objects.filter(owner_id=user_id).values("entry_id"))
    about |= Q(content_type=ContentType.objects.get_for_model(get_user_model()), object_id=str(user_id))
    logged_types = LogEntry.objects.order_by().exclude(content_type=None).values_list("content_type_id", flat=True)
    for content_type_id in set(logged_types.distinct()):
        model = ContentType.objects.get_for_id(content_type_id).model_class()
        path = owner_path(model) if model is not None else None
        if model is not None and path is not None:
            theirs = model._default_manager.filter(**{path: user_id}).annotate(
                key=Cast("pk", output_field=CharField())).values("key")
            about |= Q(content_type_id=content_type_id, object_id__in=theirs)
    return LogEntry.objects.filter(about).delete()[1].get(LogEntry._meta.label, 0)


class OwnedAdmin(admin.ModelAdmin):
    """The admin of a person's rows: its log entries say what a row is, not what it says, and record whose it
    is (see the module docstring)."""

    #: Refuse a delete of one row on its own (it goes with its parent's delete, through the parent's service).
    delete_alone_refused: ClassVar[bool] = False

    def log_repr(self, obj: Any) -> str:
        """What the log calls ``obj``: by default its ``__str__``, which for a row holding a person's words
        says what the row is (``chats.Message``: "message 9 of chat 3")."""
        return str(obj)

    def logged(self, obj: Any) -> Logged:
        return Logged(ContentType.objects.get_for_model(obj, for_concrete_model=False), str(obj.pk),
                      self.log_repr(obj), owner_of(obj))

    def log_addition(self, request: HttpRequest, obj: Any, message: Any) -> LogEntry:
        return log_write(request=request, rows=[self.logged(obj)], action_flag=ADDITION,
                         change_message=message)[0]

    def log_change(self, request: HttpRequest, obj: Any, message: Any) -> LogEntry:
        return log_write(request=request, rows=[self.logged(obj)], action_flag=CHANGE,
                         change_message=message)[0]

    def log_deletions(self, request: HttpRequest, queryset: Iterable[Any]) -> list[LogEntry]:
        return log_write(request=request, rows=[self.logged(obj) for obj in queryset], action_flag=DELETION)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return not self.delete_alone_refused and super().has_delete_permission(request, obj)

    def get_deleted_objects(self, objs: Any, request: HttpRequest) -> tuple[Any, Any, set[str], Any]:
        """As Django's, without asking for the permission to delete a row that goes along with the one deleted
        and whose own admin refuses its delete alone (the service deleting this row deletes it too)."""
        to_delete, model_count, perms_needed, protected = super().get_deleted_objects(objs, request)
        along = {str(model._meta.verbose_name) for model, model_admin in self.admin_site._registry.items()
                 if getattr(model_admin, "delete_alone_refused", False)}
        return to_delete, model_count, set(perms_needed) - along, protected

    def response_delete(self, request: HttpRequest, obj_display: str, obj_id: Any) -> HttpResponse:
        """Back to the list after a delete, also where rows are looked at but not changed (Django would go to
        the admin's index then)."""
        response = super().response_delete(request, obj_display, obj_id)
        if (isinstance(response, HttpResponseRedirect) and not self.has_change_permission(request)
                and self.has_view_permission(request)):
            opts = self.opts
            return HttpResponseRedirect(reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist",
                                                current_app=self.admin_site.name))
        return response


class ReadOnlyAdmin(OwnedAdmin):
    """Rows an administrator looks at and never writes: no add, no change, no delete of one on its own."""

    delete_alone_refused = True

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
