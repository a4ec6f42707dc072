"""API tokens and sign-up: obtain, register while open signup is on, throttling, hashed storage, 401s."""

from __future__ import annotations

import secrets
from datetime import timedelta

import pytest
import time_machine
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.db import connection
from django.utils import timezone
from rest_framework.test import APIClient

from localai_memory.accounts.models import ApiToken

from .conftest import PUBLIC_ROUTES, api_routes, assert_error, fill_route

PASSWORD = "correct horse battery staple"


def fresh_client() -> APIClient:
    """A client from an address of its own with no throttling history (Redis outlives a test session)."""
    n = secrets.randbits(24)
    address = f"10.{n >> 16}.{(n >> 8) & 255}.{n & 255}"
    cache.delete_many([f"throttle_auth_{address}"])
    return APIClient(REMOTE_ADDR=address)


def obtain(client: APIClient, username: str, password: str):
    return client.post("/api/auth/token", {"username": username, "password": password}, format="json")


def test_good_credentials_get_a_token_that_opens_the_api(owner):
    client = fresh_client()
    response = obtain(client, "alice", PASSWORD)
    assert response.status_code == 200
    token = response.json()["token"]
    assert set(response.json()) == {"token"}
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    assert client.get("/api/chats/memory").status_code == 200


def test_a_bearer_header_works_too(owner):
    client = fresh_client()
    token = obtain(client, "alice", PASSWORD).json()["token"]
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    assert client.get("/api/chats/memory").status_code == 200


@pytest.mark.parametrize("username,password", [("alice", "wrong password"), ("nobody", PASSWORD),
                                               ("ALICE", PASSWORD), ("alice", "")])
def test_bad_credentials_get_no_token(owner, username, password):
    response = obtain(fresh_client(), username, password)
    assert_error(response, 400)
    assert "token" not in response.json()
    assert not ApiToken.objects.exists()


def test_an_inactive_user_gets_no_token_and_their_old_token_stops_working(owner):
    client = fresh_client()
    token = obtain(client, "alice", PASSWORD).json()["token"]
    get_user_model().objects.filter(pk=owner.pk).update(is_active=False)
    assert_error(obtain(fresh_client(), "alice", PASSWORD), 400, "invalid_credentials")
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    assert_error(client.get("/api/chats/memory"), 401)


def test_tokens_are_stored_hashed_and_never_in_plain_text(owner):
    token = obtain(fresh_client(), "alice", PASSWORD).json()["token"]
    row = ApiToken.objects.get(user=owner)
    assert row.key_hash != token and token not in row.key_hash
    assert len(row.key_hash) == 64
    assert token.startswith(row.prefix) and len(row.prefix) < len(token) // 4
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT * FROM {ApiToken._meta.db_table}")
        stored = " ".join(str(value) for record in cursor.fetchall() for value in record)
    assert token not in stored
    assert token[8:20] not in stored


def test_a_tokens_last_use_is_recorded_at_most_once_a_minute(owner):
    token = obtain(fresh_client(), "alice", PASSWORD).json()["token"]
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    start = timezone.now().replace(microsecond=0)

    def used_at(moment):
        with time_machine.travel(moment, tick=False):
            assert client.get("/api/chats/memory").status_code == 200
        return ApiToken.objects.get(user=owner).last_used_at

    assert ApiToken.objects.get(user=owner).last_used_at is None
    assert used_at(start) == start  # written once the response was sent
    assert used_at(start + timedelta(seconds=30)) == start
    assert used_at(start + timedelta(seconds=61)) == start + timedelta(seconds=61)


def test_each_obtain_makes_a_new_token_and_both_work(owner):
    client = fresh_client()
    first = obtain(client, "alice", PASSWORD).json()["token"]
    second = obtain(client, "alice", PASSWORD).json()["token"]
    assert first != second
    for token in (first, second):
        user_client = APIClient()
        user_client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
        assert user_client.get("/api/chats/memory").status_code == 200


def test_signup_works_while_open_signup_is_on(db, settings):
    settings.OPEN_SIGNUP = True
    client = fresh_client()
    response = client.post("/api/auth/register", {"username": "newbie", "password": PASSWORD}, format="json")
    assert response.status_code == 201
    client.credentials(HTTP_AUTHORIZATION=f"Token {response.json()['token']}")
    assert client.get("/api/chats/memory").json()["enabled"] is True
    assert obtain(fresh_client(), "newbie", PASSWORD).status_code == 200


def test_signup_is_refused_while_open_signup_is_off(db, settings):
    settings.OPEN_SIGNUP = False
    response = fresh_client().post("/api/auth/register", {"username": "newbie", "password": PASSWORD},
                                   format="json")
    assert_error(response, 403, "signup_closed")
    assert not get_user_model().objects.filter(username="newbie").exists()


