"""Schema-driven fuzzing: schemathesis generates requests from /api/schema/ for every operation (valid and
invalid data) and sends them to the app as an authenticated user with notes; no response may be a 5xx.

The schema is loaded from the running app (``schemathesis.openapi.from_wsgi``), so routes added later are
fuzzed too. The model server is the loopback OpenAI fake, so a chat turn gets a real answer rather than a 502.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from hypothesis import HealthCheck, Phase, given
from hypothesis import settings as hypothesis_settings
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.core.failures import Failure, FailureGroup

from localai_memory.accounts.services import token_create

from .conftest import openapi_schema

EXAMPLES_PER_OPERATION = 12

_PATHS = openapi_schema()["paths"]
OPERATIONS = sorted((method.upper(), path) for path, operations in _PATHS.items()
                    for method in operations if method in ("get", "post", "put", "patch", "delete"))


def has_input(method: str, path: str) -> bool:
    """Whether an operation takes parameters or a body, i.e. whether there is anything to make invalid."""
    operation = _PATHS[path][method.lower()]
    return bool(operation.get("parameters") or operation.get("requestBody") or _PATHS[path].get("parameters"))


@contextmanager
def one_database_connection() -> Iterator[None]:
    """Keep the test's connection (and its transaction) across requests, as Django's own test client does."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        yield
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


@pytest.fixture(scope="module")
def fuzz_schema():
    """The schema as the app serves it at /api/schema/ (the schema view itself needs no database). The
    Django application itself, not ``localai_memory.wsgi``'s server process set-up: that would hand every
    later test's after-response work to a thread outside the test's transaction."""
    from django.core.wsgi import get_wsgi_application

    application = get_wsgi_application()

    with one_database_connection():
        return schemathesis.openapi.from_wsgi("/api/schema/?format=json", application)


def fuzz(operation, mode: GenerationMode, headers: dict[str, str], failures: list[str]) -> None:
    """Send EXAMPLES_PER_OPERATION generated requests; note every one the checks refuse (no shrinking)."""

    @given(case=operation.as_strategy(generation_mode=mode))
    @hypothesis_settings(max_examples=EXAMPLES_PER_OPERATION, deadline=None, database=None,
                         phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck),
                         derandomize=True)
    def send(case) -> None:
        response = case.call(headers=headers)
        try:
            case.validate_response(response, checks=[not_a_server_error])
        except (Failure, FailureGroup) as exc:
            failures.append(f"{mode.value}: {response.status_code} for {case.as_curl_command()}\n"
                            f"  {response.text[:300]}\n  ({type(exc).__name__})")

    send()


@pytest.mark.slow
@pytest.mark.parametrize("method,path", OPERATIONS, ids=[f"{m} {p}" for m, p in OPERATIONS])
def test_no_generated_request_gets_a_server_error(fuzz_schema, owner, alices_notes, openai_server, settings,
                                                  method, path):
    settings.LLM_BASE_URL = openai_server.url
    settings.OPEN_SIGNUP = True
    headers = {"Authorization": f"Token {token_create(user=owner)}"}
    operation = fuzz_schema[path][method]
    failures: list[str] = []

    modes = [GenerationMode.POSITIVE] + ([GenerationMode.NEGATIVE] if has_input(method, path) else [])
    for mode in modes:
        with one_database_connection():
            fuzz(operation, mode, headers, failures)

    assert failures == [], "\n".join(failures[:10])
