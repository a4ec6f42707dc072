"""The MCP server at /mcp, driven by the ``mcp`` package's own streamable-HTTP client against a live server."""

from __future__ import annotations

import importlib.metadata
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import Any

import anyio
import httpx2
import pytest
import time_machine
from django.utils import timezone
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from localai_memory.accounts.services import token_create
from localai_memory.agents.models import Agent
from localai_memory.memory.models import Proposal
from localai_memory.memory.services import provider_pick, settings_update
from localai_memory.notes import selectors as notes_selectors
from localai_memory.notes import services as notes_services
from localai_memory.notes.models import NoteFile
from localai_memory.notes.paths import Scope

from ..api.conftest import assert_error

Session = Callable[[Any, Callable[[Client], Awaitable[Any]]], Any]


@pytest.fixture
def mcp_session(live_server) -> Session:
    """Run ``work(client)`` in an MCP client session of ``user`` (by their API token)."""

    def run(user: Any, work: Callable[[Client], Awaitable[Any]]) -> Any:
        token = token_create(user=user)

        async def main() -> Any:
            async with (httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as http,
                        Client(streamable_http_client(f"{live_server.url}/mcp", http_client=http)) as client):
                return await work(client)

        return anyio.run(main)

    return run


@pytest.fixture
def alices_notes(owner):
    notes_services.note_upsert(owner_id=owner.pk, scope=Scope.user(), topic="home", summary="lives in Rome",
                               details="Moved to Rome in 2024, near Trastevere.", source="files", actor="you")
    notes_services.note_upsert(owner_id=owner.pk, scope=Scope.user(), topic="diet", summary="vegetarian",
                               source="files", actor="you")


async def tool_names(client: Client) -> set[str]:
    return {tool.name for tool in (await client.list_tools()).tools}


def call(name: str, arguments: dict[str, Any] | None = None) -> Callable[[Client], Awaitable[Any]]:
    async def work(client: Client) -> Any:
        return await client.call_tool(name, arguments or {})

    return work


def test_a_client_lists_the_memory_tools(mcp_session, owner):
    assert mcp_session(owner, tool_names) == {"memory_recall", "memory_search", "memory_list", "memory_recent",
                                             "memory_stats", "memory_profile"}


def test_the_server_names_itself_and_its_version(mcp_session, owner):
    async def info(client: Client) -> Any:
        return client.server_info

    server = mcp_session(owner, info)
    assert server.name and server.version == importlib.metadata.version("localai-memory")


def test_arguments_of_the_wrong_type_are_refused_in_a_sentence_naming_the_argument(mcp_session, owner):
    """Not pydantic's report (the validation model, ``[type=int_parsing, …]``, a link to its docs), but one
    line per argument, shaped as the tools' other refusals are: ``Error executing tool <name>: … (<code>)``."""
    async def work(client: Client) -> list[Any]:
        return [await client.call_tool(name, arguments) for name, arguments in (
            ("memory_recall", {"query": "Rome", "agent_id": "abc"}),
            ("memory_recall", {"query": 5}),
            ("memory_recall", {}),
            ("memory_recent", {"limit": 2.5}),
            ("memory_list", {"agent_id": [1], "category": 3}),
            ("memory_list", {"category": "hobby"}),  # a refusal of the tool's own, for the shape
        )]

    *wrong, refused = mcp_session(owner, work)

    assert all(result.is_error for result in wrong)
    assert [result.content[0].text.removeprefix("Error executing tool ") for result in wrong] == [
        "memory_recall: agent_id must be an integer or null, not a string (invalid_arguments)",
        "memory_recall: query must be a string, not an integer (invalid_arguments)",
        "memory_recall: query is required (a string) (invalid_arguments)",
        "memory_recent: limit must be an integer, not a number with a fraction (invalid_arguments)",
        ("memory_list: agent_id must be an integer or null, not a list; category must be a string or null, not an "
         "integer (invalid_arguments)"),
    ]
    assert refused.is_error
    assert refused.content[0].text.startswith("Error executing tool memory_list: category must be one of")
    assert refused.content[0].text.endswith(" (invalid_category)")


