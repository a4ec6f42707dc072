"""Your settings → Memory, clicked through as a new user would."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.browser

SAVE_LABELS = ["Save it and tell me", "Ask me first", "Always confirm", "Never"]
MESSAGING_LABELS = ["Ask me first", "Save it for a paired sender in a private chat", "Never"]


def add_note(web, topic: str, summary: str, details: str = "") -> None:
    page = web.page
    page.get_by_text("Add a note", exact=True).first.click()
    page.get_by_label("Topic").first.fill(topic)
    page.get_by_label("What to remember (one line)").first.fill(summary)
    if details:
        page.get_by_label("Details (optional)").first.fill(details)
    page.get_by_role("button", name="Save note").first.click()
    expect(page.get_by_text(f"Saved the note “{topic}”.")).to_be_visible()


def test_a_note_added_without_a_topic_is_named_from_its_words_and_not_added_twice(web):
    web.register("alice")
    page = web.page
    page.get_by_text("Add a note", exact=True).first.click()
    page.get_by_label("What to remember (one line)").first.fill("I live in Rome")
    page.get_by_role("button", name="Save note").first.click()
    expect(page.get_by_text("Saved the note “live-rome”.")).to_be_visible()
    expect(page.locator(".notes-list")).to_contain_text("live-rome — I live in Rome")
    page.get_by_text("Add a note", exact=True).first.click()
    page.get_by_label("What to remember (one line)").first.fill("i live in rome")
    page.get_by_role("button", name="Save note").first.click()
    expect(page.get_by_text("That is already in memory, as the note “live-rome”.")).to_be_visible()
    expect(page.locator(".notes-list li")).to_have_count(1)


def test_a_notes_importance_is_set_and_given_back_on_the_tab(web):
    web.register("alice")
    page = web.page
    add_note(web, "home", "lives in Rome")
    row = page.locator(".notes-list li").filter(has_text="home — lives in Rome")
    expect(row.get_by_test_id("note-importance")).to_have_count(0)
    row.locator("summary", has_text="Importance").click()
    row.get_by_label("How much recall weighs the note home").fill("0.9")
    row.get_by_role("button", name="Save importance").click()
    expect(page.get_by_text("The note “home” now has importance 0.9.")).to_be_visible()
    row = page.locator(".notes-list li").filter(has_text="home — lives in Rome")
    expect(row.get_by_test_id("note-importance")).to_contain_text("Importance 0.9 (you set it")
    web.accessible("memory tab with an importance set")

    row.locator("summary", has_text="Importance").click()
    expect(row.get_by_label("How much recall weighs the note home")).to_have_value("0.9")
    row.get_by_label("How much recall weighs the note home").fill("")
    row.get_by_role("button", name="Save importance").click()
    expect(page.get_by_text("The note “home” has its writer's importance again.")).to_be_visible()
    expect(page.get_by_test_id("note-importance")).to_have_count(0)


def test_the_tab_shows_each_notes_kind_and_the_notes_at_a_glance(web):
    web.register("alice")
    page = web.page
    expect(page.locator("#profile")).to_have_count(0)  # no notes, nothing to sum up
    add_note(web, "home", "lives in Rome")
    add_note(web, "sister", "sister Anna lives in Rome too")
    add_note(web, "diet", "prefers vegan food")
    row = page.locator(".notes-list li").filter(has_text="diet — prefers vegan food")
    expect(row.get_by_test_id("note-kind")).to_have_text("Kind: preference")
    # a note without details is one line of the index: its link says so, rather than "Open" the index
    expect(row.get_by_role("link", name="Edit line of the note diet in the index")).to_be_visible()
    glance = page.locator("#profile")
    expect(glance.get_by_test_id("profile-kinds")).to_contain_text("1 preference: diet")
    expect(glance.get_by_test_id("profile-kinds")).to_contain_text("2 about you: home, sister")
    expect(glance.get_by_test_id("profile-names")).to_have_text("Names your notes mention: Rome (2), Anna (1)")
    web.accessible("memory tab with the notes at a glance")


def test_a_new_user_registers_and_finds_memory_on_with_ask_me_first(web):
    web.register("alice")
    page = web.page
    # With no chats yet, home is the Memory tab.
    expect(page).to_have_url(web.base_url + "/settings/memory/")
    expect(page.get_by_role("heading", name="Memory", level=1)).to_be_visible()
    expect(page.get_by_role("switch", name="Memory")).to_have_attribute("aria-checked", "true")
    expect(page.get_by_test_id("memory-status")).to_have_text("Memory is on.")
    expect(page.get_by_label("Memory provider")).to_have_value("builtin")
    saving = page.get_by_role("group", name="When the assistant wants to save a note")
    for label in SAVE_LABELS:
        expect(saving.get_by_role("radio", name=label)).to_be_visible()
    expect(saving.get_by_role("radio", name="Ask me first")).to_be_checked()
    messaging = page.get_by_role("group", name="In messaging apps")
    for label in MESSAGING_LABELS:
        expect(messaging.get_by_role("radio", name=label)).to_be_visible()
    expect(messaging.get_by_role("radio", name="Ask me first")).to_be_checked()
    tabs = page.get_by_role("navigation", name="Whose notes")
    expect(tabs.get_by_role("link", name="Yours")).to_have_attribute("aria-current", "page")
    expect(tabs.get_by_role("link", name="Deleted agents")).to_be_visible()
    expect(page.get_by_text("No notes yet — ask the assistant to remember something")).to_be_visible()
    web.accessible()


def test_turning_memory_off_and_on_sticks_after_a_reload(web):
    web.register("alice")
    page = web.page
    switch = page.get_by_role("switch", name="Memory")
    switch.click()
    expect(page.get_by_role("switch", name="Memory")).to_have_attribute("aria-checked", "false")
    page.reload()
    expect(page.get_by_role("switch", name="Memory")).to_have_attribute("aria-checked", "false")
    expect(page.get_by_test_id("memory-status")).to_contain_text("Memory is off.")
    expect(page.get_by_test_id("memory-status")).to_contain_text("Your notes stay where they are")
    # Off is the same choice as the provider Off.
    expect(page.get_by_label("Memory provider")).to_have_value("off")
    web.accessible("memory tab, memory off")
    # The switch works from the keyboard too.
    page.get_by_role("switch", name="Memory").focus()
    page.keyboard.press("Enter")
    expect(page.get_by_role("switch", name="Memory")).to_have_attribute("aria-checked", "true")
    page.reload()
    expect(page.get_by_role("switch", name="Memory")).to_have_attribute("aria-checked", "true")
    expect(page.get_by_test_id("memory-status")).to_have_text("Memory is on.")


def test_each_save_level_and_messaging_choice_sticks_after_a_reload(web):
    web.register("alice")
    page = web.page
    for label in SAVE_LABELS:
        page.get_by_role("group", name="When the assistant wants to save a note").get_by_role(
            "radio", name=label).check()
        page.get_by_role("button", name="Save how notes are saved").click()
        expect(page.get_by_text(f"Saved: {label}.")).to_be_visible()
        page.reload()
        expect(page.get_by_role("group", name="When the assistant wants to save a note").get_by_role(
            "radio", name=label)).to_be_checked()
    for label in MESSAGING_LABELS:
        page.get_by_role("group", name="In messaging apps").get_by_role("radio", name=label).check()
        page.get_by_role("button", name="Save for messaging apps").click()
        expect(page.get_by_text(f"Saved for messaging apps: {label}.")).to_be_visible()
        page.reload()
        expect(page.get_by_role("group", name="In messaging apps").get_by_role("radio", name=label)).to_be_checked()


def test_picking_an_add_on_that_stopped_says_memory_is_off_and_names_it(web, monkeypatch):
    web.register("alice")
    page = web.page
    expect(page.get_by_label("Memory provider").locator("option")).to_have_text(
        ["Built-in", "Off", "Sample memory add-on"])
    page.get_by_label("Memory provider").select_option("sample")
    page.get_by_role("button", name="Use this provider").click()
    expect(page.get_by_test_id("memory-status")).to_have_text("Memory is on, served by the add-on “Sample memory add-on”.")
    monkeypatch.setenv("SAMPLE_PROVIDER_DOWN", "1")
    page.reload()
    expect(page.get_by_test_id("memory-status")).to_have_text(
        "Memory is off because the add-on “Sample memory add-on” is not running. Pick it again once it runs, or "
        "pick Built-in under Memory provider.")
    expect(page.get_by_label("Memory provider").locator("option:checked")).to_have_text(
        "Sample memory add-on (not running)")
    web.accessible("memory tab, add-on down")
    # It never falls back to Built-in by itself; picking Built-in turns memory on again.
    page.get_by_label("Memory provider").select_option("builtin")
    page.get_by_role("button", name="Use this provider").click()
    expect(page.get_by_test_id("memory-status")).to_have_text("Memory is on.")


def test_a_note_added_on_the_memory_tab_can_be_viewed_and_edited(web):
    web.register("alice")
    page = web.page
    add_note(web, "home", "lives in Rome", "Moved to Rome in 2020.")
    notes = page.locator(".notes-list")
    expect(notes).to_contain_text("home — lives in Rome")
    page.get_by_role("link", name="Open the note home").click()
    expect(page.get_by_role("heading", name="Note “home”")).to_be_visible()
    expect(page.get_by_text("In the index: lives in Rome")).to_be_visible()
    editor = page.get_by_label("Text of Memory/home.md")
    expect(editor).to_have_value("Moved to Rome in 2020.\n")
    web.accessible("memory note")
    editor.fill("Moved to Rome in 2020. Works in Milan.")
    page.get_by_role("button", name="Save").click()
    expect(page.get_by_text("Saved Memory/home.md.")).to_be_visible()
    expect(page.get_by_label("Text of Memory/home.md")).to_have_value("Moved to Rome in 2020. Works in Milan.")
    expect(page.get_by_text("Editing version 2")).to_be_visible()


def test_one_note_is_deleted_on_the_memory_tab_while_memory_is_off_and_undo_brings_it_back(web):
    web.register("alice")
    page = web.page
    add_note(web, "home", "lives in Rome", "Moved to Rome in 2020.")
    add_note(web, "diet", "vegetarian")
    page.get_by_role("switch", name="Memory").click()
    expect(page.get_by_role("switch", name="Memory")).to_have_attribute("aria-checked", "false")
    page.get_by_role("button", name="Delete the note home").click()
    notice = page.get_by_test_id("note-deleted")
    expect(notice).to_contain_text("Deleted the note “home”. Its files are in the Trash.")
    notes = page.locator(".notes-list")
    expect(notes).not_to_contain_text("home — lives in Rome")
    expect(notes).to_contain_text("diet — vegetarian")
    web.accessible("memory tab after a delete")
    notice.get_by_role("button", name="Undo").click()
    expect(page.get_by_role("status").get_by_text("memory is as it was before it")).to_be_visible()
    expect(notes).to_contain_text("home — lives in Rome")
    page.get_by_role("link", name="Open the note home").click()
    expect(page.get_by_label("Text of Memory/home.md")).to_have_value("Moved to Rome in 2020.\n")


def test_a_note_changed_in_another_tab_is_not_deleted_or_reweighed_from_this_one_and_its_text_is_shown(web):
    """Two tabs of the Memory tab: the second changes the note (its details, then its line) while the first
    still shows it as it was. The first's Delete and Save importance change nothing, say so where the note is,
    and show the note as it is now; done again from the page as it is now, they work."""
    web.register("alice")
    page = web.page
    add_note(web, "home", "lives in Rome", "Moved to Rome in 2020.")
    other = page.context.new_page()
    other.goto(web.base_url + "/settings/memory/note/?path=Memory/home.md")
    other.get_by_label("Text of Memory/home.md").fill("Moved to Monti in May.")
    other.get_by_role("button", name="Save").click()
    expect(other.get_by_text("Saved Memory/home.md.")).to_be_visible()

    page.get_by_role("button", name="Delete the note home").click()
    row = page.locator(".notes-list li").filter(has_text="home — lives in Rome")
    expect(row.get_by_role("status")).to_contain_text(
        "The note “home” changed since this page was loaded (in another tab, or by the assistant), so it was not "
        "deleted. It now reads: “lives in Rome”, with the details “Moved to Monti in May.”. Delete it again if "
        "you still want it gone.")
    expect(page.get_by_test_id("note-deleted")).to_have_count(0)
    web.accessible("memory tab after a stale delete")
    web.screenshot("stale-delete")

    other.goto(web.base_url + "/settings/memory/note/?path=Memory/index.md")
    other.locator("#id_content").fill("- home: lives in Lisbon -> home.md\n")
    other.get_by_role("button", name="Save").click()
    expect(other.get_by_text("Saved Memory/index.md.")).to_be_visible()
    row.locator("summary", has_text="Importance").click()
    row.get_by_label("How much recall weighs the note home").fill("0.9")
    row.get_by_role("button", name="Save importance").click()
    row = page.locator(".notes-list li").filter(has_text="home — lives in Lisbon")
    refusal = row.get_by_role("status")
    expect(refusal).to_contain_text("The note “home” changed since this page was loaded (in another tab, or by the "
                                    "assistant), so its importance was not changed. It now reads: “lives in Lisbon”, with "
                                    "the details “Moved to Monti in May.”. What you typed is still in its form: save "
                                    "it again if you still want it.")
    expect(row.get_by_test_id("note-importance")).to_have_count(0)
    # The section is open again with the number typed, the reason beside it: one click saves it.
    typed = row.get_by_label("How much recall weighs the note home")
    expect(typed).to_be_visible()
    expect(typed).to_have_value("0.9")
    expect(typed).to_be_in_viewport()
    expect(refusal).to_be_in_viewport()
    web.accessible("memory tab after a stale importance")
    web.screenshot("stale-importance")

    row.get_by_role("button", name="Save importance").click()
    expect(page.get_by_text("The note “home” now has importance 0.9.")).to_be_visible()
    page.get_by_role("button", name="Delete the note home").click()
    expect(page.get_by_test_id("note-deleted")).to_contain_text("Deleted the note “home”.")
    other.close()


def test_export_downloads_a_zip_of_the_notes_even_while_memory_is_off(web):
    web.register("alice")
    page = web.page
    add_note(web, "diet", "vegetarian")
    page.get_by_role("switch", name="Memory").click()
    expect(page.get_by_role("switch", name="Memory")).to_have_attribute("aria-checked", "false")
    with page.expect_download() as info:
        page.get_by_role("link", name="Export").click()
    download = info.value
    assert download.suggested_filename.startswith("memory-export-") and download.suggested_filename.endswith(".zip")
    with zipfile.ZipFile(io.BytesIO(Path(download.path()).read_bytes())) as archive:
        assert archive.namelist() == ["Memory/index.md"]
        assert archive.read("Memory/index.md").decode() == "- diet: vegetarian\n"


def test_forget_everything_asks_first_and_the_notes_come_back_from_the_trash(web):
    web.register("alice")
    page = web.page
    add_note(web, "home", "lives in Rome")
    page.get_by_role("link", name="Forget everything…").click()
    expect(page.get_by_role("heading", name="Forget everything?")).to_be_visible()
    expect(page.get_by_text("You can restore them later from Files → Trash.")).to_be_visible()
    web.accessible("forget confirm")
    page.get_by_role("button", name="Forget everything").click()
    expect(page.get_by_text("Your notes are in the Trash. You can restore them from Files → Trash.")).to_be_visible()
    expect(page.get_by_text("No notes yet — ask the assistant")).to_be_visible()
    add_note(web, "pets", "a cat called Miso")  # memory stays on: a note saved after forgetting
    page.get_by_role("link", name="Files").click()
    page.get_by_role("link", name="Trash (1)").click()
    expect(page.locator("strong", has_text="Everything in Memory")).to_be_visible()
    page.get_by_role("button", name="Restore Everything in Memory").click()
    expect(page.get_by_text("Restored Everything in Memory from the Trash.")).to_be_visible()
    web.go("/settings/memory/")
    expect(page.locator(".notes-list")).to_contain_text("home — lives in Rome")
    expect(page.locator(".notes-list")).to_contain_text("pets — a cat called Miso")


def test_a_note_deleted_on_the_tab_waits_in_the_trash_and_comes_back(web):
    web.register("alice")
    page = web.page
    add_note(web, "home", "lives in Rome", "Near the Pantheon since 2020.")
    add_note(web, "diet", "vegetarian")
    page.get_by_role("button", name="Delete the note home").click()
    expect(page.get_by_text("Deleted the note “home”. Its files are in the Trash.")).to_be_visible()
    page.get_by_test_id("note-deleted").get_by_role("link", name="Trash").click()
    expect(page.locator("strong", has_text="“home” in your notes")).to_be_visible()
    expect(page.get_by_text("- home: lives in Rome -> home.md")).to_be_visible()
    web.accessible("trash with a note")
    page.get_by_role("button", name="Restore “home” in your notes").click()
    expect(page.get_by_text("Restored “home” in your notes from the Trash.")).to_be_visible()
    web.go("/settings/memory/")
    expect(page.locator(".notes-list")).to_contain_text("home — lives in Rome")
    expect(page.locator(".notes-list")).to_contain_text("diet — vegetarian")


def test_with_files_off_on_the_server_the_tab_says_memory_is_off_and_why(web, settings):
    web.register("alice")
    settings.FILES_ENABLED = False
    page = web.page
    page.reload()
    expect(page.get_by_test_id("memory-status")).to_have_text(
        "Memory is off because this server has files turned off, and notes are files. Ask the administrator to "
        "turn files on.")
    # The user's own switch is still on: it is the server that is off.
    expect(page.get_by_role("switch", name="Memory")).to_have_attribute("aria-checked", "true")


def test_notes_of_a_messaging_conversation_have_their_own_tab(web):
    from django.contrib.auth import get_user_model

    from localai_memory.notes.paths import Scope
    from localai_memory.notes.services import note_upsert

    web.register("alice")
    owner = get_user_model().objects.get(username="alice")
    note_upsert(owner_id=owner.pk, scope=Scope.channel(3, "family-group"), topic="dinner",
                summary="family dinner on Sundays", source="model")
    page = web.page
    page.reload()
    page.get_by_role("navigation", name="Whose notes").get_by_role("link", name="Conversations").click()
    expect(page.locator(".notes-list")).to_contain_text("dinner — family dinner on Sundays")
    web.accessible("memory tab, conversations")


def test_each_note_says_who_changed_it_last_and_when(web):
    """At a glance: which notes the assistant saved by itself, and which are the person's own."""
    from datetime import timedelta

    import time_machine
    from django.contrib.auth import get_user_model
    from django.utils import timezone

    from localai_memory.notes.paths import Scope
    from localai_memory.notes.services import file_write, note_upsert
    from localai_memory.recall.service import notes_used

    web.register("alice")
    owner = get_user_model().objects.get(username="alice")
    with time_machine.travel(timezone.now() - timedelta(days=3), tick=False):
        note_upsert(owner_id=owner.pk, scope=Scope.user(), topic="units", summary="uses metric units",
                    details="Celsius.", source="model", automatic=True)
        note_upsert(owner_id=owner.pk, scope=Scope.user(), topic="style", summary="short answers",
                    details="No bullet lists.", source="model", automatic=True)
    page = web.page
    add_note(web, "home", "lives in Rome")
    # A person's edit of only the details makes the note theirs, though its line is the assistant's.
    file_write(owner_id=owner.pk, path="Memory/style.md", content="No bullet lists, ever.", version=1)
    # A turn brought "units" into a chat yesterday.
    notes_used(owner_id=owner.pk, notes=[("user", "", "units")], now=timezone.now() - timedelta(days=1))
    page.reload()

    notes = page.locator(".notes-list li")
    units = notes.filter(has_text="units — uses metric units")
    expect(units).to_contain_text("Last changed by the assistant, on its own, 3 days ago")
    expect(units).to_contain_text("Last brought into a chat 1 day ago")
    expect(notes.filter(has_text="home — lives in Rome")).not_to_contain_text("brought into a chat")
    expect(notes.filter(has_text="home — lives in Rome")).to_contain_text("Last changed by you, just now")
    expect(notes.filter(has_text="style — short answers")).to_contain_text("Last changed by you, just now")
    web.accessible("memory tab with who changed each note")


