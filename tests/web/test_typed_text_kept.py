"""What a person types is not lost to what happens around it: a session that ended (the whole page moves to the
log-in page and back, the message or note filled in again), a log-in in another tab that made the page stale,
or a reply arriving while the next message is being typed."""

from __future__ import annotations

import re
import threading
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from localai_memory.chats.models import Message
from localai_memory.notes import selectors as notes_selectors
from localai_memory.notes.paths import Scope
from tests.fakes.openai_server import ScriptedReply, reply, tool_calls

from .conftest import PASSWORD

pytestmark = pytest.mark.browser

TYPED = "Text typed before the session ended, which took a while"
SENT_WHILE_LOADING = "Sent before the page had finished loading"


def end_session(page: Page) -> None:
    """The session is gone (expired, flushed, the cookie dropped) while the page stays open."""
    kept = [cookie for cookie in page.context.cookies() if cookie["name"] != "sessionid"]
    page.context.clear_cookies()
    page.context.add_cookies(kept)  # type: ignore[arg-type]


def log_in_here(page: Page, username: str = "alice") -> None:
    """Log in on the log-in page the browser is on (keeping its ``next``)."""
    expect(page.get_by_role("heading", name="Log in")).to_be_visible()
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("button", name="Log out")).to_be_visible()


def new_chat(web) -> str:
    web.go("/chats/")
    web.page.get_by_role("button", name="New chat").click()
    expect(web.page.get_by_role("textbox", name="Message")).to_be_visible()
    web.page.wait_for_load_state()  # the chat page's scripts ran: htmx sends the message box, as for a person
    return web.page.url.removeprefix(web.base_url)


def test_sending_after_the_session_ended_moves_to_the_login_page_and_the_message_comes_back(web, model):
    web.register("alice")
    page = web.page
    chat = new_chat(web)
    box = page.get_by_role("textbox", name="Message")
    box.fill(TYPED)
    end_session(page)

    page.get_by_role("button", name="Send").click()

    expect(page).to_have_url(web.base_url + "/login/?next=" + chat)  # the whole page, not a page in the chat
    expect(page.locator("main")).to_have_count(1)
    expect(page.get_by_role("button", name="Log out")).to_have_count(0)
    log_in_here(page)
    expect(page).to_have_url(web.base_url + chat)
    expect(box).to_have_value(TYPED)
    model.script(reply("Welcome back."))
    page.get_by_role("button", name="Send").click()
    expect(page.locator(".msg.assistant")).to_contain_text("Welcome back.")
    expect(box).to_have_value("")
    expect(box).to_be_focused()  # the Send button was disabled while the model answered: back to the box
    page.reload()  # sent: the tab's draft is gone with it
    expect(page.locator(".msg.user")).to_have_count(1)
    expect(box).to_have_value("")


def test_save_on_a_card_after_the_session_ended_moves_the_whole_page_to_the_login_page(web, model):
    web.register("alice")
    page = web.page
    chat = new_chat(web)
    model.script(tool_calls(("propose_change", {"kind": "memory", "topic": "home", "summary": "lives in Rome"})),
                 reply("I can keep that once you confirm it."))
    page.get_by_role("textbox", name="Message").fill("I live in Rome.")
    page.get_by_role("button", name="Send").click()
    card = page.get_by_role("article", name="Save to memory: “home”")
    expect(card).to_be_visible()
    end_session(page)

    card.get_by_role("button", name="Save the note home", exact=True).click()

    # A Send clicked before htmx took the form posts the whole page, which lands on the chat's #composer:
    # the way back keeps that place.
    expect(page).to_have_url(re.compile(re.escape(web.base_url + "/login/?next=" + chat) + r"(%23composer)?$"))
    expect(page.locator("main")).to_have_count(1)
    log_in_here(page)
    expect(page).to_have_url(re.compile(re.escape(web.base_url + chat) + r"(#composer)?$"))
    card.get_by_role("button", name="Save the note home", exact=True).click()
    expect(card).to_contain_text("Saved to memory.")


def open_add_note(page: Page) -> None:
    page.get_by_text("Add a note", exact=True).first.click()
    page.get_by_label("What to remember (one line)").first.fill("drives a blue Fiat")
    page.get_by_label("Details (optional)").first.fill("Bought in 2019, parked on Via Roma.")