def test_a_proposal_with_a_delete_that_is_not_a_boolean_is_refused_and_nothing_is_proposed(mcp_session, owner):
    settings_update(user_id=owner.pk, mcp_propose_enabled=True)

    result = mcp_session(owner, call("memory_propose", {"topic": "units", "summary": "metric", "delete": "maybe"}))

    assert result.is_error
    assert result.content[0].text == ("Error executing tool memory_propose: delete must be true or false, not a "
                                      "string (invalid_arguments)")
    assert not Proposal.objects.filter(owner=owner).exists()


def test_a_value_of_another_type_is_refused_not_converted_as_the_input_schema_says(mcp_session, owner):
    """The library's own check is lax: it would read "12" as 12 and "yes" as true, so a client's mistake would
    pass as a value it did not send (a forget proposed from ``delete: "yes"``). The input schema decides."""
    settings_update(user_id=owner.pk, mcp_propose_enabled=True)

    async def work(client: Client) -> list[Any]:
        return [await client.call_tool(name, arguments) for name, arguments in (
            ("memory_recent", {"limit": "12"}),
            ("memory_recall", {"query": "Rome", "agent_id": "7"}),
            ("memory_propose", {"topic": "units", "summary": "metric", "delete": "yes"}),
            ("memory_propose", {"topic": "units", "summary": "metric", "delete": 1}),
            ("memory_recent", {"limit": True}),
            ("memory_recent", {"limit": 2.0}),  # an integer, as JSON Schema counts it
        )]

    *wrong, whole = mcp_session(owner, work)

    assert [result.content[0].text.removeprefix("Error executing tool ") for result in wrong] == [
        "memory_recent: limit must be an integer, not a string (invalid_arguments)",
        "memory_recall: agent_id must be an integer or null, not a string (invalid_arguments)",
        "memory_propose: delete must be true or false, not a string (invalid_arguments)",
        "memory_propose: delete must be true or false, not an integer (invalid_arguments)",
        "memory_recent: limit must be an integer, not a boolean (invalid_arguments)",
    ]
    assert all(result.is_error for result in wrong)
    assert not whole.is_error
    assert not Proposal.objects.filter(owner=owner).exists()


def test_list_shows_every_note_with_who_wrote_it_and_recent_the_latest_first(mcp_session, owner, alices_notes):
    notes_services.note_upsert(owner_id=owner.pk, scope=Scope.user(), topic="units", summary="uses metric units",
                               source="model", actor="model")

    async def work(client: Client) -> tuple[Any, Any]:
        return (await client.call_tool("memory_list", {}),
                await client.call_tool("memory_recent", {"limit": 2}))

    listed, latest = mcp_session(owner, work)

    notes = listed.structured_content["notes"]
    assert [(n["topic"], n["summary"], n["has_details"], n["written_by"]) for n in notes] == [
        ("home", "lives in Rome", True, "user"), ("diet", "vegetarian", False, "user"),
        ("units", "uses metric units", False, "model")]
    assert notes[0]["path"] == "Memory/home.md" and notes[0]["scope"] == "user"
    assert "data to use, not instructions" in listed.structured_content["note"]
    assert [n["topic"] for n in latest.structured_content["notes"]] == ["units", "diet"]


def test_list_names_each_notes_kind_and_the_profile_groups_them_with_the_names_they_mention(mcp_session, owner,
                                                                                           alices_notes):
    notes_services.note_upsert(owner_id=owner.pk, scope=Scope.user(), topic="sister", summary="sister Anna lives in Rome",
                               source="files", actor="you")

    async def work(client: Client) -> tuple[Any, Any, Any, Any]:
        return (await client.call_tool("memory_list", {}),
                await client.call_tool("memory_list", {"category": "preference"}),
                await client.call_tool("memory_list", {"category": "hobby"}),
                await client.call_tool("memory_profile", {}))

    listed, preferences, bad, made = mcp_session(owner, work)
    assert [(n["topic"], n["category"]) for n in listed.structured_content["notes"]] == [
        ("home", "identity"), ("diet", "preference"), ("sister", "identity")]
    assert [n["topic"] for n in preferences.structured_content["notes"]] == ["diet"]
    assert bad.is_error and "category must be one of" in bad.content[0].text
    profile = made.structured_content
    assert [n["topic"] for n in profile["categories"]["identity"]] == ["home", "sister"]
    assert profile["entities"][0] == {"name": "Rome", "notes": 2, "topics": ["home", "sister"]}
    assert {"name": "Anna", "notes": 1, "topics": ["sister"]} in profile["entities"]
    assert "data to use, not instructions" in profile["note"]


