"""A real Celery worker on the real Redis runs a consolidation pass against the loopback model server, and the
suggestion lands in the real database. The test waits on the worker's own log line, with a bound."""

from __future__ import annotations

import os
import selectors
import subprocess
import sys
import time
import uuid
from pathlib import Path
from urllib.parse import urlparse, urlunparse

import pytest
from django.conf import settings
from django.db import connection

from localai_memory.growth.tasks import (
    BEAT_SCHEDULE,
    CONSOLIDATE_DUE_TASK,
    CONSOLIDATE_USER_TASK,
    consolidate_due,
    consolidate_user_task,
)
from localai_memory.memory.models import Proposal
from tests.fakes.openai_server import reply

from .conftest import fact, facts_reply

ROOT = Path(__file__).resolve().parents[2]
WAIT_SECONDS = 60


def _test_database_url() -> str:
    parsed = urlparse(settings.DATABASE_URL)
    return urlunparse(parsed._replace(path="/" + connection.settings_dict["NAME"]))


def _wait_for_line(process: subprocess.Popen, needle: str, timeout: float) -> list[str]:
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


def test_the_beat_schedule_runs_the_scheduled_pass():
    assert BEAT_SCHEDULE["memory-consolidate-due"]["task"] == CONSOLIDATE_DUE_TASK == consolidate_due.name
    assert settings.CELERY_BEAT_SCHEDULE["memory-consolidate-due"] == BEAT_SCHEDULE["memory-consolidate-due"]
    assert consolidate_user_task.name == CONSOLIDATE_USER_TASK


@pytest.mark.django_db(transaction=True)
def test_a_real_worker_runs_a_pass_and_the_suggestion_waits_in_the_inbox(owner, openai_server, make_chat):
    make_chat(owner, "I moved to Lisbon last month.")
    openai_server.script(reply(facts_reply(fact("home", "lives in Lisbon"))))
    queue = f"test-growth-{uuid.uuid4().hex[:10]}"
    env = {**os.environ, "DATABASE_URL": _test_database_url(), "REDIS_URL": settings.REDIS_URL,
           "CELERY_QUEUE": queue, "LOCALAI_MEMORY_TESTING": "1", "DJANGO_SETTINGS_MODULE": "localai_memory.settings",
           "LLM_BASE_URL": openai_server.url, "PYTHONUNBUFFERED": "1"}
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "localai_memory", "worker", "--pool=solo", "--loglevel=INFO",
         "-Q", queue, "--without-gossip", "--without-mingle", "--without-heartbeat", "-n", f"{queue}@%h"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    try:
        _wait_for_line(worker, "ready.", WAIT_SECONDS)
        consolidate_user_task.apply_async(kwargs={"owner_id": owner.pk, "trigger": "after_turn"}, queue=queue)
        _wait_for_line(worker, "succeeded", WAIT_SECONDS)
    finally:
        worker.terminate()
        try:
            worker.wait(timeout=20)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait(timeout=10)
    [suggestion] = Proposal.objects.filter(owner=owner)
    assert (suggestion.topic, suggestion.summary, suggestion.source) == ("home", "lives in Lisbon", "consolidation")
