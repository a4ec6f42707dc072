"""A chat whose last message the model never answered says so, with "Ask again", on every load of the page, not
only in the answer of the send that failed."""

from __future__ import annotations

from localai_memory.chats.models import Message
from localai_memory.chats.services import chat_create, message_add
from tests.fakes.openai_server import reply

from .conftest import signed_in


def test_a_reloaded_chat_whose_last_message_was_never_answered_offers_ask_again(owner, model):
    chat = chat_create(owner_id=owner.pk)
    client = signed_in(owner)
    model.fail_next(500)
    failed = client.post(f"/chats/{chat.pk}/send/", {"content": "Hello?"}, HTTP_HX_REQUEST="true")
    kept = Message.objects.get(chat=chat)
    assert f'name="retry" value="{kept.pk}"' in failed.content.decode()

    shown = client.get(f"/chats/{chat.pk}/").content.decode()

    assert f'name="retry" value="{kept.pk}"' in shown
    assert "Your last message was not answered; it is kept in the chat." in shown
    model.script(reply("Hi there."))
    client.post(f"/chats/{chat.pk}/send/", {"retry": kept.pk}, HTTP_HX_REQUEST="true")
    shown = client.get(f"/chats/{chat.pk}/").content.decode()
    assert "not answered" not in shown and 'name="retry"' not in shown
    assert [m.content for m in Message.objects.filter(chat=chat).order_by("id")] == ["Hello?", "Hi there."]


def test_an_answered_chat_and_a_run_that_started_by_itself_offer_no_ask_again(owner):
    answered = chat_create(owner_id=owner.pk)
    message_add(chat=answered, role="user", content="Hello?", typed_by_user=True)
    message_add(chat=answered, role="assistant", content="Hi.")
    run = chat_create(owner_id=owner.pk, origin="trigger")
    message_add(chat=run, role="user", content="Check the weather")
    client = signed_in(owner)

    for chat in (answered, run):
        shown = client.get(f"/chats/{chat.pk}/").content.decode()
        assert "not answered" not in shown and 'name="retry"' not in shown
