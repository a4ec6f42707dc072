"""Writes for accounts: users (sign-up, deletion) and API tokens."""

from __future__ import annotations

import logging
from collections.abc import Callable
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

log = logging.getLogger(__name__)


@transaction.atomic
def token_create(*, user: User, name: str = "api") -> str:
    """Make a new API token for ``user`` and return its key (shown once; only its hash is kept)."""
    key = ApiToken.new_key()
    ApiToken.objects.create(user=user, name=name[:100], prefix=key[:8], key_hash=hash_key(key))
    return key


def token_revoke(*, token: ApiToken) -> None:
    """Revoke one token (from ``selectors.access_token``): the next call with its key is a 401. Revoking a token
    that is already gone changes nothing."""
    ApiToken.objects.filter(pk=token.pk).delete()


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


def account_delete(*, user_id: int, told: Callable[[str], None] | None = None) -> dict[str, int]:
    """Delete an account and everything of it, leaving no text of a note anywhere.

    First every note is erased for good, as the terminal's ``memory clear`` erases them
    (``growth.services.memory_clear``: files, versions, change sets, Trash, suggestions, recall's copies, what
    memory did on each turn), under the owner's note lock, so a turn saving meanwhile waits and then finds
    nobody to save for; then the user row goes, and with it their settings, tokens, agents, chats and bots.
    One transaction: it all goes or nothing does. Once it commits, the memory add-on their settings name is
    asked to forget them (as Forget everything asks it, but also while their memory is switched off: the
    add-on still keeps what it took); ``told`` hears the add-on's answer (``"forgot"`` or ``"failed"``).
    Returns what was erased of the notes, per kind. A user who does not exist is nothing to delete.
    """
    from localai_memory.growth.services import memory_clear
    from localai_memory.memory.providers import addon_forget
    from localai_memory.memory.selectors import memory_state

    choice = memory_state(user_id=user_id).provider_choice

    def forget_in_the_addon() -> None:
        answer = addon_forget(choice, user_id=user_id)
        if answer == "failed":
            log.warning("user %s was deleted, but the memory add-on %s could not forget them", user_id, choice)
        if answer is not None and told is not None:
            told(answer)

    with transaction.atomic():
        if not User.objects.filter(pk=user_id).exists():
            return {}
        # The note lock first, the user row's lock second, as a turn takes them (a note's row locks its
        # owner's row as it is written): the other order could deadlock with a turn saving a note.
        erased = memory_clear(owner_id=user_id)
        User.objects.filter(pk=user_id).delete()
        transaction.on_commit(forget_in_the_addon)
    return erased
