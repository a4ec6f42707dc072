"""The one budget of password and sign-up tries per client address, shared by the API and the web pages."""

from __future__ import annotations

import math
import uuid
from typing import Any, cast

from django.core.cache import cache
from django.http import HttpRequest
from rest_framework.settings import api_settings
from rest_framework.throttling import AnonRateThrottle

from localai_memory.core.redis_client import redis_client


class AuthThrottle(AnonRateThrottle):
    """Per client address; the rate is ``REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]["auth"]``."""

    scope = "auth"
    # Not DRF's key: its pickled list under the old name would be the wrong Redis type for the window's sorted
    # set while a deploy of this code overlaps one of the old (WRONGTYPE, a 500 on every log-in).
    cache_format = "throttle_%(scope)s_window_%(ident)s"
    # set by SimpleRateThrottle.__init__ from the rate (the DRF stubs leave them out)
    num_requests: int
    duration: int

    def get_rate(self) -> str | None:
        # DRF binds THROTTLE_RATES once at import; read the setting each time so a changed setting applies.
        # The DRF stubs type the rates as numbers; they are strings such as "20/min".
        return cast("str | None", api_settings.DEFAULT_THROTTLE_RATES.get(self.scope))

    def get_cache_key(self, request: Any, view: Any) -> str:
        # By address whoever asks: AnonRateThrottle skips a logged-in caller, but the Account page's password
        # tries come from one, and a stolen session must not guess faster than the log-in page lets anyone.
        return cache.make_key(self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)})

    def allow_request(self, request: Any, view: Any) -> bool:
        """DRF's sliding window, counted in one step on Redis: DRF reads the history and writes it back in
        two, so a burst of parallel tries all read the same count and got through (about twice the rate)."""
        if self.rate is None:
            return True
        self.key = self.get_cache_key(request, view)
        self.now = self.timer()
        allowed, oldest = _SLIDING_WINDOW(keys=[self.key], args=[self.now, self.duration, self.num_requests,
                                                                   uuid.uuid4().hex], client=redis_client())
        self.history = [float(oldest)] * self.num_requests if not allowed else []
        return bool(allowed)

    def wait(self) -> float | None:
        """Seconds until the oldest try of a full window leaves it."""
        if not self.history:
            return None
        return max(0.0, self.history[-1] + self.duration - self.now)


class _Script:
    """A Lua script registered once per process and client (EVALSHA, loaded again after a Redis restart)."""

    def __init__(self, source: str) -> None:
        self.source = source
        self._registered: dict[int, Any] = {}

    def __call__(self, *, keys: list[str], args: list[Any], client: Any) -> Any:
        script = self._registered.get(id(client))
        if script is None:
            script = self._registered[id(client)] = client.register_script(self.source)
        return script(keys=keys, args=args)


# KEYS[1]: the address's tries (a sorted set of times); ARGV: now, window seconds, tries allowed, a unique id.
# Returns {1, ""} and counts the try, or {0, the oldest try's time} when the window is full.
_SLIDING_WINDOW = _Script("""
local now, window, limit = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
if redis.call('ZCARD', KEYS[1]) >= limit then
  local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  return {0, oldest[2]}
end
redis.call('ZADD', KEYS[1], now, ARGV[4])
redis.call('EXPIRE', KEYS[1], math.ceil(window) + 1)
return {1, ''}
""")


def too_many_tries(request: HttpRequest) -> int | None:
    """Seconds to wait for an address that used up the ``auth`` rate, else None (this try is counted). The
    log-in and sign-up pages, and the Account page's password and delete forms, count against the same budget
    as the API's token and register routes."""
    throttle = AuthThrottle()
    if throttle.allow_request(request, None):  # DRF reads only what a Django request has
        return None
    return max(1, math.ceil(throttle.wait() or 1))


def too_many_tries_sentence(wait: int) -> str:
    """What a page says to an address that used up its tries (``too_many_tries``'s seconds)."""
    return f"Too many tries from your address. Try again in {wait} second{'s' if wait != 1 else ''}."