def test_a_note_with_a_suggestion_waiting_says_so_and_links_to_the_inbox(web):
    from django.contrib.auth import get_user_model

    from localai_memory.memory.proposals import proposal_create
    from localai_memory.notes.paths import Scope

    web.register("alice")
    owner = get_user_model().objects.get(username="alice")
    page = web.page
    add_note(web, "home", "lives in Rome")
    add_note(web, "diet", "vegetarian")
    add_note(web, "work", "nurse")
    proposal_create(owner_id=owner.pk, scope=Scope.user(), topic="home", summary="lives in Milan")
    proposal_create(owner_id=owner.pk, scope=Scope.user(), topic="diet", delete=True)
    page.reload()

    notes = page.locator(".notes-list li")
    expect(notes.filter(has_text="home — lives in Rome")).to_contain_text(
        "A suggestion to change it waits in your inbox")
    expect(notes.filter(has_text="diet — vegetarian")).to_contain_text(
        "A suggestion to forget it waits in your inbox")
    expect(notes.filter(has_text="work — nurse")).not_to_contain_text("waits in your inbox")
    web.accessible("memory tab with suggestions waiting")
    notes.filter(has_text="diet — vegetarian").get_by_role("link", name="A suggestion to forget it").click()
    expect(page.get_by_role("article", name="Forget the note “diet”?")).to_be_visible()


