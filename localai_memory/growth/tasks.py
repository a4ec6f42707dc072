"""Celery tasks of memory growth: one consolidation pass for a user, the scheduled sweep over users, and the
beat task that queues the passes planned a minute after turns. Passes go at the background priority
(``core.queues``): they come in bulk and may wait; a pass somebody asked for now does not.

A task takes ids, loads rows and calls one service (``consolidation.consolidate_user``); it never decides
anything itself. Register ``BEAT_SCHEDULE`` in the beat schedule of the Celery app.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from celery import shared_task
from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from localai_memory.core.queues import BACKGROUND

from .models import ConsolidationRun

CONSOLIDATE_USER_TASK = "localai_memory.growth.tasks.consolidate_user"
CONSOLIDATE_DUE_TASK = "localai_memory.growth.tasks.consolidate_due"
CONSOLIDATE_AFTER_TURNS_TASK = "localai_memory.growth.tasks.consolidate_after_turns"
#: The scheduled pass runs this often (``MEMORY_CONSOLIDATION_SCHEDULE``, seconds; default 6 hours).
SCHEDULE_SECONDS = float(getattr(settings, "MEMORY_CONSOLIDATION_SCHEDULE", 6 * 60 * 60))
#: The scheduled pass looks at users who chatted within this window.
SCHEDULE_LOOKBACK = timedelta(days=2)

#: How often the passes planned after turns are looked at (seconds): a pass starts this much after its minute.
AFTER_TURNS_EVERY_SECONDS = 15.0

BEAT_SCHEDULE = {
    "memory-consolidate-due": {"task": CONSOLIDATE_DUE_TASK, "schedule": SCHEDULE_SECONDS},
    "memory-consolidate-after-turns": {"task": CONSOLIDATE_AFTER_TURNS_TASK, "schedule": AFTER_TURNS_EVERY_SECONDS},
}


@shared_task(name=CONSOLIDATE_USER_TASK, ignore_result=True)
def consolidate_user_task(*, owner_id: int, trigger: str = ConsolidationRun.Trigger.AFTER_TURN) -> dict[str, Any]:
    """One consolidation pass for one user (after a turn, on schedule, or queued by "Synthesize now")."""
    from .consolidation import consolidate_user

    return consolidate_user(owner_id=owner_id, trigger=trigger).as_dict()


@shared_task(name=CONSOLIDATE_DUE_TASK, ignore_result=True)
def consolidate_due() -> int:
    """Queue a scheduled pass for every user who chatted recently or has a chat waiting for its summary."""
    from localai_memory.chats.models import Chat

    since = timezone.now() - SCHEDULE_LOOKBACK
    owners = set(Chat.objects.filter(Q(updated_at__gte=since) | Q(messages__created_at__gte=since))
                 .values_list("owner_id", flat=True).distinct())
    for owner_id in sorted(owners):
        consolidate_user_task.apply_async(kwargs={"owner_id": owner_id, "trigger": ConsolidationRun.Trigger.SCHEDULE},
                                          priority=BACKGROUND)
    return len(owners)


@shared_task(name=CONSOLIDATE_AFTER_TURNS_TASK, ignore_result=True)
def consolidate_after_turns() -> int:
    """Queue the passes planned after chat turns whose minute has passed; returns how many."""
    from .consolidation import consolidation_queue_due

    return len(consolidation_queue_due())
