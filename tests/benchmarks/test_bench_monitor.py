"""bench_monitor: simulated deployments, the three monitors, the tables, the runner rows."""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks import _monitor_streams as ms  # noqa: E402
from benchmarks import bench_monitor as bm  # noqa: E402
from hybridroute.monitoring import PrecisionMonitor, repeated_clopper_pearson  # noqa: E402

TARGET, DELTA = 0.9, 0.05


def _bits(p: float, n: int, seed: int) -> np.ndarray:
    return (np.random.default_rng(seed).random(n) < p).astype(float)


def _drop(p0: float, p1: float, n0: int, n1: int, seed: int) -> np.ndarray:
    return np.concatenate([_bits(p0, n0, seed), _bits(p1, n1, seed + 1)])


@pytest.fixture(scope="module")
def small_run() -> dict:
    rows = {"synthetic": ms.synthetic_rows(n=3000, seed=1)}
    return bm.run(
        ("synthetic",),
        streams=3,
        rates=(0.05, 0.2),
        target=TARGET,
        change=2_000,
        horizon=8_000,
        rows=rows,
        mapie_checks=1,
        mapie_cap=300,
    )


def test_a_small_run_has_every_setting_rate_and_monitor(small_run):
    s = small_run["sets"]["synthetic"]
    assert not s["skipped"]
    assert set(s["cells"]) == {f"{k}@{r:g}" for k in ms.SETTINGS for r in (0.05, 0.2)}
    monitors = set(bm._monitors())
    for c in s["cells"].values():
        assert set(c["monitors"]) == monitors
        if c["setting"] in bm.STABLE:
            assert c["precision_before"] >= TARGET  # a stable stream keeps the target
            for m in c["monitors"].values():
                assert 0 <= m["false_alarm_rate"] <= m["false_alarm_upper95"] <= 1
        else:
            assert c["precision_after"] < c["precision_before"]
            assert 0 < c["labels_before_mean"] < c["labels_mean"]
            for m in c["monitors"].values():
                assert m["detected_share"] is None or 0 <= m["detected_share"] <= 1
    # the fast MAPIE path agreed with RiskMonitoring.update on every checked stream
    assert small_run["mapie_checks"]["checked"] > 0
    assert small_run["mapie_checks"]["agreed"] == small_run["mapie_checks"]["checked"]
    # a certified threshold's stream is certified by our monitor at 20% audits
    assert s["cells"]["stable@0.2"]["monitors"]["ours"]["certified_share"] > 0
    assert s["matched"]["0.2"] in (None, *bm.MAPIE_LEVELS)


def test_the_tables_print_from_the_saved_json(small_run, tmp_path, capsys):
    path = tmp_path / "run.json"
    path.write_text(json.dumps(small_run), encoding="utf-8")
    assert bm.main(["--show", str(path)]) == 0
    out = capsys.readouterr().out
    assert "false-alarm rate" in out and "median detection delay" in out
    assert out.count("synthetic  label_mix") == 4  # two rates, labels and decisions tables
    assert "goals:" in out and "RiskMonitoring.update" in out


def test_the_goals_count_met_failed_and_undecided():
    assert bm._met(80.0, 100.0) is True
    assert bm._met(90.0, 100.0) is False
    assert bm._met(500.0, None) is True  # MAPIE found under half within the horizon
    assert bm._met(None, 100.0) is False
    assert bm._met(None, None) is None
    assert bm._ratio(50.0, 100.0) == 0.5 and bm._ratio(None, 100.0) is None


@pytest.mark.parametrize(
    ("p0", "p1", "level"), [(0.95, 0.7, 0.05), (0.95, 0.85, 0.2), (0.97, 0.9, 0.5)]
)
def test_the_fast_mapie_path_is_risk_monitoring(p0, p1, level):
    from mapie.exchangeability_testing import RiskMonitoring

    x = _drop(p0, p1, 200, 400, seed=int(p1 * 100))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mon = RiskMonitoring("precision", test_level=level, threshold=1 - TARGET, warn=False)
        mon.update(x.astype(int), np.ones(len(x), dtype=int))
    # the whole lower-bound sequence at once is what reading after every label gives
    flagged = np.flatnonzero(mon.online_risk_lower_bound_sequence_history > 1 - TARGET)
    expected = int(flagged[0]) + 1 if flagged.size else None
    assert ms.mapie_breach(x, TARGET, level) == expected
    assert ms.mapie_check(x, TARGET, level)


def test_the_mapie_check_catches_a_wrong_answer(monkeypatch):
    x = _drop(0.95, 0.6, 100, 200, seed=3)
    found = ms.mapie_breach(x, TARGET, 0.05)
    assert found is not None
    monkeypatch.setattr(ms, "mapie_breach", lambda x, t, lv: found + 5)
    assert not ms.mapie_check(x, TARGET, 0.05)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_naive_first_is_repeated_clopper_pearson_one_sided(seed):
    x = _drop(0.93, 0.8, 300, 600, seed)
    lower, upper = repeated_clopper_pearson(x, 2 * DELTA)
    b, c = np.flatnonzero(upper < TARGET), np.flatnonzero(lower > TARGET)
    expected = (int(b[0]) + 1 if b.size else None, int(c[0]) + 1 if c.size else None)
    assert ms.naive_first(x, TARGET, DELTA, chunk=64) == expected


