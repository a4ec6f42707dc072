"""The chat page against a loopback OpenAI-protocol model that calls the memory tools."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
import time_machine
from django.utils import timezone
from playwright.sync_api import expect

from localai_memory.chats.models import Message
from tests.fakes.openai_server import reply, tool_calls

pytestmark = pytest.mark.browser

PROPOSE_HOME = ("propose_change", {"kind": "memory", "topic": "home", "summary": "lives in Rome"})


def new_chat(web) -> None:
    page = web.page
    web.go("/chats/")
    page.get_by_role("button", name="New chat").click()
    expect(page.get_by_role("textbox", name="Message")).to_be_visible()
    page.wait_for_load_state()  # the chat page's scripts ran: htmx sends the message box, as for a person


def send(web, text: str) -> None:
    page = web.page
    count = page.locator(".msg.assistant").count()
    page.get_by_role("textbox", name="Message").fill(text)
    page.get_by_role("button", name="Send").click()
    expect(page.locator(".msg.assistant")).to_have_count(count + 1)


def pick_save_level(web, label: str) -> None:
    page = web.page
    web.go("/settings/memory/")
    page.get_by_role("group", name="When the assistant wants to save a note").get_by_role("radio", name=label).check()
    page.get_by_role("button", name="Save how notes are saved").click()
    expect(page.get_by_text(f"Saved: {label}.")).to_be_visible()


def test_a_proposal_is_confirmed_on_its_card_in_the_chat(web, model):
    web.register("alice")
    page = web.page
    model.script(tool_calls(PROPOSE_HOME), reply("I can keep that note once you confirm it."))
    new_chat(web)
    expect(page.get_by_text("No messages yet — say hello.")).to_be_visible()
    web.accessible("empty chat")
    send(web, "Remember that I live in Rome.")
    expect(page.locator(".msg.user")).to_have_text("YouRemember that I live in Rome.")
    expect(page).to_have_title("Remember that I live in Rome. · Chats · LocalAI Memory")  # the tab, not "New chat"
    expect(page.locator(".msg.assistant")).to_contain_text("I can keep that note once you confirm it.")
    card = page.get_by_role("article", name="Save to memory: “home”")
    expect(card).to_contain_text("Would be")
    expect(card.locator("ins")).to_have_text("lives in Rome")
    expect(card).to_contain_text("(no note yet)")
    expect(card).to_contain_text("Expires in 23")
    expect(card.get_by_role("button", name="Don't save the note home")).to_be_visible()
    web.accessible("chat with a proposal card")
    card.get_by_role("button", name="Save the note home", exact=True).focus()
    page.keyboard.press("Enter")  # by keyboard: the focus stays in the card, on its Undo
    expect(card).to_contain_text("Saved to memory.")
    expect(card.get_by_role("button", name="Undo saving home")).to_be_focused()
    # The model saw the memory tools, and the note is on the Memory tab now.
    names = [tool["function"]["name"] for tool in model.requests[0]["tools"]]
    assert "propose_change" in names
    web.go("/settings/memory/")
    expect(page.locator(".notes-list")).to_contain_text("home — lives in Rome")
    # The chat shows the card as saved after a reload too.
    web.go("/chats/")
    page.get_by_role("link", name="Remember that I live in Rome.").click()
    expect(page.get_by_role("article", name="Save to memory: “home”")).to_contain_text("Saved to memory.")


def test_dont_save_drops_the_proposal(web, model):
    web.register("alice")
    page = web.page
    model.script(tool_calls(PROPOSE_HOME), reply("Noted, if you want."))
    new_chat(web)
    send(web, "I live in Rome.")
    card = page.get_by_role("article", name="Save to memory: “home”")
    card.get_by_role("button", name="Don't save the note home").click()
    expect(card).to_contain_text("Dropped.")
    web.go("/settings/memory/")
    expect(page.get_by_text("No notes yet — ask the assistant")).to_be_visible()


def save_home_at_once(web, model) -> None:
    """Under "Save it and tell me", a chat in which the model saves "home" at once."""
    pick_save_level(web, "Save it and tell me")
    model.script(tool_calls(PROPOSE_HOME), reply("Saved: you live in Rome."))
    new_chat(web)
    send(web, "Remember that I live in Rome.")


def test_save_it_and_tell_me_shows_saved_to_memory_with_an_undo(web, model):
    web.register("alice")
    page = web.page
    save_home_at_once(web, model)
    line = page.get_by_test_id("saved-line")
    expect(line).to_contain_text("Saved to memory: home — lives in Rome")
    expect(page.get_by_role("article")).to_have_count(0)  # no confirmation card
    web.accessible("chat with an automatic note")
    line.get_by_role("button", name="Undo saving home").click()
    # The whole line reads as it does after a reload, not "Saved to memory … Undone" at once.
    expect(line).to_have_text("Undone: home is as it was before.")
    expect(line).to_be_focused()
    page.reload()
    expect(page.get_by_test_id("saved-line")).to_have_text("Undone: home is as it was before.")
    web.go("/settings/memory/")
    expect(page.get_by_text("No notes yet — ask the assistant")).to_be_visible()


def test_a_note_saved_at_once_over_another_shows_the_one_it_replaced(web, model):
    web.register("alice")
    page = web.page
    pick_save_level(web, "Save it and tell me")
    model.script(tool_calls(("propose_change", {**PROPOSE_HOME[1], "details": "Trastevere, near the river."})),
                 reply("Saved."))
    new_chat(web)
    send(web, "I live in Rome, in Trastevere.")
    model.script(tool_calls(("propose_change", {"kind": "memory", "topic": "home", "summary": "lives in Lisbon",
                                                "details": "Trastevere, near the river, until May; Alfama since."})),
                 reply("Updated."))
    send(web, "I moved to Lisbon.")

    line = page.get_by_test_id("saved-line").last
    expect(line).to_contain_text("Saved to memory: home — lives in Lisbon")
    expect(line.get_by_test_id("saved-before")).to_have_text("Before: Old text: lives in Rome")
    expect(line.get_by_test_id("saved-before").locator("del")).to_have_text("lives in Rome")
    expect(page.locator("#announce")).to_contain_text("Saved to memory: home, in place of “lives in Rome”.")
    expect(page.get_by_test_id("saved-line").first.get_by_test_id("saved-before")).to_have_count(0)  # new note
    line.get_by_text("Details before").click()
    expect(line.locator("details del")).to_have_text("Trastevere, near the river.")
    web.accessible("chat with a note saved over another")
    web.screenshot("replaced")
    line.get_by_role("button", name="Undo saving home").click()
    expect(line).to_have_text("Undone: home is as it was before.")


def test_the_undo_of_an_automatic_note_is_gone_after_30_minutes(web, model):
    web.register("alice")
    page = web.page
    pick_save_level(web, "Save it and tell me")
    model.script(tool_calls(PROPOSE_HOME), reply("Saved."))
    new_chat(web)
    send(web, "I live in Rome.")
    expect(page.get_by_role("button", name="Undo saving home")).to_be_visible()
    with time_machine.travel(timezone.now() + timedelta(minutes=31), tick=True):
        page.reload()
        expect(page.get_by_test_id("saved-line")).to_contain_text("Saved to memory: home — lives in Rome")
        expect(page.get_by_role("button", name="Undo saving home")).to_have_count(0)


def test_a_turn_that_read_notes_shows_a_used_memories_chip_that_opens_what_was_used(web, model):
    web.register("alice")
    page = web.page
    pick_save_level(web, "Save it and tell me")
    model.script(tool_calls(PROPOSE_HOME, ("propose_change", {"kind": "memory", "topic": "diet",
                                                              "summary": "vegetarian",
                                                              "details": "No meat, fish is fine."})),
                 reply("Saved both."))
    new_chat(web)
    send(web, "I live in Rome and I'm vegetarian.")
    model.script(tool_calls(("context_read", {"topic": "diet"})), reply("Try the carbonara without guanciale."))
    send(web, "What should I cook tonight?")
    chip = page.get_by_test_id("used-chip")
    expect(chip).to_have_text("used 2 memories")
    chip.click()
    report = page.get_by_test_id("memory-report").last
    expect(report).to_contain_text("Your notes (the index)")
    expect(report).to_contain_text("“diet” from your notes")
    expect(report.get_by_role("link", name="Memory/diet.md")).to_be_visible()
    # The model was shown the index as data.
    system = model.requests[-2]["messages"][0]["content"]
    assert "- diet: vegetarian -> diet.md" in system
    web.accessible("chat with the used chip open")


def test_a_private_chat_has_the_chip_and_neither_reads_nor_offers_memory(web, model):
    web.register("alice")
    page = web.page
    new_chat(web)
    page.get_by_text("Tools", exact=True).click()
    page.get_by_role("switch", name="Memory").click()
    expect(page.get_by_test_id("private-chip")).to_have_text("Private chat")
    off = page.get_by_test_id("memory-off-line")
    expect(off).to_contain_text("Memory is off because this chat is private.")
    page.get_by_text("Tools", exact=True).click()
    expect(page.get_by_role("switch", name="Memory")).to_have_attribute("aria-checked", "false")
    expect(page.locator("#chat-memory-line")).to_contain_text("This chat is private: it neither reads nor saves memory.")
    web.accessible("private chat, tools open")
    model.script(reply("Memory is off in this chat."))
    send(web, "Remember that I live in Rome.")
    assert "tools" not in model.last_request or not any(
        t["function"]["name"] in ("propose_change", "context_read") for t in model.last_request["tools"])
    # The chats list shows the chip too, and turning memory on again is one click from the line.
    off.get_by_role("button", name="Turn memory on for this chat").click()
    expect(page.get_by_test_id("private-chip")).to_have_count(0)
    expect(page.get_by_test_id("memory-off-line")).to_have_count(0)


def test_with_memory_off_in_settings_the_chat_says_which_level_is_off_and_how_to_turn_it_on(web, model):
    web.register("alice")
    page = web.page
    page.get_by_role("switch", name="Memory").click()
    expect(page.get_by_role("switch", name="Memory")).to_have_attribute("aria-checked", "false")
    new_chat(web)
    off = page.get_by_test_id("memory-off-line")
    expect(off).to_contain_text("Memory is off in your settings.")
    expect(off).to_contain_text("Turn it on under Your settings, then Memory.")
    web.accessible("chat, memory off in settings")
    off.get_by_role("link", name="Open Your settings → Memory").click()
    expect(page.get_by_role("switch", name="Memory")).to_have_attribute("aria-checked", "false")


def test_a_model_that_fails_keeps_the_message_and_says_so(web, model):
    web.register("alice")
    page = web.page
    new_chat(web)
    model.fail_next(500)
    page.get_by_role("textbox", name="Message").fill("Hello?")
    page.get_by_role("button", name="Send").click()
    expect(page.get_by_role("alert")).to_contain_text("The model did not answer")
    expect(page.locator(".msg.user")).to_contain_text("Hello?")
    expect(page.get_by_role("textbox", name="Message")).to_have_value("")  # kept in the chat, not in the box
    model.script(reply("Hi there."))
    page.get_by_role("button", name="Ask again").click()
    expect(page.locator(".msg.assistant")).to_contain_text("Hi there.")
    expect(page.locator(".msg.user")).to_have_count(1)  # asked again, never stored twice


def test_times_are_shown_in_the_readers_own_time_zone(new_web, model):
    """The server writes UTC; a reader in Berlin sees the Undo deadline in Berlin time, UTC in its tooltip."""
    from datetime import datetime, timedelta
    from zoneinfo import ZoneInfo

    web = new_web(timezone_id="Europe/Berlin", locale="en-GB")
    web.register("alice")
    page = web.page
    save_home_at_once(web, model)

    until = page.get_by_test_id("saved-line").locator("time")
    utc = datetime.fromisoformat(until.get_attribute("datetime"))
    berlin = utc.astimezone(ZoneInfo("Europe/Berlin"))
    assert timedelta(minutes=29) < utc - datetime.now(tz=utc.tzinfo) <= timedelta(minutes=30)
    expect(until).to_have_text(f"{berlin:%H:%M} CET")  # swapped in by htmx, then shown in local time
    expect(until).to_have_attribute("title", f"{utc:%H:%M} UTC")
    page.reload()
    expect(page.get_by_test_id("saved-line").locator("time")).to_have_text(f"{berlin:%H:%M} CET")
    web.go("/chats/")  # the chat list's last-change times too
    listed = page.locator("main li time").first
    changed = datetime.fromisoformat(listed.get_attribute("datetime")).astimezone(ZoneInfo("Europe/Berlin"))
    expect(listed).to_contain_text(f"{changed:%H:%M} CET")
    expect(listed).to_have_attribute("title", re.compile(r" UTC$"))


def test_remember_in_the_chat_saves_the_note_at_once_with_an_undo_and_no_model_call(web, model):
    web.register("alice")
    page = web.page
    new_chat(web)
    expect(page.get_by_text("write /remember and the fact")).to_be_visible()

    send(web, "/remember I live in Rome")

    expect(page.locator(".msg.assistant").last).to_contain_text("Saved to memory: \u201cI live in Rome\u201d (live-rome).")
    line = page.get_by_test_id("saved-line")
    expect(line).to_contain_text("Saved to memory: live-rome — I live in Rome")
    assert model.requests == []
    web.accessible("chat with a note typed with /remember")
    line.get_by_role("button", name="Undo saving live-rome").click()
    expect(line).to_have_text("Undone: live-rome is as it was before.")
    web.go("/settings/memory/")
    expect(page.get_by_text("No notes yet — ask the assistant")).to_be_visible()


def test_slash_memory_in_the_chat_opens_the_memory_tab(web, model):
    web.register("alice")
    page = web.page
    new_chat(web)
    page.get_by_role("textbox", name="Message").fill("/memory")
    page.get_by_role("button", name="Send").click()
    expect(page).to_have_url(web.base_url + "/settings/memory/")
    assert model.requests == [] and not Message.objects.exists()  # a shortcut, not a message


@pytest.mark.parametrize("viewport", [{"width": 320, "height": 450}, {"width": 375, "height": 700},
                                      {"width": 1200, "height": 900}], ids=["320-or-640-at-200pc", "375", "1200"])
def test_the_tools_panel_stays_inside_the_page_and_closes_on_esc_or_a_click_outside(new_web, model, viewport):
    web = new_web(viewport=viewport)
    web.register("alice")
    page = web.page
    new_chat(web)
    tools = page.locator("#tools > summary")
    panel = page.locator(".tools-panel")
    tools.click()
    expect(panel).to_be_visible()
    box = panel.bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= viewport["width"], (box, viewport)
    # Esc closes it from inside, and the focus goes back to its button.
    page.get_by_role("switch", name="Memory").focus()
    page.keyboard.press("Escape")
    expect(panel).to_be_hidden()
    expect(tools).to_be_focused()
    # A click outside it closes it too; a click inside does not.
    tools.click()
    page.locator("#chat-memory-line").click()
    expect(panel).to_be_visible()
    page.get_by_role("heading", level=1).click()
    expect(panel).to_be_hidden()


#: The words of the visible buttons (and the "Thinking…" line) that the browser broke over two lines.
WORDS_BROKEN = """() => {
  const broken = [];
  for (const el of document.querySelectorAll("button, .button, .busy")) {
    if (!el.getClientRects().length) { continue; }
    const texts = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
    for (let node = texts.nextNode(); node; node = texts.nextNode()) {
      if (node.parentElement.closest(".visually-hidden")) { continue; }
      for (const word of node.data.matchAll(/\\S+/g)) {
        const range = document.createRange();
        range.setStart(node, word.index);
        range.setEnd(node, word.index + word[0].length);
        if ([...range.getClientRects()].filter(r => r.width > 0).length > 1) { broken.push(word[0]); }
      }
    }
  }
  return broken;
}"""


@pytest.mark.parametrize("width", [320, 375, 1200])
def test_no_button_breaks_inside_a_word_send_and_thinking_included(new_web, model, width):
    web = new_web(viewport={"width": width, "height": 800})
    web.register("alice")
    page = web.page
    assert page.evaluate(WORDS_BROKEN) == [], "the Memory tab"
    new_chat(web)
    page.locator("#composer").evaluate("form => form.classList.add('htmx-request')")  # as while the model thinks
    expect(page.get_by_text("Thinking…")).to_be_visible()
    assert page.evaluate(WORDS_BROKEN) == [], "the chat"


def test_the_undo_of_a_saved_card_turns_the_whole_card_into_what_a_reload_shows(web, model):
    web.register("alice")
    page = web.page
    model.script(tool_calls(PROPOSE_HOME), reply("I can keep that note once you confirm it."))
    new_chat(web)
    send(web, "Remember that I live in Rome.")
    card = page.get_by_role("article", name="Save to memory: “home”")
    card.get_by_role("button", name="Save the note home", exact=True).click()
    expect(card.locator(".saved-line")).to_have_text(re.compile(r"^\s*Saved to memory\.\s*Undo"))
    card.get_by_role("button", name="Undo saving home").click()
    expect(card.locator(".saved-line")).to_have_text("Saved, then undone: the note is as it was.")
    expect(card).not_to_contain_text("Undone —")
    swapped = card.inner_text()
    page.reload()
    expect(page.get_by_role("article", name="Save to memory: “home”")).to_have_text(swapped)
