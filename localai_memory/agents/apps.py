from __future__ import annotations

from django.apps import AppConfig


class AgentsConfig(AppConfig):
    name = "localai_memory.agents"
    label = "agents"
