"""Memory growth: consolidation, import, stats and the terminal. Registers its scheduled pass with beat."""

from __future__ import annotations

from django.apps import AppConfig


class GrowthConfig(AppConfig):
    name = "localai_memory.growth"
    label = "growth"
    verbose_name = "Memory growth"

    def ready(self) -> None:
        from django.conf import settings

        from . import tasks

        schedule = getattr(settings, "CELERY_BEAT_SCHEDULE", None)
        if isinstance(schedule, dict):
            for name, entry in tasks.BEAT_SCHEDULE.items():
                schedule.setdefault(name, entry)
