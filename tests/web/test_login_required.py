"""Every page asks a visitor to log in first, and comes back to where they were going: the page a form was on
when its session ended (never the form's POST-only address), as a whole page for an htmx request."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from localai_memory.web.urls import urlpatterns

from .conftest import PASSWORD, signed_in

PAGES = ["/", "/settings/memory/", "/settings/memory/export/", "/settings/memory/forget/", "/chats/", "/chats/1/",
         "/inbox/", "/files/", "/files/trash/", "/files/open/?path=Memory/index.md", "/agents/", "/agents/new/",
         "/agents/1/", "/bridges/", "/account/"]


@pytest.mark.parametrize("path", PAGES)
def test_a_visitor_who_is_not_logged_in_is_sent_to_the_login_page(client, db, path):
    response = client.get(path)
    assert response.status_code == 302
    assert response["Location"].startswith("/login/?next=")


def test_a_page_opened_after_the_session_ended_comes_back_to_itself(client, db):
    response = client.get("/files/open/?path=Memory/index.md")

    assert response["Location"] == "/login/?next=/files/open/%3Fpath%3DMemory/index.md"


@pytest.mark.parametrize(("action", "data"), [("/chats/7/send/", {"content": "Are you there?"}),
                                              ("/inbox/3/confirm/", {"next": "/chats/7/"})])
def test_an_htmx_request_after_the_session_ended_moves_the_whole_page_to_the_login_page(client, db, action, data):
    """Not a 302 that htmx would follow and swap the log-in page into the conversation or the card."""
    response = client.post(action, data, HTTP_HX_REQUEST="true",
                           HTTP_HX_CURRENT_URL="http://testserver/chats/7/")

    assert response.status_code == 401
    assert response["HX-Redirect"] == "/login/?next=/chats/7/"
    assert b"<main" not in response.content


def test_a_form_refused_because_the_session_ended_comes_back_to_the_page_it_was_on(client, make_user):
    make_user("alice")
    response = client.post("/settings/memory/notes/add/", {"scope": "user", "summary": "I live in Rome"},
                           HTTP_REFERER="http://testserver/settings/memory/?tab=yours")

    assert response.status_code == 302
    assert response["Location"] == "/login/?next=/settings/memory/%3Ftab%3Dyours"
    logged_in = client.post("/login/", {"username": "alice", "password": PASSWORD,
                                        "next": "/settings/memory/?tab=yours"})
    assert logged_in["Location"] == "/settings/memory/?tab=yours"
    assert client.get(logged_in["Location"]).status_code == 200


@pytest.mark.parametrize(("referer", "data", "page"), [
    (None, {"next": "/settings/memory/?tab=yours#notes"}, "/settings/memory/?tab=yours#notes"),  # the form's next
    ("https://elsewhere.example/settings/", {}, "/settings/memory/"),  # not ours: the address's page
    (None, {"next": "https://elsewhere.example/"}, "/settings/memory/"),
    (None, {}, "/settings/memory/"),
])
def test_without_a_referer_of_ours_the_form_comes_back_to_its_next_or_the_page_of_its_address(
        client, db, referer, data, page):
    headers = {"HTTP_REFERER": referer} if referer else {}

    response = client.post("/settings/memory/notes/add/", data, **headers)

    assert response.status_code == 302
    assert Client().get(response["Location"]).context["next"] == page


@pytest.mark.parametrize(("address", "page"), [("/chats/7/send/", "/chats/7/"), ("/inbox/3/confirm/", "/inbox/"),
                                               ("/changes/5/undo/", "/"), ("/account/tokens/new/", "/account/"),
                                               ("/files/trash/4/restore/", "/files/trash/")])
def test_the_page_of_a_post_only_address_is_its_nearest_page(client, db, address, page):
    response = client.post(address)

    assert Client().get(response["Location"]).context["next"] == page


def _example(route: str) -> str:
    return "/" + re.sub(r"<int:\w+>", "1", re.sub(r"<str:\w+>", "x", route))


WEB_ADDRESSES = [_example(str(pattern.pattern)) for pattern in urlpatterns]


@pytest.mark.parametrize("address", WEB_ADDRESSES)
def test_no_address_of_the_web_app_opened_by_a_logged_in_person_is_a_blank_405(owner, address):
    """A POST-only address (a ``next`` from before, a bookmark) goes to its page."""
    response = signed_in(owner).get(address)

    assert response.status_code != 405


def test_a_post_only_address_opened_with_get_goes_to_its_page(owner):
    client = signed_in(owner)

    assert client.get("/settings/memory/notes/add/")["Location"] == "/settings/memory/"
    assert client.get("/files/history/restore/?path=Memory/index.md")["Location"] == "/files/history/?path=Memory/index.md"
    assert client.post("/settings/memory/notes/add/").status_code != 405  # its own method is untouched


def test_the_login_form_posts_to_the_login_page_wherever_it_is_shown(client, db):
    assert '<form method="post" action="/login/">' in client.get("/login/?next=/chats/").content.decode()
