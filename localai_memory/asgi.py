"""ASGI entry point (used by the MCP server mount and uvicorn deployments)."""

from __future__ import annotations

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "localai_memory.settings")
application = get_asgi_application()
