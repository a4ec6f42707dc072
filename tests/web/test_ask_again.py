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


def test_a_failed_send_without_javascript_is_sent_on_to_the_chat_so_a_reload_does_not_post_it_again(owner, model):
    """The browser's own post of a message the model failed is answered by a redirect to the chat, which says
    why once and offers Ask again: reloading that page shows the chat, it does not send the message twice."""
    chat = chat_create(owner_id=owner.pk)
    client = signed_in(owner)
    model.fail_next(500)

    failed = client.post(f"/chats/{chat.pk}/send/", {"content": "Hello?"})

    assert failed.status_code == 302 and failed["Location"] == f"/chats/{chat.pk}/#composer"
    shown = client.get(f"/chats/{chat.pk}/").content.decode()
    assert "The model did not answer" in shown and "Your last message was not answered" in shown
    reloaded = client.get(f"/chats/{chat.pk}/").content.decode()
    assert "The model did not answer" not in reloaded  # said once
    assert "Your last message was not answered" in reloaded
    assert [m.content for m in Message.objects.filter(chat=chat)] == ["Hello?"]


def test_a_message_refused_without_javascript_comes_back_in_the_box_of_the_chat_it_is_sent_on_to(owner, model):
    chat = chat_create(owner_id=owner.pk)
    client = signed_in(owner)

    refused = client.post(f"/chats/{chat.pk}/send/", {"content": "x" * 40_000})

    assert refused.status_code == 302
    shown = client.get(f"/chats/{chat.pk}/").content.decode()
    assert "x" * 40_000 in shown and 'role="alert"' in shown
    assert not Message.objects.filter(chat=chat).exists()