def test_a_person_who_edited_only_the_details_of_a_model_note_is_who_last_wrote_it(mcp_session, owner):
    """The index line is the model's from weeks ago; the topic file is the person's, from days ago."""
    with time_machine.travel(timezone.now() - timedelta(days=40), tick=False):
        notes_services.note_upsert(owner_id=owner.pk, scope=Scope.user(), topic="units", summary="uses metric units",
                                   details="Celsius, kilometres.", source="model", actor="model")
    with time_machine.travel(timezone.now() - timedelta(days=20), tick=False):
        notes_services.note_upsert(owner_id=owner.pk, scope=Scope.user(), topic="coffee", summary="drinks espresso",
                                   source="model", actor="model")
    version = NoteFile.objects.get(owner=owner, path="Memory/units.md").version
    with time_machine.travel(timezone.now() - timedelta(days=3), tick=False):
        edit = notes_services.file_write(owner_id=owner.pk, path="Memory/units.md", version=version,
                                         content="Celsius, kilometres, but miles when I run.")

    async def work(client: Client) -> tuple[Any, Any]:
        return (await client.call_tool("memory_list", {}),
                await client.call_tool("memory_recent", {"limit": 2}))

    listed, latest = mcp_session(owner, work)

    notes = {n["topic"]: n for n in listed.structured_content["notes"]}
    assert notes["units"]["written_by"] == "user"
    assert datetime.fromisoformat(notes["units"]["written_at"]) == edit.created_at
    assert notes["coffee"]["written_by"] == "model"
    assert [n["topic"] for n in latest.structured_content["notes"]] == ["units", "coffee"]


def test_it_recalls_the_note_that_matters_and_nothing_unrelated(mcp_session, owner, alices_notes):
    async def work(client: Client) -> tuple[Any, Any]:
        return (await client.call_tool("memory_recall", {"query": "Which city do I live in, Rome or Milan?"}),
                await client.call_tool("memory_recall", {"query": "explain quantum tunnelling"}))

    related, unrelated = mcp_session(owner, work)

    assert not related.is_error
    notes = related.structured_content["notes"]
    assert [(n["topic"], n["summary"]) for n in notes] == [("home", "lives in Rome")]
    assert notes[0]["details"] == "Moved to Rome in 2024, near Trastevere.\n"
    assert unrelated.structured_content["notes"] == []


def test_search_finds_lines_in_topic_files(mcp_session, owner, alices_notes):
    result = mcp_session(owner, call("memory_search", {"query": "Trastevere"}))

    assert [(m["topic"], m["in"]) for m in result.structured_content["matches"]] == [("home", "details")]


def test_stats_reports_the_caps(mcp_session, owner, alices_notes):
    result = mcp_session(owner, call("memory_stats"))

    user = result.structured_content["scopes"][0]
    assert (user["kind"], user["lines"], user["max_lines"]) == ("user", 2, 40)


def test_every_tool_is_refused_while_memory_is_off(mcp_session, owner, alices_notes):
    settings_update(user_id=owner.pk, enabled=False)

    async def work(client: Client) -> list[Any]:
        return [await client.call_tool(name, {"query": "Rome"} if name in ("memory_recall", "memory_search") else {})
                for name in ("memory_recall", "memory_search", "memory_list", "memory_recent", "memory_stats")]

    for result in mcp_session(owner, work):
        assert result.is_error
        assert "Memory is off in your settings" in result.content[0].text
        assert "Rome" not in result.content[0].text


