"""bench_calibration, round two: MAPIE's other methods, the best-MAPIE match, sizes, tables."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT / "benchmarks") not in sys.path:
    sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_calibration as bc  # noqa: E402

#: a small, quick configuration: two of ours, the cheap MAPIE methods
OURS = {k: bc.OURS[k] for k in ("certified", "fallback")}
CHEAP = ("mapie", "mapie-fs1", "mapie-fs3")


def _scores(n: int = 1500, seed: int = 0):
    rng = np.random.default_rng(seed)
    conf = rng.uniform(0.3, 1.0, n)
    return conf, rng.uniform(size=n) < conf  # calibrated by construction


@pytest.mark.parametrize(
    ("method", "expected"),
    [
        ("mapie", "bonferroni_holm"),
        ("mapie-fs1", "fixed_sequence"),
        ("mapie-sfs", "split_fixed_sequence"),
    ],
)
def test_each_mapie_method_is_the_fwer_method_it_names(method, expected) -> None:
    assert bc._fwer(method) == expected


@pytest.mark.parametrize("starts", [3, 10])
def test_multi_start_fixed_sequence_is_mapies_own_procedure(starts) -> None:
    from mapie.risk_control import FWERFixedSequenceTesting

    fwer = bc._fwer(f"mapie-fs{starts}")
    assert isinstance(fwer, FWERFixedSequenceTesting) and fwer.n_starts == starts


def test_unknown_mapie_method() -> None:
    with pytest.raises(ValueError, match="unknown MAPIE method"):
        bc._fwer("mapie-bonferroni")


@pytest.mark.parametrize("target", [0.9, 0.95])
def test_the_split_method_reuses_its_learned_order_as_a_fresh_learn_would(target) -> None:
    """mapie_thresholds learns the split order once and shares it across deltas."""
    conf, correct = _scores(900, 3)
    shared = bc.mapie_thresholds(
        conf, correct, target, methods=["mapie-sfs"], deltas=[0.2, 0.05], seed=7
    )
    learn, cal = bc.sfs_split(len(conf), 7)
    assert len(learn) == round(bc.SFS_LEARN_FRACTION * len(conf))
    for d in (0.2, 0.05):
        ctrl = bc._controller(target, d, "mapie-sfs")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            ctrl.learn_fixed_sequence_order(conf[learn], correct[learn].astype(int))
            ctrl.calibrate(conf[cal], correct[cal].astype(int))
        assert shared[bc._mapie(d, "mapie-sfs")] == bc._best_param(ctrl)


def test_synthetic_sets_are_fixed_and_the_stress_one_has_its_cluster() -> None:
    a, b = bc.synthetic("stress"), bc.synthetic("stress")
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
    s, c = a
    top = s >= 0.999
    assert len(s) == bc.SYNTHETIC_ROWS and top.mean() >= 0.01
    # the cluster's mistakes: the very top is less precise than the rows just below it
    assert (~c[top]).sum() >= 5
    assert c[top].mean() < 0.95 < c[(s >= 0.98) & ~top].mean()
    s2, c2 = bc.synthetic("calibrated")
    assert c2[s2 >= 0.999].mean() > 0.95
    with pytest.raises(ValueError, match="synthetic kind"):
        bc.synthetic("other")
    assert np.array_equal(bc.scores("synthetic-stress", None)[0], s)


def _row(ours_cov: dict[str, list[tuple[float, float]]], mapie: dict[str, tuple[float, float]]):
    """A results row: each of ours over the ladder, each MAPIE method at every MAPIE delta."""
    row = {}
    for o, ladder in ours_cov.items():
        for d, (cov, viol) in zip(bc.MATCH_DELTAS, ladder, strict=True):
            row[bc._ladder(d, o)] = {"coverage": cov, "violation_rate": viol}
    for m, (cov, viol) in mapie.items():
        for d in bc.MAPIE_DELTAS:
            row[bc._mapie(d, m)] = {"coverage": cov, "violation_rate": viol}
    return row


def _per_resplit(row: dict, resplits: int = 20):
    """Per-resplit flags giving exactly the row's means (violations first, coverage constant)."""
    cov, viol = {}, {}
    for name, r in row.items():
        k = round(r["violation_rate"] * resplits)
        cov[(name, 0.95)] = [r["coverage"]] * resplits
        viol[(name, 0.95)] = [i < k for i in range(resplits)]
    return cov, viol


