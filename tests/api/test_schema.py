"""The OpenAPI schema at /api/schema/ and the docs at /api/docs/; every route of the URL conf is in it."""

from __future__ import annotations

import pytest
import yaml

from .conftest import api_routes, schema_path

# The schema and its docs page describe the API; they are not operations of it.
NOT_OPERATIONS = {"api/schema/", "api/docs/"}


@pytest.fixture
def served_schema(anon_api) -> dict:
    response = anon_api.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    return response.json() if "json" in response["Content-Type"] else yaml.safe_load(response.content)


def test_the_schema_answers_200_without_logging_in(served_schema):
    assert served_schema["openapi"].startswith("3.")
    assert served_schema["info"]["title"] == "LocalAI Memory API"


def test_the_schema_is_served_as_yaml_by_default(anon_api):
    response = anon_api.get("/api/schema/")
    assert response.status_code == 200
    assert yaml.safe_load(response.content)["paths"]


def test_the_docs_page_answers_200_and_points_at_the_schema(anon_api):
    response = anon_api.get("/api/docs/")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/html")
    assert b"/api/schema/" in response.content


@pytest.mark.parametrize("method,route", [r for r in api_routes() if r[1] not in NOT_OPERATIONS])
def test_every_api_route_of_the_url_conf_is_in_the_schema(served_schema, method, route):
    path = schema_path(route)
    assert path in served_schema["paths"], f"{path} is missing from /api/schema/"
    assert method.lower() in served_schema["paths"][path], f"{method} {path} is missing from /api/schema/"


def test_the_schema_holds_no_route_the_url_conf_does_not_serve(served_schema):
    served = {(method, schema_path(route)) for method, route in api_routes(prefixes=("api/", "v1/", "mcp"))}
    documented = {(method.upper(), path) for path, operations in served_schema["paths"].items()
                  for method in operations if method in ("get", "post", "put", "patch", "delete")}
    assert documented - served == set()


def test_the_token_routes_need_no_authentication_in_the_schema(served_schema):
    for path in ("/api/auth/token", "/api/auth/register"):
        security = served_schema["paths"][path]["post"].get("security")
        assert security in (None, [], [{}]), (path, security)


def test_the_schema_documents_token_authentication(served_schema):
    schemes = served_schema["components"]["securitySchemes"]
    assert any(scheme.get("type") == "apiKey" and scheme.get("in") == "header" for scheme in schemes.values()) \
        or any(scheme.get("scheme") in ("bearer", "token") for scheme in schemes.values()), schemes
