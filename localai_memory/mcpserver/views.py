"""``/mcp``: the MCP endpoint (streamable HTTP, stateless, JSON responses), authenticated by an API token.

``Authorization: Bearer <key>`` (or ``Token <key>``) names the user. Without ``LOCALAI_MEMORY_MCP`` the route
does not exist (404). Only POST carries messages: a stateless server offers no event stream to GET and no
session to DELETE, which the protocol answers with 405.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from rest_framework.exceptions import AuthenticationFailed

from localai_memory.accounts.authentication import user_for_key
from localai_memory.chats.selectors import read_memory_state

from .server import serve

if TYPE_CHECKING:
    from django.contrib.auth.models import User  # AUTH_USER_MODEL is Django's own

_SKIPPED_HEADERS = {b"content-length", b"connection", b"transfer-encoding"}


def _error(status: int, code: str, message: str, **headers: str) -> JsonResponse:
    response = JsonResponse({"error": {"code": code, "message": message}}, status=status)
    for name, value in headers.items():
        response[name.replace("_", "-")] = value
    return response


def _user(request: HttpRequest) -> User | None:
    parts = request.META.get("HTTP_AUTHORIZATION", "").split()
    if len(parts) != 2 or parts[0].lower() not in ("bearer", "token"):
        return None
    try:
        user, _ = user_for_key(parts[1])
    except AuthenticationFailed:
        return None
    return user


def _asgi_scope(request: HttpRequest, body: bytes) -> dict:
    headers: list[tuple[bytes, bytes]] = []
    for key, value in request.META.items():
        if key.startswith("HTTP_"):
            name = key[5:].replace("_", "-").lower()
        elif key in ("CONTENT_TYPE", "CONTENT_LENGTH"):
            name = key.replace("_", "-").lower()
        else:
            continue
        headers.append((name.encode("latin-1"), str(value).encode("latin-1")))
    host, _, port = request.get_host().partition(":")
    return {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": request.method,
        "scheme": request.scheme, "path": request.path, "raw_path": request.path.encode(),
        "root_path": "", "query_string": request.META.get("QUERY_STRING", "").encode("latin-1"),
        "headers": headers, "server": (host, int(port or (443 if request.is_secure() else 80))),
        "client": (request.META.get("REMOTE_ADDR", ""), 0),
    }


@csrf_exempt
def mcp_endpoint(request: HttpRequest) -> HttpResponse:
    """One MCP message of the token's user, answered by the memory tools."""
    if not settings.MCP_ENABLED:
        raise Http404
    user = _user(request)
    if user is None:
        return _error(401, "authentication_failed", "Send your API token: Authorization: Bearer <token>.",
                      WWW_Authenticate='Bearer realm="mcp"')
    if request.method != "POST":
        return _error(405, "method_not_allowed", "This MCP server is stateless: send messages with POST.",
                      Allow="POST")
    state = read_memory_state(owner_id=user.pk)
    body = request.body
    status, headers, content = serve(owner_id=user.pk, propose=bool(state and state.mcp_propose_enabled),
                                     scope=_asgi_scope(request, body), body=body)
    response = HttpResponse(content, status=status)
    for name, value in headers:
        if name.lower() in _SKIPPED_HEADERS:
            continue
        response[name.decode("latin-1")] = value.decode("latin-1")
    return response
