"""Where the browser goes when a page's request cannot be answered as asked: a session that ended, or a
POST-only address opened with GET.

``login_required`` answers a refused request with a redirect to the log-in page whose ``next`` is the refused
address. For the web app's forms that is wrong twice: htmx follows the redirect itself and swaps the log-in page
into the part of the page it meant to replace (a page inside the page, the typed text gone with the part), and
a form's address is its POST-only action, which the browser would GET after logging in (a blank 405). So a
refused htmx request moves the whole page to the log-in page (``HX-Redirect``), and a refused form comes back,
after logging in, to the page it was on. A POST-only address of the web app opened with GET (such a ``next``
from before, a bookmark) goes to its page. A form that sends a field more than once is refused before its view
runs (``RepeatedFieldMiddleware``). A form posted with a body over the server's limit whose page says so
beside it (the Memory tab's Import) goes back to that page with its own words, not to the generic 413 page.

This middleware only changes those answers: never what a view decided otherwise, never the API's (its clients
log in with tokens; ``login_required`` is not theirs).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import parse_qs, urlsplit

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.views import redirect_to_login
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import resolve_url
from django.urls import Resolver404, ResolverMatch, resolve

from localai_memory.core.middleware import TOO_LARGE_ANSWER, answers_too_large, body_over_limit, too_large

from .views.common import flash, is_htmx, own_path

#: The views of the web app's pages (the only ones this middleware answers for).
WEB_VIEWS = "localai_memory.web.views."


def _is_web_view(match: ResolverMatch | None) -> bool:
    return match is not None and getattr(match.func, "__module__", "").startswith(WEB_VIEWS)


def page_of(path: str) -> str:
    """The page an address of the web app belongs to: its nearest parent that is a page of the web app
    ("/chats/7/send/" → "/chats/7/", "/inbox/3/confirm/" → "/inbox/", "/changes/5/undo/" → "/")."""
    parts = [part for part in path.split("/") if part]
    while parts:
        parts.pop()
        candidate = "/" + "".join(f"{part}/" for part in parts)
        try:
            if _is_web_view(resolve(candidate)):
                return candidate
        except Resolver404:
            continue
    return "/"


def _local(request: HttpRequest, url: str | None) -> str | None:
    """``url`` as a path of this site (with its query and fragment), or None when it is not one of ours or is
    the log-in page itself."""
    path = own_path(request, url)
    if path is None or urlsplit(path).path == resolve_url(settings.LOGIN_URL):
        return None
    return path


def page_of_request(request: HttpRequest) -> str:
    """The page a person sent this request from: the page htmx says it is on, the form's page (Referer), the
    page the form names as its ``next``; else the page of the address (``page_of``)."""
    candidates = [request.headers.get("HX-Current-URL"), request.headers.get("Referer")]
    if request.method == "POST":
        candidates.append(request.POST.get("next"))
    for candidate in candidates:
        local = _local(request, candidate)
        if local is not None:
            return local
    return page_of(request.path)


def _is_login_redirect(response: HttpResponse) -> bool:
    """Is this ``login_required``'s answer: a redirect to the log-in page with a ``next``?"""
    if response.status_code != 302:
        return False
    target = urlsplit(response.get("Location", ""))
    return target.path == resolve_url(settings.LOGIN_URL) and "next" in parse_qs(target.query)


class LoginRedirectMiddleware:
    """A request refused because the session ended goes to the log-in page as a whole page, and comes back to
    the page it was sent from (never to a POST-only address)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if not _is_login_redirect(response) or request.user.is_authenticated:
            return response
        if request.method in ("GET", "HEAD") and not is_htmx(request):
            return response  # a page opened: it is where the person comes back to
        login = redirect_to_login(page_of_request(request))
        if is_htmx(request):
            # htmx would follow a 302 and swap the log-in page into the page: the browser moves instead
            return HttpResponse("Your session has ended; log in again.", status=401,
                                content_type="text/plain; charset=utf-8", headers={"HX-Redirect": login.url})
        return login


class PostOnlyPageMiddleware:
    """A POST-only address of the web app opened with GET by a person logged in goes to its page, not to a
    blank 405 (``login_required`` sends a person who is not logged in to the log-in page first)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if (response.status_code == 405 and request.method in ("GET", "HEAD")
                and _is_web_view(request.resolver_match) and request.user.is_authenticated):
            query = request.META.get("QUERY_STRING", "")
            return HttpResponseRedirect(page_of(request.path) + (f"?{query}" if query else ""))
        return response


