"""A form from a page made stale by a log-out or log-in in another tab (its CSRF token no longer counts): a page
of the app that leads back, or for htmx an alert on top of a page left as it was; never Django's bare 403."""

from __future__ import annotations

from django.test import Client

from localai_memory.chats.services import chat_create


def stale_client(user) -> Client:
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    return client


def test_a_form_of_a_stale_page_gets_a_page_of_the_app_that_leads_back_to_the_form(owner):
    response = stale_client(owner).post("/settings/memory/notes/add/", {"scope": "user", "summary": "Rome"},
                                        HTTP_REFERER="http://testserver/settings/memory/?tab=yours")

    shown = response.content.decode()
    assert response.status_code == 403
    assert "CSRF verification failed" not in shown
    assert "<h1>This page was out of date</h1>" in shown
    assert "Your session changed in another tab" in shown
    assert '<a href="/settings/memory/?tab=yours">Back to the page</a>' in shown
    assert 'class="topbar"' in shown and "Log out" in shown  # the app's page, with its top bar


def test_an_htmx_request_of_a_stale_page_puts_an_alert_on_top_and_leaves_the_page_as_it_was(owner):
    chat = chat_create(owner_id=owner.pk)

    response = stale_client(owner).post(f"/chats/{chat.pk}/send/", {"content": "Hello?"}, HTTP_HX_REQUEST="true",
                                        HTTP_HX_CURRENT_URL=f"http://testserver/chats/{chat.pk}/")

    shown = response.content.decode()
    assert response.status_code == 403
    assert response["HX-Retarget"] == "#main" and response["HX-Reswap"] == "afterbegin"
    assert shown.startswith('<p class="notice error" role="alert" data-testid="stale-page">Your session changed')
    assert "<main" not in shown and "CSRF verification failed" not in shown


def test_a_next_that_a_browser_would_read_as_another_site_is_not_offered_as_the_way_back(owner):
    """"/\\evil.example/" is a path of ours to Python and "//evil.example/" to a browser: the way back is the
    form's own page instead."""
    for next_ in ("http://testserver/\\evil.example/", "/\\evil.example/", "http://testserver/\\/evil.example/"):
        response = stale_client(owner).post("/settings/memory/notes/add/", {"summary": "Rome", "next": next_})
        shown = response.content.decode()
        assert response.status_code == 403
        assert "evil.example" not in shown, next_
        assert '<a href="/settings/memory/">Back to the page</a>' in shown
