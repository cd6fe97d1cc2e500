"""The benchmark runner: discovery, a tiny quick run, the JSON, --compare, the CLI command."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import ModuleType

import pytest
import typer

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks._core import Context, Row  # noqa: E402

from benchmarks import _adapters, _runner  # noqa: E402

TINY = [
    "--quick",
    "--only",
    "rules",
    "--only",
    "langgraph",
    "--set",
    "rules.n=300",
    "--set",
    "langgraph.n=200",
    "--set",
    "langgraph.graph_n=20",
]


def test_every_bench_script_is_discovered_and_has_an_adapter():
    names = _runner.discover()
    assert {"rules", "langgraph", "router", "classifiers", "calibration", "llm"} <= set(names)
    assert {"records", "memory"} <= set(names)
    # a new bench_*.py needs an adapter or its own runner_entry to be run
    without = [n for n in names if n not in _adapters.ADAPTERS]
    assert all(hasattr(_runner._import(n), "runner_entry") for n in without), without


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench") / "run.json"
    code = _runner.main([*TINY, "--json", str(out)])
    return code, json.loads(out.read_text(encoding="utf-8"))


def test_quick_run_writes_rows_metrics_and_raw_results(quick_run):
    code, doc = quick_run
    assert code == 0
    assert doc["schema_version"] == _runner.SCHEMA_VERSION and doc["mode"] == "quick"
    assert doc["argv"].endswith("--json " + doc["argv"].rsplit(" ", 1)[-1])  # how to redo it
    assert "--quick" in doc["argv"].split()
    assert set(doc["benches"]) == {"rules", "langgraph"}
    assert all(b["status"] == "ok" for b in doc["benches"].values())
    m = doc["metrics"]["langgraph.rule_layer_vs_edge"]
    assert m["value"] > 0 and m["baseline"] > 0
    assert m["ratio"] == pytest.approx(m["value"] / m["baseline"])
    assert doc["benches"]["langgraph"]["raw"]["agreement_edge"] == 1.0
    assert doc["host"]["cpus"] and doc["sizes"]["rules"]["n"] == 300


def test_compare_prints_old_new_and_change(quick_run, tmp_path, capsys):
    _, doc = quick_run
    old = json.loads(json.dumps(doc))
    old["metrics"]["rules.decisions_per_s"]["value"] *= 2
    old["metrics"]["gone.metric"] = {"value": 1.0, "ratio": None, "unit": ""}
    rows = {c["key"]: c for c in _runner.compare_rows(old, doc)}
    c = rows["rules.decisions_per_s"]
    assert c["change"] == pytest.approx(-0.5)
    assert rows["gone.metric"]["new"] is None and rows["gone.metric"]["change"] is None
    assert "langgraph.rule_layer_vs_edge (ratio)" in rows
    path = tmp_path / "old.json"
    path.write_text(json.dumps(old), encoding="utf-8")
    capsys.readouterr()
    _runner.print_compare(_runner.compare_rows(old, doc), str(path))
    out = capsys.readouterr().out
    assert "-50.0%" in out and "not run" in out


def test_show_prints_a_saved_run_and_compares_without_running(quick_run, tmp_path, capsys):
    _, doc = quick_run
    new = tmp_path / "new.json"
    new.write_text(json.dumps(doc), encoding="utf-8")
    old_doc = json.loads(json.dumps(doc))
    old_doc["metrics"]["rules.decisions_per_s"]["value"] /= 2
    old = tmp_path / "old.json"
    old.write_text(json.dumps(old_doc), encoding="utf-8")
    capsys.readouterr()
    assert _runner.main(["--show", str(new), "--compare", str(old)]) == 0
    out = capsys.readouterr().out
    assert "saved run of" in out and "+100.0%" in out and "rule layer" in out
    bad = tmp_path / "bad.json"
    bad.write_text("{}", encoding="utf-8")
    with pytest.raises(SystemExit, match="not a results file"):
        _runner.main(["--show", str(bad)])


def test_a_failing_benchmark_becomes_a_row_and_exit_code_1(monkeypatch, tmp_path, capsys):
    def boom(*args):
        raise RuntimeError("deliberate")

    # the rules bench runs through its own runner_entry (an adapter would come after it)
    monkeypatch.setattr(_runner._import("rules"), "runner_entry", boom)
    out = tmp_path / "r.json"
    code = _runner.main(["--quick", "--only", "rules", "--json", str(out)])
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert code == 1
    assert doc["benches"]["rules"]["status"] == "failed"
    assert "deliberate" in doc["benches"]["rules"]["error"]
    assert "FAILED" in capsys.readouterr().out


def test_a_script_without_adapter_is_listed_as_not_run():
    ctx = Context(quick=True, sizes={}, data_dir=None, cache_dir=Path("."))
    res = _runner._generic(ModuleType("bench_new"), ctx, "new")
    assert res.status == "not run" and res.rows[0].status == "not run"

    mod = ModuleType("bench_custom")
    mod.runner_entry = lambda quick, settings: [
        {"key": "custom.x", "measure": "x", "value": 2.0, "baseline": 4.0}
    ]
    res = _runner._generic(mod, ctx, "custom")
    assert res.rows[0].ratio == 0.5 and res.rows[0].bench == "custom"


@pytest.mark.parametrize(
    ("argv", "match"),
    [
        (["--only", "nope"], "unknown benchmark"),
        (["--set", "rules"], "bench.key=value"),
        (["--compare", "/no/such/file.json"], "cannot read"),
    ],
)
def test_usage_errors(argv, match):
    with pytest.raises(SystemExit, match=match):
        _runner.main(["--quick", *argv])


def test_sets_are_typed():
    sizes: dict = {}
    _runner._apply_sets(sizes, ["a.n=3", "a.x=0.5", "a.flag=false", "b.names=x,y"])
    assert sizes == {"a": {"n": 3, "x": 0.5, "flag": False}, "b": {"names": "x,y"}}


@pytest.mark.parametrize(
    ("value", "unit", "text"),
    [(12345.6, "/s", "12,346/s"), (0.1234, "ms", "0.123 ms"), (None, "/s", "—")],
)
def test_formatting(value, unit, text):
    assert _runner.fmt_value(value, unit) == text


def test_row_ratio_is_computed_when_both_sides_are_numbers():
    assert Row("b", "k", "m", 3.0, baseline=1.5).ratio == 2.0
    assert Row("b", "k", "m", 3.0, baseline=0).ratio is None
    assert Row("b", "k", "m", None, baseline=2.0).ratio is None


def test_oracle_coverage_is_at_least_any_threshold_meeting_the_target():
    import numpy as np

    rng = np.random.default_rng(0)
    conf = rng.random(400)
    correct = rng.random(400) < conf
    oracle = _adapters.oracle_coverage(conf, correct, 5, 1, (0.9,))
    assert 0 < oracle["0.90"] < 1


# --------------------------------------------------------------------------- CLI


def _cli_app() -> typer.Typer:
    from hybridroute.cli import _bench

    app = typer.Typer()

    @app.callback()
    def _root() -> None:
        """test app"""

    _bench.register(app)
    return app


def test_cli_bench_runs_the_same_runner(tmp_path):
    out = tmp_path / "cli.json"
    command = typer.main.get_command(_cli_app())
    with pytest.raises(SystemExit) as exc:
        command.main(["bench", *TINY, "--json", str(out)], prog_name="hybridroute")
    assert exc.value.code == 0
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert set(doc["benches"]) == {"rules", "langgraph"}


def test_cli_bench_says_clearly_when_there_is_no_checkout(tmp_path, monkeypatch):
    from hybridroute.cli._bench import find_benchmarks_dir
    from hybridroute.exceptions import UserInputError

    with pytest.raises(UserInputError, match=r"no _runner\.py there"):
        find_benchmarks_dir(tmp_path)
    monkeypatch.setenv("HYBRIDROUTE_BENCHMARKS_DIR", str(tmp_path))
    with pytest.raises(UserInputError, match="HYBRIDROUTE_BENCHMARKS_DIR"):
        find_benchmarks_dir()
    monkeypatch.delenv("HYBRIDROUTE_BENCHMARKS_DIR")
    assert find_benchmarks_dir() == ROOT / "benchmarks"


def test_matched_row_notes_the_ratio_range_over_mapies_delta_ladder():
    row = {
        "frontier": [
            {"mapie_delta": 0.2, "over_mapie": 1.02},
            {"mapie_delta": 0.05, "over_mapie": 0.97},
            {"mapie_delta": 0.01, "over_mapie": None},  # nothing matched there
        ]
    }
    assert (
        _adapters._frontier(row) == "; matched against MAPIE at delta 0.2, 0.05: ratio 0.970-1.020"
    )
    assert _adapters._frontier({"frontier": []}) == ""
