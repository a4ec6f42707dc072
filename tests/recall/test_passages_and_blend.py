"""What recall embeds for a note ("my topic: …" per index line and topic file) and how the blend orders notes:
recency and importance reorder notes of close similarity, never a clearly less similar one over the right one."""

from __future__ import annotations

from datetime import datetime, timedelta

from localai_memory.recall.embedders import OnDeviceEmbedder
from localai_memory.recall.ranking import (
    Candidate,
    RecallConfig,
    RecallResult,
    note_passages,
    rank_notes,
)


def note(ondevice: OnDeviceEmbedder, now: datetime, topic: str, summary: str, details: str = "", *,
         source: str = "user", age_days: int = 10, importance: float = 0.5, id: str | None = None) -> Candidate:
    return Candidate(id=id or topic, text=f"{topic}: {summary}\n{details}", updated_at=now - timedelta(days=age_days),
                     source=source, importance=importance, vectors=ondevice.embed(note_passages(topic, summary, details)),
                     model_id=ondevice.model_id)


def recall(ondevice: OnDeviceEmbedder, notes: list[Candidate], message: str, now: datetime,
           config: RecallConfig | None = None) -> RecallResult:
    return rank_notes(notes, query=message, now=now, query_vectors=ondevice.embed([message]),
                      query_model_id=ondevice.model_id, **({"config": config} if config else {}))


def test_a_note_is_embedded_as_its_owners_topic_line_and_topic_file() -> None:
    assert note_passages("diet", "vegetarian since 2019", "  No meat or fish.\n") == [
        "my diet: vegetarian since 2019", "my diet: No meat or fish."]
    assert note_passages("units", "prefers metric units") == ["my units: prefers metric units"]


def test_a_question_answered_only_by_the_topic_files_second_sentence_brings_in_that_note(
        ondevice: OnDeviceEmbedder, now: datetime) -> None:
    others = [note(ondevice, now, "work", "backend engineer at Finlytics", "Python and Go. On call one week in four."),
              note(ondevice, now, "cat", "has a grey cat named Pixel", "Indoor cat; vet is Dr. Ferri.")]
    with_file = note(ondevice, now, "home", "lives in Rome, in Trastevere",
                     "Rents a third-floor flat with no lift. The lease renews in January.")
    line_only = note(ondevice, now, "home", "lives in Rome, in Trastevere")
    message = "When does my lease end?"
    assert recall(ondevice, [with_file, *others], message, now).ids[:1] == ["home"]
    assert recall(ondevice, [line_only, *others], message, now).ids == []  # the index line alone says nothing of it


def test_a_fresher_but_clearly_less_similar_note_does_not_push_the_right_one_down(
        ondevice: OnDeviceEmbedder, now: datetime) -> None:
    notes = [note(ondevice, now, "cat", "has a grey cat named Pixel, 6 years old",
                  "Indoor cat on a kidney-care diet. Her vet is Dr. Ferri.", source="model", age_days=300,
                  importance=0.3),
             note(ondevice, now, "dog-sitting", "looks after the neighbours' dog on weekends", "A spaniel called Bruno.",
                  source="model", age_days=1, importance=0.9)]
    message = "Which clinic does my cat go to?"
    result = recall(ondevice, notes, message, now)
    assert result.ids == ["cat", "dog-sitting"]
    assert result.items[0].cosine - result.items[1].cosine > RecallConfig().relevance_span
    # The span is configurable: with relevance spread wide, freshness and importance win instead.
    assert recall(ondevice, notes, message, now, RecallConfig(relevance_span=1.0)).ids[0] == "dog-sitting"


def test_recency_still_decides_between_notes_of_close_similarity(ondevice: OnDeviceEmbedder, now: datetime) -> None:
    stale = note(ondevice, now, "pets", "has a gray cat named Pixel", source="model", age_days=400, id="stale")
    fresh = note(ondevice, now, "pets", "has a grey cat named Pixel", source="model", age_days=1, id="fresh")
    result = recall(ondevice, [stale, fresh], "What's my pet called?", now)
    assert result.ids == ["fresh", "stale"]
    fresh_cosine, stale_cosine = result.items[0].cosine, result.items[1].cosine
    assert 0 < stale_cosine - fresh_cosine < RecallConfig().relevance_span  # the stale one is a little closer
