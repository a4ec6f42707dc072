"""Without usable vectors, recall ranks the same rows by their words in PostgreSQL full text and says so: the
note that shares a word with the message (in another form: "cook" finds "cooking") comes in, an off-topic
message brings nothing, the newest message counts more than the earlier turns, and nobody else's rows or a
scope the turn may not read ever come in. The search API and the duplicate check go the same way."""

from __future__ import annotations

import io

import pytest
from django.db import connection
from django.utils import timezone

from localai_memory.notes.paths import Scope
from localai_memory.recall import service
from localai_memory.recall.ranking import RecallQuery
from tests.chats.helpers import make_agent, new_chat, send, system_of

from .conftest import note

pytestmark = pytest.mark.django_db

SEARCH = "/api/chats/memory/search"


@pytest.fixture
def bobs_notes(owner, embeddings_off) -> None:
    embeddings_off()
    note(owner, "food", "loves cooking Sicilian dishes", details="Makes caponata every Sunday.")
    note(owner, "home", "lives in Rome", details="Moved to Trastevere in 2024, a flat near the river.")
    note(owner, "pets", "has a dog named Rex", details="Rex is a beagle, walks twice a day.")
    note(owner, "work", "nurse at the children's hospital", details="Night shifts one week in three.")


def recall_of(body: dict) -> dict:
    return body["memory"]["recall"]


def topics(outcome: service.RecallOutcome) -> list[str]:
    return [item.note.topic for item in outcome.items]


def test_with_embeddings_off_a_turn_brings_in_the_note_that_shares_a_word_in_another_form(api, model,
                                                                                        bobs_notes):
    recall = recall_of(send(api, new_chat(api), "What should I cook tonight?"))
    assert (recall["mode"], recall["degraded"]) == ("lexical", "no_embedder")
    assert recall["topics"] == ["food"]
    assert recall["notes"][0]["similarity"] is None
    assert "Makes caponata every Sunday." in system_of(model.last_request)


@pytest.mark.parametrize(("message", "topic"), [
    ("Any ideas for the beagles at the park?", "pets"),  # plural: "beagles" finds "beagle"
    ("Is living downtown expensive?", "home"),  # "living" finds "lives"
    ("How do I keep sleeping well after a night shift?", "work"),  # one shared word is enough
])
def test_any_one_shared_word_in_any_form_is_enough(owner, bobs_notes, message, topic):
    outcome = service.recall_notes(owner_id=owner.pk, scopes=[Scope.user()], query=message)
    assert (outcome.mode, outcome.degraded) == ("lexical", "no_embedder")
    assert topics(outcome)[0] == topic


@pytest.mark.parametrize("message", [
    "What's the capital of Australia?",
    "thanks, that's all for now",
    "Write a limerick about a lighthouse",
    "What do you think about it?",
])
def test_an_off_topic_message_brings_in_nothing(api, model, bobs_notes, message):
    recall = recall_of(send(api, new_chat(api), message))
    assert (recall["mode"], recall["degraded"]) == ("lexical", "no_embedder")
    assert recall["count"] == 0 and recall["topics"] == []
    assert "Trastevere" not in system_of(model.last_request)


def test_the_newest_message_counts_more_than_the_earlier_turns(owner, bobs_notes):
    # Rex's note and the cooking note match these words equally well; whichever is newest ranks first.
    query = RecallQuery(text="Is Rex allowed in a flat?", context=("I love cooking for friends",))
    assert topics(service.recall_notes(owner_id=owner.pk, scopes=[Scope.user()], query=query)) == [
        "pets", "food", "home"]
    switched = RecallQuery(text="I love cooking for friends", context=("Is Rex allowed in a flat?",))
    assert topics(service.recall_notes(owner_id=owner.pk, scopes=[Scope.user()], query=switched)) == [
        "food", "pets", "home"]


def test_a_follow_up_keeps_the_topic_of_the_users_earlier_message(api, model, bobs_notes):
    response = api.post("/v1/chat/completions", {"messages": [
        {"role": "user", "content": "I'd like to take Rex somewhere new"},
        {"role": "assistant", "content": "How about the river path?"},
        {"role": "user", "content": "yes, do that"}]}, format="json")
    recall = response.json()["memory"]["recall"]
    assert recall["degraded"] == "no_embedder" and recall["topics"] == ["pets"]


