"""The bridges app: registers its expiry listener with the memory sweep and its tidy task with beat."""

from __future__ import annotations

from django.apps import AppConfig


class BridgesConfig(AppConfig):
    name = "bridges"
    label = "bridges"
    verbose_name = "Messaging bridges"

    def ready(self) -> None:
        from django.conf import settings

        from localai_memory.memory import proposals

        from . import tasks

        if tasks.announce_proposal_expired not in proposals.expiry_listeners:
            proposals.expiry_listeners.append(tasks.announce_proposal_expired)
        schedule = getattr(settings, "CELERY_BEAT_SCHEDULE", None)
        if isinstance(schedule, dict):
            for name, entry in tasks.BEAT_SCHEDULE.items():
                schedule.setdefault(name, entry)
