"""Your account: change the password, see and revoke the API tokens, make a new one, delete the account.

Each form posts to its own address and calls one service of ``accounts.services``. A refused form re-renders
the page with its message beside it (status 400); a new token's key waits in the session only until the page
shows it, once (a reload shows it no more and makes no second token). Password and delete forms count against the same budget of password
tries as the log-in page (``accounts.throttling``).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib import auth, messages
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_GET, require_POST

from localai_memory.accounts import selectors as account_selectors
from localai_memory.accounts import services as account_services
from localai_memory.accounts.throttling import too_many_tries, too_many_tries_sentence
from localai_memory.core.errors import ApplicationError

from .common import AuthenticatedHttpRequest, not_found_as_404, page

ACCOUNT = "/account/"


def _account_page(request: AuthenticatedHttpRequest, *, status: int = 200, errors: dict[str, str] | None = None,
                  new_token: dict[str, Any] | None = None, form: dict[str, str] | None = None) -> HttpResponse:
    """The Account page; ``errors`` by section (password, token, delete), ``new_token`` the key to show once."""
    response = page(request, "web/account.html", {
        "tokens": list(account_selectors.token_list(user_id=request.user.pk)),
        "errors": errors or {}, "new_token": new_token,
        "form": {"revoke_tokens": "on", "name": "", **(form or {})},  # as the page first shows it
    }, section="account", status=status)
    if new_token is not None:  # the key is in this answer only: no cache may keep it
        response["Cache-Control"] = "no-store"
    return response


def _throttled(request: AuthenticatedHttpRequest, section: str) -> HttpResponse | None:
    """The page with "too many tries" when this address used up its password tries (this try is counted)."""
    wait = too_many_tries(request)
    if not wait:
        return None
    message = too_many_tries_sentence(wait)
    response = _account_page(request, status=429, errors={section: message})
    response["Retry-After"] = str(wait)
    return response


#: Where a new token's key waits, in the session, for the page that shows it once (then it is gone).
_NEW_TOKEN = "account.new_token"


@login_required
@require_GET
def account_page(request: AuthenticatedHttpRequest) -> HttpResponse:
    made = request.session.pop(_NEW_TOKEN, None)  # a token made by the form just before: its key, this once
    token = (account_selectors.token_list(user_id=request.user.pk).filter(pk=made["id"]).first()
             if isinstance(made, dict) and isinstance(made.get("id"), int) else None)
    return _account_page(request, new_token={"token": token, "key": made["key"]} if token is not None else None)


@login_required
@require_POST
def password_change(request: AuthenticatedHttpRequest) -> HttpResponse:
    """Change the password; this browser stays logged in, every other session ends."""
    refused = _throttled(request, "password")
    if refused is not None:
        return refused
    revoke = request.POST.get("revoke_tokens") == "on"
    try:
        revoked = account_services.password_change(
            user=request.user, current=request.POST.get("current_password", ""),
            new=request.POST.get("new_password", ""), new_again=request.POST.get("new_password2", ""),
            revoke_tokens=revoke)
    except ApplicationError as exc:
        return _account_page(request, status=400, errors={"password": exc.message},
                             form={"revoke_tokens": "on" if revoke else ""})
    auth.update_session_auth_hash(request, request.user)
    sentence = "Your password was changed. Other browsers where you were logged in are logged out."
    if revoke:
        sentence += f" {revoked} API token{'s were' if revoked != 1 else ' was'} revoked."
    messages.success(request, sentence)
    return redirect(ACCOUNT)


@login_required
@require_POST
def token_new(request: AuthenticatedHttpRequest) -> HttpResponse:
    """Make a token; the page the browser is sent to shows its key, once."""
    name = request.POST.get("name", "")
    try:
        token, key = account_services.token_create_named(user=request.user, name=name)
    except ApplicationError as exc:
        return _account_page(request, status=400, errors={"token": exc.message}, form={"name": name})
    # Shown by the page the browser is sent to, once: a reload of that page shows it no more, and makes no
    # second token as a reload of this form's answer would.
    request.session[_NEW_TOKEN] = {"id": token.pk, "key": key}
    return redirect(ACCOUNT)


@login_required
@not_found_as_404
@require_POST
def token_revoke(request: AuthenticatedHttpRequest, token_id: int) -> HttpResponse:
    token = account_selectors.access_token(request.user, token_id)
    account_services.token_revoke(token=token)
    messages.success(request, f"Revoked the token “{token.name}” ({token.prefix}…). A client using it must log "
                              "in again.")
    return redirect(ACCOUNT)


@login_required
@require_POST
def tokens_revoke_all(request: AuthenticatedHttpRequest) -> HttpResponse:
    revoked = account_services.tokens_revoke_all(user_id=request.user.pk)
    if revoked:
        messages.success(request, f"Revoked {revoked} API token{'s' if revoked != 1 else ''}. Clients using them "
                                  "must log in again.")
    else:
        messages.info(request, "You had no API tokens to revoke.")
    return redirect(ACCOUNT)


@login_required
@require_POST
def account_delete(request: AuthenticatedHttpRequest) -> HttpResponse:
    """Delete the account and everything in it, once the password and the typed username match; then log out."""
    refused = _throttled(request, "delete")
    if refused is not None:
        return refused
    answers: list[str] = []
    try:
        account_services.account_delete_by_owner(
            user=request.user, password=request.POST.get("password", ""),
            username=request.POST.get("username", ""), told=answers.append)
    except ApplicationError as exc:
        return _account_page(request, status=400, errors={"delete": exc.message})
    auth.logout(request)
    messages.success(request, "Your account and everything in it were deleted.")
    if "failed" in answers:
        messages.warning(request, "Your memory add-on could not forget your notes: remove them in the add-on "
                                  "itself.")
    return redirect(f"{settings.LOGIN_URL}#main")  # its own fragment: the form's #delete would carry over
