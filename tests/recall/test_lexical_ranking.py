"""A lexical turn ranks by the full-text rank PostgreSQL gave each note (``Candidate.lexical``): a note with
none is not recalled, and the rank is blended with recency and importance like a cosine."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

from localai_memory.recall.ranking import Candidate, DegradeReason, rank_notes

from .conftest import make_candidates


def lexical(candidates: list[Candidate], ranks: dict[str, float]) -> list[Candidate]:
    return [replace(c, lexical=ranks.get(str(c.id), 0.0)) for c in candidates]


def test_notes_the_database_ranked_come_in_best_first_and_the_others_not_at_all(now: datetime) -> None:
    notes = lexical(make_candidates(None), {"cat": 0.06, "home": 0.02})
    result = rank_notes(notes, query="anything", now=now, degrade_reason=DegradeReason.NO_EMBEDDER)
    assert (result.mode, result.degrade_reason) == ("lexical", DegradeReason.NO_EMBEDDER)
    assert result.ids == ["cat", "home"]
    assert [item.matched_by for item in result.items] == ["lexical", "lexical"]
    assert result.items[0].relevance == 1.0 and result.items[0].cosine is None


def test_the_database_rank_replaces_the_in_memory_word_match(now: datetime) -> None:
    # "Pixel" is in the cat note, but the database found no word in common: its answer is the one used.
    notes = lexical(make_candidates(None), {})
    assert rank_notes(notes, query="how is Pixel?", now=now, degrade_reason=DegradeReason.NO_EMBEDDER).ids == []


def test_between_close_ranks_recency_and_importance_decide(now: datetime) -> None:
    old = now - timedelta(days=365)
    notes = [Candidate(id="old-by-model", text="", updated_at=old, source="model", lexical=0.05),
             Candidate(id="typed", text="", updated_at=old, source="user", lexical=0.048)]
    result = rank_notes(notes, query="x", now=now, degrade_reason=DegradeReason.NO_VECTORS)
    assert result.ids == ["typed", "old-by-model"]
