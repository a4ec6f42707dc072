from __future__ import annotations

from django.apps import AppConfig


class WebConfig(AppConfig):
    name = "localai_memory.web"
    label = "web"
