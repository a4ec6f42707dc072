"""Figures from the driver's records: latency percentiles per route, throughput, outcome counts, the
overhead of memory per turn, and status counts per fault phase. Pure functions over lists; no I/O except
the ``print_*`` helpers."""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from typing import Any


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of ``values``; NaN for none."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def bucket(status: int | str) -> str:
    if status == "conn":
        return "conn"
    if status == "driver":
        return "driver"
    code = int(status)
    if code == 503:
        return "503"
    return f"{code // 100}xx"


def route_table(requests: Iterable[list[Any]], *, start: float, end: float) -> list[dict[str, Any]]:
    """Per route: count, requests/s, p50/p95/p99 (ms, answered requests only) and outcome counts."""
    by_route: dict[str, list[list[Any]]] = defaultdict(list)
    for record in requests:
        if start <= record[0] <= end:
            by_route[record[2]].append(record)
    seconds = max(end - start, 1e-9)
    rows = []
    for route, records in sorted(by_route.items()):
        answered = [r[1] for r in records if r[3] not in ("conn", "driver")]
        outcomes = Counter(bucket(r[3]) for r in records)
        rows.append({"route": route, "count": len(records), "rps": len(records) / seconds,
                     "p50": percentile(answered, 50), "p95": percentile(answered, 95),
                     "p99": percentile(answered, 99), "outcomes": dict(outcomes)})
    return rows


def print_route_table(rows: list[dict[str, Any]], out=print) -> None:
    out(f"{'route':<48} {'count':>7} {'req/s':>7} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8}  outcomes")
    for row in rows:
        outcomes = " ".join(f"{k}={v}" for k, v in sorted(row["outcomes"].items()))
        out(f"{row['route']:<48} {row['count']:>7} {row['rps']:>7.1f} {row['p50']:>8.1f} {row['p95']:>8.1f} "
            f"{row['p99']:>8.1f}  {outcomes}")


def overhead(pairs: list[list[Any]]) -> dict[str, dict[str, float]]:
    """Per kind (and ``all``): percentiles of the memory-on and the direct turn, their differences and ratios,
    and percentiles of the per-pair difference (on - direct)."""
    kinds: dict[str, list[list[Any]]] = defaultdict(list)
    for pair in pairs:
        kinds[pair[0]].append(pair)
        kinds["all"].append(pair)
    result = {}
    for kind, rows in sorted(kinds.items()):
        on = [r[1] for r in rows]
        direct = [r[2] for r in rows]
        diff = [r[1] - r[2] for r in rows]
        figures: dict[str, float] = {"pairs": len(rows), "memory_read": sum(1 for r in rows if r[4] > 0)}
        for q in (50, 95, 99):
            figures[f"on_p{q}"] = percentile(on, q)
            figures[f"direct_p{q}"] = percentile(direct, q)
            figures[f"delta_p{q}"] = figures[f"on_p{q}"] - figures[f"direct_p{q}"]
            figures[f"ratio_p{q}"] = figures[f"on_p{q}"] / figures[f"direct_p{q}"]
            figures[f"paired_p{q}"] = percentile(diff, q)
        result[kind] = figures
    return result


def split(pairs: list[list[Any]]) -> dict[str, dict[str, float]]:
    """Where a memory-on turn's time went, per kind, from its ``Server-Timing``: ``work`` = the app's time
    less its wait for the model (memory, the database, Django), ``recall`` (the recall step, in ``work``),
    and ``outside`` = what the client saw less the app's time (HTTP, gunicorn, the client)."""
    kinds: dict[str, list[dict[str, float]]] = defaultdict(list)
    for pair in pairs:
        timing = pair[5] if len(pair) > 5 else {}
        if not {"app", "model"} <= set(timing):
            continue
        row = {"work": timing["app"] - timing["model"], "recall": timing.get("recall", 0.0),
               "outside": pair[1] - timing["app"]}
        kinds[pair[0]].append(row)
        kinds["all"].append(row)
    return {kind: {f"{part}_p{q}": percentile([r[part] for r in rows], q)
                   for part in ("work", "recall", "outside") for q in (50, 95, 99)} | {"turns": len(rows)}
            for kind, rows in sorted(kinds.items())}


