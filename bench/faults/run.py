"""Fault run: break each part of the running app while the load runs, then prove nothing was lost.

    .venv/bin/python bench/faults/run.py                  # 1,000 users × 40 notes, the quoted figures
    .venv/bin/python bench/faults/run.py --users 100      # a quicker look

The stack is the load run's (bench/load/stack.py: gunicorn with several workers, a Celery worker and beat,
PostgreSQL + pgvector and Redis, a loopback model server). While a driver process plays users, the phases:

1. **baseline**;
2. **Celery worker killed mid-sweep**: thousands of proposals past their 24 hours are added, the sweep is
   queued, and the worker is SIGKILLed once ``pg_stat_activity`` shows it inside the sweep's transaction.
   While it is down a confirm of an expired proposal must still be refused (410: correctness never waits for
   the worker). It is started again (as a supervisor would); beat's next sweep must mark them all;
3. **Redis restarted** (down for a few seconds): what needs Redis answers 503, the rest keeps working;
4. **PostgreSQL restarted** (fast shutdown, down for a few seconds): requests answer a JSON 503 with
   Retry-After, never a 500 page;
5. **a web worker killed mid-confirm**: a second driver confirms inbox proposals; the gunicorn worker whose
   connection (``application_name`` ``web-<pid>``) is inside a confirm's transaction is SIGKILLed; the
   person clicks again; gunicorn starts a new worker by itself;
6. **recovered**: every request works again, and the Celery worker (which lived through the Redis and
   PostgreSQL restarts) still runs a sweep.

Then the ledger of every acknowledged write is checked against the database and the invariant checker runs.
It prints per phase the counts of 2xx / 4xx / 503 (clean JSON with Retry-After) / other 5xx / dropped
connections. Exit status 1 when a note was lost or saved twice, an invariant broke, a 5xx other than a clean
503 was answered, or the system did not recover. Bounded by a hard limit (``--max-seconds``, default 570).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import httpx

from bench.load import report
from bench.load.harness import Deadline, Harness, Options, hard_limit
from bench.load.stack import wait_until
from bench.load.verify import print_verification

IN_CONFIRM = """
    SELECT pid, application_name, state, query FROM pg_stat_activity
    WHERE datname = current_database() AND application_name LIKE 'web-%%' AND xact_start IS NOT NULL
      AND state IN ('active', 'idle in transaction')
      AND ((query ILIKE '%%FROM "memory_proposal"%%FOR UPDATE%%' AND query NOT ILIKE '%%fingerprint%%')
           OR (query ILIKE '%%INSERT INTO "notes_changeset"%%' AND query ILIKE '%%''proposal''%%'))
"""
IN_SWEEP = """
    SELECT pid, state, query FROM pg_stat_activity
    WHERE datname = current_database() AND application_name = 'celery-worker' AND xact_start IS NOT NULL
      AND query ILIKE '%%memory_proposal%%'
