from __future__ import annotations

from django.apps import AppConfig


class BridgesConfig(AppConfig):
    name = "bridges"
    label = "bridges"
    verbose_name = "Messaging bridges"
