"""The Undo of an automatic note lasts 30 minutes wherever it is pressed (the chat, the API, the model's
revert_change), and the end of the window is the policy's: at exactly 30 minutes it is closed."""

from __future__ import annotations

from datetime import timedelta

import pytest
import time_machine

from localai_memory.notes.models import ChangeSet
from tests.chats.helpers import index_of, new_chat, note, send, set_memory
from tests.fakes.openai_server import reply, tool_calls

pytestmark = pytest.mark.django_db

VEGAN = {"kind": "memory", "topic": "diet", "summary": "vegan, no honey"}


def saved_note(api, owner, model) -> ChangeSet:
    """Under Save it and tell me, the model saves VEGAN over an older note; the automatic change set."""
    set_memory(owner, save_mode="auto")
    note(owner, "diet", "vegetarian")
    chat = new_chat(api)
    model.script(tool_calls(("propose_change", VEGAN)), reply("Saved."))
    body = send(api, chat, "Remember that I am vegan now.")
    assert index_of(owner) == "- diet: vegan, no honey\n"
    return ChangeSet.objects.get(pk=body["memory"]["saved"][0]["change_id"])


def test_the_api_undo_of_an_automatic_note_is_refused_after_thirty_minutes(api, owner, model):
    change = saved_note(api, owner, model)

    with time_machine.travel(change.created_at + timedelta(minutes=31), tick=False):
        response = api.post(f"/api/chats/changes/{change.pk}/undo")

    assert response.status_code == 410
    assert response.json()["error"]["code"] == "undo_window_closed"
    assert index_of(owner) == "- diet: vegan, no honey\n"


def test_the_api_undo_of_an_automatic_note_works_within_thirty_minutes(api, owner, model):
    change = saved_note(api, owner, model)

    with time_machine.travel(change.created_at + timedelta(minutes=29), tick=False):
        response = api.post(f"/api/chats/changes/{change.pk}/undo")

    assert response.status_code == 200
    assert index_of(owner) == "- diet: vegetarian\n"


def test_at_exactly_thirty_minutes_the_undo_window_is_closed(api, owner, model):
    change = saved_note(api, owner, model)

    with time_machine.travel(change.undo_until, tick=False):
        response = api.post(f"/api/chats/changes/{change.pk}/undo")

    assert response.status_code == 410
    assert index_of(owner) == "- diet: vegan, no honey\n"


def test_revert_change_at_exactly_thirty_minutes_is_refused(api, owner, model):
    change = saved_note(api, owner, model)

    with time_machine.travel(change.undo_until, tick=False):
        model.script(tool_calls(("revert_change", {})), reply("Too late."))
        body = send(api, change.chat_id, "Forget that again.")

    assert body["memory"]["reverted"] == []
    assert body["memory"]["refused"][0]["reason"] == "undo_window_closed"
    assert index_of(owner) == "- diet: vegan, no honey\n"
