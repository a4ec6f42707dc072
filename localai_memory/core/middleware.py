"""Outages of PostgreSQL or Redis become a clear, retryable 503 instead of a 500 page; bodies over the limit a
413; and every response says in ``Server-Timing`` how long the app took (``app``) next to what a view
measured (a chat turn adds ``model`` and ``recall``), so a slow reply can be told apart from a slow model."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template.loader import render_to_string
from django.urls import Resolver404, resolve
from django.utils.html import format_html

from localai_memory.gunicorn_conf import ACCESS_LOG_ROUTE

log = logging.getLogger(__name__)

#: Paths whose clients are programs: their errors are JSON whatever they accept.
API_PREFIXES = ("/api/", "/v1/", "/mcp", "/bridges/")


def service_error(request: HttpRequest, status: int, code: str, message: str, title: str) -> HttpResponse:
    """The JSON error of the API; for a page, what a browser shows: an alert on top of the page for an htmx
    request (which would otherwise swap raw JSON into what was clicked), a short HTML page for a form posted
    without it (it must not end on raw JSON)."""
    if not request.path.startswith(API_PREFIXES) and request.headers.get("HX-Request") == "true":
        return HttpResponse(format_html('<p class="notice error" role="alert">{}</p>', message), status=status,
                            headers={"HX-Retarget": "#main", "HX-Reswap": "afterbegin"})
    browser = "text/html" in request.META.get("HTTP_ACCEPT", "") and not request.path.startswith(API_PREFIXES)
    if browser:
        return HttpResponse(render_to_string("service_error.html", {"title": title, "message": message}),
                            status=status)
    return JsonResponse({"error": {"code": code, "message": message}}, status=status)


class ServiceUnavailableMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        from .errors import _is_redis_outage, _sqlstate

        if _sqlstate(exception) in ("40P01", "40001"):
            return service_error(request, 409, "retry", "Another change happened at the same time; nothing "
                                  "was saved. Try again.", "Try again")
        if isinstance(exception, (OperationalError, InterfaceError)) or _is_redis_outage(exception):
            log.warning("service unavailable on %s: %s", route_of(request), type(exception).__name__)
            response = service_error(request, 503, "service_unavailable", "A backing service is not reachable "
                                      "right now; try again shortly.", "Not available right now")
            response["Retry-After"] = "5"
            return response
        return None


#: The attribute of a web page's view that answers a body over the limit itself (a form that says so beside
#: it, on its page: ``web.middleware.FormTooLargeMiddleware``, which runs once the session is read).
TOO_LARGE_ANSWER = "too_large_answer"


#: What a form that sends a file adds around it (``multipart/form-data``): its boundaries, each part's
#: headers, the CSRF token and the form's other fields. A file of the body limit's size is taken whole by a
#: view that takes one (``takes_a_file``): its body may pass the limit by this much, and the view checks the
#: file's own size against the limit.
MULTIPART_ROOM = 16 * 1024
#: The attribute of a view (a function, or an API view's class) that takes a file up to the body limit.
TAKES_A_FILE = "takes_a_file"


def takes_a_file(view: Any) -> Any:
    """Mark ``view`` (a function view, outermost, or an API view class) as one that takes an uploaded file as
    large as the body limit (``MULTIPART_ROOM``)."""
    setattr(view, TAKES_A_FILE, True)
    return view


def body_over_limit(request: HttpRequest) -> int | None:
    """The body limit (``DATA_UPLOAD_MAX_MEMORY_SIZE``) when the request says its body is larger, else None;
    read from the request's headers only, never from its body. A file sent to a view that takes one has
    ``MULTIPART_ROOM`` more for what goes around it (Django itself counts a multipart body's fields but not
    its files against the limit)."""
    from django.conf import settings

    try:
        length = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        length = 0
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    if not limit or length <= limit:
        return None
    multipart = (request.META.get("CONTENT_TYPE") or "").lower().startswith("multipart/form-data")
    if multipart and length <= limit + MULTIPART_ROOM and _takes_a_file(request):
        return None
    return limit


def _takes_a_file(request: HttpRequest) -> bool:
    try:
        view = resolve(request.path_info).func
    except Resolver404:
        return False
    return bool(getattr(view, TAKES_A_FILE, False) or getattr(getattr(view, "view_class", None), TAKES_A_FILE, False))


def too_large(request: HttpRequest, limit: int) -> HttpResponse:
    """The 413 of a body over ``limit``: JSON for the API, a page or an alert for a browser (``service_error``)."""
    return service_error(request, 413, "too_large", f"The request body is larger than {limit} bytes; nothing was "
                         "saved.", "Too large")


def answers_too_large(request: HttpRequest) -> Any:
    """The ``TOO_LARGE_ANSWER`` of the web page's view ``request`` is for, or None (an address of the API, of
    no view, or of a view that leaves it to ``BodySizeLimitMiddleware``)."""
    if request.path.startswith(API_PREFIXES):
        return None
    try:
        match = resolve(request.path_info)
    except Resolver404:
        return None
    return getattr(match.func, TOO_LARGE_ANSWER, None)


class BodySizeLimitMiddleware:
    """Refuse request bodies over DATA_UPLOAD_MAX_MEMORY_SIZE with a 413 before anyone reads them (JSON, or a
    page for a browser). A web page's form that says it itself (``TOO_LARGE_ANSWER``) is left to
    ``web.middleware.FormTooLargeMiddleware``, which does not read the body either."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        limit = body_over_limit(request)
        if limit is not None and answers_too_large(request) is None:
            return too_large(request, limit)
        return self.get_response(request)


