"""Load run: the app as in production under a mix of many users, and the overhead of memory per turn.

    .venv/bin/python bench/load/run.py                       # 1,000 users × 40 notes, the quoted figures
    .venv/bin/python bench/load/run.py --users 100 --seconds 30 --pairs 200     # a quick look

It starts a loopback OpenAI-protocol model server with a fixed latency, the embedded PostgreSQL + pgvector
and Redis under ``.localai/bench`` (a database of its own, cloned from a seeded template), gunicorn with
several workers, a Celery worker and beat. A second process (bench/load/driver.py) then drives:

1. the mix for ``--seconds`` with ``--concurrency`` clients: chat turns (plain, reading a topic, proposing
   a note; users who save at once get an Undo half the time), the inbox (confirm or reject), settings reads
   and writes, note edits, the audit, the notes listing and the token route;
2. ``--pairs`` overhead pairs: the same turn sent to ``/v1/chat/completions`` with memory on (the user's
   40-line index in the prompt, the memory tools offered, the proposal saved) and straight to the model
   server, in random order within each pair, by ``--pair-concurrency`` clients.

It prints throughput and p50/p95/p99 per route, the outcome counts, the overhead table (memory on vs
direct: p50/p95/p99, their difference and ratio, and percentiles of the per-pair difference), then proves
from the database that no acknowledged write was lost or saved twice and runs the invariant checker. Exit
status 1 when anything was lost or duplicated, an invariant broke, or any 5xx was answered.
Bounded: a hard limit (``--max-seconds``, default 570) ends everything it started.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.load import report
from bench.load.harness import Deadline, Harness, Options, hard_limit
from bench.load.verify import print_verification


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Load run and memory overhead per turn.")
    parser.add_argument("--users", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=120, help="length of the mixed load")
    parser.add_argument("--concurrency", type=int, default=16, help="clients of the mixed load")
    parser.add_argument("--pairs", type=int, default=1200, help="overhead pairs (memory on vs direct)")
    parser.add_argument("--pair-concurrency", type=int, default=2, help="clients sending overhead pairs")
    parser.add_argument("--pair-background", type=int, default=0,
                        help="mix clients that keep running while the pairs are measured")
    parser.add_argument("--propose-share", type=float, default=0.3, help="share of overhead turns that "
                        "propose a note (the others are plain turns)")
    parser.add_argument("--latency-ms", type=int, default=50, help="the model server's fixed latency")
    parser.add_argument("--web-workers", type=int, default=4)
    parser.add_argument("--web-threads", type=int, default=8, help="threads per gunicorn worker (1: sync workers)")
    parser.add_argument("--conn-max-age", type=int, default=60, help="DATABASE_CONN_MAX_AGE of the app")
    parser.add_argument("--embeddings", choices=["ondevice", "off"], default="ondevice",
                        help="LOCALAI_MEMORY_EMBEDDINGS of the app (off: recall is lexical)")
    parser.add_argument("--redis", choices=["tcp", "unix"], default="tcp",
                        help="tcp: a Redis of the bench's own on a loopback port (as production); unix: the "
                             "embedded development Redis on a Unix socket")
    parser.add_argument("--data-dir", type=Path, default=ROOT / ".localai" / "bench")
    parser.add_argument("--max-seconds", type=int, default=570, help="hard limit of the whole run")
    parser.add_argument("--json", type=Path, help="also write every figure to this file")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    hard_limit(args.max_seconds)
    options = Options(users=args.users, latency_ms=args.latency_ms, web_workers=args.web_workers,
                      web_threads=args.web_threads, conn_max_age=args.conn_max_age, data_dir=args.data_dir,
                      embeddings=args.embeddings, redis=args.redis)
    harness = Harness(options)
    log = harness.log
    status = 1
    log(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} at the start")
    try:
        harness.up()
        assert harness.stack is not None
        harness.stack.start_bare_hop()
        overhead = {"pairs": args.pairs, "concurrency": args.pair_concurrency, "background": args.pair_background,
                    "kinds": {"plain": 1 - args.propose_share, "propose": args.propose_share},
                    "max_seconds": 300, "bare_url": harness.stack.bare_url}
        plan = harness.plan(seconds=args.seconds, concurrency=args.concurrency, overhead=overhead)
        log(f"[{harness.elapsed()}] driving: {args.seconds:g} s of mixed load by {args.concurrency} clients, "
            f"then {args.pairs} overhead pairs by {args.pair_concurrency} clients")
        proc, out = harness.start_driver(plan)
        results = harness.wait_driver(proc, out, timeout=args.seconds + 300)
        log(f"[{harness.elapsed()}] driver done; checking the database")
        verification, violations = harness.check(results)
        size = harness.database_size()
        model = harness.model
        asked = (model.after_tools, model.asked_again) if model is not None else None
        status = print_report(args, results, verification, violations, size, log, asked)
    except Deadline as exc:
        log(f"STOPPED: {exc}")
    finally:
        import signal

        signal.alarm(0)
        harness.down()
        log(f"[{harness.elapsed()}] everything stopped; load average {os.getloadavg()[0]:.2f} "
            "(other work on the machine inflates every latency)")
    return status


def print_report(args: argparse.Namespace, results: dict, verification: dict, violations: list, size: dict,
                 log, asked: tuple[int, int] | None = None) -> int:
    mix_start, mix_end = results["phases"].get("mix", [0, 0])
    rows = report.route_table(results["requests"], start=mix_start, end=mix_end)
    total = sum(row["count"] for row in rows)
    seconds = mix_end - mix_start
    log("")
    log(f"== mixed load: {args.users} users × 40 notes, {args.concurrency} clients, {seconds:.0f} s, "
        f"model latency {args.latency_ms} ms, gunicorn {args.web_workers} workers"
        f"{f' × {args.web_threads} threads' if args.web_threads > 1 else ''}, embeddings {args.embeddings}, "
        f"DATABASE_CONN_MAX_AGE {args.conn_max_age} ==")
    log(f"throughput: {total / max(seconds, 1e-9):.1f} requests/s ({total} requests)")
    report.print_route_table(rows, out=log)
    all_rows = report.route_table(results["requests"], start=0, end=float("inf"))
    outcomes: dict[str, int] = {}
    for row in all_rows:
        for key, value in row["outcomes"].items():
            outcomes[key] = outcomes.get(key, 0) + value
    log(f"all requests of the run: {outcomes}")
    for key, bodies in results["samples"].items():
        log(f"  sample {key}: {bodies[0][:200]!r}")
    table = report.overhead(results["pairs"])
    log("")
    log(f"== overhead of memory per turn: /v1/chat/completions with memory on vs the model server directly "
        f"({args.pair_concurrency} clients, {args.pair_background} background clients) ==")
    report.print_overhead(table, out=log)
    read = int(table.get("all", {}).get("memory_read", 0))
    pairs = int(table.get("all", {}).get("pairs", 0))
    log(f"memory was on (the X-Memory header reports the index read) in {read} of {pairs} memory-on turns")
    log("where the memory-on turns' time went (Server-Timing: the app's time less its wait for the model; "
        "what the client saw less the app's time):")
    report.print_split(report.split(results["pairs"]), out=log)
    without = report.without_memory(results["pairs"])
    if without.get("turns"):
        log("the same plain turns sent to a chat of the same user whose Memory switch is off (the app without "
            "memory: off - direct; memory's own share: on - off), and through a bare HTTP hop (bench/load/"
            "bare_hop.py under the same gunicorn flags, no Django: what one more server costs by itself, "
            "bare - direct):")
        report.print_without_memory(without, out=log)
    log("")
    log(f"== what was saved (database: {size['files']} files, {size['versions']} versions, "
        f"{size['change_sets']} change sets, {size['bytes'] / 2**20:.0f} MiB) ==")
    print_verification(verification, out=log)
    log(f"  invariants: {len(violations)} violation(s) (checked in {verification['invariants_seconds']:.1f} s)")
    for violation in violations[:20]:
        log(f"    - {violation}")
    if asked is not None:
        log(f"  the model asked again with a note's real result (its first answer dropped unread): {asked[1]} of "
            f"{asked[0]} requests answering a tool call")
    five = sum(v for k, v in outcomes.items() if k.startswith("5") or k == "503")
    overall = table.get("all", {})
    log("")
    log(f"SUMMARY lost={len(verification['lost'])} duplicated={len(verification['duplicated'])} "
        f"5xx={five} invariant_violations={len(violations)} "
        f"overhead_p50={overall.get('delta_p50', float('nan')):.1f}ms "
        f"overhead_p99={overall.get('delta_p99', float('nan')):.1f}ms "
        f"ratio_p99={overall.get('ratio_p99', float('nan')):.3f}")
    if args.json:
        args.json.write_text(json.dumps({"routes": rows, "outcomes": outcomes, "overhead": table,
                                         "verification": verification, "violations": [str(v) for v in violations],
                                         "size": size, "at": time.time()}, indent=2, default=str))
    bad = verification["lost"] or verification["duplicated"] or violations or five or read < pairs
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
