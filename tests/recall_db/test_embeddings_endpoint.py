"""Recall through an OpenAI-format ``/v1/embeddings`` server on loopback (``EMBEDDINGS_BASE_URL``): notes
and queries are embedded over HTTP by the real client, and the rankings agree with the on-device model's
when the server serves the same model (rankings are compared, not thresholds: scales differ by server)."""

from __future__ import annotations

import pytest

from localai_memory.notes.paths import Scope
from localai_memory.recall import service, tasks
from localai_memory.recall.models import NoteVector
from tests.chats.helpers import new_chat, send

from .conftest import ALICE_NOTES, note, real_embeddings

pytestmark = pytest.mark.django_db

QUERIES = ["Which neighbourhood do I live in?", "Can you suggest a meal for me tonight?",
           "How often should I walk my beagle?", "What do I do for a living?", "Should I give you distances in miles or kilometres?"]


def ranking(owner, query: str) -> list[str]:
    return [r["topic"] for r in service.search(owner_id=owner.pk, scopes=[Scope.user()], query=query,
                                               limit=5)["results"]]


def test_the_endpoint_ranks_like_the_on_device_model_it_serves(owner, openai_server, use_endpoint, embeddings_on):
    openai_server.embed = real_embeddings
    use_endpoint(openai_server)
    for topic, summary, details in ALICE_NOTES:
        note(owner, topic, summary, details=details)
    assert set(NoteVector.objects.filter(owner=owner).values_list("model_id", flat=True)) == {
        "openai:all-minilm-l6-v2"}
    through_http = {q: ranking(owner, q) for q in QUERIES}
    assert all(request["model"] == "all-minilm-l6-v2" for request in openai_server.embedding_requests)

    embeddings_on()
    tasks.catch_up()  # the switch re-embeds with the on-device model
    in_process = {q: ranking(owner, q) for q in QUERIES}
    assert through_http == in_process
    assert [through_http[q][0] for q in QUERIES] == ["home", "diet", "pets", "work", "units"]


def test_a_bag_of_words_server_ranks_the_note_sharing_the_most_words_first(owner, openai_server, use_endpoint):
    use_endpoint(openai_server, "hash-words")  # the fake's own vectors: words hashed into 384 dimensions
    note(owner, "garden", "grows tomatoes and basil on the balcony")
    note(owner, "bike", "rides a red road bike to work")
    note(owner, "books", "reads crime novels at night")
    found = service.search(owner_id=owner.pk, scopes=[Scope.user()], query="red road bike")
    assert found["mode"] == "semantic" and found["results"][0]["topic"] == "bike"


def test_a_turn_embeds_its_query_through_the_endpoint(api, owner, model, openai_server, use_endpoint):
    openai_server.embed = real_embeddings
    use_endpoint(openai_server)
    note(owner, "home", "lives in Rome", details="Trastevere since 2024.")
    before = len(openai_server.embedding_requests)
    body = send(api, new_chat(api), "Which neighbourhood do I live in?")
    assert body["memory"]["recall"]["mode"] == "semantic" and body["memory"]["recall"]["topics"] == ["home"]
    [query_request] = openai_server.embedding_requests[before:]
    assert query_request["input"] == ["Which neighbourhood do I live in?"]
