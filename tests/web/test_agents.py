"""The agent form: its Memory section, its save rule, delete with the agent's notes, export and import."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import expect

from localai_memory.agents.models import Agent
from localai_memory.agents.services import agent_create

pytestmark = pytest.mark.browser

CHOICES = ["Mine and its own", "Its own only", "Mine", "None"]


def create_agent(web, name: str, memory: str | None = None, rule: str | None = None) -> None:
    page = web.page
    web.go("/agents/new/")
    page.get_by_label("Name").fill(name)
    if memory:
        page.get_by_role("group", name="Memory").get_by_role("radio", name=memory, exact=True).check()
    if rule:
        page.get_by_role("group", name="When it wants to save a note").get_by_role("radio", name=rule).check()
    page.get_by_role("button", name="Save agent").click()
    expect(page.get_by_text(f"Saved the agent “{name}”.")).to_be_visible()


def agent_row(page, name: str):
    return page.locator("li[data-agent]").filter(has=page.get_by_text(name, exact=True))


def add_agent_note(web, name: str, topic: str, summary: str) -> None:
    page = web.page
    web.go("/settings/memory/")
    page.get_by_role("navigation", name="Whose notes").get_by_role("link", name=name).click()
    page.get_by_text(f"Add a note to {name}").click()
    page.get_by_label("Topic").fill(topic)
    page.get_by_label("What to remember (one line)").fill(summary)
    page.get_by_role("button", name="Save note").click()
    expect(page.locator(".notes-list")).to_contain_text(f"{topic} — {summary}")


def test_an_agent_can_be_made_with_each_memory_choice(web):
    web.register("alice")
    page = web.page
    web.go("/agents/")
    expect(page.get_by_text("No agents yet — an agent is a saved assistant")).to_be_visible()
    web.accessible("agents, empty")
    web.go("/agents/new/")
    memory = page.get_by_role("group", name="Memory")
    expect(memory.get_by_role("radio", name="Mine and its own")).to_be_checked()  # the default of new agents
    expect(memory.get_by_role("radio", name="As before")).to_have_count(0)
    rules = page.get_by_role("group", name="When it wants to save a note")
    expect(rules.get_by_role("radio")).to_have_count(3)
    expect(rules.get_by_role("radio", name="Use my setting")).to_be_checked()
    expect(rules.get_by_role("radio", name="Save it and tell me")).to_have_count(0)
    web.accessible("new agent form")
    for number, choice in enumerate(CHOICES):
        create_agent(web, f"Agent {number}", memory=choice, rule=["Use my setting", "Always confirm", "Never",
                                                                  "Always confirm"][number])
    web.go("/agents/")
    expect(agent_row(page, "Agent 0")).to_contain_text("Memory: Mine and its own · Saving: Use my setting")
    expect(agent_row(page, "Agent 1")).to_contain_text("Memory: Its own only · Saving: Always confirm")
    expect(agent_row(page, "Agent 2")).to_contain_text("Memory: Mine · Saving: Never")
    expect(agent_row(page, "Agent 3")).to_contain_text("Memory: None · Saving: Always confirm")
    web.accessible("agents list")
    agent_row(page, "Agent 1").get_by_role("link", name="Edit Agent 1").click()
    expect(page.get_by_role("group", name="Memory").get_by_role("radio", name="Its own only")).to_be_checked()
    expect(page.get_by_role("group", name="When it wants to save a note").get_by_role(
        "radio", name="Always confirm")).to_be_checked()
    # Each agent has its own tab of notes on the Memory tab.
    web.go("/settings/memory/")
    tabs = page.get_by_role("navigation", name="Whose notes")
    expect(tabs.get_by_role("link")).to_have_text(["Yours", "Agent 0", "Agent 1", "Agent 2", "Agent 3",
                                                   "Deleted agents"])


def test_an_agent_saved_before_memory_choices_shows_as_before_with_a_way_to_pick_a_clearer_one(web):
    web.register("alice")
    page = web.page
    owner = get_user_model().objects.get(username="alice")
    old = agent_create(owner_id=owner.pk, name="Old helper", addons=["memory"])  # no memory field: as before
    web.go("/agents/")
    expect(agent_row(page, "Old helper")).to_contain_text("Memory: As before")
    web.go(f"/agents/{old.pk}/")
    memory = page.get_by_role("group", name="Memory")
    expect(memory.get_by_role("radio", name="As before")).to_be_checked()
    expect(page.get_by_text("This agent has no memory choice: it was saved before memory choices existed, or "
                            "without one.")).to_be_visible()
    web.accessible("agent form, as before")
    # Saving without picking keeps it as before; picking Mine makes it clear.
    page.get_by_role("button", name="Save agent").click()
    expect(agent_row(page, "Old helper")).to_contain_text("Memory: As before")
    web.go(f"/agents/{old.pk}/")
    page.get_by_role("group", name="Memory").get_by_role("radio", name="Mine", exact=True).check()
    page.get_by_role("button", name="Save agent").click()
    expect(agent_row(page, "Old helper")).to_contain_text("Memory: Mine ·")
    web.go(f"/agents/{old.pk}/")
    expect(page.get_by_role("group", name="Memory").get_by_role("radio", name="As before")).to_have_count(0)


def test_with_memory_off_the_agent_form_says_so_read_only(web):
    web.register("alice")
    page = web.page
    page.get_by_role("switch", name="Memory").click()
    expect(page.get_by_role("switch", name="Memory")).to_have_attribute("aria-checked", "false")
    web.go("/agents/new/")
    line = page.get_by_test_id("memory-off-line")
    expect(line).to_contain_text("Memory is off in your settings.")
    expect(line.get_by_role("link", name="Turn it on under Your settings → Memory")).to_be_visible()
    web.accessible("agent form, memory off")


def test_deleting_an_agent_with_notes_asks_keep_export_or_delete(web):
    web.register("alice")
    page = web.page
    for name in ("Keeper", "Exporter", "Deleter"):
        create_agent(web, name)
        add_agent_note(web, name, "tone", f"{name.lower()} answers briefly")

    # Keep (the default): the notes show under Deleted agents.
    web.go("/agents/")
    agent_row(page, "Keeper").get_by_role("link", name="Delete Keeper").click()
    expect(page.get_by_role("heading", name="Delete the agent “Keeper”?")).to_be_visible()
    choices = page.get_by_role("group", name="It has its own notes")
    expect(choices.get_by_role("radio")).to_have_count(3)
    expect(choices.get_by_role("radio", name="Keep")).to_be_checked()
    web.accessible("delete agent with notes")
    page.get_by_role("button", name="Delete agent").click()
    expect(page.get_by_text("The agent is deleted. Its notes stay; they show on the Memory tab under Deleted "
                            "agents.")).to_be_visible()
    web.go("/settings/memory/?tab=deleted")
    expect(page.locator(".scope h3")).to_have_text("Deleted agent “Keeper”")
    expect(page.locator(".notes-list")).to_contain_text("tone — keeper answers briefly")

    # Export then delete: a zip of the notes downloads, and they go to the Trash.
    web.go("/agents/")
    agent_row(page, "Exporter").get_by_role("link", name="Delete Exporter").click()
    page.get_by_role("radio", name="Export then delete").check()
    with page.expect_download() as info:
        page.get_by_role("button", name="Delete agent").click()
    download = info.value
    assert download.suggested_filename.endswith("-exporter-notes.zip")
    with zipfile.ZipFile(io.BytesIO(Path(download.path()).read_bytes())) as archive:
        assert [name.rsplit("/", 1)[-1] for name in archive.namelist()] == ["index.md", "folders.json"]
        assert b"exporter answers briefly" in archive.read(archive.namelist()[0])
    expect(page.get_by_text("The agent is deleted and its notes are in the Trash")).to_be_visible()

    # Delete: the notes go to the Trash.
    agent_row(page, "Deleter").get_by_role("link", name="Delete Deleter").click()
    page.get_by_role("radio", name="Delete", exact=True).check()
    page.get_by_role("button", name="Delete agent").click()
    expect(page.get_by_text("The agent is deleted and its notes are in the Trash")).to_be_visible()
    expect(page.get_by_text("No agents yet")).to_be_visible()
    web.go("/files/trash/")
    expect(page.get_by_role("button", name="Restore Notes of the deleted agent Exporter")).to_be_visible()
    expect(page.get_by_role("button", name="Restore Notes of the deleted agent Deleter")).to_be_visible()
    web.go("/settings/memory/?tab=deleted")
    expect(page.locator(".notes-list")).not_to_contain_text("exporter")
    # Kept notes stay until you delete them.
    page.get_by_role("button", name="Delete these notes of Deleted agent “Keeper”").click()
    expect(page.get_by_text("Moved the notes of the deleted agent")).to_be_visible()
    expect(page.get_by_text("No notes of deleted agents")).to_be_visible()


def test_an_agent_without_notes_is_deleted_without_the_question(web):
    web.register("alice")
    page = web.page
    create_agent(web, "Plain")
    agent_row(page, "Plain").get_by_role("link", name="Delete Plain").click()
    expect(page.get_by_text("It has no notes of its own.")).to_be_visible()
    expect(page.get_by_role("radio")).to_have_count(0)
    page.get_by_role("button", name="Delete agent").click()
    expect(page.get_by_text("The agent is deleted. It had no notes.")).to_be_visible()


def test_an_agent_whose_notes_a_memory_addon_may_hold_asks_before_the_addon_drops_them(web, monkeypatch):
    import sample_memory_provider

    from localai_memory.memory.services import provider_pick

    for name in ("SAMPLE_PROVIDER_DOWN", "SAMPLE_PROVIDER_BROKEN", "SAMPLE_PROVIDER_ONE_STORE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(sample_memory_provider, "SCOPED", {})
    web.register("alice")
    page = web.page
    user = get_user_model().objects.get(username="alice")
    provider_pick(user_id=user.pk, provider="sample")
    for name in ("Chef", "Coach"):
        create_agent(web, name, memory="Its own only")
    ids = dict(Agent.objects.filter(owner=user).values_list("name", "pk"))
    for name, pk in ids.items():
        sample_memory_provider.SCOPED[(user.pk, f"agent:{pk}")] = {"recipe": f"{name} knows risotto"}

    agent_row(page, "Chef").get_by_role("link", name="Delete Chef").click()
    group = page.get_by_role("group", name="Its notes may be in the memory add-on “Sample memory add-on”.")
    expect(group.get_by_role("radio", name="Keep")).to_be_checked()  # the default: nothing is lost
    page.get_by_role("button", name="Delete agent").click()
    expect(page.get_by_text("The agent is deleted.")).to_be_visible()
    assert sample_memory_provider.SCOPED[(user.pk, f"agent:{ids['Chef']}")] == {"recipe": "Chef knows risotto"}

    agent_row(page, "Coach").get_by_role("link", name="Delete Coach").click()
    page.get_by_role("radio", name="Delete").check()
    page.get_by_role("button", name="Delete agent").click()
    expect(page.get_by_text("The memory add-on Sample memory add-on forgot the notes of the agent “Coach”.")
           ).to_be_visible()
    assert (user.pk, f"agent:{ids['Coach']}") not in sample_memory_provider.SCOPED


def test_an_addon_not_running_when_an_agent_was_deleted_is_asked_again_from_the_memory_tab(web, monkeypatch):
    """Its warning points to the Memory tab, which lists the request with Ask again: once the add-on runs, one
    click drops that agent's notes there, and nothing else of the person's."""
    import sample_memory_provider

    from localai_memory.memory.services import provider_pick

    for name in ("SAMPLE_PROVIDER_DOWN", "SAMPLE_PROVIDER_BROKEN", "SAMPLE_PROVIDER_ONE_STORE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(sample_memory_provider, "SCOPED", {})
    web.register("alice")
    page = web.page
    user = get_user_model().objects.get(username="alice")
    monkeypatch.setitem(sample_memory_provider.NOTES, user.pk, {"kite": "flies a red kite"})
    provider_pick(user_id=user.pk, provider="sample")
    create_agent(web, "Chef", memory="Its own only")
    chef = Agent.objects.get(owner=user).pk
    sample_memory_provider.SCOPED[(user.pk, f"agent:{chef}")] = {"recipe": "Chef knows risotto"}
    monkeypatch.setenv("SAMPLE_PROVIDER_DOWN", "1")
    agent_row(page, "Chef").get_by_role("link", name="Delete Chef").click()
    page.get_by_role("radio", name="Delete").check()
    page.get_by_role("button", name="Delete agent").click()
    expect(page.get_by_text("is not running, so it was not asked to forget the notes of the agent “Chef” and may "
                            "still hold them; it is listed on the Memory tab, to ask it again.")).to_be_visible()

    web.go("/settings/memory/")
    waiting = page.get_by_test_id("addon-forgets")
    expect(waiting).to_contain_text("The memory add-on “Sample memory add-on” may still hold the notes of the agent "
                                    "“Chef”: it was not running when asked")
    web.accessible("memory tab with a request to an add-on to ask again")
    web.screenshot("waiting")
    waiting.get_by_role("button", name="Ask again to drop the notes of the agent “Chef”").click()
    expect(waiting.get_by_role("status")).to_contain_text("The memory add-on Sample memory add-on is not running")
    expect(waiting.get_by_role("status")).to_be_in_viewport()
    assert sample_memory_provider.SCOPED[(user.pk, f"agent:{chef}")] == {"recipe": "Chef knows risotto"}

    monkeypatch.delenv("SAMPLE_PROVIDER_DOWN")  # it runs again
    waiting.get_by_role("button", name="Ask again to drop the notes of the agent “Chef”").click()

    expect(waiting.get_by_role("status")).to_contain_text(
        "The memory add-on Sample memory add-on forgot the notes of the agent “Chef”.")
    expect(waiting.get_by_role("button", name="Ask again")).to_have_count(0)
    assert (user.pk, f"agent:{chef}") not in sample_memory_provider.SCOPED
    assert sample_memory_provider.NOTES[user.pk] == {"kite": "flies a red kite"}
    web.accessible("memory tab after an add-on was asked again")
    page.reload()
    expect(page.get_by_test_id("addon-forgets")).to_have_count(0)


def test_an_agent_is_exported_and_imported_as_a_new_agent_with_the_same_choices_and_no_notes(web, tmp_path):
    web.register("alice")
    page = web.page
    create_agent(web, "Cook", memory="Its own only", rule="Never")
    add_agent_note(web, "Cook", "diet", "vegetarian recipes")
    web.go("/agents/")
    with page.expect_download() as info:
        agent_row(page, "Cook").get_by_role("link", name="Export Cook").click()
    download = info.value
    document = json.loads(Path(download.path()).read_text())
    assert document["agent"]["memory"] == "own" and document["agent"]["memory_save"] == "never"
    path = tmp_path / "cook.json"
    document["agent"]["name"] = "Cook copy"
    path.write_text(json.dumps(document))
    page.get_by_label("Agent file (JSON, from Export)").set_input_files(str(path))
    page.get_by_role("button", name="Import").click()
    expect(page.get_by_text("Imported the agent “Cook copy”")).to_be_visible()
    expect(agent_row(page, "Cook copy")).to_contain_text("Memory: Its own only · Saving: Never")
    web.go("/settings/memory/")
    page.get_by_role("navigation", name="Whose notes").get_by_role("link", name="Cook copy").click()
    expect(page.get_by_text("No notes yet — this agent's own notes show here")).to_be_visible()
    # A file that is not an agent export is refused with a clear message.
    bad = tmp_path / "bad.json"
    bad.write_text('{"hello": 1}')
    web.go("/agents/")
    page.get_by_label("Agent file (JSON, from Export)").set_input_files(str(bad))
    page.get_by_role("button", name="Import").click()
    expect(page.get_by_text("not an agent export file")).to_be_visible()


def test_a_chat_with_an_agent_starts_from_the_agents_list(web):
    web.register("alice")
    page = web.page
    create_agent(web, "Cook")
    agent_row(page, "Cook").get_by_role("button", name="Chat with Cook").click()
    expect(page.get_by_text("Agent: Cook")).to_be_visible()