"""


class FaultRun:
    def __init__(self, harness: Harness, args: argparse.Namespace) -> None:
        self.h = harness
        self.args = args
        self.log = harness.log
        self.phases: list[tuple[str, float, float]] = []
        self.findings: list[str] = []
        self.problems: list[str] = []

    @property
    def stack(self):
        assert self.h.stack is not None
        return self.h.stack

    def phase(self, name: str, start: float) -> float:
        end = time.time()
        self.phases.append((name, start, end))
        self.log(f"[{self.h.elapsed()}] phase done: {name} ({end - start:.0f} s)")
        return end

    def pg(self):
        import psycopg

        return psycopg.connect(self.stack.database_url(), autocommit=True, connect_timeout=3)

    def wait(self, seconds: float) -> None:
        time.sleep(seconds)

    # -- 2. Celery worker killed mid-sweep ---------------------------------------------------------------

    def celery_phase(self) -> None:
        from django.db import connections

        from bench.load.seed import seed_proposals
        from localai_memory.memory.models import Proposal
        from localai_memory.memory.tasks import sweep_proposals

        start = time.time()
        seed_proposals(per_user=0, expired=self.args.expired, log=self.log)
        due = set(Proposal.objects.filter(status="pending", expires_at__lte=time_now())
                  .values_list("pk", flat=True))
        probe = Proposal.objects.filter(pk__in=due).select_related("owner").first()
        connections.close_all()
        sweep_proposals.delay()
        caught = None
        deadline = time.monotonic() + 30
        with self.pg() as conn:
            while time.monotonic() < deadline and caught is None:
                rows = conn.execute(IN_SWEEP).fetchall()
                if rows:
                    caught = rows[0]
                else:
                    time.sleep(0.01)
        if caught is None:
            self.problems.append("the sweep was never seen running; the worker was killed without it")
        else:
            time.sleep(0.5)  # well inside the sweep's one transaction
        self.stack.kill_worker()
        self.log(f"[{self.h.elapsed()}] Celery worker SIGKILLed "
                 + (f"inside the sweep (backend {caught[0]}, {caught[1]})" if caught else "(sweep not seen)"))
        still = Proposal.objects.filter(pk__in=due, status="pending").count()
        marked = len(due) - still
        self.findings.append(f"worker killed mid-sweep: {marked} of {len(due)} due proposals were marked "
                             f"(the sweep is one transaction: 0 expected)")
        if marked not in (0, len(due)):
            self.problems.append(f"the killed sweep left {marked} of {len(due)} proposals marked: half a sweep")
        # With the worker down, an expired proposal can still not be confirmed.
        if probe is not None:
            from bench.load.seed import token_for

            number = int(probe.owner.username.removeprefix("bench"))
            response = httpx.post(f"{self.stack.base_url}/api/chats/memory/proposals/{probe.pk}/confirm",
                                  headers={"Authorization": f"Token {token_for(number)}"}, timeout=30)
            self.findings.append(f"confirm of an expired proposal while the worker is down: {response.status_code} "
                                 f"{response.json().get('error', {}).get('code')}")
            if response.status_code != 410:
                self.problems.append(f"an expired proposal answered {response.status_code} to a confirm, not 410")
        connections.close_all()
        self.wait(self.args.outage)
        outage_end = self.phase("celery worker killed mid-sweep", start)
        self.stack.start_worker()
        self.log(f"[{self.h.elapsed()}] Celery worker started again; waiting for beat's next sweep")
        try:
            wait_until(lambda: not Proposal.objects.filter(pk__in=due, status="pending").exists(), 75,
                       "every due proposal marked expired by the next sweep", interval=1)
            self.findings.append(f"after the restart the next sweep (sent by beat) marked all {len(due)} "
                                 f"due proposals in {time.time() - outage_end:.0f} s")
            self.wait_announced(due)
        except TimeoutError:
            left = Proposal.objects.filter(pk__in=due, status="pending").count()
            self.problems.append(f"{left} due proposals still pending 75 s after the worker came back: beat "
                                 "sent no sweep (is memory.tasks.BEAT_SCHEDULE in CELERY_BEAT_SCHEDULE?)")
            sweep_proposals.delay()  # so the later phases start clean, and to see the worker itself works
            try:
                wait_until(lambda: not Proposal.objects.filter(pk__in=due, status="pending").exists(), 90,
                           "a sweep sent by hand finishing", interval=1)
                self.findings.append(f"a sweep sent by hand to the restarted worker marked all {len(due)} due "
                                     f"proposals ({time.time() - outage_end:.0f} s after the restart)")
                self.wait_announced(due)
            except TimeoutError:
                self.problems.append("the restarted worker did not finish a sweep sent by hand in 90 s")
        connections.close_all()
        self.phase("celery worker back, sweep recovers", outage_end)

    def wait_announced(self, due: set[int]) -> None:
        """The sweep's second half tells the listeners (the bots) about each expired proposal; the next
        phases start once it is done, so a restart does not land in the middle of it."""
        from localai_memory.memory.models import Proposal

        try:
            wait_until(lambda: not Proposal.objects.filter(pk__in=due, notified=False).exists(), 90,
                       "every expired proposal announced", interval=1)
        except TimeoutError:
            left = Proposal.objects.filter(pk__in=due, notified=False).count()
            self.problems.append(f"{left} expired proposals still not announced 90 s after they were marked")

    # -- 3. Redis restarted ------------------------------------------------------------------------------

    def probe(self, label: str, method: str, path: str, expect: int, **kwargs: Any) -> None:
        """One request whose answer the phase predicts (e.g. the token route needs Redis for its throttle)."""
        from bench.load.seed import PASSWORD, token_for, username

        if path == "/api/auth/token":
            kwargs.setdefault("json", {"username": username(0), "password": PASSWORD})
        else:
            kwargs.setdefault("headers", {"Authorization": f"Token {token_for(0)}"})
        try:
            response = httpx.request(method, f"{self.stack.base_url}{path}", timeout=30, **kwargs)
        except httpx.TransportError as exc:
            self.problems.append(f"{label}: {method} {path} dropped the connection ({type(exc).__name__})")
            return
        detail = ""
        if response.status_code >= 400:
            try:
                detail = response.json()["error"]["code"]
            except (ValueError, KeyError, TypeError):
                detail = f"not JSON: {response.text[:60]!r}"
        retry = response.headers.get("Retry-After")
        self.findings.append(f"{label}: {method} {path} -> {response.status_code} {detail}"
                             + (f" (Retry-After: {retry})" if retry else ""))
        if response.status_code != expect or (expect == 503 and (not retry or detail != "service_unavailable")):
            self.problems.append(f"{label}: {method} {path} answered {response.status_code} {detail}, "
                                 f"expected {expect}")

    def worker_alive(self, after: str) -> None:
        """Is the Celery worker still running? If it exited, say so and start it again, as the compose file's
        ``restart: unless-stopped`` would (the fault run plays the supervisor)."""
        proc = self.stack.procs.get("worker")
        code = proc.poll() if proc is not None else "missing"
        if code is None:
            self.findings.append(f"the Celery worker is still running after {after}")
            return
        self.problems.append(f"the Celery worker exited ({code}) after {after}; started again as a supervisor "
                             "would (see logs/worker.log)")
        self.stack.procs.pop("worker", None)
        self.stack.start_worker()

    def redis_phase(self) -> None:
        start = time.time()
        self.stack.stop_redis()
        self.log(f"[{self.h.elapsed()}] Redis stopped")
        self.probe("Redis down", "POST", "/api/auth/token", 503)
        self.probe("Redis down", "GET", "/api/chats/memory", 200)
        self.wait(self.args.outage)
        self.stack.start_redis()
        self.log(f"[{self.h.elapsed()}] Redis started")
        back = self.phase("redis down", start)
        self.probe("Redis back", "POST", "/api/auth/token", 200)
        self.wait(self.args.settle)
        self.worker_alive("the Redis restart")
        self.phase("redis back", back)

    # -- 4. PostgreSQL restarted -------------------------------------------------------------------------

    def postgres_phase(self) -> None:
        from django.db import connections

        connections.close_all()
        start = time.time()
        self.stack.stop_postgres()
        self.log(f"[{self.h.elapsed()}] PostgreSQL stopped")
        self.probe("PostgreSQL down", "GET", "/api/chats/memory", 503)
        self.probe("PostgreSQL down", "PUT", "/api/files/content?path=Memory/t01.md", 503,
                   json={"content": "written while the database is down\n", "version": 1})
        self.wait(self.args.outage)
        self.stack.start_postgres()
        self.log(f"[{self.h.elapsed()}] PostgreSQL started")
        back = self.phase("postgres down", start)
        self.probe("PostgreSQL back", "GET", "/api/chats/memory", 200)
        self.worker_alive("the PostgreSQL restart")
        self.wait(self.args.settle)
        self.phase("postgres back", back)

    # -- 5. a web worker killed mid-confirm --------------------------------------------------------------

    def web_phase(self) -> list[dict[str, Any]]:
        start = time.time()
        plan = self.h.plan(seconds=self.args.confirm_seconds, concurrency=4, mix={"inbox": 1}, name="confirms",
                           confirm_share=1.0)
        proc, out = self.h.start_driver(plan)
        before = self.stack.web_worker_pids()
        caught = None
        deadline = time.monotonic() + self.args.confirm_seconds - 3
        with self.pg() as conn:
            while time.monotonic() < deadline and caught is None:
                for pid, app, state, query in conn.execute(IN_CONFIRM).fetchall():
                    worker = int(app.removeprefix("web-"))
                    if worker in before:
                        caught = (pid, worker, state, query)
                        break
                else:
                    time.sleep(0.002)
        if caught is None:
            self.problems.append("no web worker was seen inside a confirm; none was killed")
        else:
            self.stack.kill_web_worker(caught[1])
            self.log(f"[{self.h.elapsed()}] gunicorn worker {caught[1]} SIGKILLed inside a confirm "
                     f"({caught[2]}: {caught[3][:90]!r})")
            self.findings.append(f"web worker {caught[1]} killed while its transaction was {caught[2]} in a "
                                 f"confirm, after: {caught[3][:60]!r}")
            try:
                wait_until(lambda: len(set(self.stack.web_worker_pids()) - set(before)) >= 1
                           and len(self.stack.web_worker_pids()) >= len(before), 30, "gunicorn replacing the worker")
                self.findings.append("gunicorn started a new worker by itself")
            except TimeoutError:
                self.problems.append("gunicorn did not replace the killed worker")
        results = self.h.wait_driver(proc, out, timeout=self.args.confirm_seconds + 60)
        self.phase("web worker killed mid-confirm", start)
        return [results]

    def killed_confirm_state(self, ledger: dict[str, list[list[Any]]]) -> None:
        """The confirm whose connection dropped (the killed worker's) ended saved once or not at all, and the
        person's second click got a clear answer."""
        from localai_memory.memory.models import Proposal
        from localai_memory.notes.models import ChangeSet

        dropped = {row[1] for row in ledger["confirms"] if row[2] == "conn"}
        for proposal_id in sorted(dropped):
            answers = [row[2] for row in ledger["confirms"] if row[1] == proposal_id]
            proposal = Proposal.objects.get(pk=proposal_id)
            saved = ChangeSet.objects.filter(proposal_id=proposal_id, source="proposal").count()
            self.findings.append(f"the confirm cut off by the kill (proposal {proposal_id}): answers {answers}; "
                                 f"now {proposal.status} with {saved} change set(s)")
            if saved > 1 or (proposal.status == "confirmed") != (saved == 1):
                self.problems.append(f"the killed confirm left proposal {proposal_id} {proposal.status} with "
                                     f"{saved} change sets")

    # -- 6. recovered ------------------------------------------------------------------------------------

    def worker_alive_check(self) -> None:
        from django.db import connections

        from bench.load.seed import seed_proposals
        from localai_memory.memory.models import Proposal
        from localai_memory.memory.tasks import sweep_proposals

        connections.close_all()
        seed_proposals(per_user=0, expired=50, first=10**6, log=lambda *_: None)
        due = list(Proposal.objects.filter(status="pending", expires_at__lte=time_now()).values_list("pk", flat=True))
        sweep_proposals.delay()
        started = time.monotonic()
        try:
            # The sweep queues behind the consolidation passes the load's turns scheduled (one per user after
            # a turn, a minute later; the bench's worker runs one process), so it may take a while: alive
            # means it runs within two minutes, and the time it took is reported.
            wait_until(lambda: not Proposal.objects.filter(pk__in=due, status="pending").exists(), 120,
                       "the worker sweeping after the Redis and PostgreSQL restarts", interval=0.5)
            self.findings.append("the Celery worker ran a sweep after the Redis and PostgreSQL restarts "
                                 f"({time.monotonic() - started:.0f} s after it was sent)")
        except TimeoutError:
            self.problems.append("the Celery worker did not run a sweep within 2 minutes after the Redis and "
                                 "PostgreSQL restarts")


def time_now():
    from django.utils import timezone

    return timezone.now()


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Fault run: kill and restart each part under load.")
    parser.add_argument("--users", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=8, help="clients of the background load")
    parser.add_argument("--latency-ms", type=int, default=50)
    parser.add_argument("--web-workers", type=int, default=4)
    parser.add_argument("--expired", type=int, default=5000, help="proposals past their life for the sweep")
    parser.add_argument("--outage", type=float, default=8, help="seconds each service stays down")
    parser.add_argument("--settle", type=float, default=12, help="seconds of load after each service is back")
    parser.add_argument("--baseline", type=float, default=15)
    parser.add_argument("--confirm-seconds", type=float, default=20)
    parser.add_argument("--redis", choices=["tcp", "unix"], default="tcp",
                        help="tcp: a Redis of the bench's own on a loopback port (as production); unix: the "
                             "embedded development Redis on a Unix socket")
    parser.add_argument("--data-dir", type=Path, default=ROOT / ".localai" / "bench")
    parser.add_argument("--max-seconds", type=int, default=570)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    hard_limit(args.max_seconds)
    harness = Harness(Options(users=args.users, latency_ms=args.latency_ms, web_workers=args.web_workers,
                              data_dir=args.data_dir, redis=args.redis))
    log = harness.log
    run = FaultRun(harness, args)
    status = 1
    driver = None
    log(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} at the start")
    try:
        harness.up()
        plan = harness.plan(seconds=args.max_seconds, concurrency=args.concurrency, name="load")
        driver, out = harness.start_driver(plan)
        log(f"[{harness.elapsed()}] load running ({args.concurrency} clients)")
        start = time.time()
        run.wait(args.baseline)
        run.phase("baseline", start)
        run.celery_phase()
        run.redis_phase()
        run.postgres_phase()
        extra = run.web_phase()
        start = time.time()
        run.wait(args.settle)
        run.phase("recovered", start)
        (harness.work / "load.stop").touch()  # the driver's stop file: end the background load
        results = harness.wait_driver(driver, out, timeout=90)
        driver = None
        run.worker_alive_check()
        merged = {"ledger": {k: v + [row for r in extra for row in r["ledger"][k]]
                             for k, v in results["ledger"].items()}}
        run.killed_confirm_state(merged["ledger"])
        verification, violations = harness.check(merged)
        requests = results["requests"] + [row for r in extra for row in r["requests"]]
        status = print_report(run, requests, results, extra, verification, violations, log)
    except Deadline as exc:
        log(f"STOPPED: {exc}")
    finally:
        import signal

        signal.alarm(0)
        if driver is not None and driver.poll() is None:
            (harness.work / "load.stop").touch()
            try:
                driver.wait(30)
            except Exception:  # noqa: BLE001
                driver.kill()
        harness.down()
        log(f"[{harness.elapsed()}] everything stopped; load average {os.getloadavg()[0]:.2f} "
            "(other work on the machine inflates every latency)")
    return status


def print_report(run: FaultRun, requests: list, results: dict, extra: list, verification: dict, violations: list,
                 log) -> int:
    log("")
    log("== status counts per phase (each request counted in the phase in which it ended) ==")
    rows = report.phase_counts(requests, run.phases)
    report.print_phase_counts(rows, out=log)
    samples = dict(results["samples"])
    for r in extra:
        samples.update(r["samples"])
    for key, bodies in samples.items():
        log(f"  sample {key}: {bodies[0][:200]!r}")
    for name, start, end in run.phases:
        routes_503: dict[str, int] = {}
        for record in requests:
            if record[4] == "503ok" and start <= record[0] + record[1] / 1000 < end:
                routes_503[record[2]] = routes_503.get(record[2], 0) + 1
        if routes_503:
            log(f"  503s in {name}: " + ", ".join(f"{route} {n}" for route, n in sorted(routes_503.items())))
    log("")
    log("== what happened ==")
    for line in run.findings:
        log(f"  - {line}")
    log("")
    log("== what was saved ==")
    print_verification(verification, out=log)
    log(f"  invariants: {len(violations)} violation(s)")
    for violation in violations[:20]:
        log(f"    - {violation}")
    other_5xx = sum(row.get("other_5xx", 0) + row.get("503_unclear", 0) for row in rows)
    baseline_bad = sum(row.get("503", 0) + row.get("dropped", 0) for row in rows
                       if row["phase"] in ("baseline", "recovered"))
    if baseline_bad:
        run.problems.append(f"{baseline_bad} failed requests while nothing was broken (baseline/recovered)")
    for line in run.problems:
        log(f"  PROBLEM: {line}")
    log("")
    log(f"SUMMARY lost={len(verification['lost'])} duplicated={len(verification['duplicated'])} "
        f"other_5xx={other_5xx} invariant_violations={len(violations)} problems={len(run.problems)} "
        f"error_but_saved={len(verification['error_but_saved'])}")
    bad = verification["lost"] or verification["duplicated"] or violations or other_5xx or run.problems
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
