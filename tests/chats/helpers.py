"""Shared test helpers of the chat turn and proposals: a model server wired into the settings, agents, notes
and settings made through the project's own services, and readers of what the model was sent."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from localai_memory.agents.models import Agent
from localai_memory.memory.services import provider_pick, settings_update
from localai_memory.notes import selectors as notes_selectors
from localai_memory.notes.paths import Scope
from localai_memory.notes.services import note_upsert

HEADER = "## Saved notes (memory)"
FENCE_OPEN = "```memory-notes"


@pytest.fixture
def model(openai_server, settings):
    """The loopback OpenAI server, configured as the app's model server."""
    settings.LLM_BASE_URL = openai_server.url
    settings.LLM_MODEL = "fake-model"
    settings.LLM_API_KEY = ""
    settings.LLM_TIMEOUT = 5.0
    return openai_server


def make_agent(owner, *, memory: str | None = "mine_and_own", memory_save: str | None = None,
               tools: tuple[str, ...] = ("memory",), addons: tuple[str, ...] = (),
               grants: tuple[str, ...] = ("memory.write",), instructions: str = "You are Chef.") -> Agent:
    return Agent.objects.create(owner=owner, name="Chef", instructions=instructions, tools=list(tools),
                                addons=list(addons), grants=list(grants), memory=memory, memory_save=memory_save)


def note(owner, topic: str, summary: str, *, scope: Scope | None = None, details: str | None = None) -> None:
    note_upsert(owner_id=owner.pk, scope=scope or Scope.user(), topic=topic, summary=summary, details=details,
                source="files", actor="you")


def index_of(owner, scope: Scope | None = None) -> str:
    return notes_selectors.index_text(owner_id=owner.pk, scope=scope or Scope.user())


def set_memory(owner, **fields: Any) -> None:
    settings_update(user_id=owner.pk, **fields)


def pick_provider(owner, provider: str) -> None:
    provider_pick(user_id=owner.pk, provider=provider)


def bot_of(owner) -> int:
    """The owner's bot (a Binding): a conversation's notes are written only while its bot exists."""
    from bridges.models import Binding

    bot, _ = Binding.objects.get_or_create(owner=owner, name="Home bot",
                                           defaults={"platform": "telegram", "mode": "polling"})
    return bot.pk


def new_chat(api, **body: Any) -> int:
    response = api.post("/api/chats", body, format="json")
    assert response.status_code == 201, response.content
    return response.json()["id"]


def send(api, chat_id: int, content: str = "What should I cook tonight?", status: int = 200) -> dict:
    response = api.post(f"/api/chats/{chat_id}/messages", {"content": content}, format="json")
    assert response.status_code == status, response.content
    return response.json()


def system_of(request: dict) -> str:
    """The system prompt the model received."""
    first = request["messages"][0]
    assert first["role"] == "system"
    return first["content"]


def tools_of(request: dict) -> dict[str, dict]:
    """The tools offered, by name, with their parameter schemas."""
    return {tool["function"]["name"]: tool["function"]["parameters"] for tool in request.get("tools", [])}


def memory_block_of(request: dict) -> str | None:
    """The fenced memory block (without the fences), or None when the prompt holds none."""
    system = system_of(request)
    if HEADER not in system:
        return None
    match = re.search(r"```memory-notes\n(.*?)\n```", system, flags=re.DOTALL)
    assert match, system
    return match.group(1)


def tool_results(request: dict) -> list[dict]:
    """The tool results the host sent back to the model in this request, in order."""
    return [json.loads(m["content"]) for m in request["messages"] if m["role"] == "tool"]
