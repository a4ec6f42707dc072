"""Celery tasks of memory: the periodic sweep that marks expired proposals and closed Undo windows and tells
whoever listens (``memory.proposals.expiry_listeners`` / ``undo_closed_listeners``).

Correctness never waits for this task (DESIGN §3): the 24 hours of a proposal and the 30 minutes of an Undo
are checked under a row lock when somebody acts. With the worker stopped every rule still holds; people only
hear of an expiry later. Register ``BEAT_SCHEDULE`` in the beat schedule of the Celery app.
"""

from __future__ import annotations

from datetime import timedelta

from celery import shared_task
from django.core.cache import cache
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from . import proposals

SWEEP_TASK = "localai_memory.memory.tasks.sweep_proposals"
SWEEP_EVERY_SECONDS = 60.0
#: Where the sweep remembers up to when it announced closed Undo windows (shared by every beat/worker).
UNDO_CURSOR_KEY = "memory:sweep:undo_cursor"

BEAT_SCHEDULE = {
    "memory-sweep-proposals": {"task": SWEEP_TASK, "schedule": SWEEP_EVERY_SECONDS},
}


@shared_task(name=SWEEP_TASK, ignore_result=True)
def sweep_proposals() -> dict[str, int]:
    """Mark expired proposals, announce them and the Undo windows that closed since the last sweep."""
    now = timezone.now()
    expired = proposals.proposals_expire_due(now=now)
    announced = proposals.proposals_notify_expired(now=now)
    raw = cache.get(UNDO_CURSOR_KEY)
    since = parse_datetime(raw) if isinstance(raw, str) else None
    if since is None or since > now:
        since = now - timedelta(seconds=SWEEP_EVERY_SECONDS)
    closed = proposals.undo_windows_closed(since=since, until=now)
    cache.set(UNDO_CURSOR_KEY, now.isoformat(), timeout=None)
    return {"expired": len(expired), "announced": len(announced), "undo_closed": len(closed)}
