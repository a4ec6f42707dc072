"""``/remember <fact>`` in a chat: the person's own note, saved without asking the model, with Undo; refused
where the chat may not save; never a second copy; and the same over the OpenAI-compatible route."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
import time_machine
from django.utils import timezone

from localai_memory.memory.models import Proposal
from localai_memory.notes import selectors as notes_selectors
from localai_memory.notes.models import ChangeSet, NoteFile
from localai_memory.notes.paths import Scope
from localai_memory.notes.services import note_upsert
from tests.chats.helpers import index_of, make_agent, new_chat, note, send, set_memory
from tests.fakes.openai_server import reply, tool_calls

pytestmark = pytest.mark.django_db


def test_remember_saves_the_fact_at_once_without_asking_the_model(api, owner, model):
    chat = new_chat(api)

    body = send(api, chat, "/remember I live in Rome")

    assert model.requests == []
    assert index_of(owner) == "- live-rome: I live in Rome\n"
    [saved] = body["memory"]["saved"]
    assert saved["topic"] == "live-rome" and saved["scope"] == "user" and saved["summary"] == "I live in Rome"
    change = ChangeSet.objects.get(pk=saved["change_id"])
    assert change.source == "chat" and change.chat_id == chat and not change.automatic
    assert change.actor == "you with /remember"
    assert body["reply"].startswith("Saved to memory: \u201cI live in Rome\u201d (live-rome).")
    messages = api.get(f"/api/chats/{chat}").json()["messages"]
    assert [(m["role"], m["content"]) for m in messages] == [("user", "/remember I live in Rome"),
                                                              ("assistant", body["reply"])]


def test_remember_saves_under_ask_me_first_and_always_confirm_too(api, owner, model):
    for level, fact in (("ask", "I am vegan"), ("always", "I prefer metric units")):
        set_memory(owner, save_mode=level)
        body = send(api, new_chat(api), f"/remember {fact}")
        assert body["memory"]["saved"][0]["summary"] == fact and Proposal.objects.count() == 0
    assert index_of(owner) == "- vegan: I am vegan\n- prefer-metric-units: I prefer metric units\n"


def test_the_undo_takes_the_typed_note_back(api, owner, model):
    chat = new_chat(api)
    change_id = send(api, chat, "/remember my daughter is called Ana")["memory"]["saved"][0]["change_id"]

    undone = api.post(f"/api/chats/changes/{change_id}/undo")

    assert undone.status_code == 200, undone.content
    assert index_of(owner) == ""


def test_a_fact_already_in_memory_is_not_saved_twice(api, owner, model):
    note(owner, "home", "I live in Rome")
    chat = new_chat(api)

    body = send(api, chat, "/remember i live in rome")

    assert index_of(owner) == "- home: I live in Rome\n"
    [saved] = body["memory"]["saved"]
    assert saved["already_saved"] is True and saved["change_id"] is None and saved["topic"] == "home"
    assert body["reply"] == "That is already in memory: \u201cI live in Rome\u201d (home)."


def test_a_fact_that_means_the_same_as_a_note_is_not_added(api, owner, model):
    note(owner, "home", "lives in Rome")
    body = send(api, new_chat(api), "/remember I live in Rome")
    assert index_of(owner) == "- home: lives in Rome\n"
    assert body["reply"] == "That is already in memory: \u201clives in Rome\u201d (home)."


def test_a_topic_in_use_by_another_note_gets_a_number(api, owner, model):
    note(owner, "live-rome", "I lived in Rome until 2019")
    body = send(api, new_chat(api), "/remember I live in Rome now")
    assert body["memory"]["saved"][0]["topic"] == "live-rome-2"
    assert index_of(owner).splitlines()[1] == "- live-rome-2: I live in Rome now"


def test_a_long_fact_keeps_its_first_words_as_the_line_and_all_of_it_in_the_topic_file(api, owner, model):
    fact = "My bike is a green Bianchi road bike " + "with a story " * 20 + "and a bell."
    body = send(api, new_chat(api), f"/remember {fact}")
    [saved] = body["memory"]["saved"]
    assert saved["summary"].endswith("…") and len(saved["summary"]) <= 200
    assert notes_selectors.topic_text(owner_id=owner.pk, scope=Scope.user(), topic=saved["topic"]) == fact + "\n"


@pytest.mark.parametrize("fact", ["my password is hunter2hunter2", "Mein Passwort ist Sonnenblume",
                                  "mon mot de passe Netflix est tournesol"])
def test_a_secret_waits_for_confirmation_instead(api, owner, model, fact):
    body = send(api, new_chat(api), f"/remember {fact}")
    assert index_of(owner) == "" and body["memory"]["saved"] == []
    [proposed] = body["memory"]["proposed"]
    proposal = Proposal.objects.get(pk=proposed["proposal_id"])
    assert proposal.reason == "looks_secret" and proposal.source == "chat" and proposal.status == "pending"
    assert proposal.topic == "private-note"  # never the secret as a name
    assert body["reply"].startswith("Not saved yet:")


def test_without_a_fact_it_says_how_and_saves_nothing(api, owner, model):
    body = send(api, new_chat(api), "/remember")
    assert body["reply"] == "Write what to remember after /remember, for example: /remember I live in Rome."
    assert index_of(owner) == "" and model.requests == []


def test_a_private_chat_saves_nothing(api, owner, model):
    chat = new_chat(api)
    api.put(f"/api/chats/{chat}/builtins", {"memory": False}, format="json")

    body = send(api, chat, "/remember I live in Rome")

    assert index_of(owner) == "" and model.requests == []
    assert body["memory"]["refused"][0]["reason"] == "private_chat"
    assert body["reply"].startswith("Nothing was saved. This chat is private.")


def test_memory_off_saves_nothing(api, owner, model):
    set_memory(owner, enabled=False)
    body = send(api, new_chat(api), "/remember I live in Rome")
    assert index_of(owner) == "" and body["memory"]["refused"][0]["reason"] == "user_off"


def test_an_agent_chat_saves_where_the_agent_saves(api, owner, model):
    agent = make_agent(owner, memory="own")
    body = send(api, new_chat(api, agent=agent.pk), "/remember Chef cooks without garlic")
    assert body["memory"]["saved"][0]["scope"] == "agent"
    assert index_of(owner, Scope.agent(agent.pk)) == "- chef-cooks-without-garlic: Chef cooks without garlic\n"
    assert index_of(owner) == ""


def test_a_full_index_refuses_with_a_clear_answer_and_writes_nothing(api, owner, model):
    for number in range(40):
        note(owner, f"n{number:02d}", f"fact {number}")
    before = index_of(owner)
    body = send(api, new_chat(api), "/remember I live in Rome")
    assert index_of(owner) == before
    [refused] = body["memory"]["refused"]
    assert refused["reason"] == "cap_exceeded"
    assert body["reply"].startswith("Nothing was saved:") and "Memory tab" in body["reply"]


def test_a_message_that_only_mentions_remember_goes_to_the_model(api, owner, model):
    model.script(reply("Sure."))
    body = send(api, new_chat(api), "Please /remember nothing, just answer")
    assert body["reply"] == "Sure." and len(model.requests) == 1 and index_of(owner) == ""


def test_the_openai_route_saves_it_and_answers_as_a_completion(api, owner, model):
    response = api.post("/v1/chat/completions", {"model": "m", "messages": [
        {"role": "user", "content": "/remember I take the train to work"}]}, format="json")

    assert response.status_code == 200, response.content
    assert response.json()["choices"][0]["message"]["content"].startswith("Saved to memory:")
    assert index_of(owner) == "- take-train: I take the train to work\n"
    assert model.requests == []


def test_a_message_the_client_marks_as_not_typed_never_saves(api, owner, model):
    model.script(reply("Done."))
    response = api.post("/v1/chat/completions", {"model": "m", "messages": [
        {"role": "user", "content": "/remember I live in Rome", "origin": "client"}]}, format="json")
    assert response.status_code == 200 and index_of(owner) == "" and len(model.requests) == 1


def test_the_chats_undo_shows_for_thirty_minutes_and_the_note_can_be_undone_later_like_an_edit(api, owner, model):
    chat = new_chat(api)
    [saved] = send(api, chat, "/remember I live in Rome")["memory"]["saved"]
    until = datetime.fromisoformat(saved["undo_until"])
    assert timedelta(minutes=29) < until - timezone.now() <= timedelta(minutes=30)
    with time_machine.travel(timezone.now() + timedelta(minutes=31)):
        assert api.post(f"/api/chats/changes/{saved['change_id']}/undo").status_code == 200
    assert index_of(owner) == ""


def test_the_audit_records_the_thirty_minute_undo_the_answer_promised(api, owner, model):
    with time_machine.travel("2026-12-01 09:00:00+00:00", tick=False):
        body = send(api, new_chat(api), "/remember I live in Rome")
    [saved] = body["memory"]["saved"]
    assert "You can undo it for 30 minutes." in body["reply"]

    [change] = api.get("/api/chats/changes/audit").json()["changes"]

    assert change["id"] == saved["change_id"] and change["source"] == "chat"
    assert change["undo_until"] == saved["undo_until"] == "2026-12-01T09:30:00+00:00"
    assert change["automatic"] is False  # typed by the person, not saved by the model on its own


def test_a_topic_a_waiting_proposal_or_a_stray_file_holds_is_not_taken(api, owner, model):
    chat = new_chat(api)
    send(api, chat, "/remember my password is hunter2hunter2")  # waits, as "private-note" (never the secret as a name)
    note_upsert(owner_id=owner.pk, scope=Scope.user(), topic="live-rome", summary="old", details="Old file.\n",
                source="files")
    note_upsert(owner_id=owner.pk, scope=Scope.user(), topic="live-rome", delete=True, source="files")
    NoteFile.objects.create(owner=owner, path="Memory/live-rome.md", content="A stray file.\n", version=1,
                            updated_at=timezone.now())

    topics = [send(api, chat, text)["memory"]["saved"][0]["topic"]
              for text in ("/remember I live in Rome", "/remember index")]

    assert topics == ["live-rome-2", "index-2"]
    assert Proposal.objects.get().topic == "private-note"


def test_forget_what_i_just_told_you_takes_back_the_typed_note(api, owner, model):
    note(owner, "tone", "short answers")
    chat = new_chat(api)
    send(api, chat, "/remember I live in Rome")
    model.script(tool_calls(("revert_change", {})), reply("Forgotten."))

    body = send(api, chat, "Forget what I just told you.")

    assert body["memory"]["reverted"] and index_of(owner) == "- tone: short answers\n"


@pytest.mark.django_db(transaction=True)  # two threads, two connections: each sees what the other committed
def test_the_same_fact_sent_twice_at_once_is_saved_once(owner, model):
    from concurrent.futures import ThreadPoolExecutor

    from django.db import connection

    from localai_memory.chats import services

    chats = [services.chat_create(owner_id=owner.pk, origin="web", title="x") for _ in range(2)]

    def run(chat) -> dict:
        try:
            return services.turn_run(chat=chat, content="/remember I live in Rome").memory
        finally:
            connection.close()

    with ThreadPoolExecutor(2) as pool:
        reports = list(pool.map(run, chats))

    assert index_of(owner) == "- live-rome: I live in Rome\n"
    assert sorted(bool(r["saved"][0].get("already_saved")) for r in reports) == [False, True]


def test_a_fact_too_large_for_a_topic_file_is_refused_with_the_reason(api, owner, model):
    body = send(api, new_chat(api), "/remember " + "word " * 2000)
    assert index_of(owner) == "" and body["reply"].startswith("Nothing was saved:")
    assert body["memory"]["refused"][0]["reason"] == "topic_too_large" and Proposal.objects.count() == 0
