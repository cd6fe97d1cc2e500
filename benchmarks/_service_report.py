"""The table ``bench_service.py`` prints: one line per (mode, concurrency), then the goals."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

#: Goals (issues 17 and 27, this 2-core machine).
GOAL_SINGLE_P99_MS = 15.0
GOAL_BATCH_VS_INPROCESS = 0.7
GOAL_VS_MLFLOW = 3.0
#: Issue 27: single items at c=32 >= 0.8x batches at c=32 (micro-batched serving).
GOAL_SINGLE_VS_BATCH = 0.8


def _cell(cells: Sequence[dict[str, Any]], c: int) -> dict[str, Any] | None:
    return next((cell for cell in cells if cell["concurrency"] == c), None)


def print_report(r: dict[str, Any]) -> None:
    """The table: one line per (mode, concurrency), then the goals."""
    print(
        f"routing service, 127.0.0.1, {r['cpus']} CPUs; at most {r['requests_per_cell']} "
        f"requests per cell; batches of {r['batch_size']} items"
    )
    head = (
        f"{'mode':<7}{'c':>4}  {'service items/s':>15} {'p50 ms':>7} {'p99 ms':>7}"
        f"  {'mlflow items/s':>14} {'p50 ms':>7} {'p99 ms':>7}  {'vs in-proc':>10}"
        f" {'vs mlflow':>9}"
    )
    print(head)
    for mode in ("single", "batch"):
        for cell in r["service"][mode]:
            c = cell["concurrency"]
            ml = _cell(r.get("mlflow", {}).get(mode, []), c) or {}
            ratio = r["ratios"][f"{mode}@c{c}"]

            def fmt(v: Any, spec: str) -> str:
                return format(v, spec) if isinstance(v, (int, float)) else "-"

            print(
                f"{mode:<7}{c:>4}  {fmt(cell['items_per_s'], ',.0f'):>15} "
                f"{fmt(cell['p50_ms'], '.2f'):>7} {fmt(cell['p99_ms'], '.2f'):>7}"
                f"  {fmt(ml.get('items_per_s'), ',.0f'):>14} {fmt(ml.get('p50_ms'), '.2f'):>7}"
                f" {fmt(ml.get('p99_ms'), '.2f'):>7}  {fmt(ratio.get('vs_in_process'), '.2f'):>10}"
                f" {fmt(ratio.get('vs_mlflow'), '.2f'):>9}"
            )
            errors = cell["errors"] + (ml.get("errors") or 0)
            if errors:
                print(
                    f"        {errors} failed request(s): {cell['first_error'] or ml.get('first_error')}"
                )
    for key, pair in r.get("paired", {}).items():
        on, off = pair["on"], pair["off"]
        print(
            f"single {key:>4}  side by side, micro-batching on / off: {on['items_per_s']:,.0f} / "
            f"{off['items_per_s']:,.0f} items/s, p50 {on['p50_ms']:.2f} / {off['p50_ms']:.2f} ms "
            f"(median per-round ratio {np.median(pair['p50_ratio_each']):.2f}x)"
        )
    w = r.get("service_workers")
    if w:
        for mode in ("single", "batch"):
            cell = w[mode][0]
            one = _cell(r["service"][mode], cell["concurrency"]) or {}
            grow = (cell["items_per_s"] or 0) / one["items_per_s"] if one.get("items_per_s") else 0
            print(
                f"{mode:<7}{cell['concurrency']:>4}  {w['workers']} workers: "
                f"{cell['items_per_s']:,.0f} items/s, p50 {cell['p50_ms']:.2f} ms, p99 "
                f"{cell['p99_ms']:.2f} ms = {grow:.2f}x one worker"
            )
    single32 = r["ratios"].get("single@c32", {})
    if "vs_batch" in single32:
        ok = single32["vs_batch"] >= GOAL_SINGLE_VS_BATCH
        print(
            f"goal single >= {GOAL_SINGLE_VS_BATCH:g}x batch at c=32: "
            f"{single32['vs_batch']:.2f}x ({'met' if ok else 'NOT met'})"
        )
    ip = r["in_process"]
    print(
        f"in-process (HybridRouter + log_many, one caller): single "
        f"{ip['single']['items_per_s']:,.0f} items/s (p99 {ip['single']['p99_ms']:.2f} ms), "
        f"batch {ip['batch']['items_per_s']:,.0f} items/s"
    )
    single8 = next((c for c in r["service"]["single"] if c["concurrency"] == 8), None)
    if single8 is not None and single8["p99_ms"] is not None:
        ok = single8["p99_ms"] <= GOAL_SINGLE_P99_MS
        print(
            f"goal single p99 <= {GOAL_SINGLE_P99_MS:g} ms at c=8: {single8['p99_ms']:.2f} ms "
            f"({'met' if ok else 'NOT met'})"
        )
    batch_ratios = [v.get("vs_in_process") for k, v in r["ratios"].items() if k.startswith("batch")]
    best = max((x for x in batch_ratios if x is not None), default=None)
    if best is not None:
        ok = best >= GOAL_BATCH_VS_INPROCESS
        print(
            f"goal batch >= {GOAL_BATCH_VS_INPROCESS:g}x in-process: best {best:.2f}x "
            f"({'met' if ok else 'NOT met'})"
        )
    if "mlflow" in r:
        worst = min(
            (v["vs_mlflow"] for v in r["ratios"].values() if "vs_mlflow" in v), default=None
        )
        if worst is not None:
            ok = worst >= GOAL_VS_MLFLOW
            print(
                f"goal >= {GOAL_VS_MLFLOW:g}x MLflow's scoring server at equal concurrency: "
                f"lowest {worst:.2f}x ({'met' if ok else 'NOT met'})"
            )
