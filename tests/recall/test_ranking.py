"""Ranking a user's notes for a turn: the relevance gate, the blend, the query window, lexical fallback."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

import pytest

from localai_memory.recall.embedders import OnDeviceEmbedder
from localai_memory.recall.ranking import (
    DEFAULT_CONFIG,
    Candidate,
    DegradeReason,
    RecallConfig,
    RecallQuery,
    RecallResult,
    RecallWeights,
    build_recall_query,
    content_terms,
    rank_notes,
    recency_of,
)

from .conftest import make_candidates


def recall(ondevice: OnDeviceEmbedder, candidates: list[Candidate], query: RecallQuery | str, now: datetime,
           config: RecallConfig = DEFAULT_CONFIG) -> RecallResult:
    query = RecallQuery(text=query) if isinstance(query, str) else query
    return rank_notes(candidates, query=query, now=now, query_vectors=ondevice.embed(query.texts_to_embed()),
                      query_model_id=ondevice.model_id, config=config)


@pytest.mark.parametrize("message", [
    "What's the capital of Australia?",
    "Write a limerick about a lighthouse",
    "How many moons does Jupiter have?",
    "thanks, that's all for now",
    "What is 17 times 23?",
])
def test_an_off_topic_message_brings_in_nothing(ondevice: OnDeviceEmbedder, alice_notes: list[Candidate],
                                                now: datetime, message: str) -> None:
    result = recall(ondevice, alice_notes, message, now)
    assert result.items == ()
    assert result.mode == "semantic"
    assert result.degrade_reason is None


@pytest.mark.parametrize(("message", "topic"), [
    ("What's my pet called?", "cat"),
    ("Are prawns ok for me?", "allergies"),
    ("Which company employs me?", "work"),
    ("What cities am I visiting in the autumn?", "trip-japan"),
    ("Which sci-fi saga am I working through?", "reading"),
])
def test_a_paraphrase_brings_in_its_topic_first(ondevice: OnDeviceEmbedder, alice_notes: list[Candidate],
                                                now: datetime, message: str, topic: str) -> None:
    assert recall(ondevice, alice_notes, message, now).ids[0] == topic


def test_a_follow_up_keeps_the_topic_of_the_earlier_turn(ondevice: OnDeviceEmbedder,
                                                         alice_notes: list[Candidate], now: datetime) -> None:
    alone = recall(ondevice, alice_notes, "yes, let's do that for the first week", now)
    followed = recall(ondevice, alice_notes, RecallQuery(text="yes, let's do that for the first week",
                                                         context=("I'm thinking about booking flights to Tokyo",)),
                      now)
    assert "trip-japan" not in alone.ids
    assert followed.ids[0] == "trip-japan"


def test_on_a_change_of_subject_the_newest_message_wins(ondevice: OnDeviceEmbedder,
                                                        alice_notes: list[Candidate], now: datetime) -> None:
    result = recall(ondevice, alice_notes, RecallQuery(text="what's my cat's name again?",
                                                       context=("Tell me about my Japan trip plans",)), now)
    assert result.ids[0] == "cat"


def test_a_note_you_typed_a_year_ago_does_not_fade(now: datetime) -> None:
    year_ago = now - timedelta(days=365)
    typed = Candidate(id="typed", text="x", updated_at=year_ago, source="user")
    imported = Candidate(id="imported", text="x", updated_at=year_ago, source="import")
    saved_by_model = Candidate(id="model", text="x", updated_at=year_ago, source="model")
    month_old_model = Candidate(id="model", text="x", updated_at=now - timedelta(days=30), source="model")
    assert recency_of(typed, now=now) == 1.0
    assert recency_of(imported, now=now) == 1.0
    assert recency_of(saved_by_model, now=now) < 0.001
    assert recency_of(month_old_model, now=now) == pytest.approx(0.368, abs=0.001)  # 30-day time constant


def test_of_two_equally_relevant_old_notes_the_one_you_typed_ranks_first(ondevice: OnDeviceEmbedder,
                                                                        now: datetime) -> None:
    vectors = ondevice.embed(["cat: has a grey cat named Pixel"])
    old = now - timedelta(days=365)
    notes = [Candidate(id="saved-by-model", text="cat: has a grey cat named Pixel", updated_at=old,
                       source="model", vectors=vectors, model_id=ondevice.model_id),
             Candidate(id="typed-by-you", text="cat: has a grey cat named Pixel", updated_at=old,
                       source="user", vectors=vectors, model_id=ondevice.model_id)]
    result = recall(ondevice, notes, "What's my pet called?", now)
    assert result.ids == ["typed-by-you", "saved-by-model"]
    assert result.items[0].recency == 1.0


def test_the_weights_are_configurable(ondevice: OnDeviceEmbedder, now: datetime) -> None:
    vectors = ondevice.embed(["cat: has a grey cat named Pixel"])
    notes = [Candidate(id=name, text="cat: has a grey cat named Pixel", updated_at=now, source="user",
                       importance=importance, vectors=vectors, model_id=ondevice.model_id)
             for name, importance in (("minor", 0.1), ("major", 0.9))]
    by_importance = recall(ondevice, notes, "What's my pet called?", now)
    ignoring_importance = recall(ondevice, notes, "What's my pet called?", now,
                                 RecallConfig(weights=RecallWeights(relevance=1.0, recency=0.0, importance=0.0)))
    assert by_importance.ids[0] == "major"
    assert ignoring_importance.items[0].score == ignoring_importance.items[1].score


def test_it_returns_at_most_max_items(ondevice: OnDeviceEmbedder, now: datetime) -> None:
    notes = make_candidates(ondevice, [(f"cat-{i}", f"cat fact number {i} about Pixel the grey cat", "", "user", 1)
                                       for i in range(10)])
    assert len(recall(ondevice, notes, "tell me about my cat Pixel", now, RecallConfig(max_items=3)).items) == 3


def test_vectors_of_another_model_are_never_compared(ondevice: OnDeviceEmbedder, alice_notes: list[Candidate],
                                                     now: datetime) -> None:
    foreign = [replace(c, model_id="openai:text-embedding-3-small") if c.id == "cat" else c for c in alice_notes]
    result = recall(ondevice, foreign, "What's my pet called?", now)
    assert "cat" not in result.ids  # "pet" shares no word with the note, and its vector is not comparable
    by_word = recall(ondevice, foreign, "how is my cat doing?", now)
    assert by_word.items[0].id == "cat" and by_word.items[0].matched_by == "lexical"


def test_lexical_recall_needs_a_shared_content_word(alice_notes: list[Candidate], now: datetime) -> None:
    def lexical(text: str) -> list:
        return rank_notes(alice_notes, query=text, now=now, degrade_reason=DegradeReason.NO_EMBEDDER).ids

    assert lexical("is Pixel due at the vet?")[0] == "cat"
    assert lexical("what do you think about it?") == []  # only stopwords
    assert lexical("What's the capital of Australia?") == []


def test_without_an_embedder_a_first_person_question_brings_two_notes_the_user_typed(
        alice_notes: list[Candidate], now: datetime) -> None:
    """"What is my name?" shares no word with any note ("name" says nothing by itself): with no semantic
    signal, at most two of the notes the user typed or imported come, never the model's."""
    for question in ("What is my name?", "What's my pet's name?", "remind me what I told you"):
        found = rank_notes(alice_notes, query=question, now=now, degrade_reason=DegradeReason.NO_EMBEDDER)
        assert len(found.ids) == 2, question
        assert all(item.candidate.source == "user" for item in found.items)
        assert found.mode == "lexical" and found.degrade_reason == DegradeReason.NO_EMBEDDER
    for remark in ("Tell me a joke about penguins", "My printer won't connect to the wifi, any ideas?",
                   "How do I convert a Word document to PDF?", "Can I freeze cooked rice?"):
        assert rank_notes(alice_notes, query=remark, now=now, degrade_reason=DegradeReason.NO_EMBEDDER).ids == []
    model_only = [c for c in alice_notes if c.source == "model"]
    assert rank_notes(model_only, query="What is my name?", now=now, degrade_reason=DegradeReason.NO_EMBEDDER).ids == []


