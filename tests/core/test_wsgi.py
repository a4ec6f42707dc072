"""The WSGI entry point gunicorn loads: what it sets up before the first request."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import psycopg
import pytest
from django.conf import settings

from localai_memory.accounts.services import token_create
from localai_memory.chats.models import Message
from tests.api.test_two_processes import PROJECT_ROOT, free_port, test_database_url
from tests.support.processes import stop


def test_the_web_app_hides_what_it_loaded_at_start_from_the_garbage_collector():
    """A full collection over Django's ~190,000 start-up objects would stop a worker for ~95 ms mid-turn."""
    script = ("import gc, os; os.environ['LOCALAI_MEMORY_DEV'] = '1'; "
              "from localai_memory.wsgi import application; print(gc.get_freeze_count())")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False,
                          env={**os.environ, "DJANGO_SETTINGS_MODULE": "localai_memory.settings"})
    assert done.returncode == 0, done.stderr
    assert int(done.stdout.strip().splitlines()[-1]) > 50_000


@pytest.mark.slow
def test_a_web_worker_that_is_stopped_stores_the_chat_logs_it_still_had_queued(
        transactional_db, make_user, openai_server, tmp_path):
    """``/v1/chat/completions`` answers before it stores the chat log. A worker told to stop (a deploy, a
    restart) stores what it still had queued before it exits, even when the database is slow just then."""
    owner = make_user("alice")
    openai_server.script("Stored on the way out.")
    database_url = test_database_url()
    with psycopg.connect(database_url, autocommit=False) as blocker, running_app(
            tmp_path, SECRET_KEY="stop-test-" + "k" * 40, LLM_BASE_URL=openai_server.url) as (url, process, log_path):
        # Messages can be read but not written until the blocker's transaction ends: the stored log waits.
        blocker.execute(f"LOCK TABLE {Message._meta.db_table} IN EXCLUSIVE MODE")
        answer = httpx.post(url + "/v1/chat/completions", timeout=20,
                            headers={"Authorization": f"Bearer {token_create(user=owner)}"},
                            json={"messages": [{"role": "user", "content": "keep this"}]})
        assert answer.status_code == 200, answer.text
        assert answer.json()["choices"][0]["message"]["content"] == "Stored on the way out."

        process.send_signal(signal.SIGTERM)
        with psycopg.connect(database_url, autocommit=True) as watcher:
            # the worker's write of the log, waiting for the table (pg_locks: the statement's text in
            # pg_stat_activity is cut at 1 KiB, before the INSERT of a long WITH)
            _wait_for(lambda: watcher.execute(
                "SELECT count(*) FROM pg_locks WHERE NOT granted AND relation = %s::regclass",
                [Message._meta.db_table]).fetchone()[0] == 1, process, log_path)
        assert process.poll() is None  # still there, waiting for the database to store the log
        blocker.rollback()  # the database is back
        assert process.wait(timeout=30) == 0
        # no control socket shared with every other gunicorn of this user (gunicorn 27's default)
        assert "Control socket" not in log_path.read_text()
    chat_id = int(answer.headers["X-Chat-Id"])
    assert list(Message.objects.filter(chat_id=chat_id).order_by("id").values_list("role", "content")) == [
        ("user", "keep this"), ("assistant", "Stored on the way out.")]


@pytest.mark.slow
def test_a_search_as_long_as_q_takes_in_chinese_or_emoji_reaches_the_app_through_gunicorn(
        transactional_db, make_user, tmp_path):
    """500 characters (the most ``q`` takes) percent-encode to ~4.5 KB in Chinese and ~6 KB in emoji, past
    gunicorn's default request line of 4094 bytes: its HTML 414 would answer instead of the app's JSON."""
    owner = make_user("alice")
    with running_app(tmp_path, SECRET_KEY="long-query-test-" + "k" * 40) as (url, _, _), httpx.Client(
            base_url=url, timeout=60, headers={"Authorization": f"Token {token_create(user=owner)}"}) as http:
        for q in ("我住在罗马。" * 83 + "我住", "🐶" * 500):
            assert len(q) == 500
            found = http.get("/api/chats/memory/search", params={"q": q})
            assert found.status_code == 200, found.text[:300]
            assert found.json()["results"] == []
            too_long = http.get("/api/chats/memory/search", params={"q": q + "猫"})
            assert too_long.status_code == 400, too_long.text[:300]
            assert too_long.json()["error"]["code"] == "invalid_query"


@contextmanager
def running_app(tmp_path: Path, **env: str) -> Iterator[tuple[str, subprocess.Popen, Path]]:
    """The web app under gunicorn with its production config (one sync worker) on a free loopback port, with
    the test database and Redis and ``env`` on top; its output in ``tmp_path/web.log``. Yields once it answers
    (the address, the process, the log); stopped on the way out (terminated, killed if it lingers)."""
    port = free_port()
    full = {**os.environ, "DATABASE_URL": test_database_url(), "REDIS_URL": settings.REDIS_URL,
            "ALLOWED_HOSTS": "127.0.0.1", "DATABASE_CONN_MAX_AGE": "0", "PYTHONUNBUFFERED": "1", **env}
    log_path = tmp_path / "web.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "localai_memory.wsgi:application",
             "-c", "python:localai_memory.gunicorn_conf", "--bind", f"127.0.0.1:{port}", "--workers", "1"],
            cwd=PROJECT_ROOT, env=full, stdout=log, stderr=subprocess.STDOUT)
        try:
            url = f"http://127.0.0.1:{port}"
            _wait_for(lambda: _answers(url), process, log_path)
            yield url, process, log_path
        finally:
            if process.poll() is None:
                stop(process, grace=30)


def _answers(url: str) -> bool:
    try:
        return httpx.get(url + "/api/chats/memory", timeout=2).status_code == 401
    except httpx.TransportError:
        return False


def _wait_for(condition, process: subprocess.Popen, log_path, within: float = 60.0) -> None:  # type: ignore[no-untyped-def]
    """A bounded wait on a condition of a process (or its early death)."""
    deadline = time.monotonic() + within
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting after {within} s:\n" + log_path.read_text(errors="replace")[-3000:])
        try:
            process.wait(timeout=0.1)
        except subprocess.TimeoutExpired:
            continue
        raise AssertionError(f"gunicorn exited with {process.returncode}:\n"
                             + log_path.read_text(errors="replace")[-3000:])
