"""``python manage.py services status|stop``: the embedded PostgreSQL and Redis of the development default."""

from __future__ import annotations

from django.conf import settings
from django.core.management.base import BaseCommand

from localai_memory.services import embedded


class Command(BaseCommand):
    help = "Show or stop the embedded PostgreSQL and Redis (only used when DATABASE_URL/REDIS_URL are unset)."

    def add_arguments(self, parser) -> None:  # type: ignore[no-untyped-def]
        parser.add_argument("action", choices=["status", "stop"])

    def handle(self, *args, action: str, **options) -> None:  # type: ignore[no-untyped-def]
        if action == "status":
            self.stdout.write(f"data folder: {embedded.data_dir()}")
            self.stdout.write(f"database: {settings.DATABASES['default']['HOST'] or 'tcp'} "
                              f"/{settings.DATABASES['default']['NAME']}")
            self.stdout.write(f"redis: {settings.REDIS_URL}")
            return
        embedded.stop_redis()
        embedded.stop_database()
        self.stdout.write("Stopped the embedded PostgreSQL and Redis.")