def repeated_fields(request: HttpRequest) -> list[str]:
    """The names a form sent more than once: two fields (or uploads) of one name in its body, or ``?x=1&x=2``
    in its address."""
    names: list[str] = []
    for data in (request.GET, request.POST, request.FILES):
        names += [name for name, values in data.lists() if len(values) > 1 and name not in names]
    return names


class RepeatedFieldMiddleware:
    """A form of the web app that sends a field more than once does nothing: the person is back on the page the
    form was on, told so where the form is (``flash``). A view reads a field with ``QueryDict.get``, which
    takes the last value silently: an agent's Delete sent with ``memory=keep`` and ``memory=delete`` would move
    its notes to the Trash. The API answers the same with a 400 ``repeated_parameter``
    (``core.api.one_param``). Checked here, before any view of the web app runs, so every form obeys it, also
    one added later; no form of the app sends a name twice (a radio group sends one value)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_view(self, request: HttpRequest, view: Callable[..., HttpResponse], args: Any,
                     kwargs: Any) -> HttpResponse | None:
        if (request.method != "POST" or not _is_web_view(request.resolver_match)
                or not request.user.is_authenticated):  # a person logged out goes to log in first, as before
            return None
        repeated = repeated_fields(request)
        if not repeated:
            return None
        named = ", ".join(f"“{name[:40]}”" for name in repeated[:3]) + (", …" if len(repeated) > 3 else "")
        said = f"The form sent {named} more than once, so nothing was done. Send it again from this page."
        flash(request, messages.ERROR, said)
        back = page_of_request(request)
        if is_htmx(request):  # htmx would swap a redirect's page into the part it meant to replace
            return HttpResponse(said, status=400, content_type="text/plain; charset=utf-8",
                                headers={"HX-Redirect": back})
        return HttpResponseRedirect(back)


@dataclass(frozen=True)
class TooLargeAnswer:
    """How a form's page says that what was posted is over the body limit: the ``page`` (with the fragment of
    the form's part) the browser goes back to, the part ``at`` which the message is shown (``flash``), and the
    ``message`` for a request and the limit, which must not read the request's body."""

    page: str
    at: str
    message: Callable[[HttpRequest, int], str]


View = TypeVar("View", bound=Callable[..., HttpResponse])


def says_too_large(answer: TooLargeAnswer) -> Callable[[View], View]:
    """Mark a view whose form says itself, on its page, that a body over the limit is too large
    (``FormTooLargeMiddleware``). The mark outlives decorators that wrap the view with ``functools.wraps``."""

    def mark(view: View) -> View:
        setattr(view, TOO_LARGE_ANSWER, answer)
        return view

    return mark


class FormTooLargeMiddleware:
    """A form of a page that says it itself (``says_too_large``), posted with a body over the limit, goes back to
    its page, where the part of the form says what is wrong and what the limit is, with nothing read or written:
    the person stays on the page they were on, not on the generic 413 page. Its body is never read (the CSRF
    check would read it; the message is all that is written, into the poster's own session, and only for a post
    from this site). Anyone else, and htmx, gets the 413 ``BodySizeLimitMiddleware`` gives every other address.
    After the session and the user are read, before any view."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        limit = body_over_limit(request)
        answer = answers_too_large(request) if limit is not None else None
        if limit is None or not isinstance(answer, TooLargeAnswer):
            return self.get_response(request)
        if request.user.is_authenticated and not is_htmx(request) and _from_this_site(request):
            flash(request, messages.ERROR, answer.message(request, limit), at=answer.at)
            return HttpResponseRedirect(answer.page)
        return too_large(request, limit)


def _from_this_site(request: HttpRequest) -> bool:
    """Whether a post came from a page of this site, as its ``Origin`` says (a browser sends it with every
    form it posts), as Django's CSRF check reads it (this site, or one of ``CSRF_TRUSTED_ORIGINS``); one
    without (an older client) counts as this site's."""
    origin = request.headers.get("Origin")
    return (origin is None or origin == f"{request.scheme}://{request.get_host()}"
            or origin in settings.CSRF_TRUSTED_ORIGINS)
