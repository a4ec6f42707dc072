"""What the load run and the fault run share: bring the stack up with seeded data, run the driver in a second
process, check the ledger and the invariants, and take everything down again (also on Ctrl-C or a timeout).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.load import seed as seeding
from bench.load.model_server import BenchModelServer
from bench.load.stack import PYTHON, Stack

DRIVER = Path(__file__).with_name("driver.py")

#: Relative weights of the actions of the mix (see driver.py). An inbox visit confirms or rejects one.
DEFAULT_MIX: dict[str, float] = {
    "turn_plain": 20, "turn_read": 5, "turn_propose": 15, "inbox": 12, "settings_get": 10,
    "settings_put": 3, "edit": 15, "audit": 5, "notes": 5, "token": 2,
}


@dataclass
class Options:
    users: int = 1000
    latency_ms: int = 50
    web_workers: int = 4
    web_threads: int = 1
    conn_max_age: int = 60
    embeddings: str = "ondevice"
    redis: str = "tcp"
    proposals_per_user: int = 3
    expired_proposals: int = 0
    data_dir: Path = ROOT / ".localai" / "bench"
    seed: int = 1


class Deadline(Exception):
    """The run went past its hard time limit."""


def hard_limit(seconds: int) -> None:
    """Raise Deadline in the main thread after ``seconds`` (the run then cleans up and exits)."""

    def expired(*_: object) -> None:
        raise Deadline(f"the run passed its hard limit of {seconds} s")

    signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)


class Harness:
    def __init__(self, options: Options, log=print) -> None:
        self.options = options
        self.log = log
        self.model: BenchModelServer | None = None
        self.stack: Stack | None = None
        self.users: list[dict[str, Any]] = []
        self.number_to_id: dict[int, int] = {}
        self.work = options.data_dir / "runs" / time.strftime("%Y%m%d-%H%M%S")
        self.started = time.monotonic()

    def elapsed(self) -> str:
        return f"{time.monotonic() - self.started:6.1f}s"

    # -- up / down -------------------------------------------------------------------------------------

    def up(self) -> None:
        o = self.options
        self.work.mkdir(parents=True, exist_ok=True)
        self.model = BenchModelServer(latency_ms=o.latency_ms).start()
        self.log(f"[{self.elapsed()}] model server at {self.model.url} ({o.latency_ms} ms per call)")
        self.stack = Stack(data_dir=o.data_dir, model_url=self.model.url, web_workers=o.web_workers,
                           web_threads=o.web_threads, conn_max_age=o.conn_max_age, embeddings=o.embeddings, redis=o.redis,
                           log=self.log)
        self.stack.start_services()
        self.log(f"[{self.elapsed()}] PostgreSQL + pgvector and Redis ({self.stack.redis_url}) up under {o.data_dir}")
        built = self.stack.prepare_database(
            f"users={o.users};notes={seeding.NOTES_PER_USER};embeddings={o.embeddings}",
            [PYTHON, str(Path(seeding.__file__)), "--users", str(o.users)])
        self.log(f"[{self.elapsed()}] database {'built and ' if built else ''}cloned from its template")
        os.environ.update(self.stack.env())
        import django

        django.setup()
        from django.contrib.auth import get_user_model
        from django.db import connections

        from localai_memory.chats.models import Chat

        seeding.seed_proposals(per_user=o.proposals_per_user, expired=o.expired_proposals, log=self.log)
        ids = dict(get_user_model().objects.filter(username__startswith="bench")
                   .values_list("username", "pk"))
        chats: dict[tuple[int, str], int] = {(owner, title): pk for pk, owner, title in
                                             Chat.objects.values_list("pk", "owner_id", "title")}
        for name, pk in sorted(ids.items()):
            number = int(name.removeprefix("bench"))
            self.number_to_id[number] = pk
            self.users.append({"number": number, "username": name, "token": seeding.token_for(number),
                               "chat": chats[(pk, "bench mix")], "overhead_chat": chats[(pk, "bench overhead")],
                               "private_chat": chats[(pk, "bench private")],
                               "auto": seeding.saves_at_once(number)})
        connections.close_all()
        self.stack.start()
        self.log(f"[{self.elapsed()}] gunicorn ({o.web_workers} workers"
                 f"{f' × {o.web_threads} threads' if o.web_threads > 1 else ''}) at {self.stack.base_url}, "
                 "Celery worker and beat running")

    def down(self) -> None:
        from django.db import connections

        try:
            connections.close_all()
        except Exception as exc:  # noqa: BLE001 - the database may be the thing that is down
            self.log(f"closing the bench's own database connections: {exc!r}")
        if self.stack is not None:
            self.stack.stop()
        if self.model is not None:
            self.model.stop()

    # -- the driver ------------------------------------------------------------------------------------

    def plan(self, *, seconds: float, concurrency: int, mix: dict[str, float] | None = None,
             overhead: dict[str, Any] | None = None, name: str = "plan", confirm_share: float = 0.75) -> Path:
        assert self.stack is not None and self.model is not None
        plan = {
            "base_url": self.stack.base_url, "model_url": self.model.url, "users": self.users,
            "password": seeding.PASSWORD, "notes_per_user": seeding.NOTES_PER_USER, "seconds": seconds,
            "concurrency": concurrency, "mix": mix or DEFAULT_MIX, "overhead": overhead or {},
            "seed": self.options.seed, "stop_file": str(self.work / f"{name}.stop"),
            "confirm_share": confirm_share,
        }
        path = self.work / f"{name}.json"
        path.write_text(json.dumps(plan))
        return path

    def start_driver(self, plan: Path) -> tuple[subprocess.Popen, Path]:
        out = plan.with_suffix(".results.json")
        log = open(plan.with_suffix(".driver.log"), "wb")  # noqa: SIM115
        proc = subprocess.Popen([PYTHON, str(DRIVER), str(plan), str(out)], cwd=ROOT, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        return proc, out

    def wait_driver(self, proc: subprocess.Popen, out: Path, timeout: float) -> dict[str, Any]:
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)
            raise Deadline("the driver did not finish in time") from None
        if proc.returncode != 0 or not out.exists():
            log = out.with_name(out.name.replace(".results.json", ".driver.log"))
            raise RuntimeError(f"the driver failed ({proc.returncode}); see {log}")
        return json.loads(out.read_text())

    # -- checks ----------------------------------------------------------------------------------------

    def check(self, results: dict[str, Any]) -> tuple[dict[str, Any], list[Any]]:
        """The ledger against the database, then the invariants; returns (verification, violations)."""
        from django.db import close_old_connections

        from bench.load.verify import verify
        from localai_memory.core.invariants import check_invariants

        close_old_connections()
        verification = verify(results["ledger"], self.number_to_id)
        started = time.monotonic()
        violations = check_invariants()
        verification["invariants_seconds"] = time.monotonic() - started
        return verification, violations

    def database_size(self) -> dict[str, int]:
        from django.db import connection

        from localai_memory.notes.models import ChangeSet, FileVersion, NoteFile

        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_database_size(current_database())")
            size = cursor.fetchone()[0]
        return {"files": NoteFile.objects.count(), "versions": FileVersion.objects.count(),
                "change_sets": ChangeSet.objects.count(), "bytes": size}
