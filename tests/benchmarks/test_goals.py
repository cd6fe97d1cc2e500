"""Benchmark rows with goals: each goal a ratio from one run, checked against the noise.

A row fails loudly -- a ``FAIL`` verdict in the table, a ``GOAL FAILED`` line, exit status
3 -- when its ratio misses its goal by more than the noise (its own, the committed run's,
or the floor); inside the noise it is ``within noise``; ``--quick`` runs are not checked.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks._core import NOISE_FLOOR, Context, Row, check_goals, fmt_goal, spread  # noqa: E402

from benchmarks import _runner  # noqa: E402


def _row(ratio: float | None, goal: float = 2.0, op: str = ">=", **kw) -> Row:
    return Row(
        "records", "records.writes_per_s", "writes", 1.0, ratio=ratio, goal=goal, goal_op=op, **kw
    )


@pytest.mark.parametrize(
    ("ratio", "goal", "op", "noise", "verdict"),
    [
        (2.3, 2.0, ">=", None, "meets"),
        (2.0, 2.0, ">=", None, "meets"),
        (1.95, 2.0, ">=", None, "within noise"),  # 2.5% short, floor 5%
        (1.85, 2.0, ">=", None, "FAIL"),
        (1.85, 2.0, ">=", 0.10, "within noise"),  # its own repeats spread by 10%
        (1.5, 2.0, ">=", 0.10, "FAIL"),
        (1.4, 1.3, "<=", None, "FAIL"),
        (2.05, 2.0, "<=", None, "within noise"),
        (0.9, 2.0, "<=", None, "meets"),
    ],
)
def test_a_goal_row_gets_its_verdict(ratio, goal, op, noise, verdict):
    row = _row(ratio, goal=goal, op=op, noise=noise)
    failures = check_goals([row])
    assert row.verdict == verdict
    assert len(failures) == (verdict == "FAIL")
    if failures:
        assert "records.writes_per_s" in failures[0] and "noise" in failures[0]


def test_the_committed_runs_noise_is_allowed_and_its_ratio_named():
    committed = {"rows": [{"key": "records.writes_per_s", "ratio": 2.4, "noise": 0.2}]}
    row = _row(1.7)
    assert check_goals([row], committed) == [] and row.verdict == "within noise"
    row = _row(1.5)
    (message,) = check_goals([row], committed)
    assert row.verdict == "FAIL" and "2.400x" in message and "20%" in message


def test_rows_without_goals_are_left_alone_and_quick_runs_not_checked():
    plain = Row("x", "x.k", "m", 5.0, baseline=10.0)
    assert check_goals([plain]) == [] and plain.verdict == "" and fmt_goal(plain) == ""
    row = _row(0.1)
    assert check_goals([row], enforce=False) == [] and row.verdict == "not checked"
    assert fmt_goal(row) == ">= 2x (quick)"


def test_a_goal_row_without_a_figure_fails():
    row = Row("llm", "llm.bound", "m", None, status="failed", goal=0.8)
    (message,) = check_goals([row])
    assert row.verdict == "FAIL" and "no figure" in message


@pytest.mark.parametrize(
    ("ratios", "expected"), [([2.0, 2.2, 1.8], 0.1), ([1.0], None), ([3.0, 3.0], 0.0)]
)
def test_spread_is_half_the_range_over_the_median(ratios, expected):
    assert spread(ratios) == (None if expected is None else pytest.approx(expected))


def test_a_bad_goal_op_is_refused():
    with pytest.raises(ValueError, match="goal_op"):
        Row("x", "x.k", "m", 1.0, goal=1.0, goal_op=">")


def _saved(tmp_path: Path, ratio: float, mode: str = "full") -> Path:
    row = _row(ratio)
    doc = {
        "mode": mode,
        "rows": [{k: getattr(row, k) for k in Row.__dataclass_fields__}],
        "metrics": {},
    }
    path = tmp_path / f"run-{ratio}-{mode}.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def test_show_fails_loudly_on_a_missed_goal(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(_runner, "COMMITTED", tmp_path / "none.json")
    assert _runner.main(["--show", str(_saved(tmp_path, 1.2))]) == _runner.GOAL_FAILED
    out = capsys.readouterr().out
    assert "GOAL FAILED" in out and "records.writes_per_s" in out and "FAIL" in out
    assert _runner.main(["--show", str(_saved(tmp_path, 1.2)), "--no-goals"]) == 0
    assert _runner.main(["--show", str(_saved(tmp_path, 2.2))]) == 0
    assert _runner.main(["--show", str(_saved(tmp_path, 1.2, "quick"))]) == 0
    assert "GOAL FAILED" not in capsys.readouterr().out.split("records")[-1]


def test_show_reads_a_run_saved_before_rows_had_goals(tmp_path, monkeypatch):
    monkeypatch.setattr(_runner, "COMMITTED", tmp_path / "none.json")
    doc = {"mode": "full", "rows": [{"bench": "a", "key": "a.b", "measure": "m", "value": 1}]}
    doc["metrics"] = {}
    path = tmp_path / "old.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    assert _runner.main(["--show", str(path)]) == 0


def test_a_scripts_runner_entry_comes_before_an_adapter(tmp_path, monkeypatch):
    mod = ModuleType("benchmarks.bench_fake")

    def runner_entry(quick, settings):
        return {"rows": [{"key": "fake.k", "measure": "m", "value": 3.0, "goal": 1.0}], "raw": 7}

    mod.runner_entry = runner_entry  # type: ignore[attr-defined]
    monkeypatch.setattr(_runner, "_import", lambda name: mod)
    monkeypatch.setitem(_runner.ADAPTERS, "fake", lambda m, c: pytest.fail("adapter called"))
    ctx = Context(quick=True, sizes={}, data_dir=None, cache_dir=tmp_path)
    result = _runner.run_bench("fake", ctx)
    assert result.raw == 7 and result.rows[0].goal == 1.0 and result.rows[0].bench == "fake"


def test_the_noise_floor_is_a_few_percent():
    assert 0.01 <= NOISE_FLOOR <= 0.1
