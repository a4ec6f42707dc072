"""Forget everything (or the terminal's clear) while a chat turn is still answering: the turn answers as usual,
but nothing it read or was told before the forget comes back afterwards, neither as a suggestion in the inbox
nor as a note saved at once (the built-in notes or the add-on's), nor as a ``/remember``; the model is told
why. What is said after the forget is saved as before."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest
import time_machine
from django.db import connection
from django.db.models import F
from django.utils import timezone

from localai_memory.growth.services import memory_clear
from localai_memory.memory.models import MemorySettings, Proposal
from localai_memory.memory.services import memory_forget_all
from localai_memory.notes import services as notes_services
from localai_memory.notes.models import ChangeSet, TrashEntry
from localai_memory.notes.paths import Scope
from tests.chats.helpers import (
    index_of,
    make_agent,
    new_chat,
    note,
    pick_provider,
    send,
    set_memory,
    tool_results,
)
from tests.fakes.openai_server import reply, tool_calls
from tests.support.meanwhile import meanwhile

VEGAN = {"kind": "memory", "topic": "diet", "summary": "vegan, no honey"}


def forgets(owner) -> Callable[[], Any]:
    return lambda: memory_forget_all(user_id=owner.pk)


def refused_as_forgotten(model, body: dict) -> None:
    """The model was told why nothing was kept, the turn's report says so, and it answered as usual."""
    [result] = tool_results(model.last_request)
    assert result["status"] == "refused" and result["reason"] == "forgotten", result
    assert "forgotten" in result["message"]
    assert [r["reason"] for r in body["memory"]["refused"]] == ["forgotten"]
    assert body["memory"]["saved"] == [] and body["memory"]["proposed"] == []


def answers_its_result(request: dict) -> Any:
    """The model answers what its call's result says: the reply the person reads is the answer to what was
    done (a model asked with the result the note would have had, before the forget was seen, answers too, and
    that answer is never shown)."""
    [result] = tool_results(request)
    return reply("I kept nothing." if result["status"] == "refused" else f"It is {result['status']}.")


@pytest.mark.django_db(transaction=True)  # the owner forgets on another connection while the model answers
def test_a_suggestion_the_model_makes_after_forget_everything_does_not_wait_in_the_inbox(api, owner, model):
    chat = new_chat(api)
    model.script(meanwhile(forgets(owner), tool_calls(("propose_change", VEGAN))), answers_its_result,
                 answers_its_result)

    body = send(api, chat, "Remember that I am vegan.")

    refused_as_forgotten(model, body)
    assert body["reply"] == "I kept nothing."
    assert not Proposal.objects.filter(owner=owner).exists()
    assert api.get("/api/chats/memory/proposals").json()["proposals"] == []
    messages = api.get(f"/api/chats/{chat}").json()["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant"]  # the turn itself is kept as any other


@pytest.mark.django_db(transaction=True)
def test_save_it_and_tell_me_saves_nothing_the_turn_heard_before_forget_everything(api, owner, model):
    set_memory(owner, save_mode="auto")
    note(owner, "diet", "vegetarian")
    chat = new_chat(api)
    model.script(meanwhile(forgets(owner), tool_calls(("propose_change", VEGAN))), reply("Done."))

    body = send(api, chat, "Remember that I am vegan.")

    refused_as_forgotten(model, body)
    assert index_of(owner) == ""
    assert not ChangeSet.objects.filter(owner=owner, source=ChangeSet.Source.MODEL).exists()
    # the Forget-everything entry of the Trash brings back what was forgotten, and nothing of the turn
    forgot = TrashEntry.objects.get(owner=owner, kind=TrashEntry.Kind.FORGET)
    notes_services.trash_restore(owner_id=owner.pk, entry_id=forgot.pk)
    assert index_of(owner) == "- diet: vegetarian\n"


