from __future__ import annotations

from django.urls import path

from . import api

urlpatterns = [
    path("api/chats/memory", api.MemorySettingsApi.as_view(), name="memory-settings"),
    path("api/chats/memory/export", api.ExportApi.as_view(), name="memory-export"),
    path("api/chats/memory/forget", api.ForgetApi.as_view(), name="memory-forget"),
    path("api/chats/memory/notes", api.NotesApi.as_view(), name="memory-notes"),
    path("api/chats/providers", api.ProvidersApi.as_view(), name="providers"),
    path("api/chats/providers/<str:slot>", api.ProviderPickApi.as_view(), name="providers-pick"),
]
