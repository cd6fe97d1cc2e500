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


def run(
    n: int = 20_000, batch: int = 500, repeats: int = 3, log_url: str | None = None
) -> dict[str, Any]:
    from hybridroute.records import DecisionLog, replay

    router, ds = build_router()
    items = ticket_items(ds, n)
    t0 = time.perf_counter()
    decisions = []
    for start in range(0, n, 1000):
        decisions.extend(router.route_many(items[start : start + 1000]))
    route_s = time.perf_counter() - t0
    by_stage: dict[str, int] = {}
    for d in decisions:
        by_stage[d.stage] = by_stage.get(d.stage, 0) + 1

    best_write = best_replay = float("inf")
    report: Any = None
    with tempfile.TemporaryDirectory() as tmp:
        for rep in range(repeats):
            path = Path(tmp) / f"log{rep}.sqlite"
            t0 = time.perf_counter()
            with DecisionLog(path, batch_size=batch) as log:
                log.extend(decisions)
            best_write = min(best_write, time.perf_counter() - t0)
        path = Path(tmp) / "log0.sqlite"
        for _ in range(repeats):
            with DecisionLog(path) as log:
                assert log.count() == n
                t0 = time.perf_counter()
                report = replay(log.records(), router)
                best_replay = min(best_replay, time.perf_counter() - t0)
    return {
        "benchmark": "records",
        "n": n,
        "batch_size": batch,
        "decisions_by_stage": dict(sorted(by_stage.items())),
        "route_decisions_per_s": n / route_s,
        "writes_per_s": n / best_write,
        "replay_per_s": n / best_replay,
        "replay_over_writes": best_write / best_replay,
        "replayed": report["n"],
        "mismatches": report["mismatches"],
        "unreplayable": report["unreplayable"],
        "log_many_ms": log_many_ms(decisions, log_url),
    }


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
    lm = res["log_many_ms"]
    print(
        f"log_many (one committed transaction per call) on {args.log_url or 'SQLite'}: "
        f"median {lm['per_call_1']:.2f} ms for 1 decision, {lm['per_call_64']:.2f} ms for 64 "
        f"({64 / lm['per_call_64'] * 1e3:,.0f} decisions/s)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