def without_memory(pairs: list[list[Any]]) -> dict[str, float]:
    """For the plain turns also sent to a chat whose Memory switch is off: percentiles of the three, of the
    app without memory over the direct call (off - direct) and of memory's own share (on - off)."""
    rows = [p for p in pairs if p[0] == "plain" and len(p) > 6 and p[6] is not None]
    figures: dict[str, float] = {"turns": len(rows)}
    if not rows:
        return figures
    series = {"on": [r[1] for r in rows], "off": [r[6] for r in rows], "direct": [r[2] for r in rows],
              "app": [r[6] - r[2] for r in rows], "memory": [r[1] - r[6] for r in rows]}
    hop = [r for r in rows if len(r) > 7 and r[7] is not None]  # also sent through the bare HTTP hop
    if hop:
        series |= {"bare": [r[7] for r in hop], "hop": [r[7] - r[2] for r in hop]}
        figures["hop_turns"] = len(hop)
    for q in (50, 95, 99):
        for name, values in series.items():
            figures[f"{name}_p{q}"] = percentile(values, q)
    return figures


def print_without_memory(figures: dict[str, float], out=print) -> None:
    hop = "hop_p50" in figures
    out(f"{'turn':<9} {'turns':>6} {'':>4} {'memory on':>10} {'memory off':>11} {'direct':>8} "
        f"{'off - direct':>13} {'on - off':>9}" + (f" {'bare hop':>9} {'bare - direct':>14}" if hop else ""))
    for q in (50, 95, 99):
        label, number = ("plain", f"{int(figures['turns'])}") if q == 50 else ("", "")
        out(f"{label:<9} {number:>6} p{q:<3} {figures[f'on_p{q}']:>8.1f}ms {figures[f'off_p{q}']:>9.1f}ms "
            f"{figures[f'direct_p{q}']:>6.1f}ms {figures[f'app_p{q}']:>+11.1f}ms {figures[f'memory_p{q}']:>+7.1f}ms"
            + (f" {figures[f'bare_p{q}']:>7.1f}ms {figures[f'hop_p{q}']:>+12.1f}ms" if hop else ""))


def _print_percentile_rows(table: dict[str, dict[str, float]], count: str, header: str,
                           cells: Any, out=print) -> None:
    """One row per kind and percentile (p50 with the kind and its count, then p95 and p99)."""
    out(f"{'turn':<9} {count:>6} {'':>4} {header}")
    for kind, f in table.items():
        for q in (50, 95, 99):
            label, number = (kind, f"{int(f[count])}") if q == 50 else ("", "")
            out(f"{label:<9} {number:>6} p{q:<3} {cells(f, q)}")


def print_split(table: dict[str, dict[str, float]], out=print) -> None:
    _print_percentile_rows(
        table, "turns", f"{'app work':>9} {'of it recall':>13} {'outside the app':>16}",
        lambda f, q: f"{f[f'work_p{q}']:>7.1f}ms {f[f'recall_p{q}']:>11.1f}ms {f[f'outside_p{q}']:>14.1f}ms",
        out)


def print_overhead(table: dict[str, dict[str, float]], out=print) -> None:
    _print_percentile_rows(
        table, "pairs", f"{'memory on':>10} {'direct':>8} {'overhead':>9} {'ratio':>7} {'paired diff':>12}",
        lambda f, q: (f"{f[f'on_p{q}']:>8.1f}ms {f[f'direct_p{q}']:>6.1f}ms {f[f'delta_p{q}']:>+7.1f}ms "
                      f"{f[f'ratio_p{q}']:>6.3f}x {f[f'paired_p{q}']:>+10.1f}ms"),
        out)


def phase_counts(requests: Iterable[list[Any]], phases: list[tuple[str, float, float]]) -> list[dict[str, Any]]:
    """Per phase (name, start, end): counts of 2xx / 4xx / 503 (and whether each was a clean JSON 503 with
    Retry-After) / other 5xx / dropped connections, by the moment each request ended (a request in flight
    when a service stopped belongs to the outage)."""
    rows = []
    records = list(requests)
    for name, start, end in phases:
        counts: Counter[str] = Counter()
        for record in records:
            if start <= record[0] + record[1] / 1000 < end:
                status, outcome = record[3], record[4]
                if status == "driver":
                    counts["driver_error"] += 1
                elif status == "conn":
                    counts["dropped"] += 1
                elif outcome == "503ok":
                    counts["503"] += 1
                elif outcome == "503bad":
                    counts["503_unclear"] += 1
                elif outcome == "5xx":
                    counts["other_5xx"] += 1
                else:
                    counts[bucket(status)] += 1
        rows.append({"phase": name, "seconds": end - start, **counts})
    return rows


def print_phase_counts(rows: list[dict[str, Any]], out=print) -> None:
    columns = ["2xx", "4xx", "503", "503_unclear", "other_5xx", "dropped", "driver_error"]
    out(f"{'phase':<34} {'secs':>5} " + " ".join(f"{c:>11}" for c in columns))
    for row in rows:
        out(f"{row['phase']:<34} {row['seconds']:>5.0f} " + " ".join(f"{row.get(c, 0):>11}" for c in columns))
