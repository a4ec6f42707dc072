"""Outages of PostgreSQL or Redis become a clear, retryable 503 instead of a 500 page; bodies over the limit a
413; and every response says in ``Server-Timing`` how long the app took (``app``) next to what a view
measured (a chat turn adds ``model`` and ``recall``), so a slow reply can be told apart from a slow model."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse

log = logging.getLogger(__name__)


class ServiceUnavailableMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        from .errors import _is_redis_outage, _sqlstate

        if _sqlstate(exception) in ("40P01", "40001"):
            return JsonResponse({"error": {"code": "retry", "message": "Another change happened at the same "
                                           "time; nothing was saved. Try again."}}, status=409)
        if isinstance(exception, (OperationalError, InterfaceError)) or _is_redis_outage(exception):
            log.warning("service unavailable on %s: %s", request.path, type(exception).__name__)
            response = JsonResponse(
                {"error": {"code": "service_unavailable",
                           "message": "A backing service is not reachable right now; try again shortly."}},
                status=503,
            )
            response["Retry-After"] = "5"
            return response
        return None


class BodySizeLimitMiddleware:
    """Refuse request bodies over DATA_UPLOAD_MAX_MEMORY_SIZE with a JSON 413 before anyone reads them."""

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
            return JsonResponse({"error": {"code": "too_large",
                                           "message": f"The request body is larger than {limit} bytes."}},
                                status=413)
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