def test_the_best_mapie_method_is_the_one_giving_the_lowest_ratio() -> None:
    n = len(bc.MATCH_DELTAS)
    # ours: coverage falls and violations fall along the ladder
    ladder = [(0.9 - 0.02 * i, max(0.0, 0.1 - 0.01 * i)) for i in range(n)]
    row = _row(
        {"certified": ladder},
        {
            "mapie": (0.5, 0.05),  # matched at ladder step 5: 0.8 / 0.5
            "mapie-fs1": (0.85, 0.1),  # matched at step 0: 0.9 / 0.85 -- the toughest
            "mapie-fs3": (0.0, 0.0),  # routes nothing: never "best"
        },
    )
    cov, viol = _per_resplit(row)
    best = bc.best_mapie(
        row, cov, viol, 0.95, 20, ["certified"], ["mapie", "mapie-fs1", "mapie-fs3"]
    )
    assert [p["mapie_delta"] for p in best] == list(bc.MAPIE_DELTAS)
    for p in best:
        m = p["ours"]["certified"]
        assert m["mapie_method"] == "mapie-fs1"
        assert m["over_mapie"] == pytest.approx(0.9 / 0.85)
        assert p["by_method"]["mapie"]["over"]["certified"] == pytest.approx(0.8 / 0.5)
        assert p["by_method"]["mapie-fs3"]["over"]["certified"] is None


def test_a_method_we_cannot_match_is_listed_beside_the_best_one() -> None:
    n = len(bc.MATCH_DELTAS)
    row = _row({"certified": [(0.9, 0.05)] * n}, {"mapie": (0.5, 0.0), "mapie-fs1": (0.85, 0.1)})
    cov, viol = _per_resplit(row)
    best = bc.best_mapie(row, cov, viol, 0.95, 20, ["certified"], ["mapie", "mapie-fs1"])
    m = best[0]["ours"]["certified"]
    assert m["mapie_method"] == "mapie-fs1" and m["over_mapie"] == pytest.approx(0.9 / 0.85)
    assert m["unmatched"] == ["mapie"]


def test_when_every_method_is_unmatched_the_point_has_no_ratio(capsys) -> None:
    n = len(bc.MATCH_DELTAS)
    row = _row({"certified": [(0.9, 0.05)] * n}, {"mapie": (0.5, 0.0)})
    cov, viol = _per_resplit(row)
    best = bc.best_mapie(row, cov, viol, 0.95, 20, ["certified"], ["mapie"])
    m = best[0]["ours"]["certified"]
    assert m["mapie_method"] == "mapie" and m["over_mapie"] is None and m["delta"] is None
    assert m["unmatched"] == ["mapie"]
    assert bc._worst({"best": best}, "certified") == "unmatched"


def test_when_no_mapie_method_routes_anything() -> None:
    n = len(bc.MATCH_DELTAS)
    row = _row({"certified": [(0.9, 0.0)] * n}, {"mapie": (0.0, 0.0)})
    cov, viol = _per_resplit(row)
    best = bc.best_mapie(row, cov, viol, 0.95, 20, ["certified"], ["mapie"])
    assert best[0]["ours"]["certified"]["mapie_method"] is None


def test_matched_interval_against_a_named_method_and_fitter() -> None:
    n = len(bc.MATCH_DELTAS)
    row = _row({"fallback": [(0.8, 0.0)] * n}, {"mapie-fs1": (0.4, 0.0)})
    cov, viol = _per_resplit(row)
    lo, hi = bc._matched_interval(cov, viol, 0.95, 20, bc._mapie(0.05, "mapie-fs1"), "fallback")
    assert lo == pytest.approx(2.0) and hi == pytest.approx(2.0)


@pytest.fixture(scope="module")
def small_run():
    conf, correct = _scores()
    res = bc.evaluate(conf, correct, 2, ours=OURS, mapie_methods=CHEAP)
    sized = bc.evaluate(conf, correct, 2, n_cal=250, ours=OURS, mapie_methods=CHEAP)
    return conf, res, sized


