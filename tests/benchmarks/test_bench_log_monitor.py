"""bench_log_monitor: the kept-state recompute at two log sizes, its row and its goal."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks._core import Row, check_goals  # noqa: E402

from benchmarks import bench_log_monitor  # noqa: E402


def test_a_tiny_run_is_identical_to_the_full_recompute_and_makes_a_goal_row():
    out = bench_log_monitor.runner_entry(True, {"sizes": "600,3000", "audited": 80, "rounds": 2})
    cells = out["raw"]["cells"]
    assert [c["n"] for c in cells] == [600, 3000]
    assert all(c["identical"] for c in cells)
    assert cells[0]["audited"] == cells[1]["audited"] == 80  # the same labels at both sizes
    (row,) = [Row(bench="log_monitor", **r) for r in out["rows"]]
    assert row.goal == 1.5 and row.goal_op == "<=" and row.ratio is not None
    check_goals([row])
    assert row.verdict in ("meets", "within noise", "FAIL")
