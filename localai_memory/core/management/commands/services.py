"""``python manage.py services status|stop``: the embedded PostgreSQL and Redis of the development default."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

from localai_memory.services import embedded


class Command(BaseCommand):
    help = "Show or stop the embedded PostgreSQL and Redis (only used when DATABASE_URL/REDIS_URL are unset)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("action", choices=["status", "stop"])

    def handle(self, *args: Any, action: str, **options: Any) -> None:
        if action == "status":
            self.stdout.write(f"data folder: {embedded.data_dir()}")
            self.stdout.write(f"database: {settings.DATABASES['default']['HOST'] or 'tcp'} "
                              f"/{settings.DATABASES['default']['NAME']}")
            self.stdout.write(f"redis: {settings.REDIS_URL}")
            return
        embedded.stop_redis()
        embedded.stop_database()
        self.stdout.write("Stopped the embedded PostgreSQL and Redis.")
