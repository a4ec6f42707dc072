"""A turn's message embedded ahead on a low-priority thread while the turn reads the database, and recall
taking that vector instead of embedding the message again."""

from __future__ import annotations

import os
import threading
import uuid
from concurrent.futures import Future

import numpy as np
import pytest

from localai_memory.recall import index
from localai_memory.recall.embedders import OnDeviceEmbedder


@pytest.fixture
def embedder() -> OnDeviceEmbedder:
    current = index.current_embedder()
    assert isinstance(current, OnDeviceEmbedder)  # the suite runs the on-device model
    return current


def fresh_text() -> str:
    return f"What did I tell you about my sister's wedding? ({uuid.uuid4().hex[:8]})"


def test_recall_takes_the_vector_embedded_ahead(embedder):
    text = fresh_text()
    index.embed_ahead(text)
    index._ahead[(id(embedder), text)].result()
    vectors, used = index.embed_query_texts([text], embedder=embedder)
    assert used is embedder
    assert np.allclose(vectors[0], embedder.embed([text])[0], atol=1e-6)
    assert (id(embedder), text) not in index._ahead


def test_recall_waits_for_an_embedding_ahead_that_is_running(embedder):
    text = fresh_text()
    running: Future = Future()
    assert running.set_running_or_notify_cancel()
    index._ahead[(id(embedder), text)] = running
    # What the thread will hand over: another text's vector, so that the test sees whose vector recall used.
    handed = embedder.embed(["my cat: Miso, a grey tabby"])[0]
    threading.Thread(target=running.set_result, args=({text: handed},)).start()
    vectors, _ = index.embed_query_texts([text], embedder=embedder)
    assert np.array_equal(vectors[0], handed)
    assert (id(embedder), text) not in index._ahead


def test_a_message_already_remembered_is_not_embedded_again(embedder):
    text = fresh_text()
    index.embed_query_texts([text], embedder=embedder)
    index.embed_ahead(text)
    assert (id(embedder), text) not in index._ahead


def test_an_embedding_ahead_nobody_asks_for_leaves_nothing_behind(embedder):
    text = fresh_text()
    index.embed_ahead(text)
    future = index._ahead.get((id(embedder), text))
    if future is not None:
        future.result()
    assert (id(embedder), text) not in index._ahead
    # and its vector is remembered, should recall still come for it
    assert text in index._remembered([text], embedder)


def test_the_thread_runs_below_its_process_priority():
    priority = index._ahead_executor().submit(
        lambda: os.getpriority(os.PRIO_PROCESS, threading.get_native_id())).result()
    assert priority == min(os.getpriority(os.PRIO_PROCESS, 0) + index.AHEAD_NICE, 19)


def test_recall_does_not_queue_behind_a_busy_thread(embedder):
    release = threading.Event()
    busy = index._ahead_executor().submit(release.wait, 30)
    try:
        text = fresh_text()
        index.embed_ahead(text)
        queued = index._ahead[(id(embedder), text)]
        vectors, _ = index.embed_query_texts([text], embedder=embedder)
        assert queued.cancelled()  # called off: the turn embedded its message itself
        assert np.allclose(vectors[0], embedder.embed([text])[0], atol=1e-6)
    finally:
        release.set()
        busy.result()


def test_recall_embeds_the_message_itself_when_the_thread_is_slower_than_its_patience(embedder):
    text = fresh_text()
    starved: Future = Future()
    assert starved.set_running_or_notify_cancel()  # running, and never done (a thread that gets no CPU)
    index._ahead[(id(embedder), text)] = starved
    vectors, _ = index.embed_query_texts([text], embedder=embedder)
    assert np.allclose(vectors[0], embedder.embed([text])[0], atol=1e-6)
    assert (id(embedder), text) not in index._ahead
