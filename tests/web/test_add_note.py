"""The Memory tab's Add a note, where its topic is one in use: the form says beforehand that such a topic is not
replaced, and the refusal opens that note."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.browser


def test_a_topic_in_use_is_not_replaced_and_the_refusal_opens_that_note(web):
    web.register("alice")
    page = web.page
    web.go("/settings/memory/")
    page.get_by_text("Add a note", exact=True).first.click()
    expect(page.locator(".add-note .hint").first).to_contain_text(
        "A topic in use is not replaced: open that note to change it.")
    page.get_by_label("Topic").first.fill("home")
    page.get_by_label("What to remember (one line)").first.fill("lives in Rome")
    page.get_by_label("Details (optional)").first.fill("Monti, near the Colosseum.")
    page.get_by_role("button", name="Save note").first.click()
    expect(page.get_by_text("Saved the note “home”.")).to_be_visible()

    page.get_by_text("Add a note", exact=True).first.click()
    page.get_by_label("Topic").first.fill("home")
    page.get_by_label("What to remember (one line)").first.fill("lives in Lisbon")
    page.get_by_role("button", name="Save note").first.click()
    refusal = page.get_by_text("A note “home” exists already")
    expect(refusal).to_contain_text("open it to change it, or pick another topic. Nothing was replaced.")
    expect(page.locator(".notes-list")).to_contain_text("home — lives in Rome")
    web.accessible("memory tab refusing a topic in use")
    web.screenshot("refused")

    refusal.get_by_role("link", name="open it").click()
    expect(page.get_by_text("Monti, near the Colosseum.")).to_be_visible()
    expect(page).to_have_url("/settings/memory/note/?path=Memory%2Fhome.md")
