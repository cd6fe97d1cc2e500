"""bench_calibration's resplit evaluation and its matched-violation comparison."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT / "benchmarks") not in sys.path:
    sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_calibration as bc  # noqa: E402


def _row(mapie_viol: float, ladder: dict[float, tuple[float, float]]) -> dict:
    row = {"mapie": {"coverage": 0.5, "violation_rate": mapie_viol}}
    for d, (cov, viol) in ladder.items():
        row[bc._ladder(d)] = {"coverage": cov, "violation_rate": viol}
    return row


def test_matched_takes_the_largest_delta_within_mapies_violation_rate() -> None:
    ladder = {d: (0.9 - i * 0.05, 0.05 / (i + 1)) for i, d in enumerate(bc.MATCH_DELTAS)}
    m = bc._matched(_row(0.02, ladder))
    assert m["delta"] == 0.01  # 0.05 and 0.02 violate more than 0.02; 0.01 gives 0.0167
    assert m["coverage"] == pytest.approx(0.8)
    assert m["over_mapie"] == pytest.approx(0.8 / 0.5)


def test_matched_reports_none_when_no_delta_is_low_enough() -> None:
    ladder = {d: (0.9, 0.05) for d in bc.MATCH_DELTAS}
    m = bc._matched(_row(0.0, ladder))
    assert m["delta"] is None and m["over_mapie"] is None


def test_evaluate_on_synthetic_scores() -> None:
    # MAPIE comes with the 'bench' extra, which dev.py always installs
    rng = np.random.default_rng(0)
    conf = rng.uniform(0.3, 1.0, 3000)
    correct = rng.uniform(size=3000) < conf  # calibrated by construction
    res = bc.evaluate(conf, correct, resplits=3)
    assert set(res) == {f"{t:.2f}" for t in bc.TARGETS}
    for row in res.values():
        # the literal 0.8 covers the same share whatever the target
        assert row["fixed_0.8"]["coverage"] == pytest.approx(np.mean(conf >= 0.8), abs=0.03)
        for m in ("certified", "mapie", "empirical", "certified@0.001"):
            assert 0.0 <= row[m]["coverage"] <= 1.0
            assert 0.0 <= row[m]["violation_rate"] <= 1.0
        assert row["matched"]["mapie_violation_rate"] == row["mapie"]["violation_rate"]