@pytest.mark.django_db(transaction=True)
def test_an_agents_own_note_saved_at_once_is_refused_after_forget_everything_too(api, owner, model):
    set_memory(owner, save_mode="auto")
    agent = make_agent(owner, memory="own")
    chat = new_chat(api, agent=agent.pk)
    model.script(meanwhile(forgets(owner), tool_calls(("propose_change", VEGAN))), reply("Done."))

    body = send(api, chat, "Remember that I am vegan.")

    refused_as_forgotten(model, body)
    assert index_of(owner, Scope.agent(agent.pk)) == ""


@pytest.mark.django_db(transaction=True)
def test_the_terminals_clear_while_the_model_answers_leaves_the_inbox_empty(api, owner, model):
    chat = new_chat(api)
    model.script(meanwhile(lambda: memory_clear(owner_id=owner.pk), tool_calls(("propose_change", VEGAN))),
                 reply("I kept nothing."))

    body = send(api, chat, "Remember that I am vegan.")

    refused_as_forgotten(model, body)
    assert not Proposal.objects.filter(owner=owner).exists()


@pytest.fixture
def sample_serves(owner, monkeypatch):
    """The sample add-on picked and running, with an empty store of its own for the owner."""
    import sample_memory_provider

    monkeypatch.delenv("SAMPLE_PROVIDER_DOWN", raising=False)
    monkeypatch.delenv("SAMPLE_PROVIDER_BROKEN", raising=False)
    store: dict[str, str] = {}
    monkeypatch.setitem(sample_memory_provider.NOTES, owner.pk, store)
    pick_provider(owner, "sample")
    return store


@pytest.mark.django_db(transaction=True)
def test_the_addon_gets_no_note_the_turn_heard_before_forget_everything(api, owner, model, sample_serves):
    set_memory(owner, save_mode="auto")
    sample_serves["home"] = "lives in Rome"
    model.script(meanwhile(forgets(owner), tool_calls(("propose_change", VEGAN))), reply("Done."))

    body = send(api, new_chat(api), "Remember that I am vegan.")

    refused_as_forgotten(model, body)
    assert sample_serves == {}  # the add-on forgot its own, and got nothing after


@pytest.mark.django_db(transaction=True)
def test_a_suggestion_for_the_addon_after_forget_everything_does_not_wait_in_the_inbox(
        api, owner, model, sample_serves):
    model.script(meanwhile(forgets(owner), tool_calls(("propose_change", VEGAN))), reply("I kept nothing."))

    body = send(api, new_chat(api), "Remember that I am vegan.")

    refused_as_forgotten(model, body)
    assert not Proposal.objects.filter(owner=owner).exists() and sample_serves == {}


@pytest.mark.django_db
def test_remember_typed_as_everything_is_forgotten_saves_nothing(api, owner, model, monkeypatch):
    """The turn read the settings and the notes before the forget, and saves after it."""
    from localai_memory.chats import remember

    typed = remember.remember_run

    def forget_first(**kwargs: Any) -> str:
        memory_forget_all(user_id=owner.pk)
        return typed(**kwargs)

    monkeypatch.setattr(remember, "remember_run", forget_first)
    chat = new_chat(api)

    body = send(api, chat, "/remember I live in Rome")

    assert body["reply"].startswith("Nothing was saved.") and "forgotten" in body["reply"]
    assert [r["reason"] for r in body["memory"]["refused"]] == ["forgotten"]
    assert index_of(owner) == "" and not Proposal.objects.filter(owner=owner).exists()


@pytest.mark.django_db
def test_a_message_that_arrived_before_forget_everything_is_not_saved_though_the_notes_were_read_after(
        api, owner, model, monkeypatch):
    """The forget lands between the message's arrival and the turn's first read."""
    from localai_memory.chats import services as chat_services

    def forget_first(owner_id: int, scopes: Any) -> None:
        memory_forget_all(user_id=owner_id)

    monkeypatch.setitem(chat_services.turn_read_hooks, "forget", forget_first)
    set_memory(owner, save_mode="auto")
    model.script(tool_calls(("propose_change", VEGAN)), reply("Done."))

    body = send(api, new_chat(api), "Remember that I am vegan.")

    refused_as_forgotten(model, body)
    assert index_of(owner) == ""


