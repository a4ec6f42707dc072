"""The Account page (``/account/``): a person changes their password, makes and revokes API tokens, and
deletes their account, with no administrator.

The forms are tested through Django's test client; two browser tests click through the page as a person would.
"""

from __future__ import annotations

import re
import secrets

import pytest
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.test import Client
from playwright.sync_api import expect

from localai_memory.accounts.models import ApiToken
from localai_memory.accounts.services import token_create
from localai_memory.agents.models import Agent
from localai_memory.chats.models import Chat
from localai_memory.growth.services import memory_leftovers
from localai_memory.notes.paths import Scope
from localai_memory.notes.selectors import index_text
from localai_memory.notes.services import note_upsert

from .conftest import PASSWORD, signed_in
from .test_admin import alice_with_memory  # noqa: F401  (the fixture: notes, Trash, a suggestion, agent, chat, bot)

NEW_PASSWORD = "purple elephant marmalade 42"


def api_status(key: str) -> int:
    client = Client()
    return client.get("/api/chats/memory", HTTP_AUTHORIZATION=f"Token {key}").status_code


def logged_in_as(client: Client) -> str | None:
    response = client.get("/account/")
    return response.context["user"].get_username() if response.status_code == 200 else None


# --- password ---------------------------------------------------------------------------------------------


def test_a_wrong_current_password_is_refused_on_the_form_and_changes_nothing(owner):
    key = token_create(user=owner)
    client = signed_in(owner)

    response = client.post("/account/password/", {"current_password": "not it", "new_password": NEW_PASSWORD,
                                                  "new_password2": NEW_PASSWORD, "revoke_tokens": "on"})

    assert response.status_code == 400
    assert "Your current password is not right." in response.content.decode()
    owner.refresh_from_db()
    assert owner.check_password(PASSWORD)
    assert api_status(key) == 200


@pytest.mark.parametrize("new,again,says", [
    ("short", "short", "This password is too short."),
    ("password123", "password123", "This password is too common."),
    (NEW_PASSWORD, NEW_PASSWORD + "!", "The two new passwords differ."),
])
def test_a_new_password_the_validators_refuse_or_mistyped_is_refused(owner, new, again, says):
    response = signed_in(owner).post("/account/password/", {
        "current_password": PASSWORD, "new_password": new, "new_password2": again})
    assert response.status_code == 400
    assert says in response.content.decode()
    owner.refresh_from_db()
    assert owner.check_password(PASSWORD)


def test_a_password_change_keeps_this_browser_logs_out_the_others_and_revokes_every_token(owner, outsider):
    here, elsewhere = signed_in(owner), Client()
    assert elsewhere.login(username="alice", password=PASSWORD)
    keys = [token_create(user=owner, name="laptop"), token_create(user=owner, name="phone")]
    mallorys = token_create(user=outsider)

    response = here.post("/account/password/", {"current_password": PASSWORD, "new_password": NEW_PASSWORD,
                                                "new_password2": NEW_PASSWORD, "revoke_tokens": "on"}, follow=True)

    assert response.status_code == 200
    text = response.content.decode()
    assert "Your password was changed." in text and "2 API tokens were revoked." in text
    assert logged_in_as(here) == "alice"
    assert elsewhere.get("/account/")["Location"].startswith("/login/")
    assert [api_status(key) for key in keys] == [401, 401]
    assert api_status(mallorys) == 200
    owner.refresh_from_db()
    assert owner.check_password(NEW_PASSWORD)


def test_unticking_the_box_changes_the_password_and_keeps_the_tokens(owner):
    key = token_create(user=owner)
    client = signed_in(owner)
    assert 'name="revoke_tokens" checked' in client.get("/account/").content.decode()  # ticked unless unticked

    response = client.post("/account/password/", {"current_password": PASSWORD, "new_password": NEW_PASSWORD,
                                                  "new_password2": NEW_PASSWORD})

    assert response.status_code == 302
    assert api_status(key) == 200
    assert logged_in_as(client) == "alice"


def test_password_tries_here_count_against_the_log_in_pages_budget(owner, settings):
    """A stolen session cannot guess the password here faster than at the log-in page."""
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"auth": "3/min"}}
    address = f"10.251.{secrets.randbelow(256)}.{secrets.randbelow(256)}"
    cache.delete(f"throttle_auth_{address}")
    client = Client(REMOTE_ADDR=address)
    client.force_login(owner)
    right = {"current_password": PASSWORD, "new_password": NEW_PASSWORD, "new_password2": NEW_PASSWORD}

    statuses = [client.post("/account/password/", {**right, "current_password": f"guess {n}"}).status_code
                for n in range(3)]
    refused = client.post("/account/password/", right)
    deleting = client.post("/account/delete/", {"password": PASSWORD, "username": "alice"})

    assert statuses == [400, 400, 400]
    assert refused.status_code == 429 and int(refused["Retry-After"]) > 0
    assert "Too many tries from your address." in refused.content.decode()
    assert deleting.status_code == 429
    owner.refresh_from_db()
    assert owner.check_password(PASSWORD)


