"""Writes for accounts: users (sign-up, password, deletion) and API tokens.

What a person does to their own account from the Account page (``/account/``) and ``/api/auth/tokens`` goes
through here: making and revoking tokens, changing the password (revoking every token with it when asked), and
deleting the account once they have given their password and typed its name.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from django.contrib.auth import get_user_model
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.db import IntegrityError, connection, transaction

from localai_memory.core.errors import Conflict, InvalidInput
from localai_memory.notes.paths import printable_line

from .models import ApiToken, hash_key

if TYPE_CHECKING:  # the type of AUTH_USER_MODEL, which is Django's own
    from django.contrib.auth.models import User
else:
    User = get_user_model()

log = logging.getLogger(__name__)


#: The longest name a token takes (the column's length).
TOKEN_NAME_MAX_CHARS = 100


def _token_make(user: User, name: str) -> tuple[ApiToken, str]:
    key = ApiToken.new_key()
    token = ApiToken.objects.create(user=user, name=name[:TOKEN_NAME_MAX_CHARS], prefix=key[:8],
                                    key_hash=hash_key(key))
    return token, key


@transaction.atomic
def token_create(*, user: User, name: str = "api") -> str:
    """Make a new API token for ``user`` and return its key (shown once; only its hash is kept)."""
    return _token_make(user, name)[1]


def token_create_named(*, user: User, name: str) -> tuple[ApiToken, str]:
    """Make a token the person named (the Account page), returning the row and its key (shown once).

    Raises InvalidInput for an empty name or one longer than 100 characters. The name is made one printable
    line as a note's summary is (``notes.paths.printable_line``: a control character becomes a space, a
    bidi override goes; an emoji's joiners stay)."""
    name = printable_line(name if isinstance(name, str) else "")
    if not name:
        raise InvalidInput("Give the token a name, such as the app that will use it.", code="invalid_name")
    if len(name) > TOKEN_NAME_MAX_CHARS:
        raise InvalidInput(f"A token's name is at most {TOKEN_NAME_MAX_CHARS} characters.", code="invalid_name")
    return _token_make(user, name)


def token_revoke(*, token: ApiToken) -> None:
    """Revoke one token (from ``selectors.access_token``): the next call with its key is a 401. Revoking a token
    that is already gone changes nothing."""
    ApiToken.objects.filter(pk=token.pk).delete()


def tokens_revoke_all(*, user_id: int) -> int:
    """Revoke every API token of the user (REST, OpenAI clients, MCP); returns how many there were."""
    return ApiToken.objects.filter(user_id=user_id).delete()[0]


@transaction.atomic
def password_change(*, user: User, current: str, new: str, new_again: str, revoke_tokens: bool) -> int:
    """Change the user's password after checking the current one; returns how many tokens were revoked.

    Raises InvalidInput (nothing changed) for a wrong current password (``wrong_password``), two new passwords
    that differ (``passwords_differ``) or a new one Django's password validators refuse (``weak_password``).
    Every other session of the user ends with the change (Django checks each session's hash of the password);
    the caller keeps its own with ``update_session_auth_hash``. With ``revoke_tokens`` every API token goes too,
    so a client holding one must log in again with the new password.
    """
    if not user.check_password(current or ""):
        raise InvalidInput("Your current password is not right.", code="wrong_password")
    if new != new_again:
        raise InvalidInput("The two new passwords differ.", code="passwords_differ")
    try:
        validate_password(new, user=user)
    except ValidationError as exc:
        raise InvalidInput(" ".join(exc.messages), code="weak_password") from None
    user.set_password(new)
    _save_password(user)  # the person chose whether their tokens stay: not on_user_saved's call
    return tokens_revoke_all(user_id=user.pk) if revoke_tokens else 0


@transaction.atomic
def password_reset(*, user: User, password: str | None) -> int:
    """Set the user's password for them (an administrator: the admin's password page), or with None turn
    password log-in off. Every API token is revoked and every session ends, whoever held them: the person
    logs in again with the new password. Returns how many tokens were revoked. The caller validated the
    password (the admin's form runs Django's password validators)."""
    revoked = tokens_revoke_all(user_id=user.pk)
    if password is None:
        user.set_unusable_password()
    else:
        user.set_password(password)
    _save_password(user)  # sessions end with it: Django checks each one's password hash
    return revoked


