"""Outages of PostgreSQL or Redis become a clear, retryable 503 instead of a 500 page."""

from __future__ import annotations

import logging
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
