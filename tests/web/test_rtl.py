"""Arabic and Hebrew that people write run right to left: chat bubbles, cards, note lists, editors and fields."""

from __future__ import annotations

import pytest

from tests.fakes.openai_server import reply, tool_calls

from .test_chat import new_chat, send
from .test_memory_tab import add_note

pytestmark = pytest.mark.browser

ARABIC = "أنا أعيش في القاهرة منذ عام 2019."
HEBREW = "טבעוני, בלי דבש (vegan)."


def rtl(locator) -> bool:
    return locator.evaluate("element => element.matches(':dir(rtl)')")


def test_a_chat_in_arabic_and_hebrew_runs_right_to_left(web, model):
    web.register("alice")
    page = web.page
    model.script(tool_calls(("propose_change", {"kind": "memory", "topic": "diet", "summary": HEBREW})),
                 reply("אני אשמור את זה אם תאשר."))
    new_chat(web)
    send(web, ARABIC)
    assert rtl(page.locator(".msg.user .text"))
    assert rtl(page.locator(".msg.assistant .text"))
    assert rtl(page.get_by_role("article", name="Save to memory: “diet”").locator("ins"))
    assert not rtl(page.get_by_role("heading", name="Save to memory: “diet”"))  # the app's own words stay as they are
    # The box: what is typed there runs in its own direction, line by line.
    box = page.get_by_role("textbox", name="Message")
    assert box.evaluate("element => getComputedStyle(element).unicodeBidi") == "plaintext"
    web.go("/chats/")
    assert rtl(page.get_by_role("link", name=ARABIC))


def test_notes_in_arabic_run_right_to_left_in_the_list_the_form_and_the_editor(web):
    web.register("alice")
    page = web.page
    add_note(web, "home", ARABIC, "يعيش في حي الزمالك.")
    assert rtl(page.locator(".notes-list li").filter(has_text="home").get_by_text(ARABIC))
    page.get_by_text("Add a note", exact=True).click()
    summary, details = page.get_by_label("What to remember (one line)"), page.get_by_label("Details (optional)")
    assert not rtl(summary)  # empty: the page's direction
    summary.fill(ARABIC)
    details.fill("تفاصيل")
    assert rtl(summary) and rtl(details)
    page.get_by_role("link", name="Open the note home").click()
    assert rtl(page.get_by_label("Text of Memory/home.md"))
    assert rtl(page.get_by_text(ARABIC))
