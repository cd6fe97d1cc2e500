"""Decision log: writes per second, and replay decisions per second.

    python benchmarks/bench_records.py [--n 20000] [--log-url URL] [--json]

The router of ``bench_router`` (local classifier + certified policy + the example rules)
routes ``--n`` support tickets (the bundled set, cycled, with their facts) once, untimed.
Then, best of ``--repeats``:

* ``writes_per_s`` -- the decisions appended to a fresh SQLite decision log
  (:class:`~hybridroute.records.DecisionLog`, batches of ``--batch``) and flushed;
* ``replay_per_s`` -- every logged record read back and replayed through the same router
  with :func:`~hybridroute.records.replay` (model-stage records replay from the recorded
  ranking: no classifier call). ``mismatches`` must be 0 (same router version).

* ``log_many_ms`` -- what the service pays per commit: the median time of one
  ``log_many`` call (one transaction, committed before it returns) of 1 and of 64
  decisions with fresh request ids, on a fresh SQLite log, or on ``--log-url`` (a
  ``postgresql://`` URL: its tables must not exist yet or hold only earlier runs' rows).

* ``writes_over_route`` -- the writes against routing the same items live (routing and
  writing alternate, best of each; goal of issue 27: >= 2x), with ``write_parts_us``: the
  microseconds per decision of redaction, JSON encoding, the rest of a row and SQLite's
  inserts and commits, each measured apart (why the figure is what it is);
* with ``--log-url`` (PostgreSQL): ``postgres`` -- the same writes on that log.

All are measured in the same process run; compare the ratio across machines.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

try:  # as part of the benchmarks package (python -m benchmarks)
    from .bench_router import build_router
except ImportError:  # as a script
    from bench_router import build_router  # type: ignore[no-redef]


def ticket_items(ds: Any, n: int) -> list[dict[str, Any]]:
    """``n`` route items (facts + text) cycling through the labelled set's rows."""
    names = set(ds.fact_columns)
    base = []
    for i, text in enumerate(ds.texts):
        facts = {k: v for k, v in ds.facts(i).items() if v is not None and k in names}
        base.append({"facts": facts, "text": text})
    return [base[i % len(base)] for i in range(n)]


def route_all(router: Any, items: Sequence[dict[str, Any]]) -> list[Any]:
    """Route ``items`` live, 1,000 at a time (what the write path is compared with)."""
    out: list[Any] = []
    for start in range(0, len(items), 1000):
        out.extend(router.route_many(items[start : start + 1000]))
    return out


def write_parts(decisions: Sequence[Any], tmp: str, batch: int) -> dict[str, float]:
    """Microseconds per decision of each part of the write path, measured apart.

    ``redact`` (the stored record: credentials scrubbed, the snapshot hash of what is
    stored), ``encode`` (its JSON text), ``row`` (the rest of a row: id, time, audit mark,
    request-id check) and ``sqlite`` (the inserts and one durable commit per batch, on
    rows made beforehand). Records are made one at a time and dropped, as the write path
    makes them (a list of all of them would add the garbage collector's rescans of it).
    """
    from hybridroute.records import DecisionLog
    from hybridroute.records._log import _INSERT
    from hybridroute.records._logbase import dumps_record

    n = len(decisions)
    with DecisionLog(Path(tmp) / "parts.sqlite", batch_size=batch) as log:
        redactor = log._redactor
        apply = redactor.apply_decision
        t0 = time.perf_counter()
        for d in decisions:
            apply(d)
        t1 = time.perf_counter()
        for d in decisions:
            dumps_record(apply(d))
        t2 = time.perf_counter()
        rows = [log._pending(d, None, "live").values for d in decisions]
        t3 = time.perf_counter()
        conn = log._conn
        for start in range(0, n, batch):
            conn.execute("BEGIN IMMEDIATE")
            conn.executemany(_INSERT, rows[start : start + batch])
            conn.execute("COMMIT")
        t4 = time.perf_counter()
    # the second pass redacts and encodes: its encoding is what it took beyond the first
    redact, encode = (t1 - t0) / n, max(0.0, (t2 - t1) - (t1 - t0)) / n
    return {
        "redact_us": round(redact * 1e6, 2),
        "encode_us": round(encode * 1e6, 2),
        "row_us": round(max(0.0, (t3 - t2) / n - redact - encode) * 1e6, 2),
        "sqlite_us": round((t4 - t3) / n * 1e6, 2),
    }


