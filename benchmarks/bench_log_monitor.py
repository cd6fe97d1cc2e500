"""The service's monitor recompute at two log sizes: kept state against a full re-read.

    python benchmarks/bench_log_monitor.py [--sizes 10000,1000000] [--json]

For each size a SQLite decision log is filled with that many live decisions (rows written
straight into the table: the write path is ``bench_records``' subject), the same number of
them audited (``--audited``, 2,000) and given audit outcomes. Then, per size:

* ``full_ms`` -- :func:`~hybridroute.monitoring.monitor_log`, what the service did every
  30 s: every audited row of the version, every outcome, the label mix counted over every
  classified decision;
* ``update_ms`` -- :meth:`~hybridroute.monitoring._from_log.LogMonitor.update` after
  ``--new`` more decisions (1% audited) and a few outcomes arrived: the median of
  ``--rounds`` rounds, the state kept between them.

Goal (issue 27): one recompute costs the same at 10^4 and 10^6 logged decisions --
``update_ms`` at the largest size over the smallest <= 1.5 -- with results identical to
the full recompute (checked here on every round, and in tests/monitoring).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

REFERENCE = {"label_counts": {"billing": 60, "refund": 35, "oos": 5}, "out_of_scope_label": "oos"}
ARGS = {"target": 0.8, "delta": 0.1, "reference": REFERENCE}
GOAL = 1.5


def _rows(n: int, audited: set[int], start: int, rng: np.random.Generator) -> list[tuple]:
    from hybridroute.records._schema import now_iso

    kinds = rng.integers(0, 20, size=n)
    at = now_iso()
    out = []
    for k in range(n):
        oos = kinds[k] == 0
        label = "oos" if oos else ("billing" if kinds[k] % 2 else "refund")
        selected = "human_review" if oos else label
        reason = "out_of_scope" if oos else "confident_intent"
        hit = (start + k) in audited
        out.append(
            (
                at,
                None,
                "r",
                "1",
                "policy" if oos else "model",
                selected,
                reason,
                "0" * 64,
                label,
                0.9,
                '{"synthetic":true}',
                uuid.uuid4().hex,
                "live",
                0.01 if hit else None,
                1 if hit else 0,
            )
        )
    return out


def _fill(log: Any, n: int, n_audited: int, rng: np.random.Generator) -> None:
    """``n`` decisions straight into the table, ``n_audited`` of them audited with an
    audit outcome each (85% agreeing with the label)."""
    from hybridroute.records._log import _INSERT

    audited = set(rng.choice(n, size=min(n, n_audited), replace=False).tolist())
    conn = log._conn
    for start in range(0, n, 50_000):
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(_INSERT, _rows(min(50_000, n - start), audited, start, rng))
        conn.execute("COMMIT")
    _outcomes(log, rng, None)


def _outcomes(log: Any, rng: np.random.Generator, after: int | None) -> None:
    """An audit outcome for each audited model decision without one (after ``seq``)."""
    sql = "SELECT decision_id, label FROM decisions WHERE audited = 1 AND stage = 'model'"
    rows = log._conn.execute(sql + ("" if after is None else f" AND seq > {int(after)}"))
    out = []
    for decision_id, label in rows:
        gold = label if rng.uniform() < 0.85 else ("refund" if label == "billing" else "billing")
        out.append({"decision_id": decision_id, "gold_intent": gold, "source": "audit"})
    if out:
        log.add_outcomes(out)


def measure(n: int, n_audited: int, new: int, rounds: int, tmp: Path, seed: int) -> dict[str, Any]:
    from hybridroute.monitoring import monitor_log
    from hybridroute.monitoring._from_log import LogMonitor
    from hybridroute.records import DecisionLog
    from hybridroute.records._log import _INSERT

    rng = np.random.default_rng(seed)
    with DecisionLog(tmp / f"monitor-{n}.sqlite") as log:
        log.register_router(
            name="r",
            version="1",
            labels=("billing", "refund"),
            oos_label="oos",
            destinations=("billing", "refund", "human_review"),
        )
        t0 = time.perf_counter()
        _fill(log, n, n_audited, rng)
        fill_s = time.perf_counter() - t0
        full_s = float("inf")
        for _ in range(2):  # the first call of a process also pays for its imports
            t0 = time.perf_counter()
            full = monitor_log(log, router_version="1", **ARGS)
            full_s = min(full_s, time.perf_counter() - t0)
        monitor = LogMonitor(router_version="1", **ARGS)
        t0 = time.perf_counter()
        first = monitor.update(log)
        first_s = time.perf_counter() - t0
        assert first == full
        times, identical = [], True
        for _ in range(rounds):
            before = log._last_seq()
            audited = set(rng.choice(new, size=max(1, new // 100), replace=False).tolist())
            log._conn.execute("BEGIN IMMEDIATE")
            log._conn.executemany(_INSERT, _rows(new, audited, 0, rng))
            log._conn.execute("COMMIT")
            _outcomes(log, rng, before)
            t0 = time.perf_counter()
            state = monitor.update(log)
            times.append(time.perf_counter() - t0)
            identical &= state == monitor_log(log, router_version="1", **ARGS)
    return {
        "n": n,
        "audited": full["audited"],
        "fill_s": round(fill_s, 2),
        "full_ms": round(full_s * 1e3, 2),
        "first_update_ms": round(first_s * 1e3, 2),
        "update_ms": round(statistics.median(times) * 1e3, 3),
        "update_ms_each": [round(t * 1e3, 3) for t in times],
        "identical": identical,
    }


def run(
    sizes: Sequence[int] = (10_000, 1_000_000),
    audited: int = 2_000,
    new: int = 1_000,
    rounds: int = 5,
    seed: int = 0,
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        cells = [measure(n, audited, new, rounds, Path(tmp), seed) for n in sizes]
    small, large = cells[0], cells[-1]
    each = [b / a for a, b in zip(small["update_ms_each"], large["update_ms_each"], strict=True)]
    return {
        "benchmark": "log_monitor",
        "sizes": list(sizes),
        "cells": cells,
        "update_ratio": large["update_ms"] / small["update_ms"],
        "update_ratio_each": each,
        "full_ratio": large["full_ms"] / small["full_ms"],
    }


def runner_entry(quick: bool, settings: dict[str, Any]) -> dict[str, Any]:
    """Rows for ``python -m benchmarks``: the recompute at the largest size vs the smallest."""
    from ._core import spread

    sizes = str(settings.get("sizes", "2000,20000" if quick else "10000,1000000"))
    res = run(
        [int(s) for s in sizes.split(",")],
        audited=int(settings.get("audited", 500 if quick else 2_000)),
        rounds=int(settings.get("rounds", 3 if quick else 5)),
    )
    small, large = res["cells"][0], res["cells"][-1]
    same = all(c["identical"] for c in res["cells"])
    rows = [
        {
            "key": "log_monitor.update_vs_size",
            "measure": f"service monitor recompute at {large['n']:,} vs {small['n']:,} decisions",
            "value": large["update_ms"],
            "unit": "ms",
            "baseline": small["update_ms"],
            "baseline_label": f"the same at {small['n']:,}",
            "goal": GOAL,
            "goal_op": "<=",
            "noise": spread(res["update_ratio_each"]),
            "notes": f"{large['audited']:,} audited decisions at both sizes; identical to "
            f"the full recompute: {same}; full recompute {large['full_ms']:.0f} ms vs "
            f"{small['full_ms']:.0f} ms ({res['full_ratio']:.1f}x)",
        }
    ]
    return {"rows": rows, "raw": res}


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,1000000")
    ap.add_argument("--audited", type=int, default=2_000)
    ap.add_argument("--new", type=int, default=1_000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    res = run([int(s) for s in args.sizes.split(",")], args.audited, args.new, args.rounds)
    if args.json:
        print(json.dumps(res, indent=2))
        return 0
    for c in res["cells"]:
        print(
            f"{c['n']:>9,} decisions ({c['audited']:,} audited): full recompute "
            f"{c['full_ms']:.1f} ms, kept-state update {c['update_ms']:.2f} ms "
            f"(identical: {c['identical']}; filled in {c['fill_s']} s)"
        )
    print(
        f"update at the largest / smallest size: {res['update_ratio']:.2f}x (goal <= {GOAL:g}x); "
        f"full recompute {res['full_ratio']:.1f}x"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
