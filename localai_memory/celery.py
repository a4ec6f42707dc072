"""The Celery app (``celery -A localai_memory worker``). Tasks only notify and tidy; correctness never waits
for them (DESIGN §3)."""

from __future__ import annotations

import contextlib
import os
from typing import Any

from celery import Celery
from celery.signals import worker_init

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "localai_memory.settings")

app = Celery("localai_memory")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


def _guard_closed_broker_connection() -> None:
    """Work around kombu 5.7's Redis transport killing the worker when Redis restarts.

    After the broker connection is lost, Celery closes the old channel; closing restores unacknowledged
    messages, which asks the already released connection for its address (``self.connection.client`` is
    None) and raises AttributeError. That is not a connection error, so Celery stops the worker as
    "Unrecoverable error" instead of reconnecting (seen in bench/faults: once in a few Redis restarts, over
    TCP and Unix sockets alike). Raising redis' ConnectionError there instead lets Celery ignore it and
    reconnect; the unacknowledged messages stay in Redis and are restored by the next channel (kombu's
    visibility timeout), so nothing is lost. Remove once kombu handles it.
    """
    from kombu.transport import redis as kombu_redis
    from redis.exceptions import ConnectionError as RedisConnectionError

    channel: Any = kombu_redis.Channel  # _connparams is private to kombu: its stubs do not have it
    original = channel._connparams
    if getattr(original, "_localai_guard", False):
        return

    def _connparams(self: Any, asynchronous: bool = False) -> Any:
        if self.connection.client is None:
            raise RedisConnectionError("the broker connection was already closed")
        return original(self, asynchronous=asynchronous)

    _connparams._localai_guard = True  # type: ignore[attr-defined]
    channel._connparams = _connparams


_guard_closed_broker_connection()


def _lower_worker_priority(**_: object) -> None:
    """The worker's work (consolidation passes, the proposal sweep, re-embedding) yields the CPU to chat
    turns: it runs at ``LOCALAI_MEMORY_WORKER_NICE`` (10 by default; 0 leaves it as started), set once in
    the worker's main process before its pool forks, so every pool process inherits it. Measured in
    bench/load: with a burst of consolidation passes running beside the overhead pairs, memory's p99 per
    turn rose by several milliseconds on 2 cores; background passes wait a little longer instead."""
    from django.conf import settings

    nice = int(getattr(settings, "WORKER_NICE", 0) or 0)
    if nice > 0:
        with contextlib.suppress(OSError):  # a platform or sandbox that refuses it: run as started
            os.nice(nice)


worker_init.connect(_lower_worker_priority, weak=False)
