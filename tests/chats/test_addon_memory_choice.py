"""A memory add-on serves within the agent's memory choice: "A saved agent has its own choice of notes… The
host enforces it: the model does not choose where a note goes." An add-on that keeps namespaces is handed the
choice (what the turn reads, where a note goes); one that keeps one store serves only chats whose choice is
the user's notes, and the others get memory off with the reason, rather than read or save across agents."""

from __future__ import annotations

import pytest

from tests.chats.helpers import (
    make_agent,
    new_chat,
    pick_provider,
    send,
    set_memory,
    system_of,
    tool_results,
    tools_of,
)
from tests.fakes.openai_server import reply, tool_calls

pytestmark = pytest.mark.django_db

KITE = {"kind": "memory", "topic": "kite", "summary": "flies a red kite"}


@pytest.fixture
def sample(owner, monkeypatch):
    """The sample add-on picked and running, with empty stores of its own: the user's and the others'."""
    import sample_memory_provider

    for name in ("SAMPLE_PROVIDER_DOWN", "SAMPLE_PROVIDER_BROKEN", "SAMPLE_PROVIDER_ONE_STORE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setitem(sample_memory_provider.NOTES, owner.pk, {})
    monkeypatch.setattr(sample_memory_provider, "SCOPED", {})
    pick_provider(owner, "sample")
    return sample_memory_provider


def agent_chat(api, owner, memory: str | None, **agent) -> tuple[int, int]:
    made = make_agent(owner, memory=memory, **agent)
    return made.pk, new_chat(api, agent=made.pk)


def confirm(api, body: dict) -> None:
    [proposed] = body["memory"]["proposed"]
    answer = api.post(f"/api/chats/memory/proposals/{proposed['proposal_id']}/confirm")
    assert answer.status_code == 200, answer.content


def test_an_agent_with_its_own_notes_neither_reads_nor_saves_the_users_notes_of_the_addon(api, owner, model, sample):
    sample.NOTES[owner.pk]["kite"] = "flies a red kite"
    agent_id, chat = agent_chat(api, owner, "own")
    model.script(tool_calls(("sample_lookup", {"topic": "kite"}),
                            ("propose_change", {**KITE, "topic": "bike", "summary": "rides a green bike"})),
                 reply("Noted."))

    body = send(api, chat, "What do I fly? I ride a green bike.")
    confirm(api, body)

    first, second = model.requests[-2:]
    assert "kite" not in system_of(first)  # the user's note is not in this agent's prompt
    lookup, _ = tool_results(second)
    assert lookup == {"status": "not_found", "topic": "kite"}  # nor can its tool read it
    # Its note goes to the agent's own notes in the add-on, not the user's.
    assert sample.NOTES[owner.pk] == {"kite": "flies a red kite"}
    assert sample.SCOPED == {(owner.pk, f"agent:{agent_id}"): {"bike": "rides a green bike"}}
    # A chat without an agent does not see it.
    model.script(reply("Hello."))
    send(api, new_chat(api), "Hi")
    assert "bike" not in system_of(model.last_request) and "- kite: flies a red kite" in system_of(model.last_request)


def test_mine_and_own_reads_both_and_saves_to_the_agents_own_notes_of_the_addon(api, owner, model, sample):
    sample.NOTES[owner.pk]["kite"] = "flies a red kite"
    agent_id, chat = agent_chat(api, owner, "mine_and_own")
    sample.SCOPED[(owner.pk, f"agent:{agent_id}")] = {"pasta": "cooks pasta on Fridays"}
    model.script(tool_calls(("propose_change", {**KITE, "topic": "bike", "summary": "rides a green bike",
                                                "scope": "user"})),
                 tool_calls(("propose_change", {**KITE, "topic": "bike", "summary": "rides a green bike"})),
                 reply("Noted."))

    body = send(api, chat, "I ride a green bike.")

    system = system_of(model.requests[-3])
    assert "- kite: flies a red kite" in system and "- pasta: cooks pasta on Fridays" in system
    assert tools_of(model.requests[-3])["propose_change"]["properties"]["scope"]["enum"] == ["agent"]
    refused, = tool_results(model.requests[-2])
    assert (refused["status"], refused["reason"]) == ("refused", "scope_not_allowed")  # the model does not choose
    confirm(api, body)
    assert sample.SCOPED[(owner.pk, f"agent:{agent_id}")]["bike"] == "rides a green bike"
    assert "bike" not in sample.NOTES[owner.pk]


def test_an_agent_on_mine_reads_and_saves_the_users_notes_of_the_addon(api, owner, model, sample):
    sample.NOTES[owner.pk]["kite"] = "flies a red kite"
    _, chat = agent_chat(api, owner, "mine")
    model.script(tool_calls(("propose_change", {**KITE, "topic": "bike", "summary": "rides a green bike"})),
                 reply("Noted."))

    confirm(api, send(api, chat, "I ride a green bike."))

    assert "- kite: flies a red kite" in system_of(model.requests[-2])
    assert sample.NOTES[owner.pk] == {"kite": "flies a red kite", "bike": "rides a green bike"}
    assert sample.SCOPED == {}


@pytest.mark.parametrize("choice", ["own", "mine_and_own", None], ids=["own", "mine_and_own", "as_before"])
def test_an_addon_of_one_store_does_not_serve_an_agent_whose_choice_is_not_the_users_notes(
        api, client, owner, model, sample, monkeypatch, choice):
    monkeypatch.setenv("SAMPLE_PROVIDER_ONE_STORE", "1")
    sample.NOTES[owner.pk]["kite"] = "flies a red kite"
    agent_id, chat = agent_chat(api, owner, choice, addons=("memory",))
    model.script(reply("Memory is off here."))

    body = send(api, chat, "Remember that I ride a green bike. What do I fly?")

    assert (body["memory"]["on"], body["memory"]["code"], body["memory"]["blocked_by"]) == (
        False, "memory_provider_one_store", "provider")
    system = system_of(model.last_request)
    assert "kite" not in system and "tools" not in model.last_request
    assert "keeps one set of notes for all your chats" in system  # the one line saying why
    assert sample.NOTES[owner.pk] == {"kite": "flies a red kite"} and sample.SCOPED == {}
    status = api.get(f"/api/chats/{chat}/tools").json()
    assert (status["memory"]["code"], status["tools"]) == ("memory_provider_one_store", [])
    agent = api.get(f"/api/chats/agents/{agent_id}").json()
    assert agent["memory_effective"]["on"] is False and agent["memory_effective"]["reads"] == []
    client.force_login(owner)
    page = client.get(f"/chats/{chat}/").content.decode()
    assert "Memory is off because your memory add-on cannot keep this agent" in page and "not running" not in page


def test_an_addon_of_one_store_still_serves_chats_without_an_agent_and_agents_on_mine(
        api, owner, model, sample, monkeypatch):
    monkeypatch.setenv("SAMPLE_PROVIDER_ONE_STORE", "1")
    set_memory(owner, save_mode="ask")
    sample.NOTES[owner.pk]["kite"] = "flies a red kite"
    _, mine = agent_chat(api, owner, "mine")
    for chat in (new_chat(api), mine):
        model.script(tool_calls(("sample_lookup", {"topic": "kite"})), reply("A red kite."))
        body = send(api, chat, "What do I fly?")
        assert body["memory"]["served_by"] == "addon"
        assert "- kite: flies a red kite" in system_of(model.requests[-2])
        assert tool_results(model.last_request) == [{"status": "ok", "topic": "kite", "text": "flies a red kite"}]
    model.script(tool_calls(("propose_change", {**KITE, "topic": "bike", "summary": "rides a green bike"})),
                 reply("Noted."))
    confirm(api, send(api, mine, "I ride a green bike."))
    assert sample.NOTES[owner.pk]["bike"] == "rides a green bike"
