from __future__ import annotations

from django.apps import AppConfig


class GrowthConfig(AppConfig):
    name = "localai_memory.growth"
    label = "growth"
