"""The inbox: every pending proposal, where it came from, the old text struck through and the new beside it."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
import time_machine
from django.utils import timezone
from playwright.sync_api import expect

from tests.fakes.openai_server import reply, tool_calls

from .test_chat import new_chat, send
from .test_memory_tab import add_note

pytestmark = pytest.mark.browser


def propose_in_a_chat(web, model, topic: str, summary: str, message: str) -> None:
    model.script(tool_calls(("propose_change", {"kind": "memory", "topic": topic, "summary": summary})),
                 reply("I'll keep it once you confirm."))
    new_chat(web)
    send(web, message)
    expect(web.page.get_by_role("article", name=f"Save to memory: “{topic}”")).to_be_visible()


def test_a_proposal_is_confirmed_from_the_inbox_with_the_old_text_struck_through(web, model):
    web.register("alice")
    page = web.page
    web.go("/inbox/")
    expect(page.get_by_text("No proposals waiting — when the assistant wants to remember something")).to_be_visible()
    web.accessible("inbox, empty")
    web.go("/settings/memory/")
    add_note(web, "home", "lives in Rome")
    propose_in_a_chat(web, model, "home", "lives in Milan", "I moved to Milan.")
    nav = page.get_by_role("navigation", name="Main")
    expect(nav.get_by_role("link", name=re.compile(r"^Inbox\s+1 waiting$"))).to_be_visible()
    nav.get_by_role("link", name=re.compile(r"^Inbox\s+1 waiting$")).click()
    expect(page.get_by_role("heading", name="Waiting for you (1)")).to_be_visible()
    card = page.get_by_role("article", name="Save to memory: “home”")
    expect(card).to_contain_text("Proposed in the chat “I moved to Milan.”")
    expect(card).to_contain_text("Goes to your notes")
    expect(card.locator("del")).to_have_text("lives in Rome")
    expect(card.locator("ins")).to_have_text("lives in Milan")
    expect(card).to_contain_text("Expires in 23")
    web.accessible("inbox with a proposal")
    card.get_by_role("button", name="Save the note home", exact=True).click()
    expect(card).to_contain_text("Saved to memory.")
    expect(page.get_by_role("heading", name="Waiting for you", exact=True)).to_be_visible()  # counted down
    web.go("/settings/memory/")
    expect(page.locator(".notes-list")).to_contain_text("home — lives in Milan")
    # The chat's card knows it was saved in the inbox.
    web.go("/chats/")
    page.get_by_role("link", name="I moved to Milan.").click()
    expect(page.get_by_role("article", name="Save to memory: “home”")).to_contain_text("Saved to memory.")


def test_a_proposal_can_be_rejected_from_the_inbox(web, model):
    web.register("alice")
    page = web.page
    propose_in_a_chat(web, model, "diet", "vegetarian", "I don't eat meat.")
    web.go("/inbox/")
    card = page.get_by_role("article", name="Save to memory: “diet”")
    card.get_by_role("button", name="Don't save the note diet").click()
    expect(card).to_contain_text("Dropped.")
    page.reload()
    expect(page.get_by_text("No proposals waiting")).to_be_visible()


def test_an_expired_proposal_is_greyed_and_cannot_be_saved(web, model):
    web.register("alice")
    page = web.page
    propose_in_a_chat(web, model, "diet", "vegetarian", "I don't eat meat.")
    with time_machine.travel(timezone.now() + timedelta(hours=25), tick=True):
        web.go("/inbox/")
        expect(page.get_by_text("No proposals waiting")).to_be_visible()
        expect(page.get_by_role("heading", name="Expired")).to_be_visible()
        card = page.get_by_role("article", name="Save to memory: “diet”")
        expect(card).to_have_class("proposal-card expired")
        expect(card).to_contain_text("nothing was saved")
        expect(card.get_by_role("button", name=re.compile("^Save"))).to_have_count(0)
        web.accessible("inbox with an expired proposal")
        # In the chat it is greyed the same way.
        web.go("/chats/")
        page.get_by_role("link", name="I don't eat meat.").click()
        expect(page.get_by_role("article", name="Save to memory: “diet”")).to_have_class("proposal-card expired")


def test_a_note_proposed_in_a_messaging_app_waits_in_the_inbox_with_where_it_came_from(web, model):
    from django.contrib.auth import get_user_model

    from bridges import services as bridge_services
    from bridges.core import InboundMessage, handle

    web.register("alice")
    page = web.page
    owner = get_user_model().objects.get(username="alice")
    binding = bridge_services.binding_create(owner_id=owner.pk, platform="telegram", name="Family bot",
                                             credentials={"token": "123456:ABCdefGHIjkl"})
    sender = bridge_services.sender_seen(binding_id=binding.pk, external_id="42", display="Grandma")
    code = bridge_services.pairing_offer(sender=sender).code
    bridge_services.pairing_approve(binding=binding, code=code)
    model.script(tool_calls(("propose_change", {"kind": "memory", "topic": "dinner",
                                                "summary": "family dinner on Sundays"})),
                 reply("Shall I keep that?"))
    handle(InboundMessage(binding_id=binding.pk, conversation_id="-100", kind="group", sender_id="42",
                          sender_display="Grandma", text="Remember: family dinner on Sundays",
                          conversation_title="Family group"))
    web.go("/inbox/")
    card = page.get_by_role("article", name="Save to memory: “dinner”")
    expect(card).to_contain_text("Proposed in the messaging chat “Family group”, asked by Grandma")
    expect(card).to_contain_text("Goes to the notes of the conversation Family group (Telegram bot “Family bot”)")
    expect(card).to_contain_text("reply yes to save it or no to drop it")
    card.get_by_role("link", name="open the chat").click()
    expect(page.locator(".msg.user")).to_contain_text("From the messaging appGrandma: Remember: family dinner on Sundays")
    expect(page.get_by_text("This conversation comes from a messaging app; answer it there.")).to_be_visible()
    expect(page.get_by_role("textbox", name="Message")).to_have_count(0)
    card = page.get_by_role("article", name="Save to memory: “dinner”")
    card.get_by_role("button", name="Save the note dinner", exact=True).click()
    expect(card).to_contain_text("Saved to memory.")
    web.go("/settings/memory/?tab=conversations")
    expect(page.locator(".notes-list")).to_contain_text("dinner — family dinner on Sundays")
    expect(page.locator(".scope h3")).to_have_text("Family group (Telegram bot “Family bot”)")


def test_a_note_to_forget_says_forget_it_or_keep_it(web, model):
    """A proposal to forget a note is answered with Forget it / Keep it, not Save / Don't save."""
    web.register("alice")
    page = web.page
    web.go("/settings/memory/")
    add_note(web, "home", "lives in Rome")
    add_note(web, "diet", "vegetarian")
    for topic in ("home", "diet"):
        model.script(tool_calls(("propose_change", {"kind": "memory", "topic": topic, "delete": True})),
                     reply("I'll forget it once you confirm."))
        new_chat(web)
        send(web, f"Forget my {topic}.")
        expect(page.get_by_role("article", name=f"Forget the note “{topic}”?")).to_be_visible()
    web.go("/inbox/")
    home = page.get_by_role("article", name="Forget the note “home”?")
    expect(home.get_by_role("button", name=re.compile("^Save"))).to_have_count(0)
    web.accessible("inbox with a note to forget")
    home.get_by_role("button", name="Forget it (the note home)").click()
    expect(home).to_contain_text("Forgotten.")
    diet = page.get_by_role("article", name="Forget the note “diet”?")
    diet.get_by_role("button", name="Keep it (the note diet)").click()
    expect(diet).to_contain_text("Kept.")
    web.go("/settings/memory/")
    notes = page.locator(".notes-list")
    expect(notes).to_contain_text("diet — vegetarian")
    expect(notes).not_to_contain_text("home — lives in Rome")