def test_signup_refuses_a_taken_name_and_a_weak_password(owner, settings):
    settings.OPEN_SIGNUP = True
    client = fresh_client()
    for taken in ("alice", "ALICE", "Alice"):  # one person, however it is written
        assert_error(client.post("/api/auth/register", {"username": taken, "password": PASSWORD}, format="json"),
                     409, "username_taken")
    assert_error(client.post("/api/auth/register", {"username": "bob", "password": "123"}, format="json"),
                 400, "weak_password")
    assert_error(client.post("/api/auth/register", {"username": "b o b", "password": PASSWORD}, format="json"),
                 400, "invalid_username")
    assert not get_user_model().objects.filter(username__in=["bob", "b o b"]).exists()


@pytest.fixture
def three_per_minute(settings):
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"auth": "3/min"}}


@pytest.mark.parametrize("route", ["/api/auth/token", "/api/auth/register"])
def test_token_and_register_are_throttled_with_retry_after(owner, settings, three_per_minute, route):
    settings.OPEN_SIGNUP = True
    client = fresh_client()
    statuses = [client.post(route, {"username": "alice", "password": "wrong"}, format="json").status_code
                for _ in range(3)]
    assert 429 not in statuses
    response = client.post(route, {"username": "alice", "password": PASSWORD}, format="json")
    assert_error(response, 429, "throttled")
    assert int(response["Retry-After"]) > 0
    assert "token" not in response.json()
    # another address is not affected
    assert obtain(fresh_client(), "alice", PASSWORD).status_code == 200


@pytest.mark.parametrize("method,route", [r for r in api_routes() if r[1] not in PUBLIC_ROUTES])
def test_anonymous_requests_get_a_json_401_on_every_api_route(anon_api, method, route):
    response = anon_api.generic(method, fill_route(route), b"{}", content_type="application/json")
    assert_error(response, 401, "not_authenticated")
    assert response["WWW-Authenticate"].startswith("Token")


@pytest.mark.parametrize("header", ["Token lm_not-a-real-key", "Token ", "Token a b", "Bearer x",
                                    "Token \u00e9\u00e9", "token lm_wrong"])
def test_a_wrong_token_is_a_401(db, header):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=header)
    assert_error(client.get("/api/chats/memory"), 401)


@pytest.mark.parametrize("method,route", [r for r in api_routes() if r[1] not in PUBLIC_ROUTES])
def test_a_wrong_token_is_a_401_on_every_api_route(db, method, route):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token lm_not-a-real-key")
    response = client.generic(method, fill_route(route), b"{}", content_type="application/json")
    assert_error(response, 401, "authentication_failed")


def test_the_auth_routes_refuse_get(db):
    assert_error(fresh_client().get("/api/auth/token"), 405)


@pytest.mark.django_db(transaction=True)
def test_two_signups_of_one_name_at_the_same_moment_make_one_account(settings):
    """While another sign-up of "Alice" is between its check and its commit, "alice" waits for it, then is
    refused: the check of the name and the insert take turns, however the name is written."""
    import threading

    import psycopg

    from localai_memory.accounts.services import user_register
    from localai_memory.core.errors import Conflict

    connection.ensure_connection()
    info = connection.connection.info
    other = psycopg.connect(host=info.host, port=info.port, dbname=info.dbname, user=info.user,
                            password=connection.settings_dict.get("PASSWORD") or None, autocommit=False)
    outcome: list[object] = []

    def second_signup() -> None:
        try:
            outcome.append(user_register(username="alice", password=PASSWORD))
        except Conflict as exc:
            outcome.append(exc.code)
        finally:
            from django.db import connection as thread_connection
            thread_connection.close()

    try:
        with other.cursor() as cursor:  # the first sign-up, under the service's lock, not committed yet
            cursor.execute("SELECT pg_advisory_xact_lock(%s, hashtext(upper(%s)))", [0x4C55, "Alice"])
            cursor.execute(
                "INSERT INTO auth_user (username, password, is_superuser, first_name, last_name, email, is_staff,"
                " is_active, date_joined) VALUES ('Alice', '!', false, '', '', '', false, true, now())")
        waiter = threading.Thread(target=second_signup)
        waiter.start()
        with psycopg.connect(host=info.host, port=info.port, dbname=info.dbname, user=info.user,
                             password=connection.settings_dict.get("PASSWORD") or None, autocommit=True) as watch:
            for _ in range(2000):  # until the second sign-up waits on the lock (or has already gone by)
                waiting = watch.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
                                        ).fetchone()[0]
                if waiting or not waiter.is_alive():
                    break
                waiter.join(0.005)
        assert not outcome, "the second sign-up went ahead while the first was still being made"
        other.commit()
        waiter.join(10)
    finally:
        other.close()
    assert outcome == ["username_taken"]
    assert list(get_user_model().objects.filter(username__iexact="alice").values_list("username", flat=True)) \
        == ["Alice"]
