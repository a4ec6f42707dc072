"""A terminal command against a database that does not answer says so in one line and exits with 1; any other
database error keeps its traceback.

Each command runs as ``manage.py`` does from a terminal (a subprocess): against a closed loopback port, against
the embedded server of a data folder where none runs, and against the test session's own server.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

PROJECT_ROOT = Path(__file__).resolve().parents[2]
#: a DATABASE_URL needs the key every machine shares (without one the settings refuse to start)
A_KEY = {"SECRET_KEY": "unreachable-test-" + "k" * 40}


def manage(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "manage.py", *args], cwd=PROJECT_ROOT, env=env, capture_output=True,
                          text=True, timeout=120, check=False)


def closed_port() -> int:
    """A loopback port nobody listens on (bound for a moment, then let go)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.parametrize("command", [["memory", "list", "--user", "alice"], ["migrate"]])
def test_a_command_against_a_closed_port_says_in_one_line_that_the_database_is_not_reachable(command):
    port = closed_port()
    env = {**os.environ, **A_KEY, "DATABASE_URL": f"postgresql://someone:secret@127.0.0.1:{port}/memory",
           "LOCALAI_MEMORY_EMBEDDED_START": "0"}
    done = manage(*command, env=env)

    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        (f"CommandError: the database is not reachable at 127.0.0.1:{port} (connection refused); check that "
         "PostgreSQL runs there and that DATABASE_URL names it")]
    assert "secret" not in done.stderr


def test_a_command_against_a_stopped_embedded_database_says_how_to_start_it(tmp_path):
    env = {name: value for name, value in os.environ.items() if name not in {"DATABASE_URL", "REDIS_URL"}}
    env.update(LOCALAI_MEMORY_DATA_DIR=str(tmp_path), LOCALAI_MEMORY_EMBEDDED_START="0")
    done = manage("memory", "stats", "--user", "alice", env=env)

    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        (f"CommandError: the database is not reachable at {tmp_path.resolve() / 'pg'} (the embedded PostgreSQL: "
         "it is not running); start it with `manage.py services start`")]
    assert not (tmp_path / "pg" / "PG_VERSION").exists()  # nothing was started to say so


def test_traceback_still_shows_the_traceback_of_an_unreachable_database():
    env = {**os.environ, **A_KEY, "DATABASE_URL": f"postgresql://someone@127.0.0.1:{closed_port()}/memory",
           "LOCALAI_MEMORY_EMBEDDED_START": "0"}
    done = manage("migrate", "--traceback", env=env)

    assert done.returncode == 1
    assert "Traceback (most recent call last)" in done.stderr and "OperationalError" in done.stderr


def test_another_database_error_of_a_reachable_database_keeps_its_traceback():
    """A statement the server cancels is an OperationalError too, but a reachable database's: a bug to see."""
    code = ("from django.db import connection; cursor = connection.cursor(); "
            "cursor.execute(\"SET statement_timeout = '1ms'\"); cursor.execute('SELECT pg_sleep(0.05)')")
    done = manage("shell", "-c", code, env=dict(os.environ))

    assert done.returncode == 1
    assert "Traceback (most recent call last)" in done.stderr
    assert "canceling statement due to statement timeout" in done.stderr
    assert "not reachable" not in done.stderr


def test_a_command_against_a_host_that_never_answers_gives_up_after_the_connect_timeout():
    """A host that accepts the connection and never says a word (or drops the packets) does not hold the
    command: after DATABASE_CONNECT_TIMEOUT it ends with the one line, not psycopg's own two minutes."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)  # the kernel completes the handshake; nobody ever reads or answers
        port = silent.getsockname()[1]
        env = {**os.environ, **A_KEY, "DATABASE_URL": f"postgresql://someone:secret@127.0.0.1:{port}/memory",
               "LOCALAI_MEMORY_EMBEDDED_START": "0", "DATABASE_CONNECT_TIMEOUT": "2"}
        done = subprocess.run([sys.executable, "manage.py", "memory", "list", "--user", "alice"], cwd=PROJECT_ROOT,
                              env=env, capture_output=True, text=True, timeout=40, check=False)

    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        (f"CommandError: the database is not reachable at 127.0.0.1:{port} (no answer within 2 seconds); check "
         "that PostgreSQL runs there and that DATABASE_URL names it")]


def test_a_request_while_the_database_host_never_answers_gets_the_503_after_the_connect_timeout():
    code = ("import json; from django.test import Client; "
            "r = Client().get('/api/chats/memory/notes', HTTP_AUTHORIZATION='Token lm_0123456789abcdef'); "
            "print(r.status_code, r['Retry-After'] if r.has_header('Retry-After') else '-', "
            "json.loads(r.content)['error']['code'])")
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        env = {**os.environ, **A_KEY, "DATABASE_URL": f"postgresql://someone@127.0.0.1:{silent.getsockname()[1]}/memory",
               "LOCALAI_MEMORY_EMBEDDED_START": "0", "DATABASE_CONNECT_TIMEOUT": "2",
               "ALLOWED_HOSTS": "testserver"}  # the test client's host: a server's default no longer has it
        done = subprocess.run([sys.executable, "manage.py", "shell", "-c", code], cwd=PROJECT_ROOT, env=env,
                              capture_output=True, text=True, timeout=40, check=False)

    assert done.stdout.splitlines()[-1] == "503 5 service_unavailable", done.stderr


def test_a_connect_timeout_in_the_database_url_wins_over_the_setting():
    code = "from django.conf import settings; print(settings.DATABASES['default']['OPTIONS']['connect_timeout'])"
    env = {**os.environ, **A_KEY, "LOCALAI_MEMORY_EMBEDDED_START": "0", "DATABASE_CONNECT_TIMEOUT": "7"}
    env["DATABASE_URL"] = "postgresql://someone@127.0.0.1:1/memory"
    assert manage("shell", "-c", code, env=env).stdout.splitlines()[-1] == "7"
    env["DATABASE_URL"] = "postgresql://someone@127.0.0.1:1/memory?connect_timeout=3"
    assert manage("shell", "-c", code, env=env).stdout.splitlines()[-1] == "3"


@pytest.mark.parametrize("value", ["abc", "0", "1", "-3"])
def test_a_connect_timeout_in_the_database_url_that_is_not_one_is_a_clear_start_up_error(value):
    env = {**os.environ, **A_KEY, "LOCALAI_MEMORY_EMBEDDED_START": "0"}
    env["DATABASE_URL"] = f"postgresql://someone@127.0.0.1:1/memory?connect_timeout={value}"
    done = manage("check", env=env)
    assert done.returncode != 0
    assert f"connect_timeout='{value}' in DATABASE_URL must be a whole number of seconds, at least 2" in done.stderr
    assert "Traceback" not in done.stderr