# --- tokens -----------------------------------------------------------------------------------------------


def test_a_new_token_is_shown_once_and_is_listed_by_its_first_characters_only(owner):
    client = signed_in(owner)

    made = client.post("/account/tokens/new/", {"name": "laptop assistant"}, follow=True)

    assert made.redirect_chain == [("/account/", 302)]  # a reload of the page shows it, it does not make one more
    assert made["Cache-Control"] == "no-store"
    token = ApiToken.objects.get(user=owner)
    key = made.context["new_token"]["key"]
    assert key in made.content.decode() and "shown only this once" in made.content.decode()
    page = client.get("/account/").content.decode()  # the reload
    assert key not in page and ApiToken.objects.filter(user=owner).count() == 1
    assert "laptop assistant" in page and f"<code>{token.prefix}…</code>" in page
    assert '<span class="muted">never</span>' in page
    assert api_status(key) == 200


def test_a_token_without_a_name_is_refused(owner):
    response = signed_in(owner).post("/account/tokens/new/", {"name": "   "})
    assert response.status_code == 400
    assert "Give the token a name" in response.content.decode()
    assert not ApiToken.objects.filter(user=owner).exists()


@pytest.mark.parametrize(("typed", "kept"), [("family 👨\u200d👩\u200d👧 laptop", "family 👨\u200d👩\u200d👧 laptop"),
                                           ("work\u00a0phone", "work phone"), ("a\nb\u202e", "a b")])
def test_a_token_name_is_kept_as_one_printable_line(owner, typed, kept):
    response = signed_in(owner).post("/account/tokens/new/", {"name": typed})
    assert response.status_code == 302
    assert ApiToken.objects.get(user=owner).name == kept


def test_revoke_and_revoke_all_stop_the_tokens_at_once(owner, outsider):
    laptop, phone, tablet = (token_create(user=owner, name=name) for name in ("laptop", "phone", "tablet"))
    mallorys = token_create(user=outsider)
    client = signed_in(owner)

    response = client.post(f"/account/tokens/{ApiToken.objects.get(user=owner, name='laptop').pk}/revoke/",
                           follow=True)
    assert "Revoked the token “laptop”" in response.content.decode()
    assert [api_status(key) for key in (laptop, phone, tablet)] == [401, 200, 200]

    response = client.post("/account/tokens/revoke-all/", follow=True)
    assert "Revoked 2 API tokens." in response.content.decode()
    assert [api_status(key) for key in (phone, tablet)] == [401, 401]
    assert api_status(mallorys) == 200
    assert logged_in_as(client) == "alice"


def test_another_users_token_cannot_be_revoked_from_the_page(owner, outsider):
    alices = token_create(user=owner, name="alice's laptop")
    url = f"/account/tokens/{ApiToken.objects.get(user=owner).pk}/revoke/"
    response = signed_in(outsider).post(url)
    assert response.status_code == 404 and "alice" not in response.content.decode()
    assert api_status(alices) == 200
    assert "alice&#x27;s laptop" not in signed_in(outsider).get("/account/").content.decode()
    assert signed_in(owner).post(url).status_code == 302  # the id is real: the 404 is about whose it is
    assert api_status(alices) == 401


# --- deleting the account ---------------------------------------------------------------------------------


def everything_of(user) -> tuple:
    return (memory_leftovers(owner_id=user.pk), Agent.objects.filter(owner=user).count(),
            Chat.objects.filter(owner=user).count(), ApiToken.objects.filter(user=user).count())


@pytest.mark.parametrize("password,username", [("not my password", "alice"), (PASSWORD, "Alice"),
                                               (PASSWORD, ""), ("", "alice")])
def test_deleting_the_account_is_refused_without_the_password_and_the_username(
        alice_with_memory, password, username):  # noqa: F811
    before = everything_of(alice_with_memory)
    assert before[0] and all(before[1:])
    client = signed_in(alice_with_memory)

    response = client.post("/account/delete/", {"password": password, "username": username})

    assert response.status_code == 400
    assert "nothing was deleted" in response.content.decode()
    assert get_user_model().objects.filter(pk=alice_with_memory.pk).exists()
    assert everything_of(alice_with_memory) == before
    assert logged_in_as(client) == "alice"


