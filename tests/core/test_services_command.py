"""``manage.py services status|start|stop`` reports on the embedded PostgreSQL and Redis of a data folder,
starts them and stops them, and never starts a server to report on it or to stop it.

Each command runs as ``manage.py`` does from a terminal (a subprocess), on a data folder of the test's own or
on the test session's running servers (reported on, never stopped).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from localai_memory.services import embedded

PROJECT_ROOT = Path(__file__).resolve().parents[2]


def services(action: str, data_dir: Path | str) -> subprocess.CompletedProcess[str]:
    env = {name: value for name, value in os.environ.items() if name not in {"DATABASE_URL", "REDIS_URL"}}
    env["LOCALAI_MEMORY_DATA_DIR"] = str(data_dir)
    return subprocess.run([sys.executable, "manage.py", "services", action], cwd=PROJECT_ROOT, env=env,
                          capture_output=True, text=True, timeout=120, check=False)


@pytest.fixture
def empty_data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A data folder with no servers yet; whatever runs in it at the end is stopped."""
    yield tmp_path
    monkeypatch.setenv("LOCALAI_MEMORY_DATA_DIR", str(tmp_path))
    embedded.stop_redis()
    embedded.stop_database()


def test_status_of_an_empty_data_folder_says_not_running_and_starts_nothing(empty_data_dir: Path) -> None:
    out = services("status", empty_data_dir)
    assert out.returncode == 3, out.stderr
    assert out.stdout.splitlines()[1:] == ["PostgreSQL: not running", "Redis: not running"]
    assert not (empty_data_dir / "pg" / "PG_VERSION").exists()  # no initdb either


def test_stop_of_an_empty_data_folder_says_nothing_ran_and_starts_nothing(empty_data_dir: Path) -> None:
    out = services("stop", empty_data_dir)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["Redis: was not running", "PostgreSQL: was not running"]
    assert not (empty_data_dir / "pg" / "PG_VERSION").exists()


def test_status_of_the_running_servers_says_where_they_listen() -> None:
    out = services("status", os.environ["LOCALAI_MEMORY_DATA_DIR"])  # the test session's own servers
    assert out.returncode == 0, out.stderr
    database, redis = out.stdout.splitlines()[1:3]
    assert database.startswith("PostgreSQL: running (pid ") and "postgresql://" in database
    assert redis.startswith("Redis: running at unix://")


@pytest.mark.slow
def test_start_then_stop_says_what_it_did_and_status_follows(empty_data_dir: Path) -> None:
    started = services("start", empty_data_dir)
    assert started.returncode == 0, started.stderr
    assert [line.split(" at ")[0] for line in started.stdout.splitlines()] == ["PostgreSQL: started", "Redis: started"]
    again = services("start", empty_data_dir).stdout.splitlines()
    assert [line.split(" at ")[0] for line in again] == ["PostgreSQL: already running", "Redis: already running"]
    stopped = services("stop", empty_data_dir)
    assert stopped.stdout.splitlines() == ["Redis: stopped", "PostgreSQL: stopped"]
    assert services("status", empty_data_dir).returncode == 3


def test_what_waits_in_the_embedded_redis_is_there_after_a_stop_and_start(empty_data_dir: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A task queued a moment before ``services stop`` (sooner than Redis's own save point) is not lost."""
    import redis

    monkeypatch.setenv("LOCALAI_MEMORY_DATA_DIR", str(empty_data_dir))
    redis.Redis.from_url(embedded.redis_url()).rpush("localai_memory", b"a queued task")
    assert embedded.stop_redis() and embedded.running_redis_url() is None
    assert redis.Redis.from_url(embedded.redis_url()).lrange("localai_memory", 0, -1) == [b"a queued task"]