def fill_the_index(username: str, lines: int = 40) -> None:
    """``lines`` notes in the person's own index (40: full), written as the Add form would."""
    from django.contrib.auth import get_user_model

    from localai_memory.notes.paths import Scope
    from localai_memory.notes.services import note_upsert

    owner = get_user_model().objects.get(username=username)
    for number in range(lines):
        note_upsert(owner_id=owner.pk, scope=Scope.user(), topic=f"t{number:02}", summary=f"fact number {number}",
                    source="files", actor="you")


def test_each_forms_message_is_shown_in_view_where_its_redirect_lands(web):
    """A form of the Memory tab comes back to its own part of the page (#saving, a note's row, the Add form):
    its message is drawn there and focused, not at the top of the page, a screen or more above."""
    web.register("alice")
    page = web.page
    page.set_viewport_size({"width": 1200, "height": 700})
    fill_the_index("alice")
    page.reload()
    for button, text in [("Save how notes are saved", "Saved: Ask me first."),
                         ("Save for messaging apps", "Saved for messaging apps: Ask me first."),
                         ("Save these choices", "Saved your choices for suggestions and other assistants.")]:
        page.get_by_role("button", name=button).click()
        message = page.get_by_role("status").filter(has_text=text)
        expect(message).to_be_in_viewport()
        expect(message).to_be_focused()
    # A note's importance, far down a full index: the message is in that note's row.
    row = page.locator(".notes-list li").filter(has_text="t39 — fact number 39")
    row.locator("summary", has_text="Importance").click()
    row.get_by_label("How much recall weighs the note t39").fill("0.5")
    row.get_by_role("button", name="Save importance").click()
    message = page.get_by_role("status").filter(has_text="The note “t39” now has importance 0.5.")
    expect(message).to_be_in_viewport()
    expect(page.locator(".notes-list li").filter(has_text="t39 — fact number 39")).to_contain_text(
        "now has importance 0.5")
    # Adding a 41st note is refused: the form opens again with the text, and the reason is beside it, in view.
    page.get_by_text("Add a note", exact=True).click()
    page.get_by_label("What to remember (one line)").fill("one more fact")
    page.get_by_role("button", name="Save note").click()
    expect(page.get_by_label("What to remember (one line)")).to_have_value("one more fact")
    refusal = page.locator(".flash .notice.error")
    expect(refusal).to_have_count(1)
    expect(refusal).to_be_in_viewport()
    expect(page.get_by_label("What to remember (one line)")).to_be_in_viewport()
    web.accessible("memory tab, a note refused beside its form")


def test_export_with_no_notes_yet_says_there_is_nothing_to_export_rather_than_an_empty_zip(web):
    web.register("alice")
    page = web.page
    downloads: list = []
    page.on("download", lambda download: downloads.append(download))
    page.get_by_role("link", name="Export").click()
    message = page.locator("#notes").get_by_role("status").filter(has_text="There is nothing to export yet")
    expect(message).to_be_in_viewport()
    assert downloads == []
    web.accessible("memory tab, nothing to export")