def run(
    n: int = 20_000, batch: int = 500, repeats: int = 3, log_url: str | None = None
) -> dict[str, Any]:
    """Routing, writing and replaying the same ``n`` items, each best of ``repeats``.

    Routing and writing alternate (route, write, route, write...) so a change in the
    machine's load touches both; their ratio per repeat gives the figure's noise.
    """
    from hybridroute.records import DecisionLog, open_log, replay

    router, ds = build_router()
    items = ticket_items(ds, n)
    route_all(router, items[:1000])  # warm-up
    route_t: list[float] = []
    write_t: list[float] = []
    report: Any = None
    with tempfile.TemporaryDirectory() as tmp:
        for rep in range(repeats):
            t0 = time.perf_counter()
            decisions = route_all(router, items)
            route_t.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            with DecisionLog(Path(tmp) / f"log{rep}.sqlite", batch_size=batch) as log:
                log.extend(decisions)
            write_t.append(time.perf_counter() - t0)
        best_replay = float("inf")
        for _ in range(repeats):
            with DecisionLog(Path(tmp) / "log0.sqlite") as log:
                assert log.count() == n
                t0 = time.perf_counter()
                report = replay(log.records(), router)
                best_replay = min(best_replay, time.perf_counter() - t0)
        parts = write_parts(decisions, tmp, batch)
    by_stage: dict[str, int] = {}
    for d in decisions:
        by_stage[d.stage] = by_stage.get(d.stage, 0) + 1
    best_route, best_write = min(route_t), min(write_t)
    postgres: dict[str, Any] | None = None
    if log_url:
        pg_t = []
        for _ in range(repeats):
            with open_log(log_url, batch_size=batch) as log:
                t0 = time.perf_counter()
                log.extend(decisions)
                log.flush()
                pg_t.append(time.perf_counter() - t0)
        postgres = {"writes_per_s": n / min(pg_t), "over_route": best_route / min(pg_t)}
    return {
        "benchmark": "records",
        "n": n,
        "batch_size": batch,
        "repeats": repeats,
        "decisions_by_stage": dict(sorted(by_stage.items())),
        "route_decisions_per_s": n / best_route,
        "writes_per_s": n / best_write,
        "writes_over_route": best_route / best_write,
        "writes_over_route_each": [r / w for r, w in zip(route_t, write_t, strict=True)],
        "write_parts_us": parts,
        "replay_per_s": n / best_replay,
        "replay_over_writes": best_write / best_replay,
        "replayed": report["n"],
        "mismatches": report["mismatches"],
        "unreplayable": report["unreplayable"],
        "postgres": postgres,
        "log_many_ms": log_many_ms(decisions, log_url),
    }


#: The goal of issue 27: the log writes at least twice as fast as the router routes.
WRITE_GOAL = 2.0