#: How the access log names a request that matched no route (a 404, or one refused before routing): its
#: address is whatever the client typed, which may hold a note's name.
UNMATCHED_ROUTE = "(no route)"


def route_of(request: HttpRequest) -> str:
    """The URL pattern ``request`` matched, with a leading slash (``/api/chats/memory/notes``,
    ``/chats/<int:chat_id>/``): what an address is for, never what it names. Static files are ``/static/…``."""
    from django.conf import settings

    match = request.resolver_match
    if match is None:  # answered before routing (a 413, a bad Host, a static file) or by no route (a 404)
        try:
            match = resolve(request.path_info)
        except Resolver404:
            static = "/" + settings.STATIC_URL.strip("/") + "/"
            return static + "…" if request.path_info.startswith(static) else UNMATCHED_ROUTE
    return "/" + match.route


class RouteOnlyFilter(logging.Filter):
    """Django's request log (``django.request``: "Not Found: /api/files/Memory/….md") names a request by the
    route it took (``route_of``), as the access log does, never by its path, which may hold a note's name."""

    def filter(self, record: logging.LogRecord) -> bool:
        request = getattr(record, "request", None)
        if isinstance(request, HttpRequest) and isinstance(record.args, tuple):
            path = request.path
            said = {path, path.encode("unicode_escape").decode("ascii")}  # Django logs the path escaped
            record.args = tuple(route_of(request) if isinstance(arg, str) and arg in said else arg
                                for arg in record.args)
        return True


class AccessLogRouteMiddleware:
    """Names, for gunicorn's access log, the route each request took, in the WSGI environ (``request.META`` is
    that dict): the log's format (``gunicorn_conf.access_log_format``) prints it in place of the address, whose
    path and query string carry note text, topics and file names. Outermost, so every answer is named."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        request.META[ACCESS_LOG_ROUTE] = route_of(request)
        return response


class ServerTimingMiddleware:
    """Adds ``app;dur=<ms>`` (time inside Django, this middleware outward) to the ``Server-Timing`` header,
    after any metrics the view set there (durations only: nothing about the user or the notes)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        started = time.perf_counter()
        response = self.get_response(request)
        app = f"app;dur={(time.perf_counter() - started) * 1000:.1f}"
        earlier = response.get("Server-Timing")
        response["Server-Timing"] = f"{earlier}, {app}" if earlier else app
        return response
