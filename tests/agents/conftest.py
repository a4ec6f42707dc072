"""Helpers for the agents tests: make an agent through the API, give it notes through the notes store."""

from __future__ import annotations

import pytest

from localai_memory.notes import services as notes_services
from localai_memory.notes.paths import Scope


@pytest.fixture
def make_agent(api):
    """Create an agent as the owner through the API; returns its JSON."""

    def make(**fields):
        body = {"name": "Helper", **fields}
        response = api.post("/api/chats/agents", body, format="json")
        assert response.status_code == 201, response.content
        return response.json()

    return make


@pytest.fixture
def give_notes():
    """Save notes to an agent's own folder through the notes store (the only code that writes a note)."""

    def give(user, agent_id: int, *topics: str) -> None:
        for topic in topics or ("home",):
            notes_services.note_upsert(owner_id=user.pk, scope=Scope.agent(agent_id), topic=topic,
                                       summary=f"about {topic}", details=f"Details of {topic}.",
                                       source="files", actor="you")

    return give
