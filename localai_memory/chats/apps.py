from __future__ import annotations

from django.apps import AppConfig


class ChatsConfig(AppConfig):
    name = "localai_memory.chats"
    label = "chats"