def _save_password(user: User) -> None:
    """Save ``user``'s new password for a service that decides about their API tokens itself
    (``TOKENS_DECIDED``: ``on_user_saved`` leaves them alone)."""
    setattr(user, TOKENS_DECIDED, True)
    try:
        user.save(update_fields=["password"])
    finally:
        delattr(user, TOKENS_DECIDED)


#: Set on a user while code that decides about their API tokens itself saves their new password, so
#: ``on_user_saved`` leaves the tokens to it (the Account page lets the person keep them).
TOKENS_DECIDED = "_api_tokens_decided"


def on_user_saved(sender: type[User], instance: User, created: bool, **kwargs: object) -> None:
    """``post_save`` of the user model: a new password saved by anything but the services above (Django's
    ``manage.py changepassword``, a shell) revokes every API token of the user, as a reset in the admin does;
    their sessions end by Django's own check of each one's password hash. A new account has no token yet, and
    a hash Django upgrades at log-in is no new password (Django saves it without marking it as one)."""
    if created or getattr(instance, "_password", None) is None or getattr(instance, TOKENS_DECIDED, False):
        return
    revoked = tokens_revoke_all(user_id=instance.pk)
    if revoked:
        log.info("user %s got a new password: revoked their %s API token(s)", instance.pk, revoked)


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


def account_delete_by_owner(*, user: User, password: str, username: str,
                            told: Callable[[str], None] | None = None) -> dict[str, int]:
    """Delete one's own account (the Account page): ``account_delete`` once the person gave their password and
    typed their username exactly. Raises InvalidInput, deleting nothing, when either is wrong."""
    if not user.check_password(password or ""):
        raise InvalidInput("That is not your password: nothing was deleted.", code="wrong_password")
    if (username or "").strip() != user.get_username():
        raise InvalidInput(f"Type your username, {user.get_username()}, to confirm: nothing was deleted.",
                           code="username_mismatch")
    return account_delete(user_id=user.pk, told=told)


def account_delete(*, user_id: int, told: Callable[[str], None] | None = None) -> dict[str, int]:
    """Delete an account and everything of it, leaving no text of a note anywhere.

    First every note is erased for good, as the terminal's ``memory clear`` erases them
    (``growth.services.memory_clear``: files, versions, change sets, Trash, suggestions, recall's copies, what
    memory did on each turn), under the owner's note lock, so a turn saving meanwhile waits and then finds
    nobody to save for; then the user row goes, and with it their settings, tokens, agents, chats and bots;
    so does every entry of the admin's log about them or a row of theirs (``adminlog.admin_log_forget``: an
    entry outlives the row it names, and Recent actions lists it). One transaction: it all goes or nothing
    does. Once it commits, every memory add-on they used is asked to forget them (as Forget everything asks
    each, serving or not, also while their memory is switched off: an add-on still keeps what it took); ``told`` hears the add-ons' answer (``"forgot"``, or ``"failed"`` when
    one did not or could not be asked).
    Returns what was erased of the notes, per kind. A user who does not exist is nothing to delete.
    """
    from localai_memory.growth.services import memory_clear
    from localai_memory.memory.providers import addons_forget, forget_summary
    from localai_memory.memory.selectors import addons_used

    from .adminlog import admin_log_forget

    used = addons_used(user_id=user_id)  # read before the settings row goes with the user

    def forget_in_the_addon() -> None:
        answers = addons_forget(used, user_id=user_id)
        for failed in (answer for answer in answers if answer.status != "forgot"):
            log.warning("user %s was deleted, but the memory add-on %s did not forget them: %s", user_id,
                        failed.name, failed.status)
        answer = forget_summary(answers)
        if answer is not None and told is not None:
            told(answer)

    with transaction.atomic():
        if not User.objects.filter(pk=user_id).exists():
            return {}
        admin_log_forget(user_id=user_id)  # while their rows are there to say which entries are about them
        # The note lock first, the user row's lock second, as a turn takes them (a note's row locks its
        # owner's row as it is written): the other order could deadlock with a turn saving a note.
        erased = memory_clear(owner_id=user_id)
        User.objects.filter(pk=user_id).delete()
        transaction.on_commit(forget_in_the_addon)
    return erased
