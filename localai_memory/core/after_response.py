"""Bookkeeping that may wait until the person has their answer.

``after_response(fn)`` runs ``fn`` once the WSGI server has written the response of the current request and
closed it, in the same thread; outside a request (a Celery task, a bridge, the terminal) it runs at once. A chat
turn uses it to queue the consolidation pass: a Redis round trip and a Celery publish that the reply does not
depend on. What runs here must not need the request's database
transaction, and it can't change the response; an exception is logged, never raised.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse

log = logging.getLogger(__name__)

_state = threading.local()


def after_response(fn: Callable[[], object]) -> None:
    """Run ``fn`` after the current response is sent, or now when no request is being answered."""
    queue: list[Callable[[], object]] | None = getattr(_state, "queue", None)
    if queue is None:
        _run(fn)
    else:
        queue.append(fn)


def _run(fn: Callable[[], object]) -> None:
    try:
        fn()
    except Exception:
        log.exception("after-response work %r failed", fn)


def _run_all(queue: list[Callable[[], object]]) -> None:
    for fn in queue:
        _run(fn)


class AfterResponseMiddleware:
    """Collects the request's ``after_response`` work and hands it to the response, which runs it when the
    server closes it (Django's ``HttpResponse.close``, after the last byte was sent)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        queue: list[Callable[[], object]] = []
        _state.queue = queue
        try:
            response = self.get_response(request)
        except BaseException:
            _run_all(queue)  # no response to wait for
            raise
        finally:
            _state.queue = None
        if queue:
            # Django runs a response's resource closers from close(), the WSGI server's "sent" signal.
            response._resource_closers.append(lambda: _run_all(queue))
        return response
