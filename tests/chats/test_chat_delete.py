"""Deleting a chat (``DELETE /api/chats/{id}``): its messages go, the suggestions still waiting from it are
dropped and say so, the notes saved from it stay with their Undo; another user's chat is a 404; a turn that is
still answering when its chat is deleted does not bring it back; an OpenAI client whose chat was deleted
starts a new one."""

from __future__ import annotations

import pytest

from localai_memory.chats.models import Chat, Message
from localai_memory.chats.services import chat_delete
from localai_memory.growth.models import ChatWatermark
from localai_memory.memory.models import Proposal
from localai_memory.notes.models import ChangeSet
from tests.chats.helpers import index_of, new_chat, send, set_memory
from tests.fakes.openai_server import reply, tool_calls
from tests.support.meanwhile import meanwhile

VEGAN = {"kind": "memory", "topic": "diet", "summary": "vegan, no honey"}


def bearer(user):
    from rest_framework.test import APIClient

    from localai_memory.accounts.services import token_create

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token_create(user=user)}")
    return client


@pytest.mark.django_db
def test_deleting_a_chat_takes_its_messages_and_drops_the_suggestions_waiting_from_it(api, owner, model):
    chat = new_chat(api, title="Dinner")
    model.script(tool_calls(("propose_change", VEGAN)), reply("I can keep that once you confirm it."))
    [proposed] = send(api, chat, "Remember that I am vegan.")["memory"]["proposed"]
    other = new_chat(api, title="Travel")
    model.script(tool_calls(("propose_change", {"kind": "memory", "topic": "home", "summary": "lives in Rome"})),
                 reply("Noted."))
    send(api, other, "I live in Rome.")
    ChatWatermark.objects.create(owner=owner, chat_id=chat, facts_through=1)

    response = api.delete(f"/api/chats/{chat}")

    assert response.status_code == 204 and response.content == b""
    assert api.get(f"/api/chats/{chat}").status_code == 404
    assert [c["id"] for c in api.get("/api/chats").json()["chats"]] == [other]
    assert not Message.objects.filter(chat_id=chat).exists() and not ChatWatermark.objects.filter(chat_id=chat)
    inbox = {p["topic"]: p for p in api.get("/api/chats/memory/proposals?status=all").json()["proposals"]}
    assert inbox["diet"]["status"] == "expired" and inbox["diet"]["message"] == "Dropped: its chat was deleted."
    assert inbox["home"]["status"] == "pending"  # another chat's suggestion waits as before
    confirm = api.post(f"/api/chats/memory/proposals/{proposed['proposal_id']}/confirm")
    assert confirm.status_code == 410 and confirm.json()["error"]["code"] == "chat_deleted"
    assert index_of(owner) == ""
    assert api.delete(f"/api/chats/{chat}").status_code == 404  # once


@pytest.mark.django_db
def test_the_notes_saved_in_a_deleted_chat_stay_and_their_undo_still_works(api, owner, model):
    set_memory(owner, save_mode="auto")
    chat = new_chat(api)
    model.script(tool_calls(("propose_change", VEGAN)), reply("Saved."))
    [saved] = send(api, chat, "Remember that I am vegan.")["memory"]["saved"]
    remembered = send(api, chat, "/remember I live in Rome")["memory"]["saved"][0]

    assert api.delete(f"/api/chats/{chat}").status_code == 204

    assert index_of(owner) == "- diet: vegan, no honey\n- live-rome: I live in Rome\n"
    audit = {c["id"]: c for c in api.get("/api/chats/changes/audit").json()["changes"]}
    assert audit[saved["change_id"]]["chat_id"] == chat  # the history still names the chat it came from
    assert ChangeSet.objects.get(pk=remembered["change_id"]).chat_id == chat
    undone = api.post(f"/api/chats/changes/{saved['change_id']}/undo")
    assert undone.status_code == 200, undone.content
    assert index_of(owner) == "- live-rome: I live in Rome\n"


@pytest.mark.django_db
def test_another_users_chat_is_a_404_and_stays(api, outsider_api, model):
    chat = new_chat(api)
    send(api, chat, "Hello there.")

    response = outsider_api.delete(f"/api/chats/{chat}")

    assert response.status_code == 404 and response.json()["error"]["code"] == "not_found"
    assert Chat.objects.filter(pk=chat).exists() and Message.objects.filter(chat_id=chat).count() == 2


@pytest.mark.django_db(transaction=True)  # the owner deletes on another connection while the model answers
def test_a_chat_deleted_while_the_model_answers_stays_deleted(api, owner, model):
    chat = new_chat(api)
    send(api, chat, "Hello there.")
    model.script(meanwhile(lambda: chat_delete(owner_id=owner.pk, chat_id=chat), reply("Pasta tonight.")))

    response = api.post(f"/api/chats/{chat}/messages", {"content": "What should I cook?"}, format="json")

    assert response.status_code == 410, response.content
    assert response.json()["error"]["code"] == "chat_deleted"
    assert not Chat.objects.filter(pk=chat).exists() and not Message.objects.filter(chat_id=chat).exists()
    assert api.get("/api/chats").json()["chats"] == []


