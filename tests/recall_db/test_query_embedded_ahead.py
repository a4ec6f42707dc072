"""A turn's message is embedded on another thread as it arrives, while the turn finds its chat and reads the
database, for recall to rank the notes by meaning. A person whose turns need no such ranking (no notes yet,
memory switched off, a private chat) does not have every message embedded for nothing: after one such turn,
the next ones embed nothing ahead, until a turn wants the vectors again."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from django.test import Client

from localai_memory.chats.services import MESSAGE_MAX_CHARS, chat_set_private
from localai_memory.recall import index
from tests.chats.helpers import new_chat, send, set_memory
from tests.fakes.openai_server import reply
from tests.support.embedder_runs import counted_model

from .conftest import note

pytestmark = pytest.mark.django_db


@pytest.fixture
def runs(monkeypatch: pytest.MonkeyPatch) -> Iterator[Counter[str]]:
    """The texts the configured on-device model was run on, counted."""
    index.forget_query_vectors()
    yield counted_model(monkeypatch)[1]
    index.forget_query_vectors()


def embedded(runs: Counter[str], text: str) -> bool:
    """Whether ``text`` was run through the model, or is being run ahead right now."""
    return runs[text] > 0 or text in index._ahead


def test_a_person_without_notes_has_their_messages_embedded_only_once_they_have_some(api: Any, owner: Any,
                                                                                     model: Any, runs) -> None:
    model.script(*[reply("Sure.")] * 4)
    chat = new_chat(api)
    send(api, chat, "Hello there, first message.")
    send(api, chat, "Nothing to recall yet, second message.")
    assert not embedded(runs, "Nothing to recall yet, second message.")

    note(owner, "pets", "has a dog named Rex")
    body = send(api, chat, "How is my dog doing?")  # recall embeds it now, as the turn needs it
    assert body["memory"]["recall"]["topics"] == ["pets"] and runs["How is my dog doing?"] == 1
    send(api, chat, "Tell me about Rex again.")
    assert embedded(runs, "Tell me about Rex again.")


def test_turns_with_memory_switched_off_embed_nothing_ahead(api: Any, owner: Any, model: Any, runs) -> None:
    note(owner, "pets", "has a dog named Rex")
    set_memory(owner, enabled=False)
    model.script(*[reply("Sure.")] * 3)
    chat = new_chat(api)
    send(api, chat, "First message with memory off.")
    send(api, chat, "Second message with memory off.")
    assert not embedded(runs, "Second message with memory off.")

    set_memory(owner, enabled=True)
    body = send(api, chat, "And my dog?")
    assert body["memory"]["recall"]["topics"] == ["pets"]


def test_a_private_chat_has_its_messages_embedded_at_most_once_and_others_once_each(api: Any, owner: Any,
                                                                                   model: Any, runs) -> None:
    note(owner, "pets", "has a dog named Rex")
    model.script(*[reply("Sure.")] * 5)
    private = new_chat(api)
    chat_set_private(owner_id=owner.pk, chat_id=private, private=True)
    send(api, private, "A first private message.")
    send(api, private, "A second private message.")
    assert not embedded(runs, "A second private message.")

    body = send(api, new_chat(api), "How is my dog doing?")  # embedded as it arrived, and not again
    assert body["memory"]["recall"]["topics"] == ["pets"] and runs["How is my dog doing?"] == 1
    response = api.post("/v1/chat/completions", {"messages": [{"role": "user", "content": "Is Rex well?"}]},
                        format="json", HTTP_X_CHAT_ID=str(private))
    assert response.status_code == 200 and not embedded(runs, "Is Rex well?")

    chat_set_private(owner_id=owner.pk, chat_id=private, private=False)
    body = send(api, private, "And Rex?")
    assert body["memory"]["recall"]["topics"] == ["pets"] and runs["And Rex?"] == 1


def test_a_message_the_chat_page_refuses_is_not_embedded(api: Any, owner: Any, model: Any, runs) -> None:
    note(owner, "pets", "has a dog named Rex")
    chat = new_chat(api)
    too_long = "Tell me about my dog Rex. " * (MESSAGE_MAX_CHARS // 20)

    page = Client()
    page.force_login(owner)
    page.post(f"/chats/{chat}/send/", {"content": too_long})

    assert not model.requests and not any(text.startswith("Tell me about my dog") for text in runs)
    assert not any(text.startswith("Tell me about my dog") for text in index._ahead)