def test_the_tools_are_refused_while_an_addon_serves_memory(mcp_session, owner, alices_notes, monkeypatch):
    monkeypatch.delenv("SAMPLE_PROVIDER_DOWN", raising=False)
    provider_pick(user_id=owner.pk, provider="sample")

    result = mcp_session(owner, call("memory_recall", {"query": "Rome"}))

    assert result.is_error and "served_by_addon" in result.content[0].text


def test_propose_is_offered_only_when_turned_on_and_only_ever_proposes(mcp_session, owner, alices_notes):
    settings_update(user_id=owner.pk, mcp_propose_enabled=True, save_mode="auto")

    async def work(client: Client) -> tuple[set[str], Any]:
        return await tool_names(client), await client.call_tool(
            "memory_propose", {"topic": "units", "summary": "prefers metric units"})

    names, result = mcp_session(owner, work)

    assert "memory_propose" in names
    assert result.structured_content["status"] == "proposed"
    proposal = Proposal.objects.get(pk=result.structured_content["proposal_id"])
    assert (proposal.source, proposal.status, proposal.topic) == ("mcp", "pending", "units")
    assert not NoteFile.objects.filter(owner=owner, content__contains="metric").exists()


@pytest.mark.parametrize(("tool", "arguments"), [
    ("memory_propose", {"topic": "units", "summary": "prefers metric units"}),
    ("memory_forget", {"query": "Rome"}),
])
def test_propose_while_it_is_off_says_it_is_off_and_how_to_turn_it_on(mcp_session, owner, alices_notes, tool,
                                                                       arguments):
    async def work(client: Client) -> tuple[set[str], Any]:
        return await tool_names(client), await client.call_tool(tool, arguments)

    names, result = mcp_session(owner, work)

    assert tool not in names
    assert result.is_error
    assert result.content[0].text == (
        f"Error executing tool {tool}: Proposing notes over MCP is off. Turn on \"Let other assistants propose "
        "notes (MCP)\" on the Memory tab of your settings. (mcp_propose_off)")
    assert not Proposal.objects.filter(owner=owner).exists()


def test_forget_proposes_forgetting_the_note_that_matches_and_nothing_else(mcp_session, owner, alices_notes):
    settings_update(user_id=owner.pk, mcp_propose_enabled=True, save_mode="auto")

    async def work(client: Client) -> tuple[set[str], Any, Any]:
        return (await tool_names(client),
                await client.call_tool("memory_forget", {"query": "forget that I live in Rome"}),
                await client.call_tool("memory_forget", {"query": "explain quantum tunnelling"}))

    names, matched, unrelated = mcp_session(owner, work)

    assert "memory_forget" in names
    assert matched.structured_content["status"] == "proposed" and matched.structured_content["topic"] == "home"
    proposal = Proposal.objects.get(pk=matched.structured_content["proposal_id"])
    assert (proposal.source, proposal.status, proposal.is_delete, proposal.topic) == ("mcp", "pending", True, "home")
    assert "- home: lives in Rome" in notes_selectors.index_text(owner_id=owner.pk, scope=Scope.user())
    assert unrelated.structured_content["status"] == "not_found"
    assert Proposal.objects.filter(owner=owner).count() == 1


def test_forget_is_offered_only_with_proposing_on_and_refused_under_never(mcp_session, owner, alices_notes):
    assert "memory_forget" not in mcp_session(owner, tool_names)
    settings_update(user_id=owner.pk, mcp_propose_enabled=True, save_mode="never")

    result = mcp_session(owner, call("memory_forget", {"query": "forget that I live in Rome"}))

    assert result.structured_content["status"] == "refused"
    assert not Proposal.objects.filter(owner=owner).exists()


