"""A user's recall reads that user's notes of the allowed scopes only, and stays complete at scale.

At 1,000 users × 40 facts (many users holding the very same texts, so their vectors are identical), every
user's recall through PostgreSQL returns exactly what ranking that user's own 40 notes in memory returns:
never another user's note, never an empty or short list while matching notes exist. That is what filtering
by owner and scope *before* ranking buys; a global approximate index filtered afterwards loses rows.
"""

from __future__ import annotations

import io
import itertools
from datetime import timedelta

import numpy as np
import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.utils import timezone

from localai_memory.notes.paths import Scope
from localai_memory.recall import service
from localai_memory.recall.embedders import FAST_MODEL_ID, OnDeviceEmbedder
from localai_memory.recall.models import NoteVector
from localai_memory.recall.ranking import Candidate, RecallQuery, rank_notes

from .conftest import note

pytestmark = pytest.mark.django_db

USERS = 1000
FACTS = 40
THEMES = ["home", "pet", "diet", "sport", "music", "work", "car", "garden", "travel", "book"]
WORDS = {
    "home": ["lives in Rome", "lives in Oslo", "rents a flat in Lyon", "owns a house in Porto", "lives in Kyoto",
             "moved to Austin", "lives on a boat in Amsterdam", "shares a flat in Berlin", "lives in Nairobi",
             "lives near Lima"],
    "pet": ["has a beagle named Rex", "has two cats", "keeps a parrot", "has a goldfish", "walks a husky",
            "fosters kittens", "has a rabbit called Bun", "owns a horse", "keeps bees", "has a tortoise"],
    "diet": ["is vegetarian", "is vegan", "eats no gluten", "avoids dairy", "loves spicy food", "fasts on Mondays",
             "eats fish but no meat", "is allergic to peanuts", "drinks no coffee", "follows keto"],
    "sport": ["runs marathons", "plays tennis on Sundays", "swims every morning", "climbs at the gym",
              "cycles to work", "does yoga", "plays chess competitively", "skis every winter", "boxes twice a week",
              "surfs in summer"],
    "music": ["plays the piano", "sings in a choir", "loves jazz", "plays bass in a band", "collects vinyl",
              "learns the violin", "listens to opera", "plays drums", "writes songs", "likes techno"],
    "work": ["is a nurse", "teaches maths", "is a software engineer", "runs a bakery", "is a lawyer",
             "drives a taxi", "is a pilot", "works as an architect", "is a chef", "is a farmer"],
    "car": ["drives an electric car", "has no car", "rides a motorbike", "drives a van", "owns a vintage Fiat",
            "car-shares", "leases a hybrid", "is learning to drive", "drives a pickup", "has a camper"],
    "garden": ["grows tomatoes", "keeps roses", "has an allotment", "grows herbs on the balcony", "has no garden",
               "plants tulips", "grows chillies", "composts everything", "has fruit trees", "grows cacti"],
    "travel": ["visits Japan yearly", "hates flying", "travels by train", "backpacks in Asia", "goes to Greece",
               "camps in Scotland", "cruises in winter", "visits family in India", "road-trips in the US",
               "hikes in Nepal"],
    "book": ["reads crime novels", "loves poetry", "reads history", "prefers audiobooks", "reads sci-fi",
             "is in a book club", "reads in French", "collects comics", "reads biographies", "writes a novel"],
}


@pytest.fixture(scope="module")
def embedder() -> OnDeviceEmbedder:
    return OnDeviceEmbedder()


def facts() -> list[tuple[str, str]]:
    """400 distinct (topic, summary) facts: 10 themes × 10 variants, and a few wordings per variant."""
    out = []
    for theme in THEMES:
        for n, summary in enumerate(WORDS[theme]):
            for suffix in ("", " (since 2020)", " (for years)", " (recently)"):
                out.append((f"{theme}-{n}{'-' + str(len(suffix)) if suffix else ''}", summary + suffix))
    return out[:400]


def bulk_load(users: list[int], catalogue: list[tuple[str, str]], vectors: np.ndarray) -> dict[int, list[int]]:
    """COPY 40 facts per user into the recall table; returns each user's fact numbers."""
    texts = ["[" + ",".join(f"{x:.7f}" for x in row) + "]" for row in vectors]
    now = timezone.now()
    buffer = io.StringIO()
    chosen: dict[int, list[int]] = {}
    for u, user_id in enumerate(users):
        picks = [(u * 7 + j * 10) % len(catalogue) for j in range(FACTS)]  # overlapping sets across users
        chosen[user_id] = picks
        for k in picks:
            topic, summary = catalogue[k]
            buffer.write(f"{user_id}\tuser\t\t{topic}\tline\tMemory/index.md\t{summary}\tuser\t"
                         f"{(now - timedelta(days=k % 90)).isoformat()}\t{texts[k]}\t{FAST_MODEL_ID}\t384\n")
    buffer.seek(0)
    with connection.cursor() as cursor:
        columns = ("owner_id, scope_kind, scope_key, topic, kind, path, text, source, updated_at, embedding, "
                   "model_id, dim")
        with cursor.cursor.copy(f"COPY recall_notevector ({columns}) FROM STDIN") as copy:
            while block := buffer.read(1 << 20):
                copy.write(block)
    return chosen


