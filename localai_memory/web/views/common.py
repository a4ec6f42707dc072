"""What every page shares: login, the page context (main nav, inbox count), and error handling.

A view never writes a note or a setting itself: it calls a service. An ApplicationError from a service becomes
a message on the page (or the page re-rendered with it); another user's object is a 404.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from django.contrib import messages
from django.contrib.messages.storage.base import Message
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


def own_path(request: HttpRequest, url: str | None) -> str | None:
    """``url`` as a path of this site, its query and fragment kept; None when it is not one of ours: another
    host or scheme, or a path a browser reads as another site ("//host", "/\\host")."""
    if not url or not url_has_allowed_host_and_scheme(url, allowed_hosts={request.get_host()},
                                                      require_https=request.is_secure()):
        return None
    parts = urlsplit(url)
    if not parts.path.startswith("/") or not url_has_allowed_host_and_scheme(parts.path, allowed_hosts=None):
        return None
    return parts.path + (f"?{parts.query}" if parts.query else "") + (f"#{parts.fragment}" if parts.fragment else "")


def back(request: HttpRequest, fallback: str) -> HttpResponse:
    """Redirect to the ``next`` field or the page the form was on, when it is ours; else ``fallback``."""
    target = request.POST.get("next") or request.GET.get("next") or ""
    # a path only: a bare word would be taken for a URL name by ``redirect`` (a 500, or a jump)
    if target.startswith("/") and own_path(request, target) is not None:
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


def landing(request: HttpRequest) -> str:
    """The part of the page a form's redirect lands on: the fragment of its ``next`` ("" for none)."""
    target = request.POST.get("next") or request.GET.get("next") or ""
    return target.partition("#")[2][:100]


def flash(request: HttpRequest, level: int, text: str, *, at: str | None = None) -> None:
    """Tell the person ``text`` on the page the view redirects to. ``at`` is the id of the part of that page
    the redirect lands on (by default the fragment of the form's ``next``): a page that knows that part shows
    the message there, where the person is (``flash_places``), rather than at the top of the page, maybe a
    screen or more above; any other page shows it at the top."""
    messages.add_message(request, level, text, extra_tags=landing(request) if at is None else at)


def flash_error(request: HttpRequest, exc: ApplicationError, *, at: str | None = None) -> None:
    flash(request, messages.ERROR, exc.message, at=at)


def flash_places(request: HttpRequest) -> dict[str, list[Message]]:
    """The messages waiting for this page by the part they belong to (``flash``'s ``at``; "" for the top),
    each list in the order they were said. Reading them uses them up, as showing them in a template does."""
    places: dict[str, list[Message]] = {}
    for message in messages.get_messages(request):
        places.setdefault(message.extra_tags or "", []).append(message)
    return places


def int_or_404(raw: object) -> int:
    try:
        value = int(str(raw))
    except (TypeError, ValueError):
        raise Http404("not a number") from None
    if value < 1:
        raise Http404("not a number")
    return value
