"""The Celery app (``celery -A localai_memory worker``). Tasks only notify and tidy; correctness never waits
for them (DESIGN §3)."""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "localai_memory.settings")

app = Celery("localai_memory")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
