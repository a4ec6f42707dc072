"""Error pages: JSON under /api/ and /v1/, HTML elsewhere."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render


def _wants_json(request: HttpRequest) -> bool:
    return request.path.startswith(("/api/", "/v1/", "/mcp"))


def not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if _wants_json(request):
        return JsonResponse({"error": {"code": "not_found", "message": "No such route or object."}}, status=404)
    return render(request, "404.html", status=404)


def server_error(request: HttpRequest) -> HttpResponse:
    if _wants_json(request):
        return JsonResponse({"error": {"code": "server_error", "message": "Something broke on our side."}},
                            status=500)
    return HttpResponse("<h1>Something broke on our side.</h1>", status=500)
