"""A note from a messaging chat for the agent's or the owner's notes never saves at once, even under "Save it
for a paired sender in a private chat" and Save it and tell me, and only the paired sender who asked confirms
it; an agent whose memory is None saves nothing."""

from __future__ import annotations

import pytest

from bridges.models import Binding
from localai_memory.memory.models import Proposal
from localai_memory.memory.services import settings_update
from localai_memory.notes.paths import Scope
from tests.bridges.conftest import dm_scope, notes_of, pair
from tests.chats.helpers import make_agent
from tests.fakes.openai_server import reply, tool_calls

pytestmark = pytest.mark.django_db(transaction=True)

VEGAN = {"kind": "memory", "topic": "diet", "summary": "vegan, no honey"}
LINE = "- diet: vegan, no honey\n"


def bind_agent(bot, owner, memory: str):
    agent = make_agent(owner, memory=memory)
    Binding.objects.filter(pk=bot.binding.pk).update(agent=agent)
    return agent


@pytest.mark.parametrize(("memory", "kind"), [("mine", "user"), ("own", "agent"), ("mine_and_own", "agent")])
def test_a_note_for_the_agents_or_the_owners_notes_waits_for_the_sender_who_asked(telegram_bot, owner, model,
                                                                                alice, bob, memory, kind):
    settings_update(user_id=owner.pk, save_mode="auto", messaging_save="paired_private")
    agent = bind_agent(telegram_bot, owner, memory)
    pair(telegram_bot, alice, can_confirm=True)
    pair(telegram_bot, bob, can_confirm=True)
    scope = Scope.user() if kind == "user" else Scope.agent(agent.pk)
    model.script(tool_calls(("propose_change", {**VEGAN, "scope": kind})), reply("Noted."))

    asked = telegram_bot.group(alice, "Remember that I am vegan.")

    assert "Reply yes to save it or no to drop it" in asked.text and notes_of(owner, scope) == ""
    telegram_bot.group(bob, "yes")
    assert Proposal.objects.get().status == "pending" and notes_of(owner, scope) == ""
    telegram_bot.group(alice, "yes")
    assert Proposal.objects.get().status == "confirmed" and notes_of(owner, scope) == LINE


def test_in_a_private_chat_a_note_for_the_owners_notes_still_waits(telegram_bot, owner, model, alice):
    settings_update(user_id=owner.pk, save_mode="auto", messaging_save="paired_private")
    bind_agent(telegram_bot, owner, "mine")
    pair(telegram_bot, alice, can_confirm=True)
    model.script(tool_calls(("propose_change", {**VEGAN, "scope": "user"})), reply("Noted."))

    asked = telegram_bot.dm(alice, "Remember that I am vegan.")

    assert "Reply yes to save it or no to drop it" in asked.text
    assert notes_of(owner, Scope.user()) == "" and notes_of(owner, dm_scope(telegram_bot, alice)) == ""
    assert Proposal.objects.get().requester_only


def test_an_agent_whose_memory_is_none_saves_nothing_from_a_messaging_chat(telegram_bot, owner, model, alice):
    settings_update(user_id=owner.pk, save_mode="auto", messaging_save="paired_private")
    bind_agent(telegram_bot, owner, "none")
    pair(telegram_bot, alice, can_confirm=True)
    model.script(tool_calls(("propose_change", VEGAN)), reply("Memory is off for this agent."))

    telegram_bot.dm(alice, "Remember that I am vegan.")

    assert not model.requests[0].get("tools")
    assert notes_of(owner, dm_scope(telegram_bot, alice)) == "" and not Proposal.objects.exists()


def test_a_yes_to_a_note_for_an_agent_deleted_meanwhile_says_why_nothing_was_saved(telegram_bot, api, owner,
                                                                                  model, alice):
    agent = bind_agent(telegram_bot, owner, "own")
    pair(telegram_bot, alice, can_confirm=True)
    model.script(tool_calls(("propose_change", {**VEGAN, "scope": "agent"})), reply("Noted."))
    telegram_bot.dm(alice, "Remember that I am vegan.")
    assert api.delete(f"/api/chats/agents/{agent.pk}?memory=delete").status_code == 200

    answered = telegram_bot.dm(alice, "yes")

    assert answered.texts == ["That note was not saved: Its agent was deleted, so this note can no longer be saved."]
    assert notes_of(owner, Scope.agent(agent.pk)) == ""


def test_deleting_a_bot_drops_the_suggestions_waiting_for_its_conversations(telegram_bot, api, owner, model, alice):
    from bridges.services import binding_delete

    settings_update(user_id=owner.pk, save_mode="ask")
    pair(telegram_bot, alice, can_confirm=True)
    model.script(tool_calls(("propose_change", VEGAN)), reply("I will ask."))
    telegram_bot.dm(alice, "Remember that I am vegan.")
    waiting = Proposal.objects.get()
    assert waiting.scope_kind == "channel"

    binding_delete(binding=Binding.objects.get(pk=telegram_bot.binding.pk))

    refused = api.post(f"/api/chats/memory/proposals/{waiting.pk}/confirm")
    assert refused.status_code == 410 and refused.json()["error"]["code"] == "bot_deleted"
    assert notes_of(owner, dm_scope(telegram_bot, alice)) == ""
