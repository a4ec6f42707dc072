"""One Redis client per process (``REDIS_URL``), for what the cache API cannot say in one step: the after-turn
plan's sorted set (``growth.consolidation``), the password budget's sliding window (``accounts.throttling``)."""

from __future__ import annotations

import os
from typing import Any

import redis
from django.conf import settings

_clients: dict[int, Any] = {}


def redis_client() -> Any:
    """This process's client; a forked child makes its own."""
    pid = os.getpid()
    if pid not in _clients:
        _clients.clear()
        _clients[pid] = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=5, socket_connect_timeout=5)
    return _clients[pid]