def test_every_users_recall_stays_complete_at_a_thousand_users_by_forty_facts(embedder):
    catalogue = facts()
    vectors = embedder.embed([f"{t}: {s}" for t, s in catalogue])
    user_model = get_user_model()
    user_model.objects.bulk_create([user_model(username=f"bulk{n}", password="!") for n in range(USERS)])
    users = list(user_model.objects.filter(username__startswith="bulk").order_by("id").values_list("id", flat=True))
    chosen = bulk_load(users, catalogue, vectors)
    assert NoteVector.objects.count() == USERS * FACTS

    now = timezone.now()
    model_id = embedder.model_id
    checked = empty = 0
    for u, user_id in enumerate(users):
        mine = chosen[user_id]
        target = mine[u % FACTS]
        query = RecallQuery(text=catalogue[target][1])
        query_vectors = vectors[target][None, :]
        outcome = service.recall_notes(owner_id=user_id, scopes=[Scope.user()], query=query, now=now,
                                       query_vectors=query_vectors, embedder=embedder)
        got = [r.note.topic for r in outcome.items]
        # The same ranking over this user's own 40 notes, in memory: the truth recall must match.
        own = [Candidate(id=("user", "", catalogue[k][0]), text=f"{catalogue[k][0]}: {catalogue[k][1]}",
                         updated_at=now - timedelta(days=k % 90), vectors=vectors[k], model_id=model_id)
               for k in mine]
        truth = rank_notes(own, query=query, now=now, query_vectors=query_vectors, query_model_id=model_id)
        assert got == [key[2] for key in truth.ids], (user_id, got, truth.ids)
        assert catalogue[target][0] in got
        assert set(got) <= {catalogue[k][0] for k in mine}  # nobody else's note
        assert outcome.degraded is None and outcome.candidates == FACTS
        checked += 1
        empty += not got
    assert (checked, empty) == (USERS, 0)


def test_there_is_no_approximate_vector_index_to_lose_rows():
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexdef FROM pg_indexes WHERE tablename = 'recall_notevector'")
        definitions = [row[0].lower() for row in cursor.fetchall()]
    assert not [d for d in definitions if "hnsw" in d or "ivfflat" in d]
    # recall reads through the unique B-tree: owner and scope first, then the passage (a topic file's part last)
    assert any("(owner_id, scope_kind, scope_key, topic, kind, part)" in d for d in definitions)


def test_a_users_recall_never_returns_another_users_notes(owner, outsider):
    note(owner, "home", "lives in Rome", details="Trastevere since 2024.")
    note(outsider, "home", "lives in Paris", details="Montmartre since 2019.")
    note(outsider, "pets", "has a dog named Rex")
    for query in ("Where do I live?", "Tell me about my dog Rex", "Montmartre"):
        for user, others in ((owner, ("Paris", "Montmartre", "Rex")), (outsider, ("Rome", "Trastevere"))):
            outcome = service.recall_notes(owner_id=user.pk, scopes=[Scope.user()], query=query)
            for item in outcome.items:
                assert not any(word in item.note.text for word in others), (user, query, item.note.text)
    assert service.search(owner_id=owner.pk, scopes=[Scope.user()], query="Montmartre")["results"] == []
    theirs = service.search(owner_id=outsider.pk, scopes=[Scope.user()], query="Montmartre")["results"]
    assert [r["summary"] for r in theirs] == ["lives in Paris"]


def test_only_the_scopes_asked_for_are_read(owner):
    note(owner, "home", "lives in Rome")
    note(owner, "home", "the agent's user lives in Rome too", scope=Scope.agent(7))
    note(owner, "home", "this conversation is about Rome", scope=Scope.channel(3, "chat-1"))
    for scopes in itertools.chain.from_iterable(
            itertools.combinations([Scope.user(), Scope.agent(7), Scope.channel(3, "chat-1")], n) for n in (1, 2, 3)):
        outcome = service.recall_notes(owner_id=owner.pk, scopes=list(scopes), query="Rome")
        assert {item.note.scope for item in outcome.items} == set(scopes)
    assert service.recall_notes(owner_id=owner.pk, scopes=[], query="Rome").items == []
