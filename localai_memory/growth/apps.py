"""Memory growth: consolidation, import, stats and the terminal. Registers its scheduled pass with beat, and
the suggestion of a note once the owner confirms the delete that makes room for it."""

from __future__ import annotations

from django.apps import AppConfig


class GrowthConfig(AppConfig):
    name = "localai_memory.growth"
    label = "growth"
    verbose_name = "Memory growth"

    def ready(self) -> None:
        from django.conf import settings

        from localai_memory.memory import proposals

        from . import tasks
        from .consolidation import consolidation_room_made

        if consolidation_room_made not in proposals.confirm_listeners:
            proposals.confirm_listeners.append(consolidation_room_made)
        schedule = getattr(settings, "CELERY_BEAT_SCHEDULE", None)
        if isinstance(schedule, dict):
            for name, entry in tasks.BEAT_SCHEDULE.items():
                schedule.setdefault(name, entry)
