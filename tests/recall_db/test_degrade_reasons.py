"""Each reason recall gives for not ranking by meaning comes from the situation that causes it, the turn
says so (its report and the X-Memory header), recall still finds notes by their words, and once the cause is
gone (vectors caught up, a model switch re-embedded) the next turn is semantic again."""

from __future__ import annotations

import json

import pytest

from localai_memory.notes.paths import Scope
from localai_memory.recall import index, service, tasks
from localai_memory.recall.embedders import FAST_MODEL_ID
from localai_memory.recall.models import NoteVector
from tests.chats.helpers import new_chat, send

from .conftest import note

pytestmark = pytest.mark.django_db

LIVING = "Which neighbourhood do I live in now?"


def recall_of(body: dict) -> dict:
    return body["memory"]["recall"]


def test_without_an_embedder_recall_matches_words_and_says_no_embedder(api, owner, model, embeddings_off,
                                                                      alices_notes):
    embeddings_off()
    body = send(api, new_chat(api), "Tell me about my dog Rex.")
    recall = recall_of(body)
    assert recall["degraded"] == "no_embedder" and recall["mode"] == "lexical"
    assert recall["topics"][0] == "pets"
    assert "Rex is a beagle" in model.last_request["messages"][0]["content"]


def test_the_x_memory_header_carries_the_degrade_reason(api, owner, model, embeddings_off, alices_notes):
    embeddings_off()
    response = api.post("/v1/chat/completions", {"messages": [{"role": "user", "content": "Where is Rex?"}]},
                        format="json")
    assert response.status_code == 200
    assert json.loads(response["X-Memory"])["degraded"] == "no_embedder"
    assert response.json()["memory"]["recall"]["degraded"] == "no_embedder"


def test_notes_saved_before_recall_existed_give_no_vectors_until_the_catch_up(api, owner, model, alices_notes):
    # What the migration leaves for notes older than recall: their rows, with text and no vectors.
    NoteVector.objects.filter(owner=owner).delete()
    index.owner_reindex(owner_id=owner.pk, embed=False)
    assert set(NoteVector.objects.filter(owner=owner).values_list("model_id", flat=True)) == {""}
    recall = recall_of(send(api, new_chat(api), LIVING))
    assert recall["degraded"] == "no_vectors" and recall["mode"] == "lexical"

    outcome = tasks.catch_up(owner_id=owner.pk)
    assert outcome["done"] and outcome["embedded"] == NoteVector.objects.filter(owner=owner).count()
    recall = recall_of(send(api, new_chat(api), LIVING))
    assert recall["degraded"] is None and recall["mode"] == "semantic"
    assert recall["topics"][0] == "home"


def test_notes_written_while_embeddings_were_off_embed_later(api, owner, model, embeddings_off, embeddings_on):
    embeddings_off()
    note(owner, "home", "lives in Rome", details="Trastevere since 2024.")
    assert list(NoteVector.objects.filter(owner=owner).values_list("model_id", flat=True)) == ["", ""]
    embeddings_on()
    assert recall_of(send(api, new_chat(api), LIVING))["degraded"] == "no_vectors"
    tasks.catch_up()
    assert index.waiting_count(owner_id=owner.pk) == 0
    assert recall_of(send(api, new_chat(api), LIVING))["degraded"] is None


def test_too_few_notes_with_vectors_is_low_coverage(api, owner, model, embeddings_off, embeddings_on):
    for n in range(8):
        note(owner, f"fact-{n}", f"fact number {n} about the garden")
    embeddings_off()
    for n in range(8, 12):
        note(owner, f"fact-{n}", f"fact number {n} about the kitchen")
    embeddings_on()
    recall = recall_of(send(api, new_chat(api), "What do I know about the kitchen?"))
    assert recall["degraded"] == "low_coverage" and recall["mode"] == "lexical"
    assert set(recall["topics"]) >= {"fact-8", "fact-9", "fact-10", "fact-11"}


def test_vectors_of_another_model_are_a_dim_mismatch_until_re_embedded(
        api, owner, model, openai_server, use_endpoint, embeddings_on):
    openai_server.embedding_dim = 256
    use_endpoint(openai_server, "other-model")
    note(owner, "home", "lives in Rome", details="Trastevere since 2024.")
    note(owner, "diet", "vegetarian")
    assert set(NoteVector.objects.filter(owner=owner).values_list("model_id", "dim")) == {("openai:other-model", 256)}

    embeddings_on()  # a model switch: the on-device model, 384 dimensions
    recall = recall_of(send(api, new_chat(api), LIVING))
    assert recall["degraded"] == "dim_mismatch" and recall["mode"] == "lexical"

    tasks.catch_up()
    rows = set(NoteVector.objects.filter(owner=owner).values_list("model_id", "dim"))
    assert rows == {(FAST_MODEL_ID, 384)}  # re-embedded, never mixed
    recall = recall_of(send(api, new_chat(api), LIVING))
    assert recall["degraded"] is None and recall["topics"][0] == "home"


def test_a_failed_query_embedding_is_query_embed_failed(api, owner, model, openai_server, use_endpoint):
    use_endpoint(openai_server)
    note(owner, "home", "lives in Rome", details="Trastevere since 2024.")
    note(owner, "pets", "has a dog named Rex")
    assert NoteVector.objects.filter(owner=owner, model_id="openai:all-minilm-l6-v2").count() == 3
    openai_server.fail_next(500, when=lambda request: request.path.endswith("/embeddings"))
    body = send(api, new_chat(api), "Is Rex a good dog?")
    recall = recall_of(body)
    assert recall["degraded"] == "query_embed_failed" and recall["mode"] == "lexical"
    assert recall["topics"] == ["pets"]  # words still find the note
    assert body["reply"]  # the turn itself went on


def test_the_reasons_come_from_the_service_too(owner, embeddings_off):
    note(owner, "home", "lives in Rome")
    embeddings_off()
    found = service.search(owner_id=owner.pk, scopes=[Scope.user()], query="Rome")
    assert (found["mode"], found["degraded"]) == ("lexical", "no_embedder")
    assert [r["topic"] for r in found["results"]] == ["home"]
