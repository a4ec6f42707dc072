"""What a turn reads before the policy decides: recall's notes are read only where memory could be on."""

from __future__ import annotations

import pytest

from localai_memory.chats import services
from localai_memory.chats.selectors import TurnRead
from tests.chats.helpers import make_agent, new_chat, note, send, set_memory, system_of

pytestmark = pytest.mark.django_db


@pytest.fixture
def reads(monkeypatch) -> list[int]:
    """A turn read hook (the extension point recall uses) that counts the turns it was asked to read for."""
    asked: list[int] = []

    def hook(owner_id, scopes) -> TurnRead:
        asked.append(owner_id)
        return TurnRead(sql="SELECT 1", params=[], parse=lambda rows: rows)

    monkeypatch.setitem(services.turn_read_hooks, "test.count", hook)
    return asked


def test_a_private_chat_reads_no_notes_before_it_answers(api, owner, model, reads):
    note(owner, "home", "lives in Rome")
    chat = new_chat(api)
    api.put(f"/api/chats/{chat}/builtins", {"memory": False}, format="json")
    body = send(api, chat, "Where do I live?")
    assert body["memory"]["on"] is False and body["memory"]["code"] == "private_chat"
    assert reads == []
    assert "lives in Rome" not in system_of(model.last_request)


def test_an_agent_without_the_memory_tool_reads_no_notes(api, owner, model, reads):
    note(owner, "home", "lives in Rome")
    agent = make_agent(owner, tools=())
    chat = new_chat(api, agent=agent.pk)
    send(api, chat)
    assert reads == []


def test_with_the_switch_off_the_notes_are_read_and_dropped_and_turning_it_on_shows_them(api, owner, model, reads):
    note(owner, "home", "lives in Rome")
    set_memory(owner, enabled=False)
    chat = new_chat(api)
    send(api, chat)
    assert reads == [owner.pk]  # the switch is read in the same round trip as the notes
    assert "lives in Rome" not in system_of(model.last_request)
    set_memory(owner, enabled=True)
    send(api, chat)
    assert reads == [owner.pk, owner.pk] and "lives in Rome" in system_of(model.last_request)
