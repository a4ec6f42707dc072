"""A password set for somebody — by an administrator in the admin, or with ``manage.py changepassword`` — revokes
every API token of theirs and ends their sessions, as the Account page's change does by default."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from localai_memory.accounts.services import token_create

from .conftest import PASSWORD, signed_in

NEW_PASSWORD = "purple elephant marmalade 42"


def api_status(key: str) -> int:
    return Client().get("/api/chats/memory", HTTP_AUTHORIZATION=f"Token {key}").status_code


def logged_in(client: Client) -> bool:
    return client.get("/account/").status_code == 200


@pytest.mark.parametrize("how", ["a new password", "password log-in off"])
def test_a_password_reset_in_the_admin_revokes_every_token_and_ends_every_session(client, operator, owner,
                                                                                  outsider, how):
    keys = [token_create(user=owner, name="laptop"), token_create(user=owner, name="mcp")]
    mallorys = token_create(user=outsider)
    browser = signed_in(owner)
    url = reverse("admin:auth_user_password_change", args=[owner.pk])
    page = client.get(url).content.decode()
    assert "Saving also revokes every API token of this user" in page and "logs them out" in page
    if how == "a new password":
        form = {"usable_password": "true", "password1": NEW_PASSWORD, "password2": NEW_PASSWORD}
    else:
        form = {"usable_password": "false", "unset-password": "1"}

    response = client.post(url, form, follow=True)

    assert response.status_code == 200
    said = [str(message) for message in response.context["messages"]]
    assert "Every API token of the user was revoked, and every session of theirs ended." in said
    assert [api_status(key) for key in keys] == [401, 401]
    assert not logged_in(browser)
    assert api_status(mallorys) == 200
    owner.refresh_from_db()
    assert owner.check_password(NEW_PASSWORD) if how == "a new password" else not owner.has_usable_password()


def test_a_reset_the_admin_refuses_changes_nothing(client, operator, owner):
    key = token_create(user=owner)
    response = client.post(reverse("admin:auth_user_password_change", args=[owner.pk]),
                           {"password1": NEW_PASSWORD, "password2": "something else entirely"})
    assert response.status_code == 200 and "didn’t match" in response.content.decode()
    assert api_status(key) == 200
    owner.refresh_from_db()
    assert owner.check_password(PASSWORD)


def test_manage_py_changepassword_revokes_every_token_and_ends_every_session(owner, monkeypatch):
    import getpass

    key = token_create(user=owner)
    browser = signed_in(owner)
    monkeypatch.setattr(getpass, "getpass", lambda prompt="": NEW_PASSWORD)  # what the operator types, twice

    call_command("changepassword", "alice")

    assert api_status(key) == 401
    assert not logged_in(browser)
    owner.refresh_from_db()
    assert owner.check_password(NEW_PASSWORD)


def test_logging_in_keeps_the_tokens_when_django_upgrades_the_password_hash(owner, settings):
    """A hash saved again in a newer form at log-in is no new password."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher",
                                 "django.contrib.auth.hashers.MD5PasswordHasher"]
    old_hash = owner.password
    key = token_create(user=owner)

    assert Client().login(username="alice", password=PASSWORD)

    owner.refresh_from_db()
    assert owner.password != old_hash and api_status(key) == 200
