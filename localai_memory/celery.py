"""The Celery app (``celery -A localai_memory worker``). Tasks only notify and tidy; correctness never waits
for them (DESIGN §3)."""

from __future__ import annotations

import os

from celery import Celery

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

    original = kombu_redis.Channel._connparams
    if getattr(original, "_localai_guard", False):
        return

    def _connparams(self, asynchronous=False):  # type: ignore[no-untyped-def]
        if self.connection.client is None:
            raise RedisConnectionError("the broker connection was already closed")
        return original(self, asynchronous=asynchronous)

    _connparams._localai_guard = True  # type: ignore[attr-defined]
    kombu_redis.Channel._connparams = _connparams


_guard_closed_broker_connection()
