"""Delete chat on the chat page: a page that says what goes and what stays, then back to the list; another
user's chat is a 404; a chat deleted in another tab while the model answers sends this tab back to the list."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from localai_memory.chats.models import Chat, Message
from localai_memory.chats.services import chat_create, chat_delete, message_add
from localai_memory.notes import selectors as notes_selectors
from localai_memory.notes.paths import Scope
from localai_memory.notes.services import note_upsert
from tests.fakes.openai_server import reply, tool_calls
from tests.support.meanwhile import meanwhile

from .conftest import signed_in

PROPOSE_HOME = ("propose_change", {"kind": "memory", "topic": "home", "summary": "lives in Rome"})


@pytest.mark.browser
def test_delete_chat_says_what_goes_and_what_stays_then_goes_back_to_the_list(web, model):
    web.register("alice")
    page = web.page
    model.script(tool_calls(PROPOSE_HOME), reply("I can keep that note once you confirm it."))
    web.go("/chats/")
    page.get_by_role("button", name="New chat").click()
    page.get_by_role("textbox", name="Message").fill("Remember that I live in Rome.")
    page.get_by_role("button", name="Send").click()
    expect(page.locator(".msg.assistant")).to_have_count(1)
    web.screenshot("chat")

    page.get_by_role("link", name="Delete chat").click()

    expect(page.get_by_role("heading", name="Delete the chat “Remember that I live in Rome.”?")).to_be_visible()
    goes = page.get_by_test_id("what-goes")
    expect(goes).to_contain_text("every message of this chat, yours and the assistant's, for good")
    expect(goes).to_contain_text("1 suggestion from it still waiting in your inbox is dropped")
    expect(page.get_by_test_id("what-stays")).to_contain_text("all your notes")
    web.accessible("delete chat page")
    web.screenshot("confirm")
    page.get_by_role("button", name="Delete chat").click()
    expect(page).to_have_url(re.compile(r"/chats/$"))
    expect(page.get_by_text("Deleted the chat “Remember that I live in Rome.”.")).to_be_visible()
    expect(page.get_by_text("No chats yet")).to_be_visible()
    web.accessible("chat list after a delete")
    assert not Chat.objects.exists() and not Message.objects.exists()
    web.go("/inbox/")
    expect(page.get_by_text("Dropped: its chat was deleted.")).to_be_visible()
    expect(page.get_by_text("Proposed in a chat you deleted")).to_be_visible()


@pytest.mark.django_db
def test_the_delete_page_names_the_notes_saved_from_the_chat_and_they_stay(owner):
    chat = chat_create(owner_id=owner.pk, title="Rome")
    message_add(chat=chat, role="user", content="I live in Rome.", typed_by_user=True)
    note_upsert(owner_id=owner.pk, scope=Scope.user(), topic="home", summary="lives in Rome", source="chat",
                actor="you with /remember", chat_id=chat.pk)
    client = signed_in(owner)

    shown = client.get(f"/chats/{chat.pk}/delete/").content.decode()

    assert "the notes saved from this chat: they are your notes" in shown
    done = client.post(f"/chats/{chat.pk}/delete/", follow=True)
    assert done.redirect_chain == [("/chats/", 302)]
    assert "Deleted the chat “Rome”." in done.content.decode()
    assert notes_selectors.index_text(owner_id=owner.pk, scope=Scope.user()) == "- home: lives in Rome\n"


@pytest.mark.django_db
def test_another_users_chat_cannot_be_deleted_on_the_web(owner, outsider):
    chat = chat_create(owner_id=owner.pk, title="Mine")
    client = signed_in(outsider)

    assert client.get(f"/chats/{chat.pk}/delete/").status_code == 404
    assert client.post(f"/chats/{chat.pk}/delete/").status_code == 404
    assert Chat.objects.filter(pk=chat.pk).exists()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("htmx", [False, True])
def test_a_chat_deleted_in_another_tab_while_the_model_answers_goes_back_to_the_list(owner, model, htmx):
    chat = chat_create(owner_id=owner.pk, title="Dinner")
    model.script(meanwhile(lambda: chat_delete(owner_id=owner.pk, chat_id=chat.pk), reply("Pasta.")))
    client = signed_in(owner)
    headers = {"HTTP_HX_REQUEST": "true"} if htmx else {}

    response = client.post(f"/chats/{chat.pk}/send/", {"content": "What should I cook?"}, **headers)

    if htmx:
        assert response.status_code == 204 and response["HX-Redirect"] == "/chats/"
    else:
        assert response.status_code == 302 and response["Location"] == "/chats/"
    listed = client.get("/chats/").content.decode()
    assert "The chat “Dinner” was deleted while the model was answering" in listed
    assert ">What should I cook?</textarea>" in listed  # offered back, for a new chat
    assert not Chat.objects.exists() and not Message.objects.exists()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("htmx", [False, True])
def test_a_chat_deleted_while_the_model_fails_goes_back_to_the_list_too(owner, model, htmx):
    from tests.fakes._loopback import Response

    chat = chat_create(owner_id=owner.pk, title="Dinner")
    model.script(meanwhile(lambda: chat_delete(owner_id=owner.pk, chat_id=chat.pk),
                           Response(status=500, body=b'{"error": {"message": "boom"}}')))
    client = signed_in(owner)
    headers = {"HTTP_HX_REQUEST": "true"} if htmx else {}

    response = client.post(f"/chats/{chat.pk}/send/", {"content": "What should I cook?"}, **headers)

    assert response.status_code in (204, 302), response.content[:300]
    assert "The chat “Dinner” was deleted while the model was answering" in client.get("/chats/").content.decode()


def test_sending_in_a_tab_whose_chat_was_deleted_goes_back_to_the_list(owner):
    chat = chat_create(owner_id=owner.pk, title="Dinner")
    client = signed_in(owner)
    chat_delete(owner_id=owner.pk, chat_id=chat.pk)

    response = client.post(f"/chats/{chat.pk}/send/", {"content": "Are you there?"}, HTTP_HX_REQUEST="true")

    assert response.status_code == 204 and response["HX-Redirect"] == "/chats/"
    assert "That chat was deleted" in client.get("/chats/").content.decode()


def test_a_message_sent_to_a_chat_deleted_in_another_tab_is_offered_back_for_a_new_chat(owner):
    chat = chat_create(owner_id=owner.pk, title="Dinner")
    client = signed_in(owner)
    chat_delete(owner_id=owner.pk, chat_id=chat.pk)

    response = client.post(f"/chats/{chat.pk}/send/", {"content": "Are you there?\r\nStill?"}, HTTP_HX_REQUEST="true")

    assert response["HX-Trigger"] == "draft-taken"  # the session has it: the old chat's composer lets it go
    listed = client.get("/chats/").content.decode()
    assert "your message was not sent. It is below, to put in a new chat." in listed
    assert '<textarea id="id_unsent" name="content" rows="3">Are you there?\nStill?</textarea>' in listed
    new = client.post("/chats/new/", {"content": "Are you there?\r\nStill?"})
    shown = client.get(new["Location"]).content.decode()
    assert re.search(r'<textarea id="id_content"[^>]*>Are you there\?\nStill\?</textarea>', shown)
    assert "Your message that was not sent" not in client.get("/chats/").content.decode()  # used: offered once
    assert Chat.objects.count() == 1 and not Message.objects.exists()  # in the box, not sent by itself
