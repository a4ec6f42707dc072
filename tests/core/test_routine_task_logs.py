"""``make run`` shows every process in one terminal. With ``LOCALAI_MEMORY_ROUTINE_TASK_LOGS=0``, which
``manage.py up`` sets, the scheduled tasks that run every few minutes or more often (the pass after chats
every 15 s) write no INFO lines: beat's "Sending due task" and the worker's "received" and "succeeded" made
three lines every 15 s that buried what matters. Every other task's lines stay, and so does the default."""

from __future__ import annotations

import logging

import pytest
from celery.beat import Scheduler
from django.conf import settings
from kombu import Connection

from localai_memory.celery import app
from localai_memory.growth.tasks import consolidate_after_turns, consolidate_due
from tests.support.celery_worker import celery_worker


@pytest.mark.django_db(transaction=True)
def test_the_worker_leaves_out_the_routine_tasks_lines_and_keeps_the_others():
    with celery_worker(name="routine", extra_env={"LOCALAI_MEMORY_ROUTINE_TASK_LOGS": "0"}) as worker:
        consolidate_after_turns.apply_async(queue=worker.queue)  # every 15 s: routine
        consolidate_due.apply_async(queue=worker.queue)  # every 6 hours: not routine
        received = worker.wait_for_line(f"{consolidate_due.name}[", timeout=60)
        succeeded = worker.wait_for_line("succeeded", timeout=60)
    assert "received" in received[-1] and consolidate_due.name in succeeded[-1]
    assert consolidate_after_turns.name not in "".join(received + succeeded)


def sent_by_beat(caplog: pytest.LogCaptureFixture, entry: str) -> str:
    """What celery beat logs at INFO as it sends the scheduled ``entry`` (to an in-memory broker)."""
    caplog.clear()
    scheduler = Scheduler(app=app, lazy=True)
    due = scheduler.Entry(name=entry, app=app, **settings.CELERY_BEAT_SCHEDULE[entry])
    with caplog.at_level(logging.INFO), Connection("memory://") as connection:
        scheduler.apply_entry(due, producer=connection.Producer())
    return caplog.text


def test_beat_leaves_out_sending_a_routine_task_when_told(caplog, settings):
    settings.ROUTINE_TASK_LOGS = False
    assert sent_by_beat(caplog, "memory-consolidate-after-turns") == ""
    assert "Sending due task memory-consolidate-due" in sent_by_beat(caplog, "memory-consolidate-due")


def test_beat_logs_every_task_it_sends_by_default(caplog):
    assert settings.ROUTINE_TASK_LOGS is True
    assert "Sending due task memory-consolidate-after-turns" in sent_by_beat(caplog, "memory-consolidate-after-turns")
