"""``Authorization: Token <key>`` (or ``Bearer <key>`` for OpenAI-style clients), checked against hashes."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.db import transaction
from django.utils import timezone
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions

from localai_memory.core.after_response import after_response
from localai_memory.core.db import fetch_one, unflushed_commit_cte

from .models import ApiToken, hash_key

if TYPE_CHECKING:
    from django.contrib.auth.models import User  # AUTH_USER_MODEL is Django's own
    from drf_spectacular.openapi import AutoSchema
    from rest_framework.request import Request


class TokenAuthentication(authentication.BaseAuthentication):
    keywords = ("token", "bearer")

    def authenticate(self, request: Request) -> tuple[User, ApiToken] | None:
        header = authentication.get_authorization_header(request).split()
        if not header or header[0].lower().decode(errors="replace") not in self.keywords:
            return None
        if len(header) != 2:
            raise exceptions.AuthenticationFailed("Malformed Authorization header: use 'Token <key>'.")
        try:
            key = header[1].decode()
        except UnicodeDecodeError:
            raise exceptions.AuthenticationFailed("Invalid token.") from None
        return user_for_key(key)

    def authenticate_header(self, request: Request) -> str:
        return 'Token realm="api"'


def user_for_key(key: str) -> tuple[User, ApiToken]:
    """The (user, token) pair for an API key, or AuthenticationFailed."""
    token = fetch_one(ApiToken, join="user", key_hash=hash_key(key))
    if token is None or not token.user.is_active:
        raise exceptions.AuthenticationFailed("Invalid token.")
    now = timezone.now()
    if token.last_used_at is None or (now - token.last_used_at).total_seconds() > 60:
        token_pk = token.pk
        after_response(lambda: _note_use(token_pk, now))
        token.last_used_at = now
    return token.user, token


def _note_use(token_pk: int, now: datetime) -> None:
    """Record when the token was last used (shown in the admin), at most once a minute, after the response
    is sent: a request does not wait for it (one round trip less on a chat turn, which usually comes more
    than a minute after the one before). Bookkeeping, not data anyone saved: it commits without waiting for
    the WAL flush (``core.db.unflushed_commit_cte``)."""
    connection = transaction.get_connection()
    with connection.cursor() as cursor:
        cursor.execute(f"WITH {unflushed_commit_cte(connection)} UPDATE {ApiToken._meta.db_table} "
                       "SET last_used_at = %s WHERE id = %s AND EXISTS (SELECT 1 FROM settings)", [now, token_pk])


class SessionAuthentication(authentication.SessionAuthentication):
    """Session auth for the pages' own API calls; CSRF is enforced as usual."""


class TokenScheme(OpenApiAuthenticationExtension):
    """Documents ``Authorization: Token <key>`` in /api/schema/ (registered by being defined)."""

    target_class = "localai_memory.accounts.authentication.TokenAuthentication"
    name = "tokenAuth"

    def get_security_definition(self, auto_schema: AutoSchema) -> dict[str, Any]:
        return {"type": "apiKey", "in": "header", "name": "Authorization",
                "description": "An API token from POST /api/auth/token, sent as `Token <key>` (or `Bearer <key>`)."}


class SessionScheme(OpenApiAuthenticationExtension):
    """Documents the session cookie of the web pages (their own API calls, with CSRF)."""

    target_class = "localai_memory.accounts.authentication.SessionAuthentication"
    name = "cookieAuth"

    def get_security_definition(self, auto_schema: AutoSchema) -> dict[str, Any]:
        return {"type": "apiKey", "in": "cookie", "name": "sessionid"}
