"""Files: the Memory folder as a tree; open, edit (a stale edit warns), history and restore, Trash."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.browser


def create_file(web, path: str, text: str) -> None:
    page = web.page
    web.go("/files/")
    page.get_by_text("New file", exact=True).click()
    page.get_by_label("Path").fill(path)
    page.get_by_label("Text", exact=True).fill(text)
    page.get_by_role("button", name="Create").click()
    expect(page.get_by_text(f"Created {path}.")).to_be_visible()


def test_files_starts_empty_and_shows_the_memory_folder_as_a_tree(web):
    web.register("alice")
    page = web.page
    web.go("/files/")
    expect(page.get_by_text("No notes yet — notes you confirm in a chat")).to_be_visible()
    web.accessible("files, empty")
    create_file(web, "Memory/index.md", "- home: lives in Rome -> home.md\n")
    create_file(web, "Memory/home.md", "Rome, Trastevere.\n")
    # A folder of an agent that is not yours is not made (no chat would read it).
    web.go("/files/")
    page.get_by_text("New file", exact=True).click()
    page.get_by_label("Path").fill("Memory/agents/7/index.md")
    page.get_by_label("Text", exact=True).fill("- tone: short answers\n")
    page.get_by_role("button", name="Create").click()
    expect(page.get_by_text("No such agent.")).to_be_visible()
    # The notes of an agent you deleted, kept, show under its number.
    from django.contrib.auth import get_user_model

    from localai_memory.agents.services import agent_create, agent_delete
    from localai_memory.notes.paths import Scope
    from localai_memory.notes.services import note_upsert

    alice = get_user_model().objects.get(username="alice")
    agent = agent_create(owner_id=alice.pk, name="Chef")
    note_upsert(owner_id=alice.pk, scope=Scope.agent(agent.pk), topic="tone", summary="short answers",
                source="files")
    agent_delete(owner_id=alice.pk, agent_id=agent.pk, memory="keep")
    web.go("/files/")
    tree = page.get_by_test_id("tree")
    expect(tree.get_by_role("link", name="Memory/index.md")).to_be_visible()
    expect(tree.get_by_role("link", name="Memory/home.md")).to_be_visible()
    expect(tree).to_contain_text("Deleted agent “Chef”/")
    expect(tree.get_by_role("link", name=f"Memory/agents/{agent.pk}/index.md")).to_be_visible()
    web.accessible("files tree")


def test_edit_a_note_then_restore_an_earlier_version_from_its_history(web):
    web.register("alice")
    page = web.page
    create_file(web, "Memory/home.md", "Lives in Rome.\n")
    editor = page.get_by_label("Text of Memory/home.md")
    editor.fill("Lives in Milan.\n")
    page.get_by_role("button", name="Save").click()
    expect(page.get_by_text("Saved Memory/home.md.")).to_be_visible()
    expect(page.get_by_text("Editing version 2")).to_be_visible()
    web.accessible("file open")
    page.get_by_role("link", name="History").click()
    expect(page.get_by_role("heading", name="History of Memory/home.md")).to_be_visible()
    versions = page.get_by_role("list", name="Versions, newest first")
    expect(versions.locator("li[data-version='2']")).to_contain_text("current")
    expect(versions.locator("li[data-version='1'] pre")).to_have_text("Lives in Rome.\n")
    web.accessible("file history")
    page.get_by_role("button", name="Restore version 1").click()
    expect(page.get_by_text("Restored version 1 of Memory/home.md.")).to_be_visible()
    # Nothing is lost: the restore is version 3, and version 2 is still there.
    expect(versions.locator("li[data-version='3']")).to_contain_text("current")
    expect(versions.locator("li[data-version='2'] pre")).to_have_text("Lives in Milan.\n")
    web.go("/files/open/?path=Memory/home.md")
    expect(page.get_by_label("Text of Memory/home.md")).to_have_value("Lives in Rome.\n")


def test_a_stale_edit_warns_instead_of_overwriting(web):
    web.register("alice")
    page = web.page
    create_file(web, "Memory/home.md", "Lives in Rome.\n")
    other = page.context.new_page()
    other.goto(web.base_url + "/files/open/?path=Memory/home.md")
    # The other tab saves first.
    other.get_by_label("Text of Memory/home.md").fill("Lives in Turin.\n")
    other.get_by_role("button", name="Save").click()
    expect(other.get_by_text("Saved Memory/home.md.")).to_be_visible()
    other.close()
    # This tab still edits version 1.
    page.get_by_label("Text of Memory/home.md").fill("Lives in Milan.\n")
    page.get_by_role("button", name="Save").click()
    warning = page.get_by_test_id("stale-warning")
    expect(warning).to_contain_text("This file changed since you opened it.")
    expect(warning).to_contain_text("nothing was overwritten")
    expect(page.get_by_test_id("your-text")).to_have_text("Lives in Milan.\n")
    expect(page.get_by_label("Text of Memory/home.md")).to_have_value("Lives in Turin.\n")
    expect(page.get_by_text("Editing version 2")).to_be_visible()
    web.accessible("stale edit")


def test_delete_moves_a_file_to_the_trash_and_restore_brings_it_back(web):
    web.register("alice")
    page = web.page
    create_file(web, "Memory/diet.md", "Vegetarian.\n")
    page.get_by_role("button", name="Move to Trash").click()
    expect(page.get_by_text("Moved Memory/diet.md to the Trash.")).to_be_visible()
    expect(page.get_by_text("No notes yet — notes you confirm")).to_be_visible()
    page.get_by_role("link", name="Trash (1)").click()
    expect(page.get_by_role("heading", name="Trash")).to_be_visible()
    web.accessible("trash")
    page.get_by_role("button", name="Restore Memory/diet.md").click()
    expect(page.get_by_text("Restored Memory/diet.md from the Trash.")).to_be_visible()
    expect(page.get_by_text("The Trash is empty")).to_be_visible()
    web.go("/files/open/?path=Memory/diet.md")
    expect(page.get_by_label("Text of Memory/diet.md")).to_have_value("Vegetarian.\n")


def test_an_index_that_is_not_an_index_is_refused_with_the_text_kept(web):
    web.register("alice")
    page = web.page
    create_file(web, "Memory/index.md", "- home: lives in Rome\n")
    page.get_by_label("Index of Yours").fill("this is not an index line\n")
    page.get_by_role("button", name="Save").click()
    expect(page.get_by_role("alert")).to_contain_text("line 1 is not an index entry")
    expect(page.get_by_label("Index of Yours")).to_have_value("this is not an index line\n")


def test_moving_an_index_to_the_trash_asks_first_says_how_many_notes_go_and_offers_an_undo(web):
    from django.contrib.auth import get_user_model

    from localai_memory.notes.models import NoteFile

    from .conftest import signed_in
    from .test_memory_tab import add_note

    web.register("alice")
    page = web.page
    add_note(web, "home", "lives in Rome", "Trastevere.")
    add_note(web, "diet", "vegetarian")
    add_note(web, "work", "nurse")
    alice = get_user_model().objects.get(username="alice")
    # A form that posts without the confirmation (an old page, a script) gets the question too, not a delete.
    asked = signed_in(alice).post("/files/delete/", {"path": "Memory/index.md"})
    assert asked.status_code == 200 and "all 3 notes of this index" in asked.content.decode()
    assert NoteFile.objects.filter(owner=alice, path="Memory/index.md").exists()

    web.go("/files/open/?path=Memory/index.md")
    page.get_by_role("link", name="Move to Trash…").click()
    expect(page.get_by_role("heading", name="Move this index and all its notes to the Trash?")).to_be_visible()
    what = page.get_by_test_id("what-goes")
    expect(what).to_contain_text("and with it all 3 notes of this index:")
    for topic in ("home", "diet", "work"):
        expect(what).to_contain_text(topic)
    expect(what).to_contain_text("The 1 topic file beside it goes too.")
    web.accessible("move an index to the trash")
    page.get_by_role("link", name="Cancel").click()
    expect(page.get_by_role("heading", name="Memory/index.md")).to_be_visible()
    assert NoteFile.objects.filter(owner=alice).count() == 2  # nothing moved

    page.get_by_role("link", name="Move to Trash…").click()
    page.get_by_role("button", name="Move the index and its 3 notes to the Trash").click()
    notice = page.get_by_test_id("trashed")
    expect(notice).to_contain_text("Moved Memory/index.md and its 1 topic file to the Trash.")
    assert not NoteFile.objects.filter(owner=alice).exists()
    web.accessible("files after moving the index to the trash")
    notice.get_by_role("button", name="Undo moving Memory/index.md and its 1 topic file to the Trash").click()
    expect(page.get_by_text("Restored Memory/index.md and its 1 topic file from the Trash.")).to_be_visible()
    expect(page.get_by_test_id("trashed")).to_have_count(0)
    web.go("/settings/memory/")
    for line in ("home — lives in Rome", "diet — vegetarian", "work — nurse"):
        expect(page.locator(".notes-list")).to_contain_text(line)
