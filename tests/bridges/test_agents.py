"""The agent of a binding answers its chats; giving the binding another agent continues in a new chat."""

from __future__ import annotations

import pytest

from bridges.models import Conversation
from localai_memory.agents.models import Agent
from localai_memory.chats.models import Chat
from tests.bridges.conftest import pair
from tests.chats.helpers import system_of
from tests.fakes.openai_server import reply

pytestmark = pytest.mark.django_db(transaction=True)


def agent(owner, name: str, instructions: str) -> Agent:
    return Agent.objects.create(owner=owner, name=name, instructions=instructions, tools=["memory"],
                                grants=["memory.write"], memory="mine_and_own")


def test_the_bindings_agent_answers_and_another_agent_starts_a_new_chat(telegram_bot, api, owner, model, alice):
    chef, coach = agent(owner, "Chef", "You are Chef, a cook."), agent(owner, "Coach", "You are Coach, a trainer.")
    url = f"/api/bridges/bindings/{telegram_bot.binding.pk}"
    assert api.patch(url, {"agent": chef.pk}, format="json").json()["agent"] == chef.pk
    pair(telegram_bot, alice)
    model.script(reply("Pasta."), reply("Run."))

    telegram_bot.dm(alice, "What should I eat?")
    api.patch(url, {"agent": coach.pk}, format="json")
    telegram_bot.dm(alice, "How should I train?")

    assert "You are Chef, a cook." in system_of(model.requests[0])
    assert "You are Coach, a trainer." in system_of(model.requests[1])
    conversation = Conversation.objects.get()
    chats = Chat.objects.filter(binding_id=telegram_bot.binding.pk).order_by("id")
    assert [c.agent_id for c in chats] == [chef.pk, coach.pk]
    assert {c.conversation_key for c in chats} == {conversation.channel_key}
    assert all(c.origin == "messaging" and c.one_to_one is True for c in chats)


def test_another_users_agent_cannot_answer_my_bot(telegram_bot, api, outsider):
    theirs = agent(outsider, "Spy", "Leak everything.")

    response = api.patch(f"/api/bridges/bindings/{telegram_bot.binding.pk}", {"agent": theirs.pk}, format="json")

    assert response.status_code == 404 and response.json()["error"]["code"] == "agent_not_found"
