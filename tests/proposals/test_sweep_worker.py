"""A real Celery worker (``celery -A localai_memory worker``) on the real Redis runs the sweep and expires a
proposal in the real database. The test waits on the worker's own log line, with a bound, never a sleep."""

from __future__ import annotations

from datetime import timedelta

import pytest
import time_machine
from django.utils import timezone

from localai_memory.memory import proposals
from localai_memory.memory.models import Proposal
from localai_memory.memory.tasks import BEAT_SCHEDULE, SWEEP_TASK, sweep_proposals
from localai_memory.notes.paths import Scope
from tests.support.celery_worker import celery_worker


def test_the_beat_schedule_runs_the_sweep_every_minute():
    assert BEAT_SCHEDULE["memory-sweep-proposals"] == {"task": SWEEP_TASK, "schedule": 60.0}
    assert sweep_proposals.name == SWEEP_TASK


@pytest.mark.django_db(transaction=True)
def test_a_real_worker_on_redis_expires_a_proposal(owner):
    with time_machine.travel(timezone.now() - timedelta(hours=24, minutes=1), tick=False):
        due = proposals.proposal_create(owner_id=owner.pk, scope=Scope.user(), topic="diet", summary="vegan")
    waiting = proposals.proposal_create(owner_id=owner.pk, scope=Scope.user(), topic="home", summary="Rome")

    with celery_worker(name="sweep") as worker:
        sweep_proposals.apply_async(queue=worker.queue)
        worker.wait_for_line("succeeded")
    due.refresh_from_db()
    waiting.refresh_from_db()
    assert due.status == Proposal.Status.EXPIRED and due.notified is True
    assert waiting.status == Proposal.Status.PENDING
