"""API tokens. Only a SHA-256 of each key is stored: a leaked database does not leak working tokens."""

from __future__ import annotations

import hashlib
import secrets

from django.conf import settings
from django.db import models


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


class ApiToken(models.Model):
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100, default="api")
    prefix = models.CharField(max_length=8, help_text="The first characters of the key, to tell tokens apart.")
    key_hash = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.user} · {self.name} · {self.prefix}…"

    @staticmethod
    def new_key() -> str:
        return "lm_" + secrets.token_urlsafe(32)


class AdminLogOwner(models.Model):
    """Whose row an entry of the admin log (``django_admin_log``) is about: the person the row belongs to.

    The entry names the row by content type and id, which finds nobody once the row is gone (a chat an
    administrator deleted); this does, so deleting the account deletes every entry about that person
    (``adminlog.admin_log_forget``). ``owner_id`` is a plain id, not a foreign key: it must outlive the user row
    until the entries are deleted with it."""

    entry = models.OneToOneField("admin.LogEntry", on_delete=models.CASCADE, primary_key=True, related_name="+")
    owner_id = models.BigIntegerField(db_index=True)

    def __str__(self) -> str:
        return f"admin log entry {self.entry_id} about user {self.owner_id}"
