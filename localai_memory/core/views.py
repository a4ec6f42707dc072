"""Error pages: JSON under /api/ and /v1/, HTML elsewhere."""

from __future__ import annotations

from django.core.exceptions import DisallowedHost
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.utils.html import format_html
from django.views import defaults

#: What a person is told when a form of theirs came from a page whose security token no longer counts.
STALE_PAGE = ("Your session changed in another tab (a log-out or a log-in), so this page is out of date and "
              "nothing was saved. Reload the page and try again; a message or a note you were writing is kept.")


def _wants_json(request: HttpRequest) -> bool:
    return request.path.startswith(("/api/", "/v1/", "/mcp"))


def not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if _wants_json(request):
        return JsonResponse({"error": {"code": "not_found", "message": "No such route or object."}}, status=404)
    return render(request, "404.html", status=404)


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    """A request Django refused before any view (``SuspiciousOperation``): most often a Host header that is not
    in ``ALLOWED_HOSTS`` (the app reached by another name or address than it was told, ``HOST=0.0.0.0``)."""
    if not _wants_json(request):
        return defaults.bad_request(request, exception)
    if isinstance(exception, DisallowedHost):
        return JsonResponse({"error": {"code": "disallowed_host", "message": (
            "This server does not answer to the host name or address this request was sent to (its Host "
            "header). Its administrator can add that name to ALLOWED_HOSTS.")}}, status=400)
    return JsonResponse({"error": {"code": "bad_request", "message": "The request could not be read."}},
                        status=400)


def server_error(request: HttpRequest) -> HttpResponse:
    if _wants_json(request):
        return JsonResponse({"error": {"code": "server_error", "message": "Something broke on our side."}},
                            status=500)
    return HttpResponse("<h1>Something broke on our side.</h1>", status=500)


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    """A form refused by the CSRF check (``CSRF_FAILURE_VIEW``): almost always a page made stale by a log-in or
    log-out in another tab, which gives the browser a new token. For htmx, an alert on top of the page, which
    stays as it was (the conversation, the composer and its text); for a form, a page of the app that leads
    back to the form's page."""
    if _wants_json(request):
        return JsonResponse({"error": {"code": "csrf_failed", "message": "CSRF verification failed."}}, status=403)
    if request.headers.get("HX-Request") == "true":
        return HttpResponse(format_html('<p class="notice error" role="alert" data-testid="stale-page">{} '
                                        '<a href="">Reload the page</a></p>', STALE_PAGE), status=403,
                            headers={"HX-Retarget": "#main", "HX-Reswap": "afterbegin"})
    from localai_memory.web.middleware import page_of_request

    return render(request, "csrf_failure.html", {"message": STALE_PAGE, "back": page_of_request(request)},
                  status=403)
