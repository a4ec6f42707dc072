from __future__ import annotations

from django.apps import AppConfig


class MemoryConfig(AppConfig):
    name = "localai_memory.memory"
    label = "memory"
