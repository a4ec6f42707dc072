from __future__ import annotations

from django.apps import AppConfig


class NotesConfig(AppConfig):
    name = "localai_memory.notes"
    label = "notes"
    verbose_name = "Memory files"