def test_deleting_the_account_erases_everything_of_it_and_nothing_of_anyone_else(
        alice_with_memory, make_user, django_capture_on_commit_callbacks):  # noqa: F811
    bob = make_user("bob")
    note_upsert(owner_id=bob.pk, scope=Scope.user(), topic="home", summary="lives in Oslo", source="files")
    bobs_key = token_create(user=bob)
    bobs_before = everything_of(bob)
    alice_id = alice_with_memory.pk
    client = signed_in(alice_with_memory)
    alices_key = token_create(user=alice_with_memory)

    with django_capture_on_commit_callbacks(execute=True):
        response = client.post("/account/delete/", {"password": PASSWORD, "username": "alice"})

    assert response.status_code == 302 and response["Location"] == "/login/#main"
    login = client.get("/login/")
    assert "Your account and everything in it were deleted." in login.content.decode()
    assert not login.context["user"].is_authenticated
    assert not get_user_model().objects.filter(pk=alice_id).exists()
    assert memory_leftovers(owner_id=alice_id) == {}
    assert not Agent.objects.filter(owner_id=alice_id).exists() and not Chat.objects.filter(owner_id=alice_id).exists()
    assert not ApiToken.objects.filter(user_id=alice_id).exists() and api_status(alices_key) == 401
    assert everything_of(bob) == bobs_before and api_status(bobs_key) == 200
    assert "lives in Oslo" in index_text(owner_id=bob.pk, scope=Scope.user())


# --- in the browser ---------------------------------------------------------------------------------------


@pytest.mark.browser
def test_a_token_is_made_shown_once_and_revoked_from_the_account_page(web):
    web.register("alice")
    page = web.page
    page.get_by_role("link", name="Account").click()
    expect(page.get_by_role("heading", name="Account", level=1)).to_be_visible()
    expect(page.get_by_text("No API tokens.")).to_be_visible()

    page.get_by_label("Name of a new token").fill("laptop assistant")
    page.get_by_role("button", name="Make a token").click()
    shown = page.get_by_label("Token", exact=True)
    expect(shown).to_be_visible()
    expect(page.get_by_text("Copy it now: it is shown only this once")).to_be_visible()
    key = shown.input_value()
    assert key.startswith("lm_")
    row = page.get_by_role("row", name="laptop assistant")
    expect(row).to_contain_text(f"{key[:8]}…")
    expect(row).to_contain_text("never")
    web.accessible("account with a new token")
    web.screenshot("new-token")
    api = web.base_url + "/api/chats/memory"
    assert page.request.get(api, headers={"Authorization": f"Token {key}"}).status == 200

    web.go("/account/")  # never shown again
    expect(page.get_by_label("Token", exact=True)).to_have_count(0)
    assert key not in page.content()
    row = page.get_by_role("row", name="laptop assistant")
    expect(row.locator("time[data-local]").first).to_have_attribute("title", re.compile(r" UTC$"))  # localised
    row.get_by_role("button", name="Revoke laptop assistant").click()
    expect(page.get_by_text("Revoked the token “laptop assistant”")).to_be_visible()
    expect(page.get_by_role("row", name="laptop assistant")).to_have_count(0)
    assert page.request.get(api, headers={"Authorization": f"Token {key}"}).status == 401


@pytest.mark.browser
def test_the_password_is_changed_on_the_account_page_and_the_old_one_stops_working(web):
    web.register("alice")
    page = web.page
    web.go("/account/")
    web.accessible("account")
    page.get_by_label("Current password").fill("not my password")
    page.get_by_label("New password", exact=True).fill(NEW_PASSWORD)
    page.get_by_label("New password again").fill(NEW_PASSWORD)
    page.get_by_role("button", name="Change password").click()
    expect(page.get_by_role("alert")).to_have_text("Your current password is not right.")
    web.accessible("account with a refused password")
    expect(page.get_by_label("Also revoke every API token (clients using them must log in again)")).to_be_checked()

    page.get_by_label("Current password").fill(PASSWORD)
    page.get_by_label("New password", exact=True).fill(NEW_PASSWORD)
    page.get_by_label("New password again").fill(NEW_PASSWORD)
    page.get_by_role("button", name="Change password").click()
    expect(page.get_by_text("Your password was changed.")).to_be_visible()
    web.go("/chats/")  # still logged in here
    expect(page.get_by_role("button", name="Log out")).to_be_visible()
    web.logout()
    page.get_by_label("Username").fill("alice")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_text("Wrong username or password.")).to_be_visible()
    web.login("alice", NEW_PASSWORD)