def expect_note_filled_in_again(page: Page) -> None:
    expect(page.get_by_label("What to remember (one line)").first).to_have_value("drives a blue Fiat")
    expect(page.get_by_label("Details (optional)").first).to_have_value("Bought in 2019, parked on Via Roma.")


def save_note_and_expect_it_kept_once(web, owner_name: str = "alice") -> None:
    from django.contrib.auth import get_user_model

    page = web.page
    page.get_by_role("button", name="Save note").first.click()
    expect(page.get_by_text("Saved the note “drives-blue-fiat”.")).to_be_visible()
    owner = get_user_model().objects.get(username=owner_name)
    assert "drives a blue Fiat" in notes_selectors.index_text(owner_id=owner.pk, scope=Scope.user())
    page.reload()  # saved: the form is empty again, not filled with the note it sent
    expect(page.get_by_label("What to remember (one line)").first).to_have_value("")


def test_a_note_being_added_when_the_session_ended_comes_back_to_the_memory_tab_filled_in(web):
    web.register("alice")
    page = web.page
    web.go("/settings/memory/")
    open_add_note(page)
    end_session(page)

    page.get_by_role("button", name="Save note").first.click()

    expect(page).to_have_url(re.compile(r"/login/\?next=/settings/memory/"))  # not the form's POST-only address
    log_in_here(page)
    expect(page).to_have_url(re.compile(r"/settings/memory/(\?|$)"))
    expect_note_filled_in_again(page)
    save_note_and_expect_it_kept_once(web)


def log_out_and_in_in_another_tab(web) -> None:
    other = web.page.context.new_page()
    other.goto(web.base_url + "/chats/")
    other.get_by_role("button", name="Log out").click()
    log_in_here(other)
    other.close()


def test_a_log_in_in_another_tab_leaves_the_chat_as_it_was_and_keeps_the_message(web, model):
    web.register("alice")
    page = web.page
    new_chat(web)
    model.script(reply("First answer."))
    page.get_by_role("textbox", name="Message").fill("A first message.")
    page.get_by_role("button", name="Send").click()
    expect(page.locator(".msg.assistant")).to_contain_text("First answer.")
    box = page.get_by_role("textbox", name="Message")
    box.fill(TYPED)
    log_out_and_in_in_another_tab(web)

    page.get_by_role("button", name="Send").click()

    alert = page.get_by_test_id("stale-page")
    expect(alert).to_contain_text("Your session changed in another tab")
    expect(page.get_by_text("CSRF verification failed")).to_have_count(0)
    expect(page.locator(".msg.assistant")).to_contain_text("First answer.")  # the conversation stays
    expect(page.locator("main")).to_have_count(1)
    expect(box).to_have_value(TYPED)
    alert.get_by_role("link", name="Reload the page").click()
    expect(page.get_by_test_id("stale-page")).to_have_count(0)
    expect(box).to_have_value(TYPED)
    model.script(reply("Second answer."))
    page.get_by_role("button", name="Send").click()
    expect(page.locator(".msg.assistant").last).to_contain_text("Second answer.")
    assert list(Message.objects.filter(role="user").values_list("content", flat=True)) == ["A first message.", TYPED]


def test_a_note_added_on_a_page_made_stale_by_another_tab_is_filled_in_again(web):
    web.register("alice")
    page = web.page
    web.go("/settings/memory/")
    open_add_note(page)
    log_out_and_in_in_another_tab(web)

    page.get_by_role("button", name="Save note").first.click()

    expect(page.get_by_role("heading", name="This page was out of date")).to_be_visible()
    expect(page.get_by_text("CSRF verification failed")).to_have_count(0)
    web.accessible("stale page")
    page.get_by_role("link", name="Back to the page").click()
    expect(page).to_have_url(re.compile(r"/settings/memory/(\?|$)"))
    expect_note_filled_in_again(page)
    save_note_and_expect_it_kept_once(web)


def test_what_is_typed_while_the_model_answers_stays_in_the_box(web, model):
    web.register("alice")
    page = web.page
    new_chat(web)
    answered = threading.Event()

    def slow(_request: dict[str, Any]) -> ScriptedReply:
        model.think_until(answered)
        return reply("Here is the first answer.")

    model.script(slow)
    box = page.get_by_role("textbox", name="Message")
    box.fill("First question.")
    page.get_by_role("button", name="Send").click()
    expect(page.get_by_text("Thinking…")).to_be_visible()

    box.fill("The next question, typed while the model answered")
    answered.set()

    expect(page.locator(".msg.assistant")).to_contain_text("Here is the first answer.")
    expect(page.get_by_text("Thinking…")).to_be_hidden()
    expect(box).to_have_value("The next question, typed while the model answered")
    expect(box).to_be_focused()
    page.reload()  # not sent yet: still the tab's draft
    expect(box).to_have_value("The next question, typed while the model answered")


