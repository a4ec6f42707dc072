"""Small pieces the adapters share: running blocking core calls from async code, retries with backoff, the
two ways a platform call can fail that the core must tell apart (a refused token, a passing failure), and
"typing…" shown while a turn runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any, TypeVar

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import close_old_connections

log = logging.getLogger(__name__)

T = TypeVar("T")


class Revoked(Exception):
    """The platform refused the bot's credentials: the binding is turned off with ``reason``."""

    def __init__(self, reason: str, *, code: str = "token_revoked") -> None:
        super().__init__(reason)
        self.reason = reason
        self.code = code


class Transient(Exception):
    """A passing failure (rate limit, 5xx, network); ``retry_after`` seconds when the platform said."""

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


REVOKED_REASON = ("{platform} refused the bot's token (revoked or wrong), so this binding was turned off. "
                  "Enter a new token, then turn it on again.")


def retry_attempts() -> int:
    return int(getattr(settings, "BRIDGES_RETRY_ATTEMPTS", 5))


def backoff_seconds(attempt: int) -> float:
    """Exponential backoff: base, 2×base, 4×base … capped at 60 s (base ``BRIDGES_RETRY_BASE_SECONDS``)."""
    base = float(getattr(settings, "BRIDGES_RETRY_BASE_SECONDS", 1.0))
    return min(60.0, base * (2 ** attempt))


_blocking_lock = threading.Lock()
_blocking = 0


def blocking_calls() -> int:
    """How many blocking bridge calls (a turn waiting for the model, a database write) run in threads now."""
    return _blocking


def _closing(fn: Callable[..., T]) -> Callable[..., T]:
    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> T:
        global _blocking
        with _blocking_lock:
            _blocking += 1
        close_old_connections()
        try:
            return fn(*args, **kwargs)
        finally:
            close_old_connections()
            with _blocking_lock:
                _blocking -= 1

    return call


class InFlight:
    """The turns one bot is answering, from the message to the last reply sent: a bot that stops waits for
    them (``idle``) before it disconnects. Counted from any thread (Slack's listeners run in Bolt's)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._count = 0

    @contextlib.contextmanager
    def turn(self) -> Iterator[None]:
        with self._lock:
            self._count += 1
        try:
            yield
        finally:
            with self._lock:
                self._count -= 1

    @property
    def count(self) -> int:
        return self._count

    async def idle(self) -> None:
        """Return once no turn is in flight (the runner bounds the wait with its grace)."""
        while self._count:
            await asyncio.sleep(0.05)


async def run_sync(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run a blocking (database, model) call from async code in a worker thread, so one slow conversation
    never holds up another binding. Connections of the thread are closed per CONN_MAX_AGE afterwards."""
    return await sync_to_async(_closing(fn), thread_sensitive=False)(*args, **kwargs)


async def with_retries(call: Callable[[], Awaitable[T]], classify: Callable[[BaseException], BaseException | None],
                       *, what: str) -> T:
    """Await ``call()``; ``classify`` turns a library error into Revoked (raised at once), Transient (retried
    with backoff, honouring ``retry_after``) or None (raised as it is)."""
    attempts = retry_attempts()
    for attempt in range(attempts):
        try:
            return await call()
        except Exception as exc:  # noqa: BLE001 - _retry_delay re-raises what is not retried
            delay = _retry_delay(exc, classify, attempt, attempts, what)
        await asyncio.sleep(delay)
    raise AssertionError("unreachable")  # pragma: no cover


def with_retries_sync(call: Callable[[], T], classify: Callable[[BaseException], BaseException | None], *,
                      what: str) -> T:
    """``with_retries`` for blocking calls (Slack's WebClient, the Celery worker)."""
    attempts = retry_attempts()
    for attempt in range(attempts):
        try:
            return call()
        except Exception as exc:  # noqa: BLE001 - _retry_delay re-raises what is not retried
            delay = _retry_delay(exc, classify, attempt, attempts, what)
        time.sleep(delay)
    raise AssertionError("unreachable")  # pragma: no cover


def _retry_delay(exc: Exception, classify: Callable[[BaseException], BaseException | None], attempt: int,
                 attempts: int, what: str) -> float:
    """Seconds to wait before the next attempt after ``exc``; re-raises (``exc``, or Revoked) when there is
    none: not transient, or the last attempt. Must be called inside the ``except`` block."""
    kind = classify(exc)
    if isinstance(kind, Revoked):
        raise kind from exc
    if not isinstance(kind, Transient) or attempt == attempts - 1:
        raise exc
    delay = kind.retry_after if kind.retry_after is not None else backoff_seconds(attempt)
    log.warning("%s failed (%s); retrying in %.2f s", what, exc, delay)
    return delay


def run_blocking(coro_factory: Callable[[], Awaitable[T]]) -> T:
    """Run a coroutine to completion from blocking code (a Celery task, a view), even when the calling thread
    already runs an event loop (then in a thread of its own)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro_factory())  # type: ignore[arg-type]
    result: list[T] = []
    errors: list[BaseException] = []

    def target() -> None:
        try:
            result.append(asyncio.run(coro_factory()))  # type: ignore[arg-type]
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    thread = threading.Thread(target=target, name="bridges-blocking")
    thread.start()
    thread.join()
    if errors:
        raise errors[0]
    return result[0]


#: The longest the answer waits for a "typing" call still in flight when the turn ends (so the indicator does
#: not arrive after the answer and linger); a slower call is cut off.
TYPING_STOP_SECONDS = 1.0


@contextlib.asynccontextmanager
async def typing(send: Callable[[], Awaitable[object]], *, every: float, what: str,
                 show: bool = True) -> AsyncIterator[None]:
    """Show "typing…" while the block runs (when ``show``): ``send()`` at once and then every ``every`` seconds
    (the platform's indicator fades after a few seconds; ``BRIDGES_TYPING_SECONDS`` overrides the period), in
    a task of its own, so the turn never waits for it. A call that fails is logged and ends the indicator,
    never the turn."""
    if not show:
        yield
        return
    every = float(getattr(settings, "BRIDGES_TYPING_SECONDS", 0) or every)
    done = asyncio.Event()

    async def keep_typing() -> None:
        while not done.is_set():
            try:
                await send()
            except Exception:  # an indicator is a courtesy: a refusal, a rate limit, the network
                log.info("%s: could not show typing", what, exc_info=True)
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(done.wait(), every)

    task = asyncio.create_task(keep_typing(), name=f"typing: {what}")
    try:
        yield
    except BaseException:
        task.cancel()
        raise
    done.set()
    try:
        await asyncio.wait_for(task, TYPING_STOP_SECONDS)
    except TimeoutError:
        log.info("%s: a typing call was cut off", what)
