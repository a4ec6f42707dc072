"""A form that sends a field more than once does nothing and says so, on the page it was sent from.

A view reads a field with ``QueryDict.get``, which takes the last value: an agent's Delete sent with
``memory=keep`` and ``memory=delete`` moved its notes to the Trash. The API answers 400 ``repeated_parameter``;
the pages refuse the same, with a message, whichever form it is.
"""

from __future__ import annotations

import pytest
from django.urls import URLPattern, reverse
from django.urls.converters import IntConverter

from localai_memory.agents.models import Agent
from localai_memory.agents.services import agent_create
from localai_memory.memory.models import Proposal
from localai_memory.memory.proposals import proposal_create
from localai_memory.notes.models import NoteFile, TrashEntry
from localai_memory.notes.paths import Scope
from localai_memory.notes.services import file_write, note_upsert
from localai_memory.web.urls import urlpatterns

SAID = "more than once, so nothing was done. Send it again from this page."


@pytest.fixture
def alice_client(client, owner):
    client.force_login(owner)
    return client


def _text(response) -> str:
    return response.content.decode()


def test_an_agent_delete_that_sends_its_notes_choice_twice_deletes_nothing_and_says_so(alice_client, owner):
    agent = agent_create(owner_id=owner.pk, name="Cook")
    note_upsert(owner_id=owner.pk, scope=Scope.agent(agent.pk), topic="diet", summary="no nuts", source="files",
                actor="you")

    page = alice_client.post(f"/agents/{agent.pk}/delete/", {"memory": ["keep", "delete"]},
                             HTTP_REFERER=f"http://testserver/agents/{agent.pk}/delete/", follow=True)

    assert page.redirect_chain == [(f"/agents/{agent.pk}/delete/", 302)]  # back on the page it was sent from
    assert f"The form sent “memory” {SAID}" in _text(page)
    assert Agent.objects.filter(pk=agent.pk).exists()
    assert NoteFile.objects.filter(owner=owner, path__startswith=f"Memory/agents/{agent.pk}/").exists()
    assert not TrashEntry.objects.filter(owner=owner).exists()


def test_a_file_saved_with_its_path_twice_in_the_address_writes_neither_file(alice_client, owner):
    for path in ("Memory/home.md", "Memory/work.md"):
        file_write(owner_id=owner.pk, path=path, content=f"{path}\n", version=None)

    page = alice_client.post("/files/open/?path=Memory/home.md&path=Memory/work.md",
                             {"content": "Replaced.", "version": "1"}, follow=True)

    assert f"The form sent “path” {SAID}" in _text(page)
    assert sorted(NoteFile.objects.filter(owner=owner).values_list("path", "content")) == [
        ("Memory/home.md", "Memory/home.md\n"), ("Memory/work.md", "Memory/work.md\n")]


def test_a_note_form_says_so_beside_the_form_it_came_from(alice_client):
    """The message lands where the form's own messages land (the fragment of its ``next``)."""
    page = alice_client.post("/settings/memory/notes/add/",
                             {"scope": ["user", "user"], "topic": "home", "summary": "Rome",
                              "next": "/settings/memory/?tab=yours#notes"}, follow=True)

    assert page.redirect_chain == [("/settings/memory/?tab=yours#notes", 302)]
    notes_part = _text(page).split('id="notes"', 1)[1]
    assert f"The form sent “scope” {SAID}" in notes_part
    assert not NoteFile.objects.exists()


def test_an_answer_from_the_inbox_through_htmx_with_a_field_twice_leaves_the_suggestion_waiting(alice_client,
                                                                                                  owner):
    waiting = proposal_create(owner_id=owner.pk, scope=Scope.user(), topic="home", summary="lives in Rome")

    answered = alice_client.post(f"/inbox/{waiting.pk}/confirm/", {"next": "/inbox/", "swap": ["a", "b"]},
                                 HTTP_HX_REQUEST="true", HTTP_HX_CURRENT_URL="http://testserver/inbox/")

    assert answered.status_code == 400 and answered["HX-Redirect"] == "/inbox/"  # the whole page goes there
    assert Proposal.objects.get(pk=waiting.pk).status == Proposal.Status.PENDING
    assert f"The form sent “swap” {SAID}" in _text(alice_client.get("/inbox/"))


def test_in_the_browser_a_card_whose_form_was_made_to_send_a_field_twice_saves_nothing_and_the_page_says_so(web):
    """Through htmx, as the inbox's Save sends it: the whole page comes back with the message, not a page inside
    the card."""
    from django.contrib.auth import get_user_model
    from playwright.sync_api import expect

    web.register("alice")
    alice = get_user_model().objects.get(username="alice")
    waiting = proposal_create(owner_id=alice.pk, scope=Scope.user(), topic="home", summary="lives in Rome")
    page = web.go("/inbox/")
    page.evaluate("""() => {  // what an extension or a broken template could do
        const form = document.querySelector('form[action$="/confirm/"]');
        form.insertAdjacentHTML('beforeend', '<input type="hidden" name="next" value="/inbox/">');
    }""")

    page.get_by_role("button", name="Save the note home", exact=True).click()

    expect(page.get_by_text(f"The form sent “next” {SAID}")).to_be_visible()
    assert page.url.endswith("/inbox/") and page.locator("#proposal-" + str(waiting.pk)).count() == 1
    assert Proposal.objects.get(pk=waiting.pk).status == Proposal.Status.PENDING


def test_the_message_names_the_fields_and_never_their_values(alice_client):
    # values no random token on the page could hold (a CSRF token once held "n1")
    page = alice_client.post("/account/password/", {"current_password": ["hunter2 secret", "x"],
                                                     "new_password": ["first-new-pass", "second-new-pass"],
                                                     "new_password2": "second-new-pass"}, follow=True)

    assert f"The form sent “current_password”, “new_password” {SAID}" in _text(page)
    assert "hunter2" not in _text(page) and "first-new-pass" not in _text(page)


def test_a_person_logged_out_still_goes_to_log_in_first(client):
    response = client.post("/agents/new/", {"name": ["a", "b"]})

    assert response.status_code == 302 and response["Location"].startswith("/login/")


def _web_routes() -> list[URLPattern]:
    return [pattern for pattern in urlpatterns if isinstance(pattern, URLPattern)]


@pytest.mark.parametrize("route", _web_routes(), ids=lambda route: route.name)
def test_every_form_of_the_web_app_refuses_a_field_sent_twice(alice_client, owner, route):
    """The same rule on every page's form, also one added later: it is checked before any view runs."""
    agent = agent_create(owner_id=owner.pk, name="Cook")
    kwargs = {name: agent.pk if name == "agent_id" else 1 if isinstance(converter, IntConverter) else "abc"
              for name, converter in route.pattern.converters.items()}

    page = alice_client.post(reverse(route.name, kwargs=kwargs), {"name": ["Chef", "Sous-chef"]},
                             HTTP_REFERER="http://testserver/agents/", follow=True)

    assert page.redirect_chain == [("/agents/", 302)]
    assert f"The form sent “name” {SAID}" in _text(page)
    assert Agent.objects.get(pk=agent.pk).name == "Cook"
