"""Semantic recall: keeps a vector copy of every note in step with the notes store, recalls the notes that
match each chat turn, and registers the catch-up of embeddings with celery beat."""

from __future__ import annotations

from django.apps import AppConfig


class RecallConfig(AppConfig):
    name = "localai_memory.recall"
    label = "recall"
    verbose_name = "Semantic recall"

    def ready(self) -> None:
        from django.conf import settings

        from localai_memory.chats import services as chat_services
        from localai_memory.notes.services import notes_changed

        from . import index, service, tasks

        notes_changed.connect(index.on_notes_changed, dispatch_uid="recall.index.on_notes_changed")
        if service.turn_recall not in chat_services.recall_hooks:
            chat_services.recall_hooks.append(service.turn_recall)
        chat_services.turn_read_hooks[service.TURN_READ] = service.turn_notes_read
        if service.turn_query_ahead not in chat_services.turn_ahead_hooks:
            chat_services.turn_ahead_hooks.append(service.turn_query_ahead)
        schedule = getattr(settings, "CELERY_BEAT_SCHEDULE", None)
        if isinstance(schedule, dict):
            for name, entry in tasks.BEAT_SCHEDULE.items():
                schedule.setdefault(name, entry)
