"""Celery tasks of recall: embed, in batches, every row that has no vector of the current model yet.

Rows wait when a note was written while no embedder was configured or it failed, when the notes predate
recall (the migration stores them without vectors), and after a model switch (a new model id or dimension:
every row is re-embedded rather than compared across models). A task takes ids, calls ``index.catch_up_batch``
and re-queues itself until nothing waits, so no single run holds a worker for long.
``BEAT_SCHEDULE`` runs the sweep regularly; correctness never waits for it (recall says ``no_vectors``,
``low_coverage`` or ``dim_mismatch`` and ranks lexically meanwhile).
"""

from __future__ import annotations

import logging
from typing import Any

from celery import shared_task
from django.conf import settings

from localai_memory.core.queues import BACKGROUND

from . import index

log = logging.getLogger(__name__)

CATCH_UP_TASK = "localai_memory.recall.tasks.recall_catch_up"
#: Rows embedded per batch, and batches per task run before it re-queues itself.
BATCH_SIZE = int(getattr(settings, "RECALL_CATCH_UP_BATCH", 128))
BATCHES_PER_RUN = int(getattr(settings, "RECALL_CATCH_UP_BATCHES", 20))
#: The sweep runs this often (seconds).
SCHEDULE_SECONDS = float(getattr(settings, "RECALL_CATCH_UP_SCHEDULE", 5 * 60))

BEAT_SCHEDULE = {
    "recall-catch-up": {"task": CATCH_UP_TASK, "schedule": SCHEDULE_SECONDS},
}


def catch_up(*, owner_id: int | None = None, batches: int = BATCHES_PER_RUN,
             batch_size: int = BATCH_SIZE) -> dict[str, Any]:
    """Run up to ``batches`` batches; ``{"embedded", "done", "failed"}``."""
    embedded = 0
    for _ in range(max(1, batches)):
        step = index.catch_up_batch(limit=batch_size, owner_id=owner_id)
        if step.failed:
            return {"embedded": embedded, "done": False, "failed": True}
        if step.done:
            return {"embedded": embedded, "done": True, "failed": False}
        embedded += step.embedded
    return {"embedded": embedded, "done": False, "failed": False}


@shared_task(name=CATCH_UP_TASK, ignore_result=True)
def recall_catch_up(*, owner_id: int | None = None) -> dict[str, Any]:
    """Embed waiting rows (of one owner, or of everyone); re-queue itself while more wait."""
    outcome = catch_up(owner_id=owner_id)
    if not outcome["done"] and not outcome["failed"]:
        recall_catch_up.apply_async(kwargs={"owner_id": owner_id}, priority=BACKGROUND)
    elif outcome["failed"]:
        log.info("recall catch-up paused: no working embedder (owner %s)", owner_id)
    return outcome
