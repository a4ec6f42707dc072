"""What every page shares: login, the page context (main nav, inbox count), and error handling.

A view never writes a note or a setting itself: it calls a service. An ApplicationError from a service becomes
a message on the page (or the page re-rendered with it); another user's object is a 404.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import TYPE_CHECKING, Any

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import redirect, render
from django.utils.http import url_has_allowed_host_and_scheme

from localai_memory.core.errors import ApplicationError, NotFound

if TYPE_CHECKING:
    from django.contrib.auth.models import User  # AUTH_USER_MODEL is Django's own


class AuthenticatedHttpRequest(HttpRequest):
    """The request of a page here: every page is ``login_required``, so its user is signed in (for the type
    checker; Django never makes one of these)."""

    user: User


def is_htmx(request: HttpRequest) -> bool:
    return request.headers.get("HX-Request") == "true"


def pending_count(user_id: int) -> int:
    """How many proposals wait in the inbox (the badge in the main nav)."""
    from .inbox import inbox_pending_count

    try:
        return inbox_pending_count(user_id)
    except ApplicationError:
        return 0


def page(request: AuthenticatedHttpRequest, template: str, context: dict[str, Any] | None = None, *,
         section: str, status: int = 200) -> HttpResponse:
    """Render a full page with the main nav (``section`` is the highlighted entry)."""
    ctx = {"nav_section": section, "nav_pending": pending_count(request.user.pk)}
    ctx.update(context or {})
    return render(request, template, ctx, status=status)


def back(request: HttpRequest, fallback: str) -> HttpResponse:
    """Redirect to the ``next`` field or the page the form was on, when it is ours; else ``fallback``."""
    target = request.POST.get("next") or request.GET.get("next") or ""
    # a path of this site only: a bare word would be taken for a URL name by ``redirect`` (a 500, or a jump)
    if target.startswith("/") and url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()},
                                                                  require_https=request.is_secure()):
        return HttpResponseRedirect(target)
    return redirect(fallback)


def not_found_as_404(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """NotFound from a selector or service is the 404 page (another user's object looks like no object)."""

    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        try:
            return view(request, *args, **kwargs)
        except NotFound as exc:
            raise Http404(exc.message) from None

    return wrapped


def flash_error(request: HttpRequest, exc: ApplicationError) -> None:
    messages.error(request, exc.message)


def int_or_404(raw: object) -> int:
    try:
        value = int(str(raw))
    except (TypeError, ValueError):
        raise Http404("not a number") from None
    if value < 1:
        raise Http404("not a number")
    return value