def runner_entry(quick: bool, settings: dict[str, Any]) -> dict[str, Any]:
    """Rows for ``python -m benchmarks``: writes and replay against live routing."""
    from ._core import spread

    n = int(settings.get("n", 1_000 if quick else 10_000))
    res = run(
        n,
        batch=int(settings.get("batch", 500)),
        repeats=int(settings.get("repeats", 1 if quick else 3)),
        log_url=settings.get("log_url") or None,
    )
    p = res["write_parts_us"]
    route = res["route_decisions_per_s"]
    rows = [
        {
            "key": "records.writes_per_s",
            "measure": "decision log writes/s vs live routing",
            "value": res["writes_per_s"],
            "unit": "/s",
            "baseline": route,
            "baseline_label": "router.route_many on the same items",
            "ratio": res["writes_over_route"],
            "goal": WRITE_GOAL,
            "noise": spread(res["writes_over_route_each"]),
            "notes": (
                f"SQLite WAL, batches of {res['batch_size']}; n={res['n']:,} "
                f"{res['decisions_by_stage']}; per decision: redact {p['redact_us']} us, "
                f"JSON {p['encode_us']} us, row {p['row_us']} us, SQLite insert+commit "
                f"{p['sqlite_us']} us (writing {1e6 / res['writes_per_s']:.0f} us in all, "
                f"routing {1e6 / route:.0f} us)"
            ),
        },
        {
            "key": "records.replay_per_s",
            "measure": "replay decisions/s vs live routing",
            "value": res["replay_per_s"],
            "unit": "/s",
            "baseline": route,
            "baseline_label": "router.route_many on the same items",
            "notes": f"read back + replayed from recorded rankings; {res['mismatches']} "
            f"mismatches, {res['unreplayable']} unreplayable",
        },
    ]
    if res["postgres"] is not None:
        rows.append(
            {
                "key": "records.postgres_writes_per_s",
                "measure": "PostgreSQL log writes/s vs live routing",
                "value": res["postgres"]["writes_per_s"],
                "unit": "/s",
                "baseline": route,
                "baseline_label": "router.route_many on the same items",
                "ratio": res["postgres"]["over_route"],
                "notes": f"--log-url; batches of {res['batch_size']}; log_many of 64: "
                f"{res['log_many_ms']['per_call_64']} ms",
            }
        )
    return {"rows": rows, "raw": res}


def log_many_ms(
    decisions: Sequence[Any], url: str | None = None, calls: int = 300
) -> dict[str, float]:
    """Median milliseconds of one ``log_many`` call of 1 and of 64 decisions."""
    import statistics
    import uuid

    from hybridroute.records import open_log

    out: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        target = url or f"sqlite:///{Path(tmp) / 'log_many.sqlite'}"
        run_id = uuid.uuid4().hex[:8]
        with open_log(target) as log:
            for size, n_calls in ((1, calls), (64, max(20, calls // 5))):
                times = []
                for c in range(n_calls):
                    part = [
                        (
                            decisions[(c * size + k) % len(decisions)],
                            f"{run_id}-{size}-{c}-{k}",
                            "live",
                        )
                        for k in range(size)
                    ]
                    t0 = time.perf_counter()
                    log.log_many(part)
                    times.append(time.perf_counter() - t0)
                out[f"per_call_{size}"] = round(statistics.median(times) * 1e3, 3)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=20_000)
    ap.add_argument("--batch", type=int, default=500)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--log-url", default=None, help="log_many on this log (default: SQLite)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    res = run(args.n, args.batch, args.repeats, log_url=args.log_url)
    if args.json:
        print(json.dumps(res, indent=2))
        return 0
    print(
        f"decision log: {res['writes_per_s']:,.0f} writes/s (batches of {res['batch_size']}), "
        f"replay {res['replay_per_s']:,.0f} decisions/s; {res['mismatches']} mismatches, "
        f"n={res['n']:,} {res['decisions_by_stage']}"
    )
    print(
        f"  writes / live routing {res['writes_over_route']:.2f}x (goal >= {WRITE_GOAL:g}x); "
        f"per decision (us): {res['write_parts_us']}"
    )
    if res["postgres"] is not None:
        pg = res["postgres"]
        print(f"  PostgreSQL: {pg['writes_per_s']:,.0f} writes/s = {pg['over_route']:.2f}x routing")
    lm = res["log_many_ms"]
    print(
        f"log_many (one committed transaction per call) on {args.log_url or 'SQLite'}: "
        f"median {lm['per_call_1']:.2f} ms for 1 decision, {lm['per_call_64']:.2f} ms for 64 "
        f"({64 / lm['per_call_64'] * 1e3:,.0f} decisions/s)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
