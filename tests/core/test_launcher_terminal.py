"""What ``manage.py up`` (``make run``) shows in its one terminal: "running at" and how to log in come after
the start-up lines of the web server, the worker and beat, not among them, and the one-time ``admin``
password is set apart so it can be copied."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from django.conf import settings

from localai_memory.core.management.commands.up import Supervisor
from tests.api.test_two_processes import PROJECT_ROOT, free_port, test_database_url
from tests.support.celery_worker import new_queue

#: a web server stand-in: listens on the port it is given and answers each connection with an HTTP status line
WEB = ("import socket, sys; server = socket.create_server(('127.0.0.1', int(sys.argv[1])))\n"
       "while True:\n"
       "    connection = server.accept()[0]; connection.recv(1024)\n"
       "    connection.sendall(b'HTTP/1.0 302 Found\\r\\n\\r\\n'); connection.close()\n")


def supervise_web(port: int, **options) -> list[str]:  # type: ignore[no-untyped-def]
    """Run the supervisor over a web server stand-in; its ``on_ready`` notes what it saw, then presses Ctrl-C."""
    said: list[str] = []

    def on_ready() -> None:
        said.append("running at")
        os.kill(os.getpid(), signal.SIGINT)

    reason = Supervisor({"web": [sys.executable, "-c", WEB, str(port)]}, env=dict(os.environ), cwd=PROJECT_ROOT,
                        web=("127.0.0.1", port), on_ready=on_ready, say=said.append, poll=0.01, **options).run()
    assert reason is None
    return said


def test_running_at_waits_until_the_others_say_they_are_ready() -> None:
    answers, asked = iter([False, False, True]), []

    def others_ready() -> bool:
        asked.append("ready?")
        return next(answers)

    said = supervise_web(free_port(), others_ready=others_ready)
    assert said == ["running at"] and asked == ["ready?"] * 3


def test_running_at_is_said_anyway_when_the_others_never_say_they_are_ready() -> None:
    assert supervise_web(free_port(), others_ready=lambda: False, others_within=0) == ["running at"]


@pytest.mark.slow
def test_the_first_start_ends_with_how_to_log_in_and_the_password_works(transactional_db, tmp_path: Path) -> None:
    port = free_port()
    env = {**os.environ, "DATABASE_URL": test_database_url(), "REDIS_URL": settings.REDIS_URL,
           "CELERY_QUEUE": new_queue("up"), "LOCALAI_MEMORY_DATA_DIR": str(tmp_path), "LOCALAI_MEMORY_TESTING": "1",
           "SECRET_KEY": "up-test-" + "k" * 40, "DATABASE_CONN_MAX_AGE": "0", "PYTHONUNBUFFERED": "1"}
    up = subprocess.Popen([sys.executable, "manage.py", "up", "--port", str(port), "--workers", "1", "--threads", "2",
                           "--no-bridges"], cwd=PROJECT_ROOT, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, start_new_session=True)
    try:
        before = read_until(up, "This password is shown only this once")
        login = before[before.index("LocalAI Memory is running at"):]
        lines = login.splitlines()
        assert lines[:3] == [f"LocalAI Memory is running at http://127.0.0.1:{port}/",
                             "Started: web, worker, beat. Press Ctrl-C to stop.", ""]
        assert lines[3] == f"Log in at http://127.0.0.1:{port}/login/ with the administrator account made just now:"
        assert lines[4] == "    user name:  admin"
        password = lines[5].removeprefix("    password:   ")
        assert password != lines[5] and password and " " not in password
        # what the worker and beat say as they start came before it
        startup = before[:before.index("LocalAI Memory is running at")]
        assert " ready." in startup and "beat: Starting..." in startup
        token = httpx.post(f"http://127.0.0.1:{port}/api/auth/token", timeout=30,
                           json={"username": "admin", "password": password})
        assert token.status_code == 200, token.text
    finally:
        os.killpg(up.pid, signal.SIGINT)
        up.communicate(timeout=60)
    assert up.returncode == 0


def read_until(process: subprocess.Popen, needle: str, within: float = 120.0) -> str:
    """The process's output up to and including the line holding ``needle`` (a bounded wait)."""
    assert process.stdout is not None
    fd, seen, deadline = process.stdout.fileno(), b"", time.monotonic() + within
    while needle.encode() not in seen or not seen.endswith(b"\n"):
        remaining = deadline - time.monotonic()
        if remaining <= 0 or process.poll() is not None:
            raise AssertionError(f"no {needle!r} (exit {process.poll()}):\n" + seen.decode(errors="replace")[-4000:])
        if select.select([fd], [], [], remaining)[0]:
            seen += os.read(fd, 65536)
    return seen.decode(errors="replace")
