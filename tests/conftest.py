"""Shared fixtures: an owner, a member and an outsider; API clients authenticated by real tokens.

The session's PostgreSQL + pgvector and Redis are the embedded ones (started by the settings when
DATABASE_URL / REDIS_URL are unset) under .localai/test, one per test session, shared by xdist workers.
"""

from __future__ import annotations

import itertools

import pytest
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from localai_memory.accounts.services import token_create

_names = itertools.count(1)


@pytest.fixture
def make_user(db):
    def make(username: str | None = None, password: str = "correct horse battery staple"):
        name = username or f"user{next(_names)}"
        return get_user_model().objects.create_user(username=name, password=password)

    return make


@pytest.fixture
def owner(make_user):
    return make_user("alice")


@pytest.fixture
def outsider(make_user):
    """Somebody who should have no access to Alice's stuff."""
    return make_user("mallory")


@pytest.fixture
def client_for(db):
    def make(user) -> APIClient:
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Token {token_create(user=user)}")
        return client

    return make


@pytest.fixture
def api(owner, client_for) -> APIClient:
    return client_for(owner)


@pytest.fixture
def outsider_api(outsider, client_for) -> APIClient:
    return client_for(outsider)


@pytest.fixture
def anon_api() -> APIClient:
    return APIClient()
