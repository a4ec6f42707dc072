"""Two real web processes (gunicorn) on one database read the same memory settings, as a cluster would.

The processes run ``localai_memory.wsgi:application`` against the test database of this session (committed
data: ``transactional_db``) and the session's Redis, on loopback ports.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
from django.conf import settings
from django.db import connection

from localai_memory.accounts.services import token_create
from tests.support.processes import stop

PROJECT_ROOT = Path(__file__).resolve().parents[2]
READY_WITHIN_SECONDS = 60.0


def test_database_url() -> str:
    """A DATABASE_URL for the test database, in the Unix-socket form when the server listens on a socket."""
    db = connection.settings_dict
    user, password = quote(db["USER"] or "", safe=""), quote(db["PASSWORD"] or "", safe="")
    host, port = db["HOST"] or "", db["PORT"] or ""
    name = quote(db["NAME"], safe="")
    if host.startswith("/"):
        return f"postgresql://{user}:{password}@/{name}?host={quote(host, safe='/')}"
    return f"postgresql://{user}:{password}@{host}{':' + str(port) if port else ''}/{name}"


test_database_url.__test__ = False  # a helper, not a test


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def web_process(log_dir: Path, name: str) -> Iterator[str]:
    """Run one gunicorn web process; yield its base URL once it answers, stop it afterwards."""
    port = free_port()
    env = {**os.environ, "DATABASE_URL": test_database_url(), "REDIS_URL": settings.REDIS_URL,
           "SECRET_KEY": "two-process-test-" + "k" * 40, "ALLOWED_HOSTS": "127.0.0.1",
           "DATABASE_CONN_MAX_AGE": "0", "PYTHONUNBUFFERED": "1"}
    log = (log_dir / f"{name}.log").open("wb")
    process = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "localai_memory.wsgi:application", "--bind", f"127.0.0.1:{port}",
         "--workers", "1", "--timeout", "60"],
        cwd=PROJECT_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + READY_WITHIN_SECONDS
        while True:  # a bounded wait on a condition: the process answers on its port (or dies)
            try:
                if httpx.get(url + "/api/chats/memory", timeout=2).status_code == 401:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError(f"{name} did not answer within {READY_WITHIN_SECONDS} s")
            try:
                process.wait(timeout=0.1)  # between polls, wait for the one thing that ends it early
            except subprocess.TimeoutExpired:
                continue
            raise AssertionError(f"{name} exited with {process.returncode}:\n"
                                 + (log_dir / f"{name}.log").read_text(errors="replace")[-3000:])
        yield url
    finally:
        stop(process)
        log.close()


@pytest.mark.slow
def test_two_web_processes_on_one_database_read_the_same_settings(transactional_db, make_user, tmp_path):
    alice = make_user("alice")
    headers = {"Authorization": f"Token {token_create(user=alice)}"}
    with ExitStack() as stack:
        first = stack.enter_context(web_process(tmp_path, "web-1"))
        second = stack.enter_context(web_process(tmp_path, "web-2"))
        with httpx.Client(headers=headers, timeout=20) as http:
            assert http.get(second + "/api/chats/memory").json()["save_mode"] == "ask"

            changed = http.put(first + "/api/chats/memory", json={"enabled": False, "save_mode": "always",
                                                                   "messaging_save": "never"})
            assert changed.status_code == 200
            assert http.get(second + "/api/chats/memory").json() == changed.json()

            picked = http.put(second + "/api/chats/providers/memory", json={"provider": "builtin"})
            assert picked.status_code == 200
            assert http.get(first + "/api/chats/memory").json() == picked.json() == {
                "enabled": True, "enabled_set": True, "save_mode": "always", "messaging_save": "never",
                "save_mode_set": True, "provider": "builtin", "available": True}

            written = http.put(first + "/api/files/content", params={"path": "Memory/home.md"},
                               json={"content": "Lives in Rome."})
            assert written.status_code == 200
            read = http.get(second + "/api/files/content", params={"path": "Memory/home.md"})
            assert (read.json()["content"], read.json()["version"]) == ("Lives in Rome.", 1)
            stale = http.put(second + "/api/files/content", params={"path": "Memory/home.md"},
                             json={"content": "From a stale tab.", "version": 1})
            assert stale.status_code == 200
            assert http.put(first + "/api/files/content", params={"path": "Memory/home.md"},
                            json={"content": "Other tab.", "version": 1}).status_code == 409
