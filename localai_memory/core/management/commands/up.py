"""``python manage.py up``: migrate, then run web, Celery worker, beat and the bridges together.

It is the development launcher behind ``make run``. With DATABASE_URL / REDIS_URL unset the settings have
already started the embedded PostgreSQL + pgvector and Redis; the children get the resolved URLs so they
all talk to the same servers. A worker, beat or the bridges that exit are started again (at most 5 times a
minute each); the web server exiting stops everything. Ctrl-C stops everything it started and exits with 0
(the embedded servers keep their data and stop with ``python manage.py services stop``); anything else that
stops everything (the web server exiting, a child out of restarts) exits non-zero with a one-line reason.
A port already in use is refused before anything starts, and "running at" is printed once the web server
answers HTTP and the worker and beat have started, so that it and how to log in (an ``admin`` password made
on the first start) come after their start-up lines, not among them. The Celery processes leave their
routine scheduled tasks' lines out of this one terminal (``LOCALAI_MEMORY_ROUTINE_TASK_LOGS=0``).
"""

from __future__ import annotations

import argparse
import errno
import os
import secrets
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command, get_commands
from django.core.management.base import BaseCommand, CommandError, CommandParser

from localai_memory import gunicorn_conf
from localai_memory.celery import READY_DIR_ENV


def _at_least_one(text: str) -> int:
    """A count of processes or threads: a whole number from 1 (0 would start a web server that answers nobody)."""
    try:
        number = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if number < 1:
        raise argparse.ArgumentTypeError(f"{number} is too few: at least 1")
    return number


def _port(text: str) -> int:
    try:
        number = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 1 <= number <= 65535:
        raise argparse.ArgumentTypeError(f"{number} is not a port number (1 to 65535)")
    return number


def _port_from_environment() -> int:
    """``PORT``, else 8000; a value that is no port is refused in one line that names the variable."""
    raw = os.environ.get("PORT", "") or "8000"
    try:
        return _port(raw)
    except argparse.ArgumentTypeError:
        raise CommandError(f"PORT={raw!r} is not a port number (1 to 65535)") from None


