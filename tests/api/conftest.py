"""Helpers shared by the API tests: JSON error checks and a few ready-made notes of Alice's."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from localai_memory.notes import services
from localai_memory.notes.paths import Scope


def assert_error(response: Any, status: int, code: str | None = None) -> dict:
    """The response is a JSON error ``{"error": {"code", "message"}}`` with ``status``; returns the error."""
    assert response.status_code == status, (response.status_code, getattr(response, "content", b"")[:500])
    assert response["Content-Type"].startswith("application/json"), response["Content-Type"]
    body = response.json()
    assert set(body) == {"error"}, body
    error = body["error"]
    assert isinstance(error["code"], str) and error["code"], error
    assert isinstance(error["message"], str) and error["message"], error
    if code is not None:
        assert error["code"] == code, error
    return error


def assert_json_4xx(response: Any) -> dict:
    """Any client error, as JSON ``{"error": {"code", "message"}}``; never a 5xx or an HTML page."""
    assert 400 <= response.status_code < 500, (response.status_code, getattr(response, "content", b"")[:500])
    return assert_error(response, response.status_code)


def put_json(client: APIClient, url: str, body: Any) -> Any:
    return client.put(url, body, format="json")


def post_json(client: APIClient, url: str, body: Any) -> Any:
    return client.post(url, body, format="json")


@pytest.fixture
def alices_notes(owner) -> dict[str, Any]:
    """Alice's notes: two of hers, one of an agent's, one of a conversation's; returns ids to aim at."""
    first = services.note_upsert(owner_id=owner.pk, scope=Scope.user(), topic="home", summary="lives in Rome",
                                 details="Moved to Rome in 2024.", source="files", actor="you")
    services.note_upsert(owner_id=owner.pk, scope=Scope.user(), topic="diet", summary="vegetarian",
                         source="files", actor="you")
    services.note_upsert(owner_id=owner.pk, scope=Scope.agent(7), topic="tone", summary="short answers",
                         source="files", actor="you")
    services.note_upsert(owner_id=owner.pk, scope=Scope.channel(3, "C123"), topic="team", summary="Friday demos",
                         source="files", actor="you")
    services.file_write(owner_id=owner.pk, path="Memory/scratch.md", content="to be deleted", version=None)
    trash = services.file_delete(owner_id=owner.pk, path="Memory/scratch.md")
    return {"change_id": first.pk, "trash_id": trash.pk}


def api_routes(prefixes: tuple[str, ...] = ("api/",)) -> list[tuple[str, str]]:
    """Every (METHOD, route) of the URL conf under ``prefixes``, read from the resolver (``api/x/<int:id>``)."""
    from django.urls import URLPattern, URLResolver, get_resolver

    found: list[tuple[str, str]] = []

    def walk(patterns: list, prefix: str) -> None:
        for pattern in patterns:
            route = prefix + str(pattern.pattern)
            if isinstance(pattern, URLResolver):
                walk(pattern.url_patterns, route)
            elif isinstance(pattern, URLPattern) and route.startswith(prefixes):
                view_class = getattr(pattern.callback, "view_class", None) or getattr(pattern.callback, "cls", None)
                if view_class is None:
                    found.append(("GET", route))
                    continue
                for method in ("get", "post", "put", "patch", "delete"):
                    if hasattr(view_class, method):
                        found.append((method.upper(), route))

    walk(get_resolver().url_patterns, "")
    return sorted(set(found))


def fill_route(route: str, value: object = 1) -> str:
    """A concrete URL for a resolver route: every ``<conv:name>`` becomes ``value`` (``memory`` for a slot)."""
    import re

    def replace(match: re.Match) -> str:
        return "memory" if match["name"] == "slot" else str(value)

    return "/" + re.sub(r"<(?:(?P<conv>\w+):)?(?P<name>\w+)>", replace, route)


# Routes anybody may call: getting a token, signing up, the schema and its docs.
PUBLIC_ROUTES = {"api/auth/token", "api/auth/register", "api/schema/", "api/docs/"}


def schema_path(route: str) -> str:
    """The OpenAPI path of a resolver route: ``api/x/<int:id>`` → ``/api/x/{id}``."""
    import re

    return "/" + re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", route)


def openapi_schema() -> dict:
    """The app's OpenAPI schema as /api/schema/ serves it (built in-process, no request needed)."""
    from drf_spectacular.generators import SchemaGenerator

    return SchemaGenerator().get_schema(request=None, public=True)


def takes_a_body(method: str, route: str, schema: dict) -> bool:
    """Whether the schema says this operation reads a request body (the others may ignore one)."""
    operation = schema.get("paths", {}).get(schema_path(route), {}).get(method.lower(), {})
    return "requestBody" in operation
