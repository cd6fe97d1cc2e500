"""Decision log: writes per second, and replay decisions per second.

    python benchmarks/bench_records.py [--n 20000] [--json]

The router of ``bench_router`` (local classifier + certified policy + the example rules)
routes ``--n`` support tickets (the bundled set, cycled, with their facts) once, untimed.
Then, best of ``--repeats``:

* ``writes_per_s`` -- the decisions appended to a fresh SQLite decision log
  (:class:`~hybridroute.records.DecisionLog`, batches of ``--batch``) and flushed;
* ``replay_per_s`` -- every logged record read back and replayed through the same router
  with :func:`~hybridroute.records.replay` (model-stage records replay from the recorded
  ranking: no classifier call). ``mismatches`` must be 0 (same router version).

Both are measured in the same process run; compare the ratio across machines.
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


def run(n: int = 20_000, batch: int = 500, repeats: int = 3) -> dict[str, Any]:
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
    }


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=20_000)
    ap.add_argument("--batch", type=int, default=500)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    res = run(args.n, args.batch, args.repeats)
    if args.json:
        print(json.dumps(res, indent=2))
        return 0
    print(
        f"decision log: {res['writes_per_s']:,.0f} writes/s (batches of {res['batch_size']}), "
        f"replay {res['replay_per_s']:,.0f} decisions/s; {res['mismatches']} mismatches, "
        f"n={res['n']:,} {res['decisions_by_stage']}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