class Command(BaseCommand):
    help = "Migrate, then run the web app, the Celery worker and beat, and the messaging bridges."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default=os.environ.get("HOST", "127.0.0.1"))
        parser.add_argument("--port", type=_port, default=None, help="the web port (default: PORT, else 8000)")
        parser.add_argument("--workers", type=_at_least_one, default=2, help="web worker processes")
        parser.add_argument("--threads", type=_at_least_one, default=8,
                            help="threads per web worker (a turn waits for the model; reads must not queue)")
        parser.add_argument("--no-worker", action="store_true", help="do not start Celery worker and beat")
        parser.add_argument("--no-bridges", action="store_true", help="do not start the messaging bridges")

    def handle(self, *args: Any, **options: Any) -> None:
        host, port = options["host"], options["port"] or _port_from_environment()
        refusal = port_refusal(host, port)  # before anything starts: one clear line, not 5 s of gunicorn retries
        if refusal:
            raise CommandError(f"the web server could not start: {refusal}")
        call_command("migrate", interactive=False, verbosity=0)
        call_command("collectstatic", interactive=False, verbosity=0)
        url = address_to_open(host, port)
        login_hint, password_shown_once = self._first_user(url)
        env = dict(os.environ)
        db = settings.DATABASES["default"]
        env.setdefault("DATABASE_URL", _database_url(db))
        env.setdefault("REDIS_URL", settings.REDIS_URL)
        env.setdefault("SECRET_KEY", settings.SECRET_KEY)
        # a webhook bot's endpoint names the port this server listens on, not the settings' 8000
        env.setdefault("LOCALAI_MEMORY_PUBLIC_URL", url)
        # one terminal for every process: the worker's and beat's lines of routine scheduled tasks (three every
        # 15 s) stay out of it (localai_memory.celery); failures still show
        env.setdefault("LOCALAI_MEMORY_ROUTINE_TASK_LOGS", "0")
        python = sys.executable
        children: dict[str, list[str]] = {
            "web": [python, "-m", "gunicorn", "localai_memory.wsgi:application", "-c", "python:localai_memory.gunicorn_conf",
                    "--bind", f"{host}:{port}", "--workers", str(options["workers"]),
                    "--threads", str(options["threads"])],
        }
        if not options["no_worker"]:
            data = Path(os.environ.get("LOCALAI_MEMORY_DATA_DIR") or settings.BASE_DIR / ".localai" / "data")
            children["worker"] = [python, "-m", "celery", "-A", "localai_memory", "worker", "-l", "info",
                                  "--concurrency", "2", "-Q", settings.CELERY_TASK_DEFAULT_QUEUE]
            children["beat"] = [python, "-m", "celery", "-A", "localai_memory", "beat", "-l", "info",
                                "-s", str(data / "celerybeat-schedule")]
        if not options["no_bridges"] and "runbridges" in get_commands():
            children["bridges"] = [python, "manage.py", "runbridges"]
        # The worker (once ready) and beat (once started) say so with a file here (localai_memory.celery): how
        # to log in is printed after their start-up lines, not buried among them.
        ready_dir = Path(tempfile.mkdtemp(prefix="localai-memory-up-"))
        env[READY_DIR_ENV] = str(ready_dir)
        waits_for = [name for name in ("worker", "beat") if name in children]

        knock = AppKnock(host, port)

        def others_ready() -> bool:
            """The worker and beat started, and a web worker serves (it logs loading the embedder before)."""
            return all((ready_dir / name).exists() for name in waits_for) and knock.answered()

        announced = False

        def ready() -> None:
            nonlocal announced
            announced = True
            self.stdout.write(self.style.SUCCESS(f"\nLocalAI Memory is running at {url}/"))
            self.stdout.write(f"Started: {', '.join(children)}. Press Ctrl-C to stop.\n\n")  # a blank line, then
            self.stdout.write(login_hint)  # how to log in, last

        supervisor = Supervisor(children, env=env, cwd=settings.BASE_DIR, web=(host, port), on_ready=ready,
                                say=self.stderr.write,
                                others_ready=others_ready)
        try:
            reason = supervisor.run()
        finally:
            knock.close()
            shutil.rmtree(ready_dir, ignore_errors=True)
        self.stdout.write("Stopped.")
        if password_shown_once and not announced:  # the web server never came up: the password is not lost
            self.stdout.write(login_hint)
        if reason:
            raise CommandError(reason)

    def _first_user(self, url: str) -> tuple[str, bool]:
        """How to log in, and whether that holds the password of an ``admin`` made just now (shown once)."""
        users = get_user_model().objects
        if users.exists():
            signup = f" or create an account at {url}/register/" if settings.OPEN_SIGNUP else ""
            return f"Log in at {url}/login/ with your account{signup}.", False
        password = secrets.token_urlsafe(12)
        users.create_superuser(username="admin", password=password)
        return (f"Log in at {url}/login/ with the administrator account made just now:\n"
                f"    user name:  admin\n"
                f"    password:   {password}\n"
                "This password is shown only this once: change it on your Account page (/account/)."), True