def test_content_terms_drop_stopwords_and_meet_across_word_forms() -> None:
    assert content_terms("Where do I live? She lives and lived there.") == ["liv", "liv", "liv"]
    assert content_terms("running trained plans") == ["run", "train", "plan"]


def test_the_recall_query_is_what_the_user_typed_newest_first() -> None:
    messages = [
        {"role": "system", "content": "You are helpful."},
        {"role": "user", "content": "I'm planning my trip to Japan"},
        {"role": "assistant", "content": "Great! Tokyo or Kyoto?"},
        {"role": "user", "content": "Kyoto, I think"},
        {"role": "tool", "content": "Kyoto weather: sunny"},
        {"role": "user", "content": "Fetched page: 10 best sushi bars", "origin": "tool"},
        {"role": "user", "content": "Summarise the chat so far", "origin": "client"},
        {"role": "user", "content": [{"type": "text", "text": "yes, book that"}]},
    ]
    query = build_recall_query(messages, window=2)
    assert query == RecallQuery(text="yes, book that", context=("I'm planning my trip to Japan", "Kyoto, I think"))
    assert query.texts_to_embed() == ["yes, book that", "Kyoto, I think", "I'm planning my trip to Japan"]


def test_a_turn_with_nothing_typed_by_the_user_has_no_recall_query() -> None:
    assert build_recall_query([{"role": "user", "content": "page text", "origin": "tool"},
                               {"role": "assistant", "content": "hi"}]) is None


def test_a_newest_message_the_user_did_not_type_has_no_recall_query_even_after_typed_ones() -> None:
    typed = [{"role": "user", "content": "I'm planning my trip to Japan"}, {"role": "assistant", "content": "Nice!"}]
    for origin in ("client", "tool", "host"):
        newest = {"role": "user", "content": "Summarise the chat so far", "origin": origin}
        assert build_recall_query([*typed, newest]) is None, origin


def test_the_window_keeps_only_the_last_earlier_turns() -> None:
    messages = [{"role": "user", "content": f"turn {i}"} for i in range(6)]
    assert build_recall_query(messages, window=2).context == ("turn 3", "turn 4")
    assert build_recall_query(messages, window=0).context == ()