@pytest.mark.django_db(transaction=True)
def test_a_suggestion_the_model_makes_after_its_chat_was_deleted_does_not_wait_in_the_inbox(api, owner, model):
    chat = new_chat(api)
    model.script(meanwhile(lambda: chat_delete(owner_id=owner.pk, chat_id=chat),
                           tool_calls(("propose_change", VEGAN))), reply("I can keep that."))

    response = api.post(f"/api/chats/{chat}/messages", {"content": "Remember that I am vegan."}, format="json")

    assert response.status_code == 410 and response.json()["error"]["code"] == "chat_deleted"
    assert not Proposal.objects.filter(owner=owner).exists()
    assert not Chat.objects.filter(pk=chat).exists()


@pytest.mark.django_db(transaction=True)
def test_an_openai_clients_turn_in_a_chat_deleted_meanwhile_is_answered_and_stores_nothing(owner, model):
    client = bearer(owner)
    talk = [{"role": "user", "content": "Plan a weekend trip to Porto for me."}]
    model.script(reply("Ribeira, then Livraria Lello."))
    chat = int(client.post("/v1/chat/completions", {"messages": talk}, format="json")["X-Chat-Id"])
    talk += [{"role": "assistant", "content": "Ribeira, then Livraria Lello."},
             {"role": "user", "content": "And by train?"}]
    model.script(meanwhile(lambda: chat_delete(owner_id=owner.pk, chat_id=chat), reply("Take the Alfa.")))

    response = client.post("/v1/chat/completions", {"messages": talk}, format="json")

    assert response.status_code == 200 and response.json()["choices"][0]["message"]["content"] == "Take the Alfa."
    assert not Chat.objects.filter(pk=chat).exists() and not Message.objects.filter(chat_id=chat).exists()


@pytest.mark.django_db
def test_an_openai_client_whose_chat_was_deleted_starts_a_new_one(api, owner, model):
    client = bearer(owner)
    talk = [{"role": "user", "content": "Plan a weekend trip to Porto for me."}]
    model.script(reply("Ribeira, then Livraria Lello."))
    first = int(client.post("/v1/chat/completions", {"messages": talk}, format="json")["X-Chat-Id"])
    assert api.delete(f"/api/chats/{first}").status_code == 204
    talk += [{"role": "assistant", "content": "Ribeira, then Livraria Lello."},
             {"role": "user", "content": "And by train?"}]
    model.script(reply("Take the Alfa."))

    response = client.post("/v1/chat/completions", {"messages": talk}, format="json")

    assert response.status_code == 200, response.content
    second = int(response["X-Chat-Id"])
    assert second != first and not Chat.objects.filter(pk=first).exists()
    assert list(Message.objects.filter(chat_id=second).order_by("id").values_list("content", flat=True)) == [
        "And by train?", "Take the Alfa."]
    # the client's whole conversation still reaches the model
    assert [m["content"] for m in model.last_request["messages"][1:]] == [
        "Plan a weekend trip to Porto for me.", "Ribeira, then Livraria Lello.", "And by train?"]


@pytest.mark.django_db(transaction=True)
def test_an_account_deleted_while_the_model_answers_gets_no_note_and_no_error_page(api, owner, model):
    """The account's delete holds the owner's note lock while it erases; a save that waited for it finds
    nobody to save for (410), never a half-written note or a 500."""
    from localai_memory.accounts.services import account_delete
    from localai_memory.notes.models import NoteFile

    set_memory(owner, save_mode="auto")
    chat = new_chat(api)
    owner_id = owner.pk
    model.script(meanwhile(lambda: account_delete(user_id=owner_id), tool_calls(("propose_change", VEGAN))),
                 reply("Saved."))

    response = api.post(f"/api/chats/{chat}/messages", {"content": "Remember that I am vegan."}, format="json")

    assert response.status_code == 410, response.content
    assert not NoteFile.objects.filter(owner_id=owner_id).exists()
    assert not ChangeSet.objects.filter(owner_id=owner_id).exists()


@pytest.mark.django_db(transaction=True)
def test_a_chat_deleted_while_the_model_fails_is_a_410_not_a_message_kept_to_ask_again(api, owner, model):
    from tests.fakes._loopback import Response

    chat = new_chat(api)
    model.script(meanwhile(lambda: chat_delete(owner_id=owner.pk, chat_id=chat),
                           Response(status=500, body=b'{"error": {"message": "boom"}}')))

    response = api.post(f"/api/chats/{chat}/messages", {"content": "Are you there?"}, format="json")

    assert response.status_code == 410 and response.json()["error"]["code"] == "chat_deleted"
    assert not Chat.objects.filter(pk=chat).exists()
