"""WSGI entry point: ``localai_memory.wsgi:application``."""

from __future__ import annotations

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "localai_memory.settings")
application = get_wsgi_application()
