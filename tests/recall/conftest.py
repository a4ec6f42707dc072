"""Fixtures for the recall tests: the real on-device model, a loopback OpenAI embeddings server, a user's notes.

The loopback server speaks OpenAI's ``POST /v1/embeddings`` and answers with real vectors from the same
on-device model, so the endpoint path is exercised end to end (HTTP, JSON, ordering, normalisation) with
meaningful embeddings. It records every request and can be told to fail or to change its dimension, the
situations behind ``query_embed_failed`` and ``dim_mismatch``. These tests need no database.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from localai_memory.recall.embedders import OnDeviceEmbedder
from localai_memory.recall.ranking import Candidate, note_passages

NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)

#: One user's notes, as (topic, summary, details, source, age in days).
ALICE_NOTES = [
    ("home", "lives in Rome, in Trastevere, with partner Marco", "Rents a third-floor flat with no lift.", "user", 40),
    ("work", "backend engineer at Finlytics, a payments startup", "Python and Go; on call one week in four.", "user", 20),
    ("allergies", "allergic to peanuts and shellfish", "Carries an EpiPen.", "user", 200),
    ("cat", "has a grey cat named Pixel, 6 years old", "Indoor cat; vet is Dr. Ferri.", "user", 90),
    ("running", "training for the Rome half marathon in March", "Runs four times a week.", "model", 10),
    ("trip-japan", "planning a two-week trip to Japan in October", "Tokyo, Kyoto and Osaka.", "model", 5),
    ("reading", "reading the Dune series, now on book 3", "Enjoys hard science fiction.", "model", 45),
]


@pytest.fixture(scope="session")
def ondevice() -> OnDeviceEmbedder:
    embedder = OnDeviceEmbedder()
    embedder.load()
    return embedder


@pytest.fixture
def now() -> datetime:
    return NOW


def make_candidates(embedder: Any | None, notes: list[tuple] = ALICE_NOTES, *, embed: bool = True,
                    model_id: str | None = None) -> list[Candidate]:
    """Alice's notes as recall candidates, embedded by ``embedder`` (index line + topic details)."""
    rows = []
    for topic, summary, details, source, age in notes:
        vectors = embedder.embed(note_passages(topic, summary, details)) if (embedder and embed) else None
        rows.append(Candidate(
            id=topic, text=f"{topic}: {summary}\n{details}", updated_at=NOW - timedelta(days=age),
            source=source, importance=0.5, vectors=vectors,
            model_id=(model_id or embedder.model_id) if vectors is not None else None,
        ))
    return rows


@pytest.fixture
def alice_notes(ondevice: OnDeviceEmbedder) -> list[Candidate]:
    return make_candidates(ondevice)


@dataclass
class EmbeddingsServer:
    """State of the loopback server; tests read ``requests`` and set ``fail_with`` / ``truncate_to``."""

    embedder: OnDeviceEmbedder
    base_url: str = ""
    requests: list[dict] = field(default_factory=list)
    connections: set[int] = field(default_factory=set)  # client ports seen: one per TCP connection
    fail_with: int | None = None
    truncate_to: int | None = None
    reverse_order: bool = False


def _handler(state: EmbeddingsServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as real servers do
        disable_nagle_algorithm = True

        def log_message(self, *args: Any) -> None:
            pass

        def _send(self, status: int, body: dict) -> None:
            payload = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            body = json.loads(self.rfile.read(length) or b"{}")
            state.connections.add(self.client_address[1])
            state.requests.append({"path": self.path, "authorization": self.headers.get("Authorization"),
                                   "body": body})
            if self.path != "/v1/embeddings":
                self._send(404, {"error": {"message": "not found"}})
                return
            if state.fail_with:
                self._send(state.fail_with, {"error": {"message": "model is loading", "type": "server_error"}})
                return
            texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
            vectors = state.embedder.embed(texts)
            if state.truncate_to:
                vectors = vectors[:, : state.truncate_to]
            data = [{"object": "embedding", "index": i, "embedding": [float(x) * 3.0 for x in row]}
                    for i, row in enumerate(vectors)]  # scaled: the client must normalise
            if state.reverse_order:
                data.reverse()  # the client must order by "index", not by position
            self._send(200, {"object": "list", "data": data, "model": body.get("model"),
                             "usage": {"prompt_tokens": 0, "total_tokens": 0}})

    return Handler


@pytest.fixture
def embeddings_server(ondevice: OnDeviceEmbedder) -> Iterator[EmbeddingsServer]:
    state = EmbeddingsServer(embedder=ondevice)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    state.base_url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
