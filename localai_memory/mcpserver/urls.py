"""The MCP endpoint. It answers 404 while ``LOCALAI_MEMORY_MCP`` is off (settings.MCP_ENABLED)."""

from __future__ import annotations

from django.urls import path

from . import views

urlpatterns = [
    path("mcp", views.mcp_endpoint, name="mcp"),
    path("mcp/", views.mcp_endpoint, name="mcp-slash"),
]
