"""One family of application errors and the one DRF exception handler that renders them.

Every error the API returns is JSON ``{"error": {"code", "message"}}`` (plus optional ``details``) with a
fitting status. Services raise ApplicationError subclasses; views never build error responses by hand.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import TooManyFieldsSent
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import DatabaseError, InterfaceError, OperationalError
from django.http import Http404
from rest_framework import exceptions as drf_exceptions
from rest_framework.response import Response


class ApplicationError(Exception):
    """An error a client can act on. ``details`` is optional extra JSON (e.g. the current index entries)."""

    status = 400
    code = "bad_request"
    #: seconds for a ``Retry-After`` header (a 503 says 5 without one)
    retry_after: str | None = None

    def __init__(self, message: str, *, code: str | None = None, status: int | None = None,
                 details: Any = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        if status is not None:
            self.status = status
        self.details = details

    def as_dict(self) -> dict:
        body: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.details is not None:
            body["details"] = self.details
        return {"error": body}


class InvalidInput(ApplicationError):
    status = 400
    code = "invalid"


class NotFound(ApplicationError):
    status = 404
    code = "not_found"

    def __init__(self, message: str = "Not found.", **kwargs: Any) -> None:
        super().__init__(message, **kwargs)


class Conflict(ApplicationError):
    status = 409
    code = "conflict"


class Gone(ApplicationError):
    status = 410
    code = "gone"


class Forbidden(ApplicationError):
    status = 403
    code = "forbidden"


class TooLarge(ApplicationError):
    status = 413
    code = "too_large"


class ServiceUnavailable(ApplicationError):
    status = 503
    code = "service_unavailable"


class UpstreamError(ApplicationError):
    """The model server (or another outside party) failed; the user's input was kept."""

    status = 502
    code = "upstream_error"


def _flatten(detail: Any) -> str:
    if isinstance(detail, dict):
        parts = []
        for key, value in detail.items():
            text = _flatten(value)
            parts.append(text if key in ("non_field_errors", "detail") else f"{key}: {text}")
        return "; ".join(parts)
    if isinstance(detail, (list, tuple)):
        return " ".join(_flatten(item) for item in detail)
    return str(detail)


def _renderable(value: Any) -> Any:
    """Error bodies echo client input (unknown field names, bad values); make any text UTF-8 encodable so
    rendering the error can never fail (a lone surrogate becomes a visible ``\\ud800`` escape)."""
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, dict):
        return {_renderable(k): _renderable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_renderable(v) for v in value]
    return value


def error_response(exc: ApplicationError) -> Response:
    response = Response(_renderable(exc.as_dict()), status=exc.status)
    if exc.retry_after or exc.status == 503:
        response["Retry-After"] = exc.retry_after or "5"
    return response


def exception_handler(exc: Exception, context: dict) -> Response | None:
    """DRF's EXCEPTION_HANDLER: every error as ``{"error": {"code", "message"}}``."""
    if isinstance(exc, ApplicationError):
        return error_response(exc)
    if isinstance(exc, Http404):
        return error_response(NotFound())
    if isinstance(exc, DjangoPermissionDenied):
        return error_response(Forbidden("You may not do that."))
    if isinstance(exc, DjangoValidationError):
        return error_response(InvalidInput(" ".join(exc.messages)))
    if isinstance(exc, TooManyFieldsSent):  # a query string of more parameters than Django reads: not HTML
        return error_response(InvalidInput(f"too many parameters (at most {settings.DATA_UPLOAD_MAX_NUMBER_FIELDS})",
                                           code="too_many_parameters"))
    if _sqlstate(exc) in ("40P01", "40001"):  # deadlock or serialization failure: nothing was written
        return error_response(Conflict("Another change happened at the same time; try again.", code="retry"))
    if isinstance(exc, (OperationalError, InterfaceError)):
        return error_response(ServiceUnavailable("The database is not reachable right now; try again shortly."))
    if isinstance(exc, DatabaseError) and "could not serialize" in str(exc):
        return error_response(Conflict("Another change happened at the same time; try again.", code="retry"))
    if _is_redis_outage(exc):
        return error_response(ServiceUnavailable("The cache and task queue (Redis) are not reachable right now; "
                                                 "try again shortly."))
    if isinstance(exc, drf_exceptions.APIException):
        codes = {
            drf_exceptions.NotAuthenticated: "not_authenticated",
            drf_exceptions.AuthenticationFailed: "authentication_failed",
            drf_exceptions.PermissionDenied: "forbidden",
            drf_exceptions.NotFound: "not_found",
            drf_exceptions.MethodNotAllowed: "method_not_allowed",
            drf_exceptions.NotAcceptable: "not_acceptable",
            drf_exceptions.UnsupportedMediaType: "unsupported_media_type",
            drf_exceptions.Throttled: "throttled",
            drf_exceptions.ParseError: "parse_error",
            drf_exceptions.ValidationError: "invalid",
        }
        code = next((c for cls, c in codes.items() if isinstance(exc, cls)), "error")
        response = Response({"error": {"code": code, "message": _renderable(_flatten(exc.detail))}},
                            status=exc.status_code)
        if isinstance(exc, drf_exceptions.Throttled):
            # Throttled sets ``wait`` in __init__; the DRF stubs do not declare it.
            wait: float | None = exc.wait  # type: ignore[attr-defined]
            if wait:
                response["Retry-After"] = str(int(wait) + 1)
        auth_header = getattr(exc, "auth_header", None)
        if isinstance(exc, (drf_exceptions.NotAuthenticated, drf_exceptions.AuthenticationFailed)):
            response["WWW-Authenticate"] = auth_header or 'Token realm="api"'
        return response
    return None


def _sqlstate(exc: BaseException) -> str | None:
    """The PostgreSQL error code behind a Django database error, if any."""
    cause = exc.__cause__ or exc.__context__
    return getattr(cause, "sqlstate", None) or getattr(exc, "sqlstate", None)


def _is_redis_outage(exc: Exception) -> bool:
    try:
        import kombu.exceptions
        import redis.exceptions
    except ImportError:  # pragma: no cover
        return False
    return isinstance(exc, (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError,
                            kombu.exceptions.OperationalError))
