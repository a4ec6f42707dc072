"""The bridges app: registers its expiry listener with the memory sweep, its tidy task with beat, and its notices
as copies of note text that clearing a user's memory wipes."""

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
        from localai_memory.notes.services import NoteCopies, note_copies

        from .models import Notice

        if not any(copies.name == "bot_notices" for copies in note_copies):
            # What a bot said in a conversation about a note (its topic and summary), kept to match answers.
            note_copies.append(NoteCopies(
                name="bot_notices",
                rows=lambda owner_id: Notice.objects.filter(conversation__binding__owner_id=owner_id),
                wipe=lambda rows: rows.delete()[0]))
        schedule = getattr(settings, "CELERY_BEAT_SCHEDULE", None)
        if isinstance(schedule, dict):
            for name, entry in tasks.BEAT_SCHEDULE.items():
                schedule.setdefault(name, entry)