def test_a_message_sent_to_a_chat_deleted_in_another_tab_is_offered_back_in_a_new_chat(web, model):
    from localai_memory.chats.models import Chat
    from localai_memory.chats.services import chat_delete

    web.register("alice")
    page = web.page
    new_chat(web)
    chat = Chat.objects.get()
    chat_delete(owner_id=chat.owner_id, chat_id=chat.pk)  # in another tab
    page.get_by_role("textbox", name="Message").fill(TYPED)

    page.get_by_role("button", name="Send").click()

    expect(page).to_have_url(web.base_url + "/chats/")
    expect(page.get_by_text("your message was not sent. It is below, to put in a new chat.")).to_be_visible()
    offered = page.get_by_role("textbox", name="Your message that was not sent")
    expect(offered).to_have_value(TYPED)
    web.accessible("chat list offering an unsent message")
    web.screenshot("offered")
    page.get_by_role("button", name="Put it in a new chat").click()
    box = page.get_by_role("textbox", name="Message")
    expect(box).to_have_value(TYPED)
    page.reload()  # not sent yet: the tab keeps it
    expect(box).to_have_value(TYPED)
    model.script(reply("Here now."))
    page.get_by_role("button", name="Send").click()
    expect(page.locator(".msg.assistant")).to_contain_text("Here now.")
    expect(page.locator(".msg.user")).to_contain_text(TYPED)
    expect(box).to_have_value("")


def test_a_message_the_browser_posted_itself_while_the_page_loaded_is_not_put_back_once_the_chat_kept_it(web, model):
    """Send clicked while the chat page still loads (its last script on its way, so htmx has not taken the form
    yet while the tab's draft already keeps what is typed) is the browser's own post. The model fails and the
    chat keeps the message, offering Ask again: the box must not get it back from the tab's draft, or Send
    would put it in the chat twice."""
    from django.contrib.auth import get_user_model

    from localai_memory.chats.models import Chat

    web.register("alice")
    page = web.page
    held: list[Any] = []

    def hold_the_first(route: Any) -> None:
        if held:
            route.continue_()
        else:
            held.append(route)  # never answered: the page stays loading, htmx waits for DOMContentLoaded

    # menus.js is the chat page's last deferred script: held, the page stays loading after htmx and drafts.js ran
    page.route(re.compile(r"/static/menus\.js"), hold_the_first)
    web.go("/chats/")
    page.get_by_role("button", name="New chat").click()
    box = page.get_by_role("textbox", name="Message")
    expect(box).to_be_visible()
    box.fill(SENT_WHILE_LOADING)
    owner = get_user_model().objects.get(username="alice")
    chat = Chat.objects.get()
    key = f"draft:{owner.pk}:chat:{chat.pk}"
    page.wait_for_function("key => sessionStorage.getItem(key) !== null", arg=key)  # drafts.js keeps it
    # htmx is there but waits for DOMContentLoaded to take the form
    assert page.evaluate("() => [document.readyState, !!window.htmx]") == ["interactive", True] and held
    model.fail_next(500)

    page.get_by_role("button", name="Send").click()

    expect(page).to_have_url(re.compile(r"/chats/\d+/#composer$"))  # the browser's own post, sent on to the chat
    expect(page.get_by_role("alert")).to_contain_text("The model did not answer")
    expect(page.locator(".msg.user")).to_contain_text(SENT_WHILE_LOADING)
    expect(page.get_by_test_id("not-answered")).to_be_visible()
    page.wait_for_load_state()
    expect(box).to_have_value("")  # kept in the chat (Ask again), not in the box as well
    web.go(f"/chats/{chat.pk}/")  # the chat opened again in this tab: still not in the box
    expect(page.get_by_test_id("not-answered")).to_be_visible()
    expect(box).to_have_value("")
    model.script(reply("Here it is."))
    page.get_by_role("button", name="Ask again").click()
    expect(page.locator(".msg.assistant")).to_contain_text("Here it is.")
    assert list(Message.objects.filter(role="user").values_list("content", flat=True)) == [SENT_WHILE_LOADING]