class Supervisor:
    """Runs the children, restarts a dying worker, beat or bridges within its ``RestartBudget``, and stops
    them all on Ctrl-C / SIGTERM or when the web server (or a child out of restarts) exits.

    ``on_ready`` is called once the web server accepts connections on ``web`` (host, port), so "running at"
    is never printed for a server that failed to start, and once ``others_ready`` says the other children
    are up too (what it prints then comes after their start-up lines), or ``others_within`` seconds after
    the web server answered if they never say so. ``run`` returns None after Ctrl-C / SIGTERM, else the
    one-line reason everything stopped (for the launcher's non-zero exit).
    """

    def __init__(self, children: dict[str, list[str]], *, env: dict[str, str], cwd: Path | str,
                 web: tuple[str, int], on_ready: Callable[[], None], say: Callable[[str], object],
                 budget: RestartBudget | None = None, poll: float = 0.5,
                 others_ready: Callable[[], bool] | None = None, others_within: float = 60.0) -> None:
        self.children = children
        self.env = env
        self.cwd = cwd
        self.web = web
        self.on_ready = on_ready
        self.say = say
        self.budget = budget or RestartBudget()
        self.poll = poll
        self.others_ready = others_ready
        self.others_within = others_within

    def run(self) -> str | None:
        procs: dict[str, subprocess.Popen] = {}
        stopping = False
        reason: str | None = None
        answered = False
        answered_at = 0.0
        announced = False

        def stop(*_: object) -> None:
            nonlocal stopping
            stopping = True

        previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            for name in self.children:
                procs[name] = self._start(name)
            while not stopping:
                for name, proc in list(procs.items()):
                    if proc.poll() is None:
                        continue
                    if name != "web" and self.budget.allow(name, time.monotonic()):
                        # Like compose's "restart: unless-stopped": a worker that died (a broker restart,
                        # a crash) comes back, so memory's background work goes on by itself.
                        self.say(f"{name} exited with {proc.returncode}; starting it again.")
                        procs[name] = self._start(name)
                        continue
                    self.say(f"{name} exited with {proc.returncode}; stopping everything.")
                    reason = self._reason(name, proc.returncode, answered=answered)
                    stopping = True
                    break
                if not stopping and not answered and "web" in procs and web_answers(*self.web):
                    answered, answered_at = True, time.monotonic()
                if not stopping and answered and not announced and self._others_up(since=answered_at):
                    announced = True
                    self.on_ready()
                if not stopping:
                    time.sleep(self.poll)
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
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        return reason

    def _others_up(self, *, since: float) -> bool:
        if self.others_ready is None or time.monotonic() - since >= self.others_within:
            return True
        return self.others_ready()

    def _start(self, name: str) -> subprocess.Popen:
        return subprocess.Popen(self.children[name], env=self.env, cwd=self.cwd, start_new_session=True)

    def _reason(self, name: str, returncode: int, *, answered: bool) -> str:
        if name != "web":
            return (f"the {name} kept exiting (last with {returncode}; {self.budget.limit} restarts within "
                    f"{self.budget.window:.0f} s); see its log above")
        if answered:
            return f"the web server exited with {returncode}"
        refusal = port_refusal(*self.web)
        return f"the web server could not start: {refusal or f'it exited with {returncode}; see its log above'}"


def port_refusal(host: str, port: int) -> str | None:
    """Why the web server could not listen on ``host:port`` (say, "port 8000 is in use"), or None if it can.

    Binds a socket the way gunicorn does (SO_REUSEADDR, so a port just left in TIME_WAIT counts as free) and
    closes it again."""
    try:
        infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError) as exc:
        return f"{host!r} is not an address of this machine ({exc})"
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return (f"port {port} is in use (another server listens on {host}:{port}; stop it, or pick "
                        "another port with --port or PORT)")
            if exc.errno == errno.EACCES:
                return f"this user may not listen on port {port} (pick one above 1023 with --port)"
            return f"cannot listen on {host}:{port}: {exc.strerror}"
    return None


def address_to_open(host: str, port: int) -> str:
    """The address to open in a browser on this machine: a wildcard host (0.0.0.0, ::) is no address to open, so
    it is loopback's; an IPv6 address goes in brackets."""
    reachable = _reachable(host)
    return f"http://{f'[{reachable}]' if ':' in reachable else reachable}:{port}"


def _reachable(host: str) -> str:
    """Where to knock for a server listening on ``host``: a wildcard host is asked on loopback."""
    return {"": "127.0.0.1", "0.0.0.0": "127.0.0.1", "::": "::1", "[::]": "::1"}.get(host, host.strip("[]"))


def web_answers(host: str, port: int) -> bool:
    """Whether something accepts connections on ``host:port`` (gunicorn does as soon as it listens)."""
    try:
        with socket.create_connection((_reachable(host), port), timeout=0.2):
            return True
    except OSError:
        return False


class AppKnock:
    """One ``HEAD /`` sent to the web server and left waiting for a web worker to answer (any status: it has
    loaded the app). ``answered`` looks without blocking; a knock is never repeated while one waits, since
    each would be answered, and written to the access log, once a worker is up."""

    def __init__(self, host: str, port: int) -> None:
        self.address = (_reachable(host), port)
        self.sock: socket.socket | None = None

    def answered(self) -> bool:
        if self.sock is None:
            target, port = self.address
            name = f"[{target}]" if ":" in target else target
            try:
                self.sock = socket.create_connection(self.address, timeout=0.2)
                self.sock.sendall(f"HEAD / HTTP/1.0\r\nHost: {name}:{port}\r\n\r\n".encode())
            except OSError:
                self.close()
                return False
        readable, _, _ = select.select([self.sock], [], [], 0)
        if not readable:
            return False
        try:
            head = self.sock.recv(16)
        except OSError:
            head = b""
        self.close()  # answered, or closed unanswered (a worker that died): knock again next time
        return head.startswith(b"HTTP/")

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None


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
