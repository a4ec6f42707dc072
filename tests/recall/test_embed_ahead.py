"""A turn's query is embedded ahead, on another thread, while the turn reads the database
(``recall.index.embed_ahead``): whoever needs the vectors then waits for that thread, and gets what the model
itself gives, with each text run through the model once however many ask at the same moment."""

from __future__ import annotations

import os
import threading
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from localai_memory.recall import index
from localai_memory.recall.embedders import OnDeviceEmbedder, reset_embedder_cache
from tests.support.embedder_runs import counted_model


@pytest.fixture
def embedder(settings: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[OnDeviceEmbedder, Counter[str]]]:
    """The configured on-device model of this process, with a count of the texts it was run on."""
    settings.EMBEDDINGS_BASE_URL = ""
    settings.EMBEDDINGS_PROVIDER = "ondevice"
    reset_embedder_cache()
    index.forget_query_vectors()
    index.reset_breakers()
    yield counted_model(monkeypatch)
    index.forget_query_vectors()
    index.reset_breakers()
    reset_embedder_cache()


def test_a_text_embedded_ahead_gives_the_vector_the_model_gives(embedder) -> None:
    model, runs = embedder
    text = "What should I cook tonight with the tomatoes from the garden?"
    index.embed_ahead([text])
    vectors, used = index.embed_query_texts([text], embedder=model)

    assert used is model and vectors is not None
    expected = OnDeviceEmbedder().embed([text])[0]
    assert float(vectors[0] @ expected) > 0.9999
    assert runs[text] == 1


def test_many_asking_for_one_text_at_the_same_moment_wait_for_one_run_of_the_model(embedder) -> None:
    model, runs = embedder
    text = "Remind me what my sister's birthday plans were."
    results: list[np.ndarray] = []
    start = threading.Barrier(12)

    def turn() -> None:
        start.wait()
        index.embed_ahead([text])
        vectors, _ = index.embed_query_texts([text, "and the cake?"], embedder=model)
        assert vectors is not None
        results.append(vectors[0])

    threads = [threading.Thread(target=turn) for _ in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)

    assert len(results) == 12 and all(np.array_equal(results[0], row) for row in results)
    assert runs[text] == 1


def test_nothing_is_embedded_ahead_for_an_embedder_resting_after_a_failure(embedder) -> None:
    model, runs = embedder
    index.note_embedder_failed(model)
    index.embed_ahead(["Where did I park?"])
    vectors, _ = index.embed_query_texts(["Where did I park?"], embedder=model)

    assert vectors is None and runs["Where did I park?"] == 0  # the turn's recall degrades, as before


def test_a_forked_child_never_waits_for_a_job_of_its_parents(embedder) -> None:
    # A gunicorn or Celery child forked while its parent embedded ahead has no thread to finish that job.
    model, _ = embedder
    text = "What did I plan for the weekend?"
    index._ahead[text] = (model, threading.Event())  # the parent's job, still running as the child is forked
    try:
        child = os.fork()
        if child == 0:  # the child: embeds the text itself, at once
            began = time.monotonic()
            vectors, _ = index.embed_query_texts([text], embedder=model)
            os._exit(0 if vectors is not None and time.monotonic() - began < index.AHEAD_WAIT_SECONDS / 2 else 1)
        _, status = os.waitpid(child, 0)
    finally:
        index._ahead.pop(text, None)
    assert os.waitstatus_to_exitcode(status) == 0