def test_propose_of_what_memory_already_says_under_another_topic_is_refused_as_a_duplicate(mcp_session, owner,
                                                                                            alices_notes):
    settings_update(user_id=owner.pk, mcp_propose_enabled=True)

    result = mcp_session(owner, call("memory_propose", {"topic": "city", "summary": "lives in Rome"}))

    assert result.structured_content["status"] == "refused"
    assert result.structured_content["reason"] == "duplicate"
    assert result.structured_content["duplicate_of"]["topic"] == "home"
    assert not Proposal.objects.filter(owner=owner).exists()


def test_a_propose_without_a_usable_topic_is_named_from_its_words_and_never_replaces_a_note(mcp_session, owner,
                                                                                            alices_notes):
    """A secret-looking note is named private-note, then private-note-2: never another note's topic, and
    never the secret's own words."""
    settings_update(user_id=owner.pk, mcp_propose_enabled=True)
    topics = [mcp_session(owner, call("memory_propose", {"topic": "!!", "summary": summary})
                          ).structured_content["topic"]
              for summary in ("my password is hunter2hunter2", "my other password is swordfish99")]
    assert topics == ["private-note", "private-note-2"]


def test_propose_is_refused_where_the_policy_refuses(mcp_session, owner):
    settings_update(user_id=owner.pk, mcp_propose_enabled=True, save_mode="never")

    result = mcp_session(owner, call("memory_propose", {"topic": "units", "summary": "metric"}))

    assert result.structured_content["status"] == "refused"
    assert result.structured_content["reason"] == "save_mode_never"
    assert not Proposal.objects.filter(owner=owner).exists()


def test_an_agent_reads_as_its_memory_choice_says(mcp_session, owner, alices_notes):
    agent = Agent.objects.create(owner=owner, name="Chef", tools=["memory"], memory="own")
    notes_services.note_upsert(owner_id=owner.pk, scope=Scope.agent(agent.pk), topic="menu",
                               summary="cooks risotto in Rome", source="files", actor="you")

    result = mcp_session(owner, call("memory_recall", {"query": "Rome", "agent_id": agent.pk}))

    assert [n["scope"] for n in result.structured_content["notes"]] == [f"agent:{agent.pk}"]


def test_an_outsider_sees_nothing_of_alices_notes(mcp_session, owner, outsider, alices_notes):
    agent = Agent.objects.create(owner=owner, name="Chef", tools=["memory"], memory="own")

    async def work(client: Client) -> tuple[Any, Any, Any]:
        return (await client.call_tool("memory_recall", {"query": "Rome"}),
                await client.call_tool("memory_recall", {"query": "Rome", "agent_id": agent.pk}),
                await client.call_tool("memory_list", {"agent_id": agent.pk}))

    mine, alices_agent, alices_agent_list = mcp_session(outsider, work)

    assert mine.structured_content["notes"] == []
    assert alices_agent_list.is_error and "No such agent" in alices_agent_list.content[0].text
    assert alices_agent.is_error and "No such agent" in alices_agent.content[0].text


def test_without_a_valid_token_the_server_answers_401(client, owner):
    assert_error(client.post("/mcp", data="{}", content_type="application/json"), 401, "authentication_failed")
    response = client.post("/mcp", data="{}", content_type="application/json",
                           HTTP_AUTHORIZATION="Bearer lm_not-a-token")
    assert_error(response, 401)


def test_a_suspended_accounts_token_gets_a_401(client, owner):
    """Unticking "Active" in the admin suspends an account: its API tokens stop working here too."""
    from django.contrib.auth import get_user_model

    token = token_create(user=owner)
    get_user_model().objects.filter(pk=owner.pk).update(is_active=False)

    response = client.post("/mcp", data="{}", content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}")

    assert_error(response, 401, "authentication_failed")


def test_a_stateless_server_offers_no_event_stream(client, owner):
    response = client.get("/mcp", HTTP_AUTHORIZATION=f"Bearer {token_create(user=owner)}")

    assert_error(response, 405, "method_not_allowed")
    assert response["Allow"] == "POST"


def test_the_switch_hides_the_server_entirely(client, owner, settings):
    settings.MCP_ENABLED = False

    response = client.post("/mcp", data="{}", content_type="application/json",
                           HTTP_AUTHORIZATION=f"Bearer {token_create(user=owner)}")

    assert response.status_code == 404


