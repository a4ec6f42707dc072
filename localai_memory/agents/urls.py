"""Routes of the agents API. All live under api/chats/agents, so they never meet api/chats/<int:id>."""

from __future__ import annotations

from django.urls import path

from . import api

urlpatterns = [
    path("api/chats/agents", api.AgentListApi.as_view(), name="agents"),
    path("api/chats/agents/import", api.AgentImportApi.as_view(), name="agents-import"),
    path("api/chats/agents/<int:agent_id>", api.AgentDetailApi.as_view(), name="agents-detail"),
    path("api/chats/agents/<int:agent_id>/export", api.AgentExportApi.as_view(), name="agents-export"),
]
