"""Your own API tokens: list them (``GET /api/auth/tokens``), revoke one (``DELETE /api/auth/tokens/{id}``).

A revoked token stops working at once; another user's token is a 404 and stays as it was.
"""

from __future__ import annotations

from datetime import timedelta

import time_machine
from django.utils import timezone
from rest_framework.test import APIClient

from localai_memory.accounts.models import ApiToken
from localai_memory.accounts.services import token_create

from .conftest import assert_error


def client_with(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


def test_the_list_shows_each_of_my_tokens_and_marks_the_one_i_call_with(owner, outsider):
    start = timezone.now().replace(microsecond=0)
    with time_machine.travel(start, tick=False):
        laptop = token_create(user=owner, name="laptop")
    with time_machine.travel(start + timedelta(hours=1), tick=False):
        phone = token_create(user=owner, name="phone")
    token_create(user=outsider, name="mallory's")

    with time_machine.travel(start + timedelta(hours=2), tick=False):
        response = client_with(phone).get("/api/auth/tokens")

    assert response.status_code == 200
    tokens = response.json()["tokens"]
    assert [t["name"] for t in tokens] == ["phone", "laptop"]  # newest first, only mine
    by_name = {t["name"]: t for t in tokens}
    assert set(by_name["phone"]) == {"id", "name", "prefix", "created_at", "last_used_at", "current"}
    assert by_name["phone"]["current"] is True and by_name["laptop"]["current"] is False
    assert by_name["laptop"]["prefix"] == laptop[:8] and by_name["phone"]["prefix"] == phone[:8]
    assert by_name["laptop"]["last_used_at"] is None  # never used
    assert by_name["phone"]["last_used_at"].startswith((start + timedelta(hours=2)).strftime("%Y-%m-%dT%H:%M"))
    assert by_name["laptop"]["created_at"].startswith(start.strftime("%Y-%m-%dT%H:%M"))
    # written as every other answer writes a time: the agents' created_at, a change's, an export's
    assert by_name["laptop"]["created_at"] == start.isoformat() and start.isoformat().endswith("+00:00")
    assert by_name["phone"]["last_used_at"].endswith("+00:00")
    agent = client_with(phone).post("/api/chats/agents", {"name": "Chef"}, format="json").json()
    assert agent["created_at"].endswith("+00:00")
    assert laptop not in response.content.decode() and phone not in response.content.decode()


def test_a_session_lists_the_tokens_with_none_of_them_current(owner):
    token_create(user=owner, name="laptop")
    client = APIClient()
    client.force_login(owner)
    tokens = client.get("/api/auth/tokens").json()["tokens"]
    assert [(t["name"], t["current"]) for t in tokens] == [("laptop", False)]


def test_a_revoked_token_is_refused_on_its_next_call(owner):
    keep, revoke = token_create(user=owner, name="keep"), token_create(user=owner, name="revoke")
    revoked_client = client_with(revoke)
    assert revoked_client.get("/api/chats/memory").status_code == 200
    revoke_id = ApiToken.objects.get(user=owner, name="revoke").pk

    response = client_with(keep).delete(f"/api/auth/tokens/{revoke_id}")

    assert response.status_code == 204
    assert_error(revoked_client.get("/api/chats/memory"), 401, "authentication_failed")
    assert_error(client_with(revoke).post("/v1/chat/completions", {"messages": []}, format="json"), 401)
    assert client_with(keep).get("/api/chats/memory").status_code == 200
    assert [t["name"] for t in client_with(keep).get("/api/auth/tokens").json()["tokens"]] == ["keep"]


def test_a_token_may_revoke_itself(owner):
    key = token_create(user=owner)
    client = client_with(key)
    (own,) = client.get("/api/auth/tokens").json()["tokens"]
    assert client.delete(f"/api/auth/tokens/{own['id']}").status_code == 204
    assert_error(client.get("/api/auth/tokens"), 401)
    assert not ApiToken.objects.filter(user=owner).exists()


def test_another_users_token_is_a_404_and_keeps_working(owner, outsider):
    alices = token_create(user=owner, name="alice's laptop")
    alices_id = ApiToken.objects.get(user=owner).pk
    mallory = client_with(token_create(user=outsider))

    error = assert_error(mallory.delete(f"/api/auth/tokens/{alices_id}"), 404, "not_found")

    assert "alice" not in error["message"]
    assert client_with(alices).get("/api/chats/memory").status_code == 200
    assert ApiToken.objects.filter(pk=alices_id).exists()
    assert [t["current"] for t in mallory.get("/api/auth/tokens").json()["tokens"]] == [True]  # only her own


def test_a_token_that_does_not_exist_is_a_404(owner):
    client = client_with(token_create(user=owner))
    assert_error(client.delete("/api/auth/tokens/999999999"), 404, "not_found")
    assert len(client.get("/api/auth/tokens").json()["tokens"]) == 1


def test_anonymous_callers_get_no_list_and_revoke_nothing(owner, anon_api):
    token_create(user=owner)
    token_id = ApiToken.objects.get(user=owner).pk
    assert_error(anon_api.get("/api/auth/tokens"), 401, "not_authenticated")
    assert_error(anon_api.delete(f"/api/auth/tokens/{token_id}"), 401, "not_authenticated")
    assert ApiToken.objects.filter(pk=token_id).exists()
