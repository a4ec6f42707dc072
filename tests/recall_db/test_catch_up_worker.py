"""A real Celery worker on the real Redis embeds, in batches, the rows that wait for a vector (notes written
while embeddings were off), and the beat schedule runs that catch-up regularly. Waits on the worker's own
log line, with a bound."""

from __future__ import annotations

import pytest
from django.conf import settings

from localai_memory.recall import index
from localai_memory.recall.embedders import FAST_MODEL_ID
from localai_memory.recall.models import NoteVector
from localai_memory.recall.tasks import BEAT_SCHEDULE, CATCH_UP_TASK, recall_catch_up
from tests.support.celery_worker import celery_worker

from .conftest import note


def test_the_beat_schedule_runs_the_catch_up():
    assert BEAT_SCHEDULE["recall-catch-up"]["task"] == CATCH_UP_TASK == recall_catch_up.name
    assert settings.CELERY_BEAT_SCHEDULE["recall-catch-up"] == BEAT_SCHEDULE["recall-catch-up"]


@pytest.mark.django_db(transaction=True)
def test_a_real_worker_embeds_the_notes_written_while_embeddings_were_off(owner, embeddings_off):
    embeddings_off()
    for n in range(30):
        note(owner, f"fact-{n}", f"fact number {n} about the garden", details=f"Details of fact {n}.")
    assert NoteVector.objects.filter(owner=owner, model_id="").count() == 60
    with celery_worker(name="recall", extra_env={"LOCALAI_MEMORY_EMBEDDINGS": "ondevice",
                                                 "EMBEDDINGS_BASE_URL": ""}) as worker:
        recall_catch_up.apply_async(kwargs={"owner_id": owner.pk}, queue=worker.queue)
        worker.wait_for_line("succeeded")
    assert index.waiting_count(owner_id=owner.pk, model_id=FAST_MODEL_ID) == 0
    assert set(NoteVector.objects.filter(owner=owner).values_list("dim", flat=True)) == {384}
