"""A second user never sees the first one's things; every page is accessible, has CSRF on its forms, and fits a
phone."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import expect

from localai_memory.agents.models import Agent
from localai_memory.chats.models import Chat
from localai_memory.memory.models import Proposal
from localai_memory.notes.models import TrashEntry
from tests.fakes.openai_server import reply, tool_calls

from .test_chat import new_chat, send
from .test_files import create_file
from .test_memory_tab import add_note

pytestmark = pytest.mark.browser


def alice_has_everything(web, model) -> None:
    """Alice: a note, an agent with its own note, a chat with a waiting proposal, something in the Trash."""
    page = web.page
    web.register("alice")
    add_note(web, "home", "alice lives in Rome")
    web.go("/agents/new/")
    page.get_by_label("Name").fill("Alice's cook")
    page.get_by_role("button", name="Save agent").click()
    expect(page.get_by_text("Saved the agent “Alice's cook”.")).to_be_visible()
    create_file(web, "Memory/secret-plans.md", "alice's plans\n")
    page.get_by_role("button", name="Move to Trash").click()
    model.script(tool_calls(("propose_change", {"kind": "memory", "topic": "diet", "summary": "alice eats fish"})),
                 reply("Noted for confirmation."))
    new_chat(web)
    send(web, "Alice's private chat")
    expect(page.get_by_role("article", name="Save to memory: “diet”")).to_be_visible()


def test_a_second_user_never_sees_the_first_users_notes_proposals_chats_or_agents(new_web, model):
    alice = new_web("alice")
    alice_has_everything(alice, model)
    owner = get_user_model().objects.get(username="alice")
    chat = Chat.objects.get(owner=owner)
    agent = Agent.objects.get(owner=owner)
    proposal = Proposal.objects.get(owner=owner)
    trash = TrashEntry.objects.get(owner=owner)

    bob = new_web("bob")
    bob.register("bob")
    page = bob.page
    expect(page.get_by_text("No notes yet — ask the assistant")).to_be_visible()
    expect(page.locator("body")).not_to_contain_text("alice")
    for path, empty in [("/chats/", "No chats yet"), ("/inbox/", "No proposals waiting"),
                        ("/agents/", "No agents yet"), ("/files/", "No notes yet"),
                        ("/files/trash/", "The Trash is empty"), ("/bridges/", "No bots yet")]:
        bob.go(path)
        expect(page.get_by_text(empty)).to_be_visible()
        expect(page.locator("main")).not_to_contain_text("lice")  # neither "Alice" nor "alice"
    # Alice's addresses are a 404 for Bob, never a 403 that would tell him they exist.
    for path in [f"/chats/{chat.pk}/", f"/agents/{agent.pk}/", f"/agents/{agent.pk}/delete/",
                 f"/agents/{agent.pk}/export/", "/files/open/?path=Memory/index.md",
                 "/files/history/?path=Memory/index.md", "/settings/memory/note/?path=Memory/index.md"]:
        response = page.request.get(bob.base_url + path)
        assert response.status == 404, path
        assert "lice" not in response.text(), path
    csrf = next(c["value"] for c in page.context.cookies() if c["name"] == "csrftoken")
    for path in [f"/inbox/{proposal.pk}/confirm/", f"/inbox/{proposal.pk}/reject/", f"/chats/{chat.pk}/send/",
                 f"/chats/{chat.pk}/memory/", f"/agents/{agent.pk}/delete/",
                 f"/files/trash/{trash.pk}/restore/"]:
        response = page.request.post(bob.base_url + path, headers={"X-CSRFToken": csrf, "Referer": bob.base_url},
                                     form={"content": "hi", "memory": "off"})
        assert response.status == 404, path
    bob.go(f"/chats/{chat.pk}/")
    expect(page.get_by_role("heading", name="Not found")).to_be_visible()
    # Nothing of Alice's changed.
    proposal.refresh_from_db()
    chat.refresh_from_db()
    assert proposal.status == "pending" and not chat.private
    assert Agent.objects.filter(pk=agent.pk).exists()
    assert TrashEntry.objects.get(pk=trash.pk).restored_at is None


def test_every_page_passes_axe_and_every_form_carries_a_csrf_token(web, model):
    alice_has_everything(web, model)
    page = web.page
    chat = Chat.objects.get(owner__username="alice")
    agent = Agent.objects.get(owner__username="alice")
    pages = ["/settings/memory/", f"/settings/memory/?tab=agent-{agent.pk}", "/settings/memory/?tab=deleted",
             "/settings/memory/note/?path=Memory/index.md", "/settings/memory/forget/", "/chats/",
             f"/chats/{chat.pk}/", "/inbox/", "/files/", "/files/open/?path=Memory/index.md",
             "/files/history/?path=Memory/index.md", "/files/trash/", "/agents/", "/agents/new/",
             f"/agents/{agent.pk}/", f"/agents/{agent.pk}/delete/", "/bridges/", "/account/"]
    for path in pages:
        web.go(path)
        expect(page.locator("h1")).to_have_count(1)
        # Open every disclosure so hidden forms are checked too.
        page.evaluate("() => document.querySelectorAll('details').forEach(d => d.open = true)")
        web.accessible(path)
        missing = page.evaluate("""() => [...document.querySelectorAll('form')]
            .filter(f => f.method.toLowerCase() === 'post' && !f.querySelector('input[name=csrfmiddlewaretoken]'))
            .map(f => f.action)""")
        assert missing == [], f"{path}: POST forms without a CSRF token: {missing}"
    web.logout()
    for path in ["/login/", "/register/"]:
        web.go(path)
        web.accessible(path)


def test_a_post_without_the_csrf_token_is_refused(web):
    web.register("alice")
    page = web.page
    response = page.request.post(web.base_url + "/settings/memory/switch/", form={"enabled": "off"})
    assert response.status == 403
    web.go("/settings/memory/")
    expect(page.get_by_role("switch", name="Memory")).to_have_attribute("aria-checked", "true")


def test_the_pages_fit_a_phone_screen(new_web, model):
    web = new_web("phone", viewport={"width": 390, "height": 844})
    alice_has_everything(web, model)
    page = web.page
    for path in ["/settings/memory/", "/chats/", "/inbox/", "/files/", "/agents/", "/agents/new/", "/bridges/",
                 "/account/"]:
        web.go(path)
        overflow = page.evaluate("() => document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 0, f"{path} scrolls sideways by {overflow}px on a phone"
        expect(page.get_by_role("navigation", name="Main").get_by_role("link", name="Memory")).to_be_visible()
    chat = Chat.objects.get(owner__username="alice")
    web.go(f"/chats/{chat.pk}/")
    expect(page.get_by_role("button", name="Send")).to_be_in_viewport()
    web.screenshot("chat")
    web.go("/settings/memory/")
