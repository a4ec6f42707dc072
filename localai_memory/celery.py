"""The Celery app (``celery -A localai_memory worker``). Tasks only notify and tidy; correctness never waits
for them (DESIGN §3).

With ``LOCALAI_MEMORY_ROUTINE_TASK_LOGS=0`` (``manage.py up`` sets it: one terminal shows every process) its
log leaves out the routine: a scheduled task that runs every few minutes or more often (the pass after chats
every 15 s, the proposal sweep every minute) writes three lines each time at INFO (beat's "Sending due task",
the worker's "received" and "succeeded"), 12 a minute that bury what matters. Their failures are still
logged (as errors), and so are the lines of every other task.
"""

from __future__ import annotations

import contextlib
import logging
import os
from datetime import timedelta
from pathlib import Path
from typing import Any

from celery import Celery
from celery.app.trace import LOG_RECEIVED, LOG_SUCCESS
from celery.signals import beat_init, worker_init, worker_ready

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "localai_memory.settings")

app = Celery("localai_memory")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


def _refuse_in_one_line(**_: object) -> None:
    """A setting the settings refuse stops ``celery -A localai_memory worker`` (and beat) with the one line
    ``manage.py`` prints, not a traceback: the configuration is first read here, before the settings load."""
    from localai_memory.core.startup import exit_if_refused

    exit_if_refused()


app.on_configure.connect(_refuse_in_one_line, weak=False)


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

    channel: Any = kombu_redis.Channel  # _connparams is private to kombu: its stubs do not have it
    original = channel._connparams
    if getattr(original, "_localai_guard", False):
        return

    def _connparams(self: Any, asynchronous: bool = False) -> Any:
        if self.connection.client is None:
            raise RedisConnectionError("the broker connection was already closed")
        return original(self, asynchronous=asynchronous)

    _connparams._localai_guard = True  # type: ignore[attr-defined]
    channel._connparams = _connparams


_guard_closed_broker_connection()


def _lower_worker_priority(**_: object) -> None:
    """The worker's work (consolidation passes, the proposal sweep, re-embedding) yields the CPU to chat
    turns: it runs at ``LOCALAI_MEMORY_WORKER_NICE`` (10 by default; 0 leaves it as started), set once in
    the worker's main process before its pool forks, so every pool process inherits it. Measured in
    bench/load: with a burst of consolidation passes running beside the overhead pairs, memory's p99 per
    turn rose by several milliseconds on 2 cores; background passes wait a little longer instead."""
    from django.conf import settings

    nice = int(getattr(settings, "WORKER_NICE", 0) or 0)
    if nice > 0:
        with contextlib.suppress(OSError):  # a platform or sandbox that refuses it: run as started
            os.nice(nice)


worker_init.connect(_lower_worker_priority, weak=False)


#: A scheduled task that runs at least this often is routine: its INFO lines are left out of the log.
ROUTINE_EVERY_SECONDS = 300.0
#: celery beat's line for each task it sends (celery.beat.Scheduler.apply_entry)
BEAT_SENDING = "Scheduler: Sending due task %s (%s)"


def _routine() -> tuple[set[str], set[str]]:
    """The beat entries that run at least every ``ROUTINE_EVERY_SECONDS``, and their tasks' names. Read each
    time: the apps add their entries to the schedule once Django is ready, after this module is imported."""
    from django.conf import settings

    entries: set[str] = set()
    tasks: set[str] = set()
    for name, entry in getattr(settings, "CELERY_BEAT_SCHEDULE", {}).items():
        every = entry.get("schedule")
        seconds = every.total_seconds() if isinstance(every, timedelta) else every
        if isinstance(seconds, (int, float)) and seconds <= ROUTINE_EVERY_SECONDS:
            entries.add(name)
            tasks.add(str(entry.get("task")))
    return entries, tasks


class RoutineTaskLines(logging.Filter):
    """Unless ``ROUTINE_TASK_LOGS``, leaves out beat's "Sending due task" and the worker's "received" /
    "succeeded" lines of routine scheduled tasks (``_routine``); every other line, and any failure of theirs,
    passes."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno != logging.INFO or record.msg not in (BEAT_SENDING, LOG_RECEIVED, LOG_SUCCESS):
            return True
        from django.conf import settings

        if getattr(settings, "ROUTINE_TASK_LOGS", True):
            return True
        entries, tasks = _routine()
        if record.msg == BEAT_SENDING:
            return not (isinstance(record.args, tuple) and record.args and record.args[0] in entries)
        data = getattr(record, "data", None)
        return not (isinstance(data, dict) and data.get("name") in tasks)


_routine_lines = RoutineTaskLines()
for _logger in ("celery.beat", "celery.worker.strategy", "celery.app.trace"):
    logging.getLogger(_logger).addFilter(_routine_lines)


#: A folder ``manage.py up`` names for its children: the worker (once ready) and beat (once started) each put
#: a file of their name there, and the launcher says how to log in once they did, below their start-up lines.
READY_DIR_ENV = "LOCALAI_MEMORY_READY_DIR"


def _mark_ready(name: str) -> None:
    folder = os.environ.get(READY_DIR_ENV)
    if folder:
        with contextlib.suppress(OSError):  # the launcher's folder gone: it only delays "running at"
            (Path(folder) / name).touch()


worker_ready.connect(lambda **_: _mark_ready("worker"), weak=False)
beat_init.connect(lambda **_: _mark_ready("beat"), weak=False)
