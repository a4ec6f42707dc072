"""A real Celery worker on the real Redis runs a consolidation pass against the loopback model server, and the
suggestion lands in the real database. The test waits on the worker's own log line, with a bound."""

from __future__ import annotations

import pytest
from django.conf import settings

from localai_memory.core.queues import BACKGROUND
from localai_memory.growth.tasks import (
    BEAT_SCHEDULE,
    CONSOLIDATE_AFTER_TURNS_TASK,
    CONSOLIDATE_DUE_TASK,
    CONSOLIDATE_USER_TASK,
    consolidate_after_turns,
    consolidate_due,
    consolidate_user_task,
)
from localai_memory.memory.models import Proposal
from localai_memory.memory.tasks import SWEEP_TASK, sweep_proposals
from tests.fakes.openai_server import reply
from tests.support.celery_worker import celery_worker, new_queue

from .conftest import fact, facts_reply


def test_the_beat_schedule_runs_the_scheduled_pass_and_queues_the_passes_after_turns():
    assert BEAT_SCHEDULE["memory-consolidate-due"]["task"] == CONSOLIDATE_DUE_TASK == consolidate_due.name
    assert settings.CELERY_BEAT_SCHEDULE["memory-consolidate-due"] == BEAT_SCHEDULE["memory-consolidate-due"]
    after_turns = settings.CELERY_BEAT_SCHEDULE["memory-consolidate-after-turns"]
    assert after_turns["task"] == CONSOLIDATE_AFTER_TURNS_TASK == consolidate_after_turns.name
    assert after_turns["schedule"] <= 30  # a pass planned for a minute after a turn starts within 30 s of it
    assert consolidate_user_task.name == CONSOLIDATE_USER_TASK


@pytest.mark.django_db(transaction=True)
def test_a_real_worker_runs_a_pass_and_the_suggestion_waits_in_the_inbox(owner, openai_server, make_chat):
    make_chat(owner, "I moved to Lisbon last month.")
    openai_server.script(reply(facts_reply(fact("home", "lives in Lisbon"))))
    with celery_worker(name="growth", extra_env={"LLM_BASE_URL": openai_server.url}) as worker:
        consolidate_user_task.apply_async(kwargs={"owner_id": owner.pk, "trigger": "after_turn"}, queue=worker.queue)
        worker.wait_for_line("succeeded")
    [suggestion] = Proposal.objects.filter(owner=owner)
    assert (suggestion.topic, suggestion.summary, suggestion.source) == ("home", "lives in Lisbon", "consolidation")


def test_the_worker_runs_its_background_passes_at_a_lower_cpu_priority_than_the_web():
    import os

    web = os.getpriority(os.PRIO_PROCESS, 0)
    with celery_worker(name="nice") as worker:
        assert os.getpriority(os.PRIO_PROCESS, worker.process.pid) == min(web + settings.WORKER_NICE, 19)
    assert settings.WORKER_NICE == 10


@pytest.mark.django_db(transaction=True)
def test_the_proposal_sweep_runs_before_background_priority_passes_queued_ahead_of_it(owner):
    queue = new_queue("priority")
    for _ in range(5):
        consolidate_user_task.apply_async(kwargs={"owner_id": owner.pk, "trigger": "after_turn"}, queue=queue,
                                          priority=BACKGROUND)
    sweep_proposals.apply_async(queue=queue)  # sent last, as beat sends it while hundreds of passes wait
    with celery_worker(name="priority", queue=queue) as worker:
        seen = worker.wait_for_line(f"Task {SWEEP_TASK}[")
        passes_first = [line for line in seen if f"Task {CONSOLIDATE_USER_TASK}[" in line]
        assert passes_first == [], passes_first
        for _ in range(5):  # and the passes still run, after it
            worker.wait_for_line(f"Task {CONSOLIDATE_USER_TASK}[")