@pytest.mark.parametrize("seed", [4, 5])
def test_ours_is_what_the_precision_monitor_reports(seed):
    x = _drop(0.98, 0.75, 800, 400, seed)
    breach = ms.ours_breach(x, TARGET, DELTA)
    cert = ms.ours_certify(x, TARGET, DELTA, chunk=100)
    assert cert is not None and breach is not None and cert < 800 < breach
    assert PrecisionMonitor(TARGET, DELTA).update_many(x).breach_labels_ == breach
    assert PrecisionMonitor(TARGET, DELTA).update_many(x[:cert]).status == "certified_online"
    assert PrecisionMonitor(TARGET, DELTA).update_many(x[: cert - 1]).status != ("certified_online")


def test_a_stream_audits_at_the_rate_and_cuts_at_the_change():
    setting = ms.Setting("s", ms.Pool(np.ones(10, bool)), ms.Pool(np.zeros(10, bool)), "x")
    st = ms.make_stream(setting, 0.1, 2_000, 10_000, np.random.default_rng(0))
    assert np.all(np.diff(st.decision) > 0) and st.decision[-1] <= 10_000
    assert len(st.labels) == pytest.approx(1_000, rel=0.15)
    assert st.before == int(np.sum(st.decision <= 2_000))
    assert np.all(st.labels[: st.before] == 1) and np.all(st.labels[st.before :] == 0)
    again = ms.make_stream(setting, 0.1, 2_000, 10_000, np.random.default_rng(0))
    assert np.array_equal(st.decision, again.decision)  # seeded


def test_weighted_pools_draw_in_proportion():
    pool = ms.Pool(np.array([True, False]), np.array([0.8, 0.2]))
    assert pool.precision == pytest.approx(0.8)
    assert pool.draw(np.random.default_rng(1), 20_000).mean() == pytest.approx(0.8, abs=0.02)


def test_settings_without_out_of_scope_texts_say_why():
    rows = ms.synthetic_rows(n=3000, seed=1)
    none = ms.ScoredRows(
        **{
            **rows.__dict__,
            "truth": np.where(rows.truth < 0, 0, rows.truth),
            "extra_conf": np.zeros(0),
            "extra_top1": np.zeros(0, int),
            "extra_top2": np.zeros(0, int),
        }
    )
    settings, info = ms.settings_for(none, TARGET, DELTA, seed=0)
    assert settings["oos_surge"] == "no out-of-scope texts"
    assert isinstance(settings["stable"], ms.Setting)
    assert info["pool_precision"] >= TARGET


def test_scored_rows_round_trip_through_the_cache(tmp_path):
    rows = ms.synthetic_rows(n=500, seed=3)
    rows.save(tmp_path / "synthetic_monitor_rows.npz")
    back = ms.scored_rows("synthetic", None, tmp_path)
    assert back.classes == rows.classes and back.oos_class == rows.oos_class
    assert np.array_equal(back.conf, rows.conf) and np.array_equal(back.correct, rows.correct)
    with pytest.raises(FileNotFoundError, match="HYBRIDROUTE_DATA_DIR"):
        ms.scored_rows("banking77", None, tmp_path)
    with pytest.raises(ValueError, match="unknown set"):
        ms.scored_rows("nope", None, None)


def test_the_window_study_runs_on_a_tiny_grid(monkeypatch, capsys):
    monkeypatch.setattr(ms, "WINDOW_CASES", ((0.9, 0.95, 0.6),))
    res = ms.window_study(windows=(50, 200), streams=3, before=(50,), after=400, null_labels=200)
    assert set(res["worst_regret"]) == {50, 200} and min(res["worst_regret"].values()) == 1.0
    ms.print_window_study(res)
    assert "worst regret" in capsys.readouterr().out


def test_usage_errors():
    with pytest.raises(ValueError, match="change < horizon"):
        bm.run(
            ("synthetic",), 1, rows={"synthetic": ms.synthetic_rows(n=300)}, change=10, horizon=5
        )
    with pytest.raises(SystemExit):
        bm.main(["--rates", "0.5,2"])


def test_the_runner_lists_it_and_its_quick_rows_are_rows(monkeypatch):
    from benchmarks._core import Row

    from benchmarks import _runner

    assert "monitor" in _runner.discover()
    # the quick path with the support-ticket scores replaced by synthetic ones (fast)
    monkeypatch.setattr(
        ms, "scored_rows", lambda name, data_dir, cache=None: ms.synthetic_rows(n=1500, seed=4)
    )
    rows = bm.runner_entry(
        True, {"streams": 1, "horizon": 8_000, "change": 2_000, "mapie_checks": 0}
    )
    assert rows and {r["key"].split(".")[1] for r in rows} == {"support-tickets"}
    for r in rows:
        Row(**r)  # every dict is a valid table row


@pytest.mark.slow
def test_the_public_sets_end_to_end(tmp_path):
    """Banking77 through the real classifier (about a minute): CI has the public sets."""
    data_dir = bm._data_dir()
    assert data_dir is not None, "public sets not found: set HYBRIDROUTE_DATA_DIR"
    res = bm.run(("banking77",), 2, (0.2,), data_dir=data_dir, cache=tmp_path, horizon=60_000)
    s = res["sets"]["banking77"]
    assert s["info"]["pool_precision"] >= bm.TARGET
    assert s["cells"]["oos_surge@0.2"]["precision_after"] < bm.TARGET
    assert res["mapie_checks"]["agreed"] == res["mapie_checks"]["checked"]
