"""Outages of PostgreSQL or Redis become a clear, retryable 503 instead of a 500 page; bodies over the limit a
413; and every response says in ``Server-Timing`` how long the app took (``app``) next to what a view
measured (a chat turn adds ``model`` and ``recall``), so a slow reply can be told apart from a slow model."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template.loader import render_to_string
from django.utils.html import format_html

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
            log.warning("service unavailable on %s: %s", request.path, type(exception).__name__)
            response = service_error(request, 503, "service_unavailable", "A backing service is not reachable "
                                      "right now; try again shortly.", "Not available right now")
            response["Retry-After"] = "5"
            return response
        return None


class BodySizeLimitMiddleware:
    """Refuse request bodies over DATA_UPLOAD_MAX_MEMORY_SIZE with a 413 before anyone reads them (JSON, or a
    page for a browser)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        from django.conf import settings

        try:
            length = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = 0
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        if limit and length > limit:
            return service_error(request, 413, "too_large", f"The request body is larger than {limit} bytes; "
                                  "nothing was saved.", "Too large")
        return self.get_response(request)


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
