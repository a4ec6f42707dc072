"""Routes of recall: the search of your own notes."""

from __future__ import annotations

from django.urls import path

from . import api

urlpatterns = [
    path("api/chats/memory/search", api.MemorySearchApi.as_view(), name="memory-search"),
]