def test_evaluate_fills_every_method_and_the_best_match(small_run) -> None:
    conf, res, _ = small_run
    assert res["rows"] == len(conf) and res["calibration_size"] == len(conf) // 2
    for t in bc.TARGETS:
        row = res[f"{t:.2f}"]
        for name in bc.method_names(tuple(OURS), CHEAP):
            assert 0.0 <= row[name]["coverage"] <= 1.0
            assert 0.0 <= row[name]["population_violation_rate"] <= 1.0
        assert [p["mapie_delta"] for p in row["best"]] == list(bc.MAPIE_DELTAS)
        for p in row["best"]:
            assert set(p["ours"]) == set(OURS) and set(p["by_method"]) == set(CHEAP)
        # the runner's keys are still there
        assert row["matched"]["mapie_delta"] == bc.DELTA and len(row["frontier"]) == 5


def test_fallback_never_covers_less_than_certified_in_the_run(small_run) -> None:
    _, res, sized = small_run
    for run in (res, sized):
        for t in bc.TARGETS:
            row = run[f"{t:.2f}"]
            for d in bc.MATCH_DELTAS:
                a = row[bc._ladder(d, "fallback")]["coverage"]
                assert a >= row[bc._ladder(d, "certified")]["coverage"] - 1e-12


def test_sizes_use_the_calibration_size_asked_for(small_run) -> None:
    conf, _, sized = small_run
    assert sized["calibration_size"] == 250
    with pytest.raises(ValueError, match="n_cal"):
        bc.evaluate(conf, conf > 0.5, 1, n_cal=len(conf), ours=OURS, mapie_methods=())


def test_split_method_has_no_population_figure() -> None:
    conf, correct = _scores(600, 4)
    res = bc.evaluate(conf, correct, 1, ours={}, mapie_methods=("mapie-sfs",))
    row = res["0.90"]
    assert row["mapie-sfs"]["population_violation_rate"] is None
    assert "matched" not in row  # no 'certified' in this run: the runner's match is absent


def _saved(small_run) -> dict:
    _, res, sized = small_run
    doc = {
        "mapie_version": "x",
        "resplits": 2,
        "ours": list(OURS),
        "mapie_methods": list(CHEAP),
        "banking77": res,
        "synthetic-stress": res,
        "sizes": {"resplits": 2, "banking77": {"250": sized}},
    }
    return json.loads(json.dumps(doc))


def test_show_prints_every_table_from_the_saved_results(small_run, capsys) -> None:
    bc.print_tables(_saved(small_run))
    out = capsys.readouterr().out
    assert "per method at delta 0.05" in out and "best MAPIE method" in out
    assert "calibration sizes" in out
    # per method: 2 baselines + ours + MAPIE methods; best: one line per MAPIE delta and fitter
    per_method = 2 + len(OURS) + len(CHEAP)
    prefix = f"{'banking77':21s} {0.95:6.2f}"
    assert out.count(prefix) == per_method + 5 * len(OURS)


def test_readme_tables_are_markdown_from_the_saved_results(small_run) -> None:
    text = bc.readme_tables(_saved(small_run))
    lines = text.splitlines()
    tables = [ln for ln in lines if ln.startswith("|---")]
    assert len(tables) == 3  # per method, matched ratios, sizes
    assert any(ln.startswith("| Banking77, 0.95 |") for ln in lines)
    assert any(ln.startswith("| stress (synthetic), 0.90 |") for ln in lines)
    assert any(ln.startswith("| Banking77, 250, 0.98 |") for ln in lines)
    for i, ln in enumerate(lines):
        if ln.startswith("|---"):  # a separator has as many columns as its header
            assert ln.count("|") == lines[i - 1].count("|")


def test_the_committed_run_shows_and_covers_the_issue() -> None:
    """The README's tables come from this file: ``--show`` and ``--readme`` read it."""
    doc = json.loads(bc.COMMITTED.read_text())
    assert doc["mapie_methods"] == list(bc.MAPIE_METHODS)
    for name in (*bc.PUBLIC_SETS, "synthetic-stress"):
        for t in bc.TARGETS:
            assert len(doc[name][f"{t:.2f}"]["best"]) == len(bc.MAPIE_DELTAS)
    assert set(doc["sizes"]) >= {"resplits", *bc.PUBLIC_SETS}
    for name in bc.PUBLIC_SETS:
        assert sorted(map(int, doc["sizes"][name])) == list(bc.SIZES)
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "bench_calibration.py"), "--show"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    assert "best MAPIE method" in out and "calibration sizes" in out