def test_a_proposal_made_from_a_note_read_before_it_changed_is_refused_quoting_it_as_it_is_now(mcp_session, owner,
                                                                                                alices_notes):
    """memory_list and memory_recall give each note's note_version (the API's); memory_propose sent with it
    suggests a change of the note only as it was read: a note edited since (its details only, here) is the
    one-line stale error naming its current text, and nothing waits in the inbox. Without it, as before."""
    settings_update(user_id=owner.pk, mcp_propose_enabled=True)

    async def read(client: Client) -> tuple[Any, Any]:
        return (await client.call_tool("memory_list", {}),
                await client.call_tool("memory_recall", {"query": "Which city do I live in, Rome or Milan?"}))

    listed, recalled = mcp_session(owner, read)
    home = next(n for n in listed.structured_content["notes"] if n["topic"] == "home")
    assert home["note_version"] == notes_selectors.note_version_now(owner_id=owner.pk, scope=Scope.user(),
                                                                    topic="home")
    assert recalled.structured_content["notes"][0]["note_version"] == home["note_version"]
    notes_services.note_upsert(owner_id=owner.pk, scope=Scope.user(), topic="home", summary="lives in Lisbon",
                               details="Moved to Lisbon in 2026.", source="files", actor="you")

    async def propose(client: Client) -> tuple[Any, Any, Any]:
        return (await client.call_tool("memory_propose", {"topic": "home", "summary": "lives in Milan",
                                                          "note_version": home["note_version"]}),
                await client.call_tool("memory_propose", {"topic": "home", "delete": True,
                                                          "note_version": "not-a-version"}),
                await client.call_tool("memory_propose", {"topic": "home", "summary": "lives in Milan"}))

    stale, bad, unchecked = mcp_session(owner, propose)

    assert stale.is_error
    now = notes_selectors.note_version_now(owner_id=owner.pk, scope=Scope.user(), topic="home")
    assert stale.content[0].text == (
        "Error executing tool memory_propose: The note 'home' in your notes changed since you read it, so nothing "
        f"was proposed. It now reads: 'lives in Lisbon', with the details 'Moved to Lisbon in 2026.' (version {now})."
        " Look at it again and apply your change to it if you still want it. (stale_version)")
    assert bad.is_error and bad.content[0].text.endswith(
        "note_version must be the one memory_list lists for the note, or left out not to check it "
        "(invalid_version)")
    assert unchecked.structured_content["status"] == "proposed"
    assert list(Proposal.objects.filter(owner=owner).values_list("summary", flat=True)) == ["lives in Milan"]


def test_a_proposal_sent_with_the_version_it_read_is_made(mcp_session, owner, alices_notes):
    settings_update(user_id=owner.pk, mcp_propose_enabled=True)

    async def work(client: Client) -> Any:
        listed = await client.call_tool("memory_list", {})
        diet = next(n for n in listed.structured_content["notes"] if n["topic"] == "diet")
        return await client.call_tool("memory_propose", {"topic": "diet", "delete": True,
                                                         "note_version": diet["note_version"]})

    result = mcp_session(owner, work)

    assert result.structured_content["status"] == "proposed"
    assert Proposal.objects.get(pk=result.structured_content["proposal_id"]).is_delete


def test_a_version_in_capitals_is_the_one_memory_list_gave(mcp_session, owner, alices_notes):
    """Read as the API, the terminal and the Memory tab read it (``notes.services.note_version_given``)."""
    settings_update(user_id=owner.pk, mcp_propose_enabled=True)

    async def work(client: Client) -> Any:
        listed = await client.call_tool("memory_list", {})
        diet = next(n for n in listed.structured_content["notes"] if n["topic"] == "diet")
        return await client.call_tool("memory_propose", {"topic": "diet", "summary": "vegan",
                                                         "note_version": diet["note_version"].upper()})

    result = mcp_session(owner, work)

    assert not result.is_error, result.content[0].text
    assert result.structured_content["status"] == "proposed"


