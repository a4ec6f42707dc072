"""Rules a person notices in a messaging chat beyond yes/no: what reaches the model, and what it is offered."""

from __future__ import annotations

import pytest

from localai_memory.memory.services import settings_update
from localai_memory.notes.paths import Scope
from localai_memory.notes.services import note_upsert
from tests.bridges.conftest import dm_scope, pair
from tests.chats.helpers import system_of, tools_of
from tests.fakes.openai_server import reply

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_yes_when_nothing_waits_is_an_ordinary_message(telegram_bot, model, alice):
    pair(telegram_bot, alice)
    model.script(reply("Yes to what?"))

    said = telegram_bot.dm(alice, "yes")

    assert said.texts == ["Yes to what?"]
    assert model.requests[-1]["messages"][-1]["content"] == "yes"


def test_under_never_the_model_is_offered_no_way_to_propose_a_note(telegram_bot, owner, model, alice):
    settings_update(user_id=owner.pk, messaging_save="never")
    pair(telegram_bot, alice)
    model.script(reply("Saving is off."))

    telegram_bot.dm(alice, "Remember that I am vegan.")

    assert "propose_change" not in tools_of(model.requests[-1])


def test_a_messaging_chat_reads_the_owners_notes_and_its_own(telegram_bot, owner, model, alice):
    note_upsert(owner_id=owner.pk, scope=Scope.user(), topic="home", summary="lives in Rome", source="files")
    note_upsert(owner_id=owner.pk, scope=dm_scope(telegram_bot, alice), topic="tone", summary="short answers",
                source="files")
    pair(telegram_bot, alice)
    model.script(reply("Ciao."))

    telegram_bot.dm(alice, "Where do I live?")

    system = system_of(model.requests[-1])
    assert "lives in Rome" in system and "short answers" in system


def test_a_blocked_sender_is_ignored(telegram_bot, api, model, carol):
    telegram_bot.dm(carol, "hello")
    [pending] = api.get(f"/api/bridges/bindings/{telegram_bot.binding.pk}/pairings").json()["pairings"]
    api.post(f"/api/bridges/bindings/{telegram_bot.binding.pk}/pairings/{pending['id']}/deny")

    said = telegram_bot.dm(carol, "hello again")

    assert said.texts == [] and model.requests == []