def test_each_cards_buttons_name_their_note_and_a_decided_card_says_before_not_now(web):
    from django.contrib.auth import get_user_model

    from localai_memory.memory.proposals import proposal_create
    from localai_memory.notes.paths import Scope

    web.register("alice")
    page = web.page
    owner = get_user_model().objects.get(username="alice")
    for topic, summary in (("home", "lives in Rome"), ("diet", "vegetarian"), ("work", "nurse")):
        proposal_create(owner_id=owner.pk, scope=Scope.user(), topic=topic, summary=summary)

    def button_names() -> list[str]:
        return re.findall(r'button "([^"]+)"', page.locator("main").aria_snapshot())

    web.go("/inbox/")
    assert sorted(button_names()) == sorted(f"{verb} the note {topic}" for verb in ("Save", "Don't save")
                                            for topic in ("home", "diet", "work"))
    home = page.get_by_role("article", name="Save to memory: “home”")
    expect(home).to_contain_text(re.compile(r"Now\s*\(no note yet\)"))
    home.get_by_role("button", name="Save the note home", exact=True).click()
    expect(home).to_contain_text("Saved to memory.")
    diet = page.get_by_role("article", name="Save to memory: “diet”")
    diet.get_by_role("button", name="Save the note diet", exact=True).click()
    expect(page.get_by_role("button", name="Undo saving diet")).to_be_visible()
    names = button_names()
    assert len(names) == len(set(names)) and {"Undo saving home", "Undo saving diet"} <= set(names), names
    # Decided, the card says what the note was before, not what it is "now" (it has a note now).
    expect(home).to_contain_text(re.compile(r"Before\s*\(no note\)\s*Saved\s*(New text: )?lives in Rome"))
    expect(home).not_to_contain_text("Now")
    expect(home).not_to_contain_text("no note yet")
    web.accessible("inbox with decided cards")
