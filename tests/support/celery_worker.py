"""A real ``celery -A localai_memory worker`` on the real Redis, for the tests that prove the wiring.

The worker gets a queue of its own (so no other test's tasks reach it) and the test database's URL. Tests
wait on the worker's own log lines with a bound, never on a sleep.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse, urlunparse

from django.conf import settings
from django.db import connection

from tests.support.processes import stop

ROOT = Path(__file__).resolve().parents[2]
WAIT_SECONDS = 60


def test_database_url() -> str:
    """The URL of the database this test session uses (the test database, not the development one)."""
    parsed = urlparse(settings.DATABASE_URL)
    return urlunparse(parsed._replace(path="/" + connection.settings_dict["NAME"]))


@dataclass
class Worker:
    process: subprocess.Popen
    queue: str
    #: bytes read from the worker's output and not yet returned as lines
    pending: bytearray = field(default_factory=bytearray)

    def wait_for_line(self, needle: str, timeout: float = WAIT_SECONDS) -> list[str]:
        """Read the worker's output until a line holds ``needle``; raise after ``timeout`` seconds.

        Reads the pipe's file descriptor itself: a buffered reader can hold lines the worker already wrote
        while ``select`` waits for more (the worker's "ready." sat in such a buffer until the wait ran out)."""
        seen: list[str] = []
        assert self.process.stdout is not None
        fd = self.process.stdout.fileno()
        deadline = time.monotonic() + timeout
        while True:
            while b"\n" in self.pending:
                raw, _, rest = bytes(self.pending).partition(b"\n")
                self.pending = bytearray(rest)
                line = raw.decode(errors="replace") + "\n"
                seen.append(line)
                if needle in line:
                    return seen
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"no {needle!r} within {timeout} s:\n" + "".join(seen[-40:]) + self._stacks())
            readable, _, _ = select.select([fd], [], [], remaining)
            if not readable:
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                raise AssertionError("the worker stopped:\n" + "".join(seen[-40:]) + self.pending.decode(errors="replace"))
            self.pending += chunk

    def _stacks(self) -> str:
        """Where a worker that went quiet is stuck: SIGABRT makes its fault handler (``-X faulthandler``)
        print every thread's stack before it dies; the rest of its output, read with a bound."""
        if self.process.poll() is not None or self.process.stdout is None:
            return ""
        self.process.send_signal(signal.SIGABRT)
        try:
            rest, _ = self.process.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            return "\n(the worker did not answer SIGABRT)"
        unread = self.pending.decode(errors="replace")
        return "\n--- the worker's threads when it was stopped ---\n" + (unread + (rest or ""))[-6000:]


def new_queue(name: str) -> str:
    """A queue name no other test uses."""
    return f"test-{name}-{uuid.uuid4().hex[:10]}"


@contextmanager
def celery_worker(*, name: str, extra_env: dict[str, str] | None = None, queue: str | None = None) -> Iterator[Worker]:
    """Start a worker on a queue of its own (``queue``: one made with ``new_queue`` that already holds tasks),
    wait until it is ready, stop it afterwards."""
    queue = queue or new_queue(name)
    env = {**os.environ, "DATABASE_URL": test_database_url(), "REDIS_URL": settings.REDIS_URL,
           "CELERY_QUEUE": queue, "LOCALAI_MEMORY_TESTING": "1", "DJANGO_SETTINGS_MODULE": "localai_memory.settings",
           "PYTHONUNBUFFERED": "1",
           "LOCALAI_MEMORY_ROUTINE_TASK_LOGS": "1",  # the tests wait on the lines of routine tasks too
           **(extra_env or {})}
    process = subprocess.Popen(
        [sys.executable, "-X", "faulthandler", "-m", "celery", "-A", "localai_memory", "worker", "--pool=solo",
         "--loglevel=INFO",
         "-Q", queue, "--without-gossip", "--without-mingle", "--without-heartbeat", "-n", f"{queue}@%h"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    worker = Worker(process, queue)
    try:
        worker.wait_for_line("ready.")
        yield worker
    finally:
        stop(process)
