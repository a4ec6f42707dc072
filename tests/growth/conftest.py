"""Fixtures of the growth tests: the model server wired into settings, chats with typed messages, replies."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest
import time_machine
from django.utils import timezone

from localai_memory.chats.models import Chat, Message, Role
from tests.fakes.openai_server import OpenAIServer


@pytest.fixture
def model(openai_server: OpenAIServer, settings: Any) -> OpenAIServer:
    """The loopback OpenAI-protocol server, configured as the app's model."""
    settings.LLM_BASE_URL = openai_server.url
    settings.LLM_TIMEOUT = 5.0
    return openai_server


def facts_reply(*facts: dict[str, Any], summary: str = "") -> str:
    """A clean JSON reply of consolidation."""
    return json.dumps({"facts": list(facts), "summary": summary})


def fact(topic: str, summary: str, action: str = "add", details: str = "") -> dict[str, Any]:
    return {"action": action, "topic": topic, "summary": summary, "details": details}


@pytest.fixture
def make_chat() -> Callable[..., Chat]:
    """A chat of ``owner`` with user messages (typed by the user unless given as (text, False)) and a reply
    after each; ``ago`` puts the whole chat that long in the past (so it counts as finished)."""

    def make(owner: Any, *messages: str | tuple[str, bool], ago: timedelta | None = None, **chat_fields: Any
             ) -> Chat:
        when: datetime = timezone.now() - (ago or timedelta(0))
        with time_machine.travel(when, tick=False):
            chat = Chat.objects.create(owner=owner, **chat_fields)
            for item in messages:
                text, typed = (item, True) if isinstance(item, str) else item
                Message.objects.create(chat=chat, role=Role.USER, content=text, typed_by_user=typed)
                Message.objects.create(chat=chat, role=Role.ASSISTANT, content="Noted.")
        return chat

    return make


def add_messages(chat: Chat, *texts: str, ago: timedelta | None = None) -> None:
    when = timezone.now() - (ago or timedelta(0))
    with time_machine.travel(when, tick=False):
        for text in texts:
            Message.objects.create(chat=chat, role=Role.USER, content=text, typed_by_user=True)
        chat.save()
