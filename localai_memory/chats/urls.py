"""Routes of chats (``/api/chats/<int:…>`` so they never clash with ``/api/chats/memory`` or
``/api/chats/agents``) and the OpenAI-compatible ``/v1/chat/completions`` and ``/v1/models``."""

from __future__ import annotations

from django.urls import path

from . import api

urlpatterns = [
    path("api/chats", api.ChatsApi.as_view(), name="chats"),
    path("api/chats/<int:chat_id>", api.ChatApi.as_view(), name="chat"),
    path("api/chats/<int:chat_id>/messages", api.ChatMessagesApi.as_view(), name="chat-messages"),
    path("api/chats/<int:chat_id>/builtins", api.ChatBuiltinsApi.as_view(), name="chat-builtins"),
    path("api/chats/<int:chat_id>/tools", api.ChatToolsApi.as_view(), name="chat-tools"),
    path("v1/chat/completions", api.ChatCompletionsApi.as_view(), name="openai-chat-completions"),
    path("v1/models", api.ModelsApi.as_view(), name="openai-models"),
    path("v1/models/<path:model_id>", api.ModelApi.as_view(), name="openai-model"),
]
