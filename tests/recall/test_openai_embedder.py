"""The OpenAI-compatible endpoint provider, against a loopback server speaking POST /v1/embeddings."""

from __future__ import annotations

import numpy as np
import pytest

from localai_memory.recall.embedders import (
    EmbeddingError,
    OnDeviceEmbedder,
    OpenAIEmbedder,
    embedder_from_config,
    get_embedder,
    resolve_api_key,
)

from .conftest import EmbeddingsServer


def test_it_posts_the_texts_and_model_with_the_key_and_gets_unit_vectors(
        embeddings_server: EmbeddingsServer, ondevice: OnDeviceEmbedder) -> None:
    embedder = OpenAIEmbedder(embeddings_server.base_url, "all-minilm-l6-v2", api_key="sk-local", timeout=5)
    vectors = embedder.embed(["has a grey cat named Pixel", "What's my pet called?"])
    request = embeddings_server.requests[-1]
    assert request["path"] == "/v1/embeddings"
    assert request["authorization"] == "Bearer sk-local"
    assert request["body"] == {"model": "all-minilm-l6-v2", "input": ["has a grey cat named Pixel",
                                                                     "What's my pet called?"]}
    assert vectors.shape == (2, 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert np.allclose(vectors, ondevice.embed(["has a grey cat named Pixel", "What's my pet called?"]),
                       atol=1e-4)
    assert embedder.model_id == "openai:all-minilm-l6-v2"
    assert embedder.dim == 384


def test_it_orders_rows_by_their_index_not_by_their_position(embeddings_server: EmbeddingsServer,
                                                              ondevice: OnDeviceEmbedder) -> None:
    embeddings_server.reverse_order = True
    texts = ["cat", "payments startup", "half marathon"]
    vectors = OpenAIEmbedder(embeddings_server.base_url, "m").embed(texts)
    assert np.allclose(vectors, ondevice.embed(texts), atol=1e-4)


def test_it_keeps_one_connection_open_across_calls(embeddings_server: EmbeddingsServer) -> None:
    embedder = OpenAIEmbedder(embeddings_server.base_url, "m")
    for text in ["one", "two", "three", "four"]:
        embedder.embed([text])
    assert len(embeddings_server.requests) == 4
    assert len(embeddings_server.connections) == 1


def test_it_splits_a_large_batch_into_several_requests(embeddings_server: EmbeddingsServer) -> None:
    vectors = OpenAIEmbedder(embeddings_server.base_url, "m", batch_size=4).embed([f"t{i}" for i in range(10)])
    assert vectors.shape == (10, 384)
    assert [len(r["body"]["input"]) for r in embeddings_server.requests] == [4, 4, 2]


def test_a_server_error_is_an_embedding_error(embeddings_server: EmbeddingsServer) -> None:
    embeddings_server.fail_with = 503
    with pytest.raises(EmbeddingError, match="503"):
        OpenAIEmbedder(embeddings_server.base_url, "m").embed(["hello"])


def test_a_server_that_is_not_there_is_an_embedding_error() -> None:
    embedder = OpenAIEmbedder("http://127.0.0.1:9/v1", "m", timeout=2)  # the discard port: nothing listens
    with pytest.raises(EmbeddingError):
        embedder.embed(["hello"])


def test_a_server_that_changes_its_dimension_is_refused_rather_than_mixed(
        embeddings_server: EmbeddingsServer) -> None:
    embedder = OpenAIEmbedder(embeddings_server.base_url, "m")
    embedder.embed(["first"])
    embeddings_server.truncate_to = 128
    with pytest.raises(EmbeddingError, match="384 to 128"):
        embedder.embed(["second"])


def test_a_configured_endpoint_wins_over_the_on_device_model(embeddings_server: EmbeddingsServer) -> None:
    embedder = embedder_from_config(base_url=embeddings_server.base_url, model="all-minilm-l6-v2",
                                    provider="ondevice")
    assert isinstance(embedder, OpenAIEmbedder)


def test_without_an_endpoint_the_on_device_model_is_the_default() -> None:
    assert isinstance(embedder_from_config(base_url="", model="x"), OnDeviceEmbedder)


def test_off_without_an_endpoint_means_lexical_recall() -> None:
    assert embedder_from_config(base_url="", model="x", provider="off") is None


def test_an_unknown_provider_value_is_refused() -> None:
    with pytest.raises(ValueError, match="LOCALAI_MEMORY_EMBEDDINGS"):
        embedder_from_config(base_url="", model="x", provider="cloud")


def test_the_chat_models_key_goes_only_to_the_same_server() -> None:
    same = resolve_api_key(embeddings_key="", llm_key="sk-chat", embeddings_base_url="http://127.0.0.1:8080/v1",
                           llm_base_url="http://127.0.0.1:8080/v1")
    other = resolve_api_key(embeddings_key="", llm_key="sk-chat", embeddings_base_url="http://127.0.0.1:9000/v1",
                            llm_base_url="http://127.0.0.1:8080/v1")
    own = resolve_api_key(embeddings_key="sk-emb", llm_key="sk-chat", embeddings_base_url="http://h:1/v1",
                          llm_base_url="http://127.0.0.1:8080/v1")
    assert (same, other, own) == ("sk-chat", "", "sk-emb")


def test_the_process_shares_one_configured_embedder() -> None:
    assert get_embedder() is get_embedder()
