"""bench_calibration's resplit evaluation and its matched-violation comparison."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT / "benchmarks") not in sys.path:
    sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_calibration as bc  # noqa: E402

#: today's fitter alone (the frontier and matched rows are about it)
CERTIFIED = {"certified": bc.OURS["certified"]}


def _row(mapie_viol: float, ladder: dict[float, tuple[float, float]]) -> dict:
    row = {"mapie": {"coverage": 0.5, "violation_rate": mapie_viol}}
    for d, (cov, viol) in ladder.items():
        row[bc._ladder(d)] = {"coverage": cov, "violation_rate": viol}
    return row


def test_matched_takes_the_largest_delta_within_mapies_violation_rate() -> None:
    ladder = {d: (0.9 - i * 0.05, 0.05 / (i + 1)) for i, d in enumerate(bc.MATCH_DELTAS)}
    m = bc._matched(_row(0.02, ladder))
    # the first two ladder steps violate more than 0.02; the third gives 0.0167
    assert m["delta"] == bc.MATCH_DELTAS[2]
    assert m["coverage"] == pytest.approx(0.8)
    assert m["over_mapie"] == pytest.approx(0.8 / 0.5)


def test_matched_reports_none_when_no_delta_is_low_enough() -> None:
    ladder = {d: (0.9, 0.05) for d in bc.MATCH_DELTAS}
    m = bc._matched(_row(0.0, ladder))
    assert m["delta"] is None and m["over_mapie"] is None


def test_evaluate_on_synthetic_scores() -> None:
    # MAPIE comes with the 'bench' extra, which dev.py always installs
    rng = np.random.default_rng(0)
    conf = rng.uniform(0.3, 1.0, 2000)
    correct = rng.uniform(size=2000) < conf  # calibrated by construction
    res = bc.evaluate(conf, correct, resplits=2, ours=CERTIFIED, mapie_methods=("mapie",))
    assert set(res) == {f"{t:.2f}" for t in bc.TARGETS} | {"rows", "calibration_size"}
    for row in (res[f"{t:.2f}"] for t in bc.TARGETS):
        # the literal 0.8 covers the same share whatever the target
        assert row["fixed_0.8"]["coverage"] == pytest.approx(np.mean(conf >= 0.8), abs=0.03)
        for m in ("certified", "mapie", "empirical", "certified@0.001"):
            assert 0.0 <= row[m]["coverage"] <= 1.0
            assert 0.0 <= row[m]["violation_rate"] <= 1.0
        assert row["matched"]["mapie_violation_rate"] == row["mapie"]["violation_rate"]
        iv = row["matched"]["interval"]
        assert iv is None or iv[0] <= iv[1]


def _per_resplit(mapie_viol: list[bool], ladder_viol: dict[float, list[bool]], t: float = 0.95):
    """Per-resplit coverage and violation flags in evaluate()'s layout (coverage = 1 - delta)."""
    cov = {("mapie", t): [0.5] * len(mapie_viol)}
    viol = {("mapie", t): mapie_viol}
    for d, flags in ladder_viol.items():
        cov[(bc._ladder(d), t)] = [1.0 - d] * len(flags)
        viol[(bc._ladder(d), t)] = flags
    return cov, viol


def test_matched_interval_is_a_point_when_nothing_varies() -> None:
    n = 50
    ladder = {d: [False] * n for d in bc.MATCH_DELTAS}
    cov, viol = _per_resplit([False] * n, ladder)
    lo, hi = bc._matched_interval(cov, viol, 0.95, n)
    assert lo == pytest.approx(0.95 / 0.5) and hi == pytest.approx(0.95 / 0.5)


def test_matched_interval_carries_the_noise_of_the_violation_counts() -> None:
    # MAPIE violates on resplit 0; the largest delta on resplits 1-3, the next on resplit 4,
    # the rest never. The point match is the second delta; resamples that repeat resplit 0
    # reach the first, resamples that drop it (and keep 4) fall to the third.
    n = 50

    def on(*which: int) -> list[bool]:
        return [i in which for i in range(n)]

    first, second, third = bc.MATCH_DELTAS[:3]
    ladder = {d: on() for d in bc.MATCH_DELTAS}
    ladder.update({first: on(1, 2, 3), second: on(4)})
    cov, viol = _per_resplit(on(0), ladder)
    point = bc._matched(
        {
            m: {"coverage": float(np.mean(cov[(m, 0.95)])), "violation_rate": float(np.mean(v))}
            for (m, _), v in viol.items()
        }
    )
    assert point["delta"] == second
    lo, hi = bc._matched_interval(cov, viol, 0.95, n)
    assert lo == pytest.approx((1.0 - first) / 0.5)
    assert hi == pytest.approx((1.0 - third) / 0.5)
    assert lo < point["over_mapie"] < hi


def test_matched_interval_is_none_when_no_resample_matches() -> None:
    n = 20
    ladder = {d: [True] * n for d in bc.MATCH_DELTAS}
    cov, viol = _per_resplit([False] * n, ladder)
    assert bc._matched_interval(cov, viol, 0.95, n) is None


def test_matched_against_another_mapie_delta() -> None:
    ladder = {d: (0.9 - i * 0.05, 0.05 / (i + 1)) for i, d in enumerate(bc.MATCH_DELTAS)}
    row = _row(0.02, ladder)
    row[bc._mapie(0.2)] = {"coverage": 0.6, "violation_rate": 0.05}
    m = bc._matched(row, bc._mapie(0.2))
    # MAPIE at delta 0.2 violates as often as the largest ladder step
    assert m["delta"] == bc.MATCH_DELTAS[0]
    assert m["mapie_violation_rate"] == 0.05
    assert m["over_mapie"] == pytest.approx(0.9 / 0.6)


def test_frontier_matches_every_mapie_delta(capsys: pytest.CaptureFixture[str]) -> None:
    rng = np.random.default_rng(1)
    conf = rng.uniform(0.3, 1.0, 2000)
    correct = rng.uniform(size=2000) < conf
    res = bc.evaluate(conf, correct, resplits=2, ours=CERTIFIED, mapie_methods=("mapie",))
    for row in (res[f"{t:.2f}"] for t in bc.TARGETS):
        assert [p["mapie_delta"] for p in row["frontier"]] == list(bc.MAPIE_DELTAS)
        at_default = next(p for p in row["frontier"] if p["mapie_delta"] == bc.DELTA)
        assert at_default["delta"] == row["matched"]["delta"]
        assert at_default["over_mapie"] == row["matched"]["over_mapie"]
        for p in row["frontier"]:
            name = bc._mapie(p["mapie_delta"])
            assert p["mapie_violation_rate"] == row[name]["violation_rate"]
            assert p["mapie_coverage"] == row[name]["coverage"]
    # the tables print from the results alone (what --show does with a saved --json run)
    saved = json.loads(
        json.dumps(
            {
                "mapie_version": "x",
                "resplits": 2,
                "ours": ["certified"],
                "mapie_methods": ["mapie"],
                "banking77": res,
            }
        )
    )
    saved["clinc150"] = saved["banking77"]
    bc.print_tables(saved)
    out = capsys.readouterr().out
    # per method (fixed, empirical, certified, mapie) and one best-MAPIE line per MAPIE delta
    assert out.count(f"{'banking77':21s} {0.95:6.2f}") == 4 + len(bc.MAPIE_DELTAS)
