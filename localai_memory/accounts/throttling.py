"""The one budget of password and sign-up tries per client address, shared by the API and the web pages."""

from __future__ import annotations

import math
from typing import Any, cast

from django.http import HttpRequest
from rest_framework.settings import api_settings
from rest_framework.throttling import AnonRateThrottle


class AuthThrottle(AnonRateThrottle):
    """Per client address; the rate is ``REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]["auth"]``."""

    scope = "auth"

    def get_rate(self) -> str | None:
        # DRF binds THROTTLE_RATES once at import; read the setting each time so a changed setting applies.
        # The DRF stubs type the rates as numbers; they are strings such as "20/min".
        return cast("str | None", api_settings.DEFAULT_THROTTLE_RATES.get(self.scope))

    def get_cache_key(self, request: Any, view: Any) -> str:
        # By address whoever asks: AnonRateThrottle skips a logged-in caller, but the Account page's password
        # tries come from one, and a stolen session must not guess faster than the log-in page lets anyone.
        return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}


def too_many_tries(request: HttpRequest) -> int | None:
    """Seconds to wait for an address that used up the ``auth`` rate, else None (this try is counted). The
    log-in and sign-up pages, and the Account page's password and delete forms, count against the same budget
    as the API's token and register routes."""
    throttle = AuthThrottle()
    if throttle.allow_request(request, None):  # type: ignore[arg-type]  # DRF reads only what a Django request has
        return None
    return max(1, math.ceil(throttle.wait() or 1))
