"""``python manage.py services status|start|stop``: the embedded PostgreSQL and Redis of the development default.

The settings start the embedded servers when they are read; for this command manage.py tells them not to
(``LOCALAI_MEMORY_EMBEDDED_START=0``), so ``status`` reports what runs in the data folder instead of starting
it, and ``stop`` never starts a server in order to stop it. ``status`` exits with 0 when both run and with 3
when one does not (the LSB/systemd ``status`` convention), so a script can write
``manage.py services status || manage.py services start``.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from localai_memory.services import embedded

#: ``status``: one of the servers is not running (``systemctl status`` and LSB init scripts use 3 as well).
NOT_RUNNING = 3


class Command(BaseCommand):
    help = ("Show, start or stop the embedded PostgreSQL and Redis (only used when DATABASE_URL/REDIS_URL are "
            "unset). status exits with 3 when one of them is not running.")
    requires_system_checks: list[str] = []  # nothing here reads the apps; a report must not wait for checks

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("action", choices=["status", "start", "stop"])

    def handle(self, *args: Any, action: str, **options: Any) -> None:
        getattr(self, f"_{action}")()

    def _status(self) -> None:
        self.stdout.write(f"data folder: {embedded.data_dir()}")
        database, redis = embedded.running_database_url(), embedded.running_redis_url()
        if database:
            self.stdout.write(f"PostgreSQL: running (pid {embedded.database_pid()}) at {database}")
        else:
            self.stdout.write("PostgreSQL: not running")
        self.stdout.write(f"Redis: running at {redis}" if redis else "Redis: not running")
        for name in ("DATABASE_URL", "REDIS_URL"):
            if os.environ.get(name) or os.environ.get(f"{name}_FILE"):
                self.stdout.write(f"({name} is set: the app uses that server, not the embedded one.)")
        if not (database and redis):
            sys.exit(NOT_RUNNING)

    def _start(self) -> None:
        database, redis = embedded.running_database_url(), embedded.running_redis_url()
        self.stdout.write(f"PostgreSQL: {'already running' if database else 'started'} at "
                          f"{database or embedded.database_url()}")
        self.stdout.write(f"Redis: {'already running' if redis else 'started'} at {redis or embedded.redis_url()}")

    def _stop(self) -> None:
        self.stdout.write("Redis: stopped" if embedded.stop_redis() else "Redis: was not running")
        self.stdout.write("PostgreSQL: stopped" if embedded.stop_database() else "PostgreSQL: was not running")