def test_lexical_recall_never_brings_another_users_rows_or_a_scope_not_allowed(api, owner, outsider, model,
                                                                              embeddings_off):
    embeddings_off()
    agent = make_agent(owner, memory="own")
    note(owner, "home", "lives in Rome", details="Trastevere since 2024.")
    note(owner, "style", "answers about Rome in short bullet points", scope=Scope.agent(agent.pk))
    note(outsider, "travel", "visits Rome every spring", details="Always stays in Trastevere.")
    # The agent's own notes only: the user's note about Rome and the outsider's are not readable here.
    recall = recall_of(send(api, new_chat(api, agent=agent.pk), "Tell me about Rome and Trastevere"))
    assert (recall["mode"], recall["topics"]) == ("lexical", ["style"])
    assert {n["scope"] for n in recall["notes"]} == {"agent"}
    assert "Always stays" not in system_of(model.last_request)
    # Without the agent: the user's own note, never the outsider's.
    outcome = service.recall_notes(owner_id=owner.pk, scopes=[Scope.user()], query="Rome and Trastevere")
    assert [(i.note.scope.kind, i.note.topic) for i in outcome.items] == [("user", "home")]
    assert service.lexical_scores(owner_id=owner.pk, scopes=[Scope.user()], query="spring travel") == {}


def test_the_search_api_searches_by_words_and_says_so(api, outsider_api, bobs_notes):
    body = api.get(SEARCH, {"q": "cook"}).json()
    assert (body["mode"], body["degraded"]) == ("lexical", "no_embedder")
    [result] = body["results"]
    assert (result["topic"], result["in"], result["matched_by"], result["similarity"]) == (
        "food", "index", "lexical", None)
    [in_details] = api.get(SEARCH, {"q": "beagle walks"}).json()["results"]
    assert (in_details["topic"], in_details["in"]) == ("pets", "details")
    assert in_details["line"] == "Rex is a beagle, walks twice a day."
    assert api.get(SEARCH, {"q": "the capital of Mongolia"}).json()["results"] == []
    assert outsider_api.get(SEARCH, {"q": "cooking caponata"}).json()["results"] == []


def test_search_words_and_quotes_are_read_as_words_never_as_operators(owner, bobs_notes):
    for query in ("Rex & !beagle | <-> (walks", "Rex's 'beagle':* \\ walks", "O'Neil's \\\\ dog: Rex"):
        found = service.search(owner_id=owner.pk, scopes=[Scope.user()], query=query)
        assert [r["topic"] for r in found["results"]] == ["pets"], query
    assert service.search(owner_id=owner.pk, scopes=[Scope.user()], query="&|!():*")["results"] == []


def test_every_degrade_reason_ranks_by_full_text(owner, embeddings_off, embeddings_on):
    embeddings_off()
    note(owner, "food", "loves cooking Sicilian dishes")
    note(owner, "pets", "has a dog named Rex")
    embeddings_on()  # the notes wait for the catch-up: no vectors yet
    outcome = service.recall_notes(owner_id=owner.pk, scopes=[Scope.user()], query="What should I cook?")
    assert (outcome.mode, outcome.degraded, topics(outcome)) == ("lexical", "no_vectors", ["food"])


def test_rows_bulk_loaded_with_copy_are_found_by_their_words(owner, embeddings_off):
    embeddings_off()
    columns = "owner_id, scope_kind, scope_key, topic, kind, path, text, source, updated_at, model_id"
    rows = io.StringIO(f"{owner.pk}\tuser\t\tgarden\tline\tMemory/index.md\tgrows tomatoes on the balcony\tuser\t"
                       f"{timezone.now().isoformat()}\t\n")
    with connection.cursor() as cursor, cursor.cursor.copy(f"COPY recall_notevector ({columns}) FROM STDIN") as copy:
        copy.write(rows.getvalue())
    outcome = service.recall_notes(owner_id=owner.pk, scopes=[Scope.user()], query="Is it too cold for tomato plants?")
    assert topics(outcome) == ["garden"]


def test_with_embeddings_off_a_reworded_repeat_is_a_lexical_duplicate(owner, bobs_notes):
    duplicate = service.find_duplicate(owner_id=owner.pk, scope=Scope.user(), topic="cooking",
                                       summary="loves to cook Sicilian dishes")
    assert duplicate is not None and (duplicate.topic, duplicate.by) == ("food", "lexical")
    assert service.find_duplicate(owner_id=owner.pk, scope=Scope.user(), topic="cooking",
                                  summary="loves Thai street food") is None
