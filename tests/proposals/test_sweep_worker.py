"""A real Celery worker (``celery -A localai_memory worker``) on the real Redis runs the sweep and expires a
proposal in the real database. The test waits on the worker's own log line, with a bound, never a sleep."""

from __future__ import annotations

import os
import selectors
import subprocess
import sys
import time
import uuid
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlparse, urlunparse

import pytest
import time_machine
from django.conf import settings
from django.db import connection
from django.utils import timezone

from localai_memory.memory import proposals
from localai_memory.memory.models import Proposal
from localai_memory.memory.tasks import BEAT_SCHEDULE, SWEEP_TASK, sweep_proposals
from localai_memory.notes.paths import Scope

ROOT = Path(__file__).resolve().parents[2]
WAIT_SECONDS = 60


def _test_database_url() -> str:
    """The URL of the database this test session uses (the test database, not the development one)."""
    parsed = urlparse(settings.DATABASE_URL)
    return urlunparse(parsed._replace(path="/" + connection.settings_dict["NAME"]))


def _wait_for_line(process: subprocess.Popen, needle: str, timeout: float) -> list[str]:
    """Read the worker's output until a line holds ``needle``; raise after ``timeout`` seconds."""
    seen: list[str] = []
    selector = selectors.DefaultSelector()
    assert process.stdout is not None
    selector.register(process.stdout, selectors.EVENT_READ)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not selector.select(timeout=max(0.0, deadline - time.monotonic())):
            continue
        line = process.stdout.readline()
        if not line:
            raise AssertionError("the worker stopped:\n" + "".join(seen[-40:]))
        seen.append(line)
        if needle in line:
            return seen
    raise AssertionError(f"no {needle!r} within {timeout} s:\n" + "".join(seen[-40:]))


def test_the_beat_schedule_runs_the_sweep_every_minute():
    assert BEAT_SCHEDULE["memory-sweep-proposals"] == {"task": SWEEP_TASK, "schedule": 60.0}
    assert sweep_proposals.name == SWEEP_TASK


@pytest.mark.django_db(transaction=True)
def test_a_real_worker_on_redis_expires_a_proposal(owner):
    with time_machine.travel(timezone.now() - timedelta(hours=24, minutes=1), tick=False):
        due = proposals.proposal_create(owner_id=owner.pk, scope=Scope.user(), topic="diet", summary="vegan")
    waiting = proposals.proposal_create(owner_id=owner.pk, scope=Scope.user(), topic="home", summary="Rome")

    queue = f"test-sweep-{uuid.uuid4().hex[:10]}"
    env = {**os.environ, "DATABASE_URL": _test_database_url(), "REDIS_URL": settings.REDIS_URL,
           "CELERY_QUEUE": queue, "LOCALAI_MEMORY_TESTING": "1", "DJANGO_SETTINGS_MODULE": "localai_memory.settings",
           "PYTHONUNBUFFERED": "1"}
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "localai_memory", "worker", "--pool=solo", "--loglevel=INFO",
         "-Q", queue, "--without-gossip", "--without-mingle", "--without-heartbeat", "-n", f"{queue}@%h"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    try:
        _wait_for_line(worker, "ready.", WAIT_SECONDS)
        sweep_proposals.apply_async(queue=queue)
        _wait_for_line(worker, "succeeded", WAIT_SECONDS)
    finally:
        worker.terminate()
        try:
            worker.wait(timeout=20)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait(timeout=10)
    due.refresh_from_db()
    waiting.refresh_from_db()
    assert due.status == Proposal.Status.EXPIRED and due.notified is True
    assert waiting.status == Proposal.Status.PENDING
