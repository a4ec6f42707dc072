"""Reads for accounts: a person's own API tokens. Another user's token is a 404, never a 403."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from localai_memory.core.access import owned_or_404

from .models import ApiToken


def token_list(*, user_id: int) -> QuerySet[ApiToken]:
    """The user's API tokens, newest first (names, prefixes and times only: the keys themselves are not kept)."""
    return ApiToken.objects.filter(user_id=user_id).order_by("-created_at", "-id")


def access_token(user_id: Any, token_id: object) -> ApiToken:
    """The token ``token_id`` if ``user_id`` owns it, else NotFound. ``user_id`` may also be a user."""
    return owned_or_404(ApiToken.objects.all(), owner_field="user_id", owner=getattr(user_id, "pk", user_id),
                        pk=token_id)
