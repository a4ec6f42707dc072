"""The configured on-device model with a count of the texts it was run on (tests of what a turn embeds)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np
import pytest

from localai_memory.recall.embedders import OnDeviceEmbedder, get_embedder


def counted_model(monkeypatch: pytest.MonkeyPatch) -> tuple[OnDeviceEmbedder, Counter[str]]:
    """The configured on-device model of this process, each text it embeds from now on counted."""
    model = get_embedder()
    assert isinstance(model, OnDeviceEmbedder)
    runs: Counter[str] = Counter()
    embed = model.embed

    def counting(texts: Sequence[str]) -> np.ndarray:
        runs.update(texts)
        return embed(texts)

    monkeypatch.setattr(model, "embed", counting)
    return model, runs
