"""Memory settings, the policy and proposals. Registers the proposal sweep with celery beat."""

from __future__ import annotations

from django.apps import AppConfig


class MemoryConfig(AppConfig):
    name = "localai_memory.memory"
    label = "memory"

    def ready(self) -> None:
        from django.conf import settings

        from . import tasks

        schedule = getattr(settings, "CELERY_BEAT_SCHEDULE", None)
        if isinstance(schedule, dict):
            for name, entry in tasks.BEAT_SCHEDULE.items():
                schedule.setdefault(name, entry)
