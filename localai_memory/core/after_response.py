"""Bookkeeping that may wait until the person has their answer.

``after_response(fn)`` runs ``fn`` once the WSGI server has written the response of the current request and
closed it, in the same thread; outside a request (a Celery task, a bridge, the terminal) it runs at once. A chat
turn uses it to queue the consolidation pass: a Redis round trip and a Celery publish that the reply does not
depend on. What runs here must not need the request's database
transaction, and it can't change the response; an exception is logged, never raised.

Under a WSGI server (``localai_memory.wsgi`` calls ``run_in_background()``), a response's work goes to one
thread of the process instead of running in the request's thread: gunicorn hands a kept-alive connection back
to its poller only once the response is closed, so work run there would delay the next request the same
client sends on that connection. The thread keeps a database connection of its own while work keeps coming
and gives it back after a second with nothing to do. When ``MAX_WAITING`` responses' work is waiting (the
database is slow), a request's thread runs its own work itself. A worker that stops normally runs what is
still queued first (gunicorn's ``worker_exit`` hook in ``localai_memory.gunicorn_conf``; ``atexit`` under
other servers); a worker that is killed (SIGKILL, out of memory) loses it: usually the last few milliseconds'
work, at most ``MAX_WAITING`` responses'. Tests and the development server keep the default: the work runs
when the response is closed, in the request's thread.
"""

from __future__ import annotations

import atexit
import logging
import os
import queue
import threading
import time
from collections.abc import Callable

from django.db import connections
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


def _run_all(work: list[Callable[[], object]]) -> None:
    for fn in work:
        _run(fn)


class _Background:
    """One thread per process running the work of answered requests, in the order they were answered."""

    #: requests whose work may wait; beyond that, a request's thread runs its own (back-pressure)
    MAX_WAITING = 100
    #: how long a process that exits waits for the work still queued
    EXIT_SECONDS = 5.0
    #: seconds without work after which the thread gives its database connection back
    IDLE_SECONDS = 1.0

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pid = 0
        self._queue: queue.Queue[list[Callable[[], object]]] = queue.Queue(self.MAX_WAITING)

    def submit(self, work: list[Callable[[], object]]) -> None:
        self._start()
        try:
            self._queue.put_nowait(work)
        except queue.Full:
            _run_all(work)

    def drain(self, timeout: float) -> bool:
        """Wait until the work queued so far has run; False when ``timeout`` seconds passed first."""
        done = threading.Event()
        if self._pid != os.getpid():
            return True  # nothing was ever queued in this process
        deadline = time.monotonic() + timeout
        try:
            self._queue.put([done.set], timeout=timeout)
        except queue.Full:
            return False
        return done.wait(max(0.0, deadline - time.monotonic()))

    def _start(self) -> None:
        if self._pid == os.getpid():
            return
        with self._lock:
            if self._pid != os.getpid():  # first use in this process (a forked worker starts its own)
                self._queue = queue.Queue(self.MAX_WAITING)
                threading.Thread(target=self._loop, name="after-response", daemon=True).start()
                atexit.register(self.drain, self.EXIT_SECONDS)
                self._pid = os.getpid()

    def _loop(self) -> None:
        while True:
            try:
                try:
                    work = self._queue.get(timeout=self.IDLE_SECONDS)
                except queue.Empty:
                    connections.close_all()  # idle: give the connection back, as the end of a request would
                    work = self._queue.get()
                _check_connections()
                _run_all(work)
                _drop_broken_connections()
            except BaseException:  # the thread must outlive anything, or later work would wait forever
                log.exception("after-response thread: a batch failed")


def _check_connections() -> None:
    """Before a batch, as before a request: a kept connection is checked again before its first query
    (``CONN_HEALTH_CHECKS``; ``core.postgresql`` makes that a look at its socket), so one the server ended
    while the thread was busy is replaced instead of failing the batch."""
    for connection in connections.all(initialized_only=True):
        # Django's attribute (BaseDatabaseWrapper.__init__), which django-stubs 5.2 does not declare.
        connection.health_check_done = False  # type: ignore[attr-defined]


def _drop_broken_connections() -> None:
    """After a batch: close a connection that failed and can no longer be used, or that a failed batch left
    outside autocommit, so the next batch opens a new one; a working connection stays open for it."""
    for connection in connections.all(initialized_only=True):
        left_a_transaction = (connection.connection is not None
                              and connection.get_autocommit() != connection.settings_dict["AUTOCOMMIT"])
        if left_a_transaction:
            connection.close()
        elif connection.errors_occurred:
            if not connection.is_usable():
                connection.close()
            connection.errors_occurred = False


_background: _Background | None = None


def run_in_background() -> None:
    """From now on, this process runs each answered request's work on its after-response thread."""
    global _background
    if _background is None:
        _background = _Background()


def drain(timeout: float = 10.0) -> bool:
    """Wait for the after-response thread to finish the work queued so far (True at once without one)."""
    return _background.drain(timeout) if _background is not None else True


def _hand_over(work: list[Callable[[], object]]) -> None:
    if _background is not None:
        _background.submit(work)
    else:
        _run_all(work)


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
            # (``_resource_closers`` is private to Django: the stubs do not declare it.)
            response._resource_closers.append(lambda: _hand_over(queue))  # type: ignore[attr-defined]
        return response
