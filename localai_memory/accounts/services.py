"""Writes for accounts: users and API tokens."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.contrib.auth import get_user_model
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.db import IntegrityError, connection, transaction

from localai_memory.core.errors import Conflict, InvalidInput

from .models import ApiToken, hash_key

if TYPE_CHECKING:  # the type of AUTH_USER_MODEL, which is Django's own
    from django.contrib.auth.models import User
else:
    User = get_user_model()


@transaction.atomic
def token_create(*, user: User, name: str = "api") -> str:
    """Make a new API token for ``user`` and return its key (shown once; only its hash is kept)."""
    key = ApiToken.new_key()
    ApiToken.objects.create(user=user, name=name[:100], prefix=key[:8], key_hash=hash_key(key))
    return key


#: The advisory lock namespace of sign-ups ("LU"): two sign-ups of one name, however it is written, take turns.
_SIGNUP_LOCK_NAMESPACE = 0x4C55


def signup_lock(username: str) -> None:
    """Hold, until the transaction ends, the lock of every spelling of ``username`` ("Alice" is "alice")."""
    with connection.cursor() as cursor:
        # upper(), as Django's iexact compares: one lock for every spelling the check calls the same name
        cursor.execute("SELECT pg_advisory_xact_lock(%s, hashtext(upper(%s)))", [_SIGNUP_LOCK_NAMESPACE, username])


def user_register(*, username: str, password: str) -> User:
    """Create a user. Raises InvalidInput for a bad name or weak password, Conflict if the name is taken.

    The check of the name and the insert run under ``signup_lock``: two sign-ups of "Alice" and "alice" at
    the same moment cannot both pass the check (no case-insensitive unique index exists on Django's user
    table, and an existing database may hold such pairs made by an admin)."""
    username = (username or "").strip()
    if not username or len(username) > 150 or not all(c.isalnum() or c in "@.+-_" for c in username):
        raise InvalidInput("username must be 1-150 letters, digits or @.+-_", code="invalid_username")
    candidate = User(username=username)
    try:
        validate_password(password, user=candidate)
    except ValidationError as exc:
        raise InvalidInput(" ".join(exc.messages), code="weak_password") from None
    try:
        with transaction.atomic():
            signup_lock(username)
            if User.objects.filter(username__iexact=username).exists():  # "ALICE" beside "alice" is one person
                raise Conflict("That username is taken.", code="username_taken")
            return User.objects.create_user(username=username, password=password)
    except IntegrityError:
        raise Conflict("That username is taken.", code="username_taken") from None
