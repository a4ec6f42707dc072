"""A shared bot never leaks one sender's conversation notes to another: what the model received is checked."""

from __future__ import annotations

import pytest

from localai_memory.memory.services import settings_update
from tests.bridges.conftest import dm_scope, notes_of, pair
from tests.chats.helpers import system_of
from tests.fakes.openai_server import reply, tool_calls

pytestmark = pytest.mark.django_db(transaction=True)


def test_two_senders_of_one_shared_bot_never_see_each_others_conversation_notes(bot, owner, model, alice, bob):
    settings_update(user_id=owner.pk, messaging_save="paired_private")
    pair(bot, alice)
    pair(bot, bob)
    model.script(tool_calls(("propose_change", {"kind": "memory", "topic": "hobby",
                                                "summary": "collects rare Penny Black stamps"})), reply("Noted."))
    bot.dm(alice, "Remember that I collect rare Penny Black stamps.", expect=2)
    assert "Penny Black" in notes_of(owner, dm_scope(bot, alice))

    model.script(reply("I know nothing about your hobbies."))
    bot.dm(bob, "What do you know about my hobbies?")
    bobs_turn = model.requests[-1]

    model.script(reply("You collect stamps."))
    bot.dm(alice, "What do you know about my hobbies?")
    alices_turn = model.requests[-1]

    assert "Penny Black" not in str(bobs_turn["messages"])
    assert "Penny Black" in system_of(alices_turn)
    assert notes_of(owner, dm_scope(bot, bob)) == ""


def test_each_private_chat_is_its_own_conversation_with_its_own_notes_folder(bot, api, owner, model, alice, bob):
    pair(bot, alice)
    pair(bot, bob)
    bot.dm(alice, "hi")
    bot.dm(bob, "hi")

    body = api.get(f"/api/bridges/bindings/{bot.binding.pk}/conversations").json()["conversations"]

    assert sorted(c["notes"] for c in body) == sorted(
        f"{scope.index_path}" for scope in (dm_scope(bot, alice), dm_scope(bot, bob)))
    assert {c["kind"] for c in body} == {"one_to_one"}
