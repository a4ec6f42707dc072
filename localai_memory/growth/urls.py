"""Routes of memory growth: Synthesize now, its switches, the stats, import."""

from __future__ import annotations

from django.urls import path

from . import api

urlpatterns = [
    path("api/chats/memory/consolidate", api.ConsolidateApi.as_view(), name="memory-consolidate"),
    path("api/chats/memory/growing", api.GrowingApi.as_view(), name="memory-growing"),
    path("api/chats/memory/stats", api.StatsApi.as_view(), name="memory-stats"),
    path("api/chats/memory/import", api.ImportApi.as_view(), name="memory-import"),
]
