"""``python manage.py up``: migrate, then run web, Celery worker, beat and the bridges together.

It is the development launcher behind ``make run``. With DATABASE_URL / REDIS_URL unset the settings have
already started the embedded PostgreSQL + pgvector and Redis; the children get the resolved URLs so they
all talk to the same servers. A worker, beat or the bridges that exit are started again (at most 5 times a
minute each); the web server exiting stops everything. Ctrl-C stops everything it started (the embedded
servers keep their data and stop with ``python manage.py services stop``).
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command, get_commands
from django.core.management.base import BaseCommand, CommandParser

from localai_memory import gunicorn_conf


class Command(BaseCommand):
    help = "Migrate, then run the web app, the Celery worker and beat, and the messaging bridges."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default=os.environ.get("HOST", "127.0.0.1"))
        parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
        parser.add_argument("--workers", type=int, default=2, help="web worker processes")
        parser.add_argument("--threads", type=int, default=8,
                            help="threads per web worker (a turn waits for the model; reads must not queue)")
        parser.add_argument("--no-worker", action="store_true", help="do not start Celery worker and beat")
        parser.add_argument("--no-bridges", action="store_true", help="do not start the messaging bridges")

    def handle(self, *args: Any, **options: Any) -> None:
        call_command("migrate", interactive=False, verbosity=0)
        call_command("collectstatic", interactive=False, verbosity=0)
        login_hint = self._first_user()
        env = dict(os.environ)
        db = settings.DATABASES["default"]
        env.setdefault("DATABASE_URL", _database_url(db))
        env.setdefault("REDIS_URL", settings.REDIS_URL)
        env.setdefault("SECRET_KEY", settings.SECRET_KEY)
        python = sys.executable
        bind = f"{options['host']}:{options['port']}"
        children: dict[str, list[str]] = {
            "web": [python, "-m", "gunicorn", "localai_memory.wsgi:application", "-c", "python:localai_memory.gunicorn_conf",
                    "--bind", bind, "--workers", str(options["workers"]), "--threads", str(options["threads"]),
                    "--access-logfile", "-"],
        }
        if not options["no_worker"]:
            data = Path(os.environ.get("LOCALAI_MEMORY_DATA_DIR") or settings.BASE_DIR / ".localai" / "data")
            children["worker"] = [python, "-m", "celery", "-A", "localai_memory", "worker", "-l", "info",
                                  "--concurrency", "2", "-Q", settings.CELERY_TASK_DEFAULT_QUEUE]
            children["beat"] = [python, "-m", "celery", "-A", "localai_memory", "beat", "-l", "info",
                                "-s", str(data / "celerybeat-schedule")]
        if not options["no_bridges"] and "runbridges" in get_commands():
            children["bridges"] = [python, "manage.py", "runbridges"]
        procs: dict[str, subprocess.Popen] = {}
        for name, argv in children.items():
            procs[name] = subprocess.Popen(argv, env=env, cwd=settings.BASE_DIR, start_new_session=True)
        url = f"http://{options['host']}:{options['port']}/"
        self.stdout.write(self.style.SUCCESS(f"\nLocalAI Memory is running at {url}"))
        self.stdout.write(login_hint)
        self.stdout.write(f"Started: {', '.join(procs)}. Press Ctrl-C to stop.\n")
        stopping = False

        def stop(*_: object) -> None:
            nonlocal stopping
            stopping = True

        signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGTERM, stop)
        budget = RestartBudget()
        try:
            while not stopping:
                for name, proc in list(procs.items()):
                    if proc.poll() is None:
                        continue
                    if name != "web" and budget.allow(name, time.monotonic()):
                        # Like compose's "restart: unless-stopped": a worker that died (a broker restart,
                        # a crash) comes back, so memory's background work goes on by itself.
                        self.stderr.write(f"{name} exited with {proc.returncode}; starting it again.")
                        procs[name] = subprocess.Popen(children[name], env=env, cwd=settings.BASE_DIR,
                                                       start_new_session=True)
                        continue
                    self.stderr.write(f"{name} exited with {proc.returncode}; stopping everything.")
                    stopping = True
                    break
                time.sleep(0.5)
        finally:
            for proc in procs.values():
                if proc.poll() is None:
                    os.killpg(proc.pid, signal.SIGTERM)
            # gunicorn lets a stopping worker finish its requests, then its queued bookkeeping
            deadline = time.monotonic() + gunicorn_conf.graceful_timeout + 5
            for proc in procs.values():
                try:
                    proc.wait(timeout=max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
            self.stdout.write("Stopped.")

    def _first_user(self) -> str:
        users = get_user_model().objects
        if users.exists():
            signup = " or create an account at /register/" if settings.OPEN_SIGNUP else ""
            return f"Log in at /login/ with your account{signup}."
        password = secrets.token_urlsafe(12)
        users.create_superuser(username="admin", password=password)
        return (f"Log in at /login/ as  admin  with password  {password}  (shown once; change it in /admin/).")


class RestartBudget:
    """At most ``limit`` restarts of one child within ``window`` seconds: a child that keeps dying (a broken
    configuration) stops everything instead of restarting forever."""

    def __init__(self, limit: int = 5, window: float = 60.0) -> None:
        self.limit = limit
        self.window = window
        self._restarts: dict[str, list[float]] = {}

    def allow(self, name: str, now: float) -> bool:
        recent = [t for t in self._restarts.get(name, []) if now - t < self.window]
        if len(recent) >= self.limit:
            self._restarts[name] = recent
            return False
        self._restarts[name] = [*recent, now]
        return True


def _database_url(db: dict) -> str:
    host = db["HOST"]
    if host.startswith("/"):
        return f"postgresql://{db['USER']}:{db['PASSWORD']}@/{db['NAME']}?host={host}"
    port = f":{db['PORT']}" if db["PORT"] else ""
    return f"postgresql://{db['USER']}:{db['PASSWORD']}@{host}{port}/{db['NAME']}"
