"""Fixtures of the recall tests: real PostgreSQL + pgvector, the on-device model, and the loopback OpenAI
server as the chat model and (when asked) as the embeddings endpoint.

Embedders are chosen through the settings exactly as in production (``EMBEDDINGS_PROVIDER`` is what
``LOCALAI_MEMORY_EMBEDDINGS`` sets; ``EMBEDDINGS_BASE_URL`` points at an OpenAI-format server).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from localai_memory.notes.paths import Scope
from localai_memory.notes.services import note_upsert
from localai_memory.recall import index
from localai_memory.recall.embedders import OnDeviceEmbedder, reset_embedder_cache
from tests.fakes.openai_server import OpenAIServer

_ondevice = OnDeviceEmbedder()


@pytest.fixture(autouse=True)
def _fresh_embedders(settings: Any) -> Iterator[None]:
    """Every test starts with the default configuration (the on-device model) and no remembered failure."""
    settings.EMBEDDINGS_BASE_URL = ""
    settings.EMBEDDINGS_PROVIDER = "ondevice"
    index.reset_breakers()
    yield
    index.reset_breakers()
    reset_embedder_cache()


@pytest.fixture
def model(openai_server: OpenAIServer, settings: Any) -> OpenAIServer:
    """The loopback OpenAI server as the app's chat model."""
    settings.LLM_BASE_URL = openai_server.url
    settings.LLM_MODEL = "fake-model"
    settings.LLM_API_KEY = ""
    settings.LLM_TIMEOUT = 5.0
    return openai_server


@pytest.fixture
def embeddings_off(settings: Any) -> Callable[[], None]:
    """Call it to turn embeddings off (``LOCALAI_MEMORY_EMBEDDINGS=off``) from then on."""

    def off() -> None:
        settings.EMBEDDINGS_PROVIDER = "off"
        settings.EMBEDDINGS_BASE_URL = ""

    return off


@pytest.fixture
def embeddings_on(settings: Any) -> Callable[[], None]:
    """Call it to go back to the default on-device model."""

    def on() -> None:
        settings.EMBEDDINGS_PROVIDER = "ondevice"
        settings.EMBEDDINGS_BASE_URL = ""

    return on


def real_embeddings(texts: list[str]) -> list[list[float]]:
    """What the loopback server answers /v1/embeddings with when it should mean something: MiniLM."""
    return _ondevice.embed(texts).tolist()


@pytest.fixture
def use_endpoint(settings: Any) -> Callable[[OpenAIServer, str], None]:
    """Call it with a loopback server to embed through its ``/v1/embeddings`` from then on."""

    def use(server: OpenAIServer, model: str = "all-minilm-l6-v2") -> None:
        settings.EMBEDDINGS_BASE_URL = server.url
        settings.EMBEDDINGS_MODEL = model
        settings.EMBEDDINGS_API_KEY = ""

    return use


def note(owner: Any, topic: str, summary: str, *, details: str | None = None, scope: Scope | None = None,
         source: str = "files") -> None:
    note_upsert(owner_id=owner.pk, scope=scope or Scope.user(), topic=topic, summary=summary, details=details,
                source=source, actor="you")


ALICE_NOTES = [
    ("home", "lives in Rome", "Moved to Trastevere in 2024, a flat near the river."),
    ("diet", "vegetarian", "No meat; fish is fine now and then."),
    ("pets", "has a dog named Rex", "Rex is a beagle, walks twice a day."),
    ("work", "software engineer at a bank", None),
    ("units", "prefers metric units", None),
]


@pytest.fixture
def alices_notes(owner: Any) -> None:
    for topic, summary, details in ALICE_NOTES:
        note(owner, topic, summary, details=details)