def test_a_version_memory_list_gave_for_an_agents_note_proposes_a_change_of_that_note(mcp_session, owner,
                                                                                      alices_notes):
    """memory_list with agent_id lists the user's notes and the agent's, each with its scope; memory_propose
    takes no scope, so it finds the note the version was read from (its default was the user's notes here,
    where 'menu' is not: "never there"). In capitals the version is the same one, as everywhere."""
    settings_update(user_id=owner.pk, mcp_propose_enabled=True)
    agent = Agent.objects.create(owner=owner, name="Chef", tools=["memory"], addons=["memory"],
                                 grants=["memory.write"], memory=None)
    notes_services.note_upsert(owner_id=owner.pk, scope=Scope.agent(agent.pk), topic="menu", summary="no nuts",
                               source="files", actor="you")

    async def work(client: Client) -> tuple[Any, Any, Any]:
        listed = (await client.call_tool("memory_list", {"agent_id": agent.pk})).structured_content["notes"]
        menu = next(n for n in listed if n["topic"] == "menu")
        home = next(n for n in listed if n["topic"] == "home")
        return (menu, await client.call_tool("memory_propose", {
                    "topic": "menu", "summary": "no nuts, no shellfish", "agent_id": agent.pk,
                    "note_version": menu["note_version"].upper()}),
                await client.call_tool("memory_propose", {"topic": "home", "delete": True, "agent_id": agent.pk,
                                                          "note_version": home["note_version"]}))

    menu, changed, forgotten = mcp_session(owner, work)

    assert menu["scope"] == f"agent:{agent.pk}"
    assert not changed.is_error, changed.content[0].text
    assert changed.structured_content["status"] == "proposed"
    assert changed.structured_content["scope"] == f"agent:{agent.pk}"
    assert forgotten.structured_content["status"] == "proposed" and forgotten.structured_content["scope"] == "user"
    waiting = {(p.scope_kind, p.topic, p.is_delete) for p in Proposal.objects.filter(owner=owner)}
    assert waiting == {("agent", "menu", False), ("user", "home", True)}


def test_a_users_note_listed_for_an_agent_that_saves_to_its_own_notes_is_refused_saying_so(mcp_session, owner,
                                                                                           alices_notes):
    """An agent with "my notes and its own" reads the user's notes but saves to its own: a change of the
    user's note, named by the version memory_list gave, is refused saying that, not "there is no note";
    memory_forget, which finds the note itself, is refused the same way (it proposed the forget regardless)."""
    settings_update(user_id=owner.pk, mcp_propose_enabled=True)
    agent = Agent.objects.create(owner=owner, name="Chef", tools=["memory"], grants=["memory.write"],
                                 memory="mine_and_own")

    async def work(client: Client) -> tuple[Any, ...]:
        listed = (await client.call_tool("memory_list", {"agent_id": agent.pk})).structured_content["notes"]
        home = next(n for n in listed if n["topic"] == "home")
        return (home,
                await client.call_tool("memory_propose", {"topic": "home", "summary": "lives in Milan",
                                                          "agent_id": agent.pk,
                                                          "note_version": home["note_version"]}),
                await client.call_tool("memory_propose", {"topic": "home", "delete": True, "agent_id": agent.pk}),
                await client.call_tool("memory_forget", {"query": "forget that I live in Rome",
                                                         "agent_id": agent.pk}))

    home, changed, deleted, forgotten = mcp_session(owner, work)

    assert home["scope"] == "user"
    said = (f"The note 'home' is in your notes, which agent “Chef” reads but may not change (with agent_id "
            f"{agent.pk}, notes are suggested for agent “Chef” only), so nothing was proposed. Leave out "
            "agent_id to suggest a change of your notes.")
    for result in (changed, deleted, forgotten):
        assert not result.is_error, result.content[0].text
        assert result.structured_content["status"] == "refused"
        assert result.structured_content["reason"] == "scope_not_allowed"
        assert result.structured_content["message"] == said
    assert not Proposal.objects.filter(owner=owner).exists()
