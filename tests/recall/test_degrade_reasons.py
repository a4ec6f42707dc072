"""Each degrade reason comes from the situation that causes it, and recall still answers lexically."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from localai_memory.recall.embedders import OnDeviceEmbedder, OpenAIEmbedder
from localai_memory.recall.ranking import DegradeReason, VectorCoverage, choose_degrade_reason
from localai_memory.recall.search import recall_notes

from .conftest import EmbeddingsServer, make_candidates


def test_with_no_embedder_recall_is_lexical_and_says_no_embedder(now: datetime) -> None:
    result = recall_notes(make_candidates(None), query="how is my cat Pixel doing?", embedder=None, now=now)
    assert result.degrade_reason == DegradeReason.NO_EMBEDDER
    assert result.mode == "lexical"
    assert result.ids[0] == "cat"


def test_notes_not_embedded_yet_say_no_vectors_and_cost_no_embedding_call(
        embeddings_server: EmbeddingsServer, now: datetime) -> None:
    embedder = OpenAIEmbedder(embeddings_server.base_url, "all-minilm-l6-v2")
    result = recall_notes(make_candidates(None), query="how is my cat Pixel doing?", embedder=embedder, now=now)
    assert result.degrade_reason == DegradeReason.NO_VECTORS
    assert result.ids[0] == "cat"
    assert embeddings_server.requests == []


def test_a_store_half_embedded_says_low_coverage(ondevice: OnDeviceEmbedder, now: datetime) -> None:
    candidates = make_candidates(ondevice)
    half = [c if i % 2 else replace(c, vectors=None, model_id=None) for i, c in enumerate(candidates)]
    result = recall_notes(half, query="how is my cat Pixel doing?", embedder=ondevice, now=now)
    assert result.degrade_reason == DegradeReason.LOW_COVERAGE
    assert result.mode == "lexical"


def test_vectors_of_the_previous_model_say_dim_mismatch(embeddings_server: EmbeddingsServer,
                                                        ondevice: OnDeviceEmbedder, now: datetime) -> None:
    # The store was embedded through an endpoint (a 128-dimension model), then the on-device model came on.
    embeddings_server.truncate_to = 128
    old_model = OpenAIEmbedder(embeddings_server.base_url, "small-128")
    candidates = make_candidates(old_model)
    result = recall_notes(candidates, query="What's my pet called?", embedder=ondevice, now=now)
    assert result.degrade_reason == DegradeReason.DIM_MISMATCH
    assert result.mode == "lexical"


def test_a_server_that_swapped_its_model_under_the_same_name_says_dim_mismatch(
        embeddings_server: EmbeddingsServer, now: datetime) -> None:
    embedder = OpenAIEmbedder(embeddings_server.base_url, "all-minilm-l6-v2")
    candidates = make_candidates(embedder)  # 384 dimensions
    embeddings_server.truncate_to = 128  # same model name, now 128 dimensions
    result = recall_notes(candidates, query="What's my pet called?",
                          embedder=OpenAIEmbedder(embeddings_server.base_url, "all-minilm-l6-v2"), now=now)
    assert result.degrade_reason == DegradeReason.DIM_MISMATCH


def test_an_embedder_failing_on_the_query_says_query_embed_failed_and_still_recalls(
        embeddings_server: EmbeddingsServer, now: datetime) -> None:
    embedder = OpenAIEmbedder(embeddings_server.base_url, "all-minilm-l6-v2")
    candidates = make_candidates(embedder)
    embeddings_server.fail_with = 500
    result = recall_notes(candidates, query="how is my cat Pixel doing?", embedder=embedder, now=now)
    assert result.degrade_reason == DegradeReason.QUERY_EMBED_FAILED
    assert result.mode == "lexical"
    assert result.ids[0] == "cat"


def test_a_fully_embedded_store_ranks_by_meaning_with_no_reason(embeddings_server: EmbeddingsServer,
                                                                now: datetime) -> None:
    embedder = OpenAIEmbedder(embeddings_server.base_url, "all-minilm-l6-v2")
    result = recall_notes(make_candidates(embedder), query="What's my pet called?", embedder=embedder, now=now)
    assert result.degrade_reason is None
    assert result.mode == "semantic"
    assert result.ids[0] == "cat"


def test_a_few_notes_still_waiting_for_a_vector_do_not_degrade_the_turn(ondevice: OnDeviceEmbedder,
                                                                       now: datetime) -> None:
    candidates = make_candidates(ondevice)
    candidates[-1] = replace(candidates[-1], vectors=None, model_id=None)  # 6 of 7 embedded
    result = recall_notes(candidates, query="What's my pet called?", embedder=ondevice, now=now)
    assert result.degrade_reason is None
    assert result.ids[0] == "cat"


def test_the_reason_names_the_first_thing_to_fix() -> None:
    def reason(**kwargs: object) -> DegradeReason | None:
        coverage = VectorCoverage(**{"total": 10, "with_vectors": 10, "matching": 10,
                                     **{k: v for k, v in kwargs.items() if k != "embedder"}})
        return choose_degrade_reason(embedder_present=bool(kwargs.get("embedder", True)), coverage=coverage,
                                     query_embed_failed=bool(kwargs.get("failed", False)))

    assert reason(embedder=False, with_vectors=0, matching=0) == DegradeReason.NO_EMBEDDER
    assert reason(with_vectors=0, matching=0) == DegradeReason.NO_VECTORS
    assert reason(with_vectors=10, matching=3) == DegradeReason.DIM_MISMATCH
    assert reason(with_vectors=5, matching=5) == DegradeReason.LOW_COVERAGE
    assert reason(with_vectors=9, matching=8) is None  # 80 %: enough; the odd one is judged lexically
    assert reason(total=0, with_vectors=0, matching=0) is None  # no notes: nothing to degrade
    assert choose_degrade_reason(embedder_present=True, coverage=VectorCoverage(10, 10, 10),
                                 query_embed_failed=True) == DegradeReason.QUERY_EMBED_FAILED
