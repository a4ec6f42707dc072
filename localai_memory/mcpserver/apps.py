from __future__ import annotations

from django.apps import AppConfig


class McpserverConfig(AppConfig):
    name = "localai_memory.mcpserver"
    label = "mcpserver"