@pytest.mark.django_db
def forgot_a_second_ago(owner) -> None:
    """Forget everything, a second before now. A turn's arrival is read on the database's clock less the time
    its read took (``read_turn_memory``: never later than it was), so on a busy machine a message sent a
    millisecond after a forget can count as said before it, the safe side; this test is about what is said
    well after."""
    memory_forget_all(user_id=owner.pk)
    MemorySettings.objects.filter(user_id=owner.pk).update(forgot_at=F("forgot_at") - timedelta(seconds=1))


def test_what_is_said_after_forget_everything_is_saved_and_suggested_as_before(api, owner, model):
    forgot_a_second_ago(owner)
    chat = new_chat(api)
    model.script(tool_calls(("propose_change", VEGAN)), reply("I will ask you first."))
    assert [p["topic"] for p in send(api, chat, "Remember that I am vegan.")["memory"]["proposed"]] == ["diet"]

    set_memory(owner, save_mode="auto")
    forgot_a_second_ago(owner)  # the suggestion goes with it
    model.script(tool_calls(("propose_change", VEGAN)), reply("Saved."))
    assert [s["topic"] for s in send(api, chat, "Remember that I am vegan.")["memory"]["saved"]] == ["diet"]
    assert send(api, chat, "/remember I live in Rome")["memory"]["saved"]
    assert index_of(owner) == "- diet: vegan, no honey\n- live-rome: I live in Rome\n"


def database_now() -> datetime:
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement_timestamp()")
        return cursor.fetchone()[0]


@pytest.mark.django_db
def test_forget_everything_is_recorded_on_the_databases_clock_and_a_later_one_as_later(owner):
    """Two frontends whose clocks differ (from each other and from the database's): a forget is recorded at
    the database's time, and the second after the first, so a turn that read after the first is refused
    after the second."""
    before = database_now()
    with time_machine.travel(timezone.now() + timedelta(minutes=5), tick=False):
        memory_forget_all(user_id=owner.pk)
    first = MemorySettings.objects.get(user=owner).forgot_at
    with time_machine.travel(timezone.now() - timedelta(minutes=5), tick=False):
        memory_forget_all(user_id=owner.pk)
    assert before < first < database_now() and MemorySettings.objects.get(user=owner).forgot_at > first


@pytest.mark.django_db
def test_a_turn_on_a_frontend_whose_clock_is_behind_saves_what_is_said_after_forget_everything(api, owner, model):
    """The forget ran on a frontend whose clock is right; the turn, sent after it, runs on one ten minutes
    behind: it read after the forget, and what it is told now is saved."""
    set_memory(owner, save_mode="auto")
    memory_forget_all(user_id=owner.pk)
    model.script(tool_calls(("propose_change", VEGAN)), reply("Saved."))
    chat = new_chat(api)

    with time_machine.travel(timezone.now() - timedelta(minutes=10)):
        body = send(api, chat, "Remember that I am vegan.")

    assert [s["topic"] for s in body["memory"]["saved"]] == ["diet"] and body["memory"]["refused"] == []
    assert index_of(owner) == "- diet: vegan, no honey\n"


@pytest.mark.django_db
def test_a_message_that_arrived_before_a_forget_on_a_frontend_whose_clock_is_behind_is_not_saved(
        api, owner, model, monkeypatch):
    """The forget lands between the message's arrival and the turn's first read, from a frontend whose clock
    is ten minutes behind the turn's: the message was said before it all the same."""
    from localai_memory.chats import services as chat_services

    def forget_on_a_clock_behind(owner_id: int, scopes: Any) -> None:
        with time_machine.travel(timezone.now() - timedelta(minutes=10)):
            memory_forget_all(user_id=owner_id)

    monkeypatch.setitem(chat_services.turn_read_hooks, "forget", forget_on_a_clock_behind)
    set_memory(owner, save_mode="auto")
    model.script(tool_calls(("propose_change", VEGAN)), reply("Done."))

    body = send(api, new_chat(api), "Remember that I am vegan.")

    refused_as_forgotten(model, body)
    assert index_of(owner) == ""
