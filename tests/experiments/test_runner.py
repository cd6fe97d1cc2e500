"""Running specs: the returned / printed table equals what the MLflow runs hold, and is reproducible."""

from __future__ import annotations

import csv
import io
import json
import warnings
from pathlib import Path

import pytest
import typer

from hybridroute.exceptions import DatasetError, SpecError, UserInputError
from hybridroute.experiments import load_spec, parse_spec, run_experiment

from .conftest import SHIPPED

# Small classifier settings (fewer n-grams, a loose solver tolerance) keep each run here
# to about a second.
FAST_CLASSIFIER = (
    "{params: {Cs: [3.0], word_ngram_range: [1, 1], char_ngram_range: [3, 3], tol: 0.001}}"
)


def thresholds_spec(data: Path, **extra: str) -> str:
    lines = {
        "kind": "thresholds",
        "name": "thresholds-synthetic",
        "description": "fixed vs empirical vs certified on synthetic rows",
        "seed": "3",
        "mlflow_experiment": "t-experiments",
        "dataset": f"{{name: 'csv:{data}', options: {{oos_label: oos}}, splits: {{train: train, pool: [validation, test]}}}}",
        "classifier": FAST_CLASSIFIER,
        "methods": "[{method: fixed, threshold: 0.8}, {method: fixed, threshold: 0.8, score: raw}, empirical, certified]",
        "targets": "[0.8, 0.9]",
        "delta": "0.1",
        "resplits": "50",
        **extra,
    }
    return "".join(f"{k}: {v}\n" for k, v in lines.items() if v is not None)


def oos_spec(data: Path, **extra: str) -> str:
    lines = {
        "kind": "oos",
        "name": "oos-synthetic",
        "seed": "1",
        "mlflow_experiment": "t-experiments",
        "dataset": f"{{name: 'csv:{data}', options: {{oos_label: oos}}}}",
        "classifier": FAST_CLASSIFIER,
        "scores": "[one_minus_confidence, one_minus_raw_confidence, entropy]",
        "targets": "[0.7, 0.9]",
        "delta": "0.1",
        "resplits": "6",
        **extra,
    }
    return "".join(f"{k}: {v}\n" for k, v in lines.items() if v is not None)


ROUTER_SPEC = f"""
kind: router
name: router-support-small
seed: 0
mlflow_experiment: t-experiments
dataset: support-tickets
classifier: {FAST_CLASSIFIER}
rules: example:support_rules.yaml
router: {{name: support, version: "9"}}
policies:
  - {{label: certified 0.85, objective: precision, target: 0.85, delta: 0.1}}
  - {{label: empirical 0.9, objective: empirical, target: 0.9}}
n_boot: 50
"""


SYNTHETIC_RULES = """
format: 1
name: synthetic-rules
version: "1"
facts:
  has_permission: {type: bool, default: true}
destinations: [refund, shipping, password, invoice]
rules:
  - {id: permission, guard: permission}
default: {destination: human_review, reason: default_exit}
"""


def synthetic_router_spec(data: Path, **extra: str) -> str:
    lines = {
        "kind": "router",
        "name": "router-synthetic",
        "dataset": f"{{name: 'csv:{data}', options: {{oos_label: oos}}, "
        "splits: {train: train, calibration: validation, test: test}}",
        "classifier": FAST_CLASSIFIER,
        "rules": "rules/synthetic.yaml",
        "policies": "[{objective: precision, target: 0.8, delta: 0.1}, {objective: coverage, target: 0.5}]",
        "n_boot": "50",
        **extra,
    }
    return "".join(f"{k}: {v}\n" for k, v in lines.items() if v is not None)


@pytest.fixture()
def synthetic_router(synthetic_csv, tmp_path):
    """A router spec file over the synthetic rows, its rules file beside it (relative path)."""
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / "synthetic.yaml").write_text(SYNTHETIC_RULES, encoding="utf-8")
    path = tmp_path / "router.yaml"
    path.write_text(synthetic_router_spec(synthetic_csv), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def router_result(mlflow_server):
    return run_experiment(parse_spec(ROUTER_SPEC), tracking_uri=mlflow_server)


def assert_table_matches_mlflow(result, server: str) -> None:
    """Every row's numbers are its nested run's metrics; the parent holds the same table."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(server)
    assert result.parent_run_id is not None and None not in result.run_ids
    parent = client.get_run(result.parent_run_id)
    assert parent.info.status == "FINISHED"
    assert parent.data.tags["hybridroute.experiment_kind"] == result.spec.kind
    assert parent.data.tags["hybridroute.spec_sha256"] == result.spec.sha256
    # the labelled rows each role took are the parent run's dataset inputs, by fingerprint
    inputs = {d.dataset.name: d for d in parent.inputs.dataset_inputs}
    assert result.datasets and len(inputs) == len(result.datasets)
    for context, part, split in result.datasets:
        entry = inputs[f"{part.name}/{split}"]
        assert part.fingerprint.startswith(entry.dataset.digest)
        assert {t.key: t.value for t in entry.tags}["mlflow.data.context"] == context
    nested = client.search_runs(
        [parent.info.experiment_id],
        filter_string=f"tags.mlflow.parentRunId = '{result.parent_run_id}'",
    )
    assert {r.info.run_id for r in nested} == set(result.run_ids)
    assert len(result.run_ids) == len(result.rows) == len(result.labels)
    metric_cols = [c for c in result.columns if c.role == "metric" and c.in_rows]
    config_cols = [c for c in result.columns if c.role == "config"]
    for i, row in enumerate(result.rows):
        run = client.get_run(result.run_ids[i])
        assert run.info.run_name == result.labels[i]
        expected = {c.key: float(row[c.key]) for c in metric_cols if row[c.key] is not None}
        assert run.data.metrics == expected  # exact: the logged metrics are the table's numbers
        assert run.data.params == {c.key: str(row[c.key]) for c in config_cols}
    # the table artifacts of the parent run
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        doc = json.loads(
            Path(client.download_artifacts(result.parent_run_id, "results/table.json")).read_text()
        )
        text = Path(
            client.download_artifacts(result.parent_run_id, "results/table.csv")
        ).read_text()
    assert doc["rows"] == result.rows
    assert doc["notes"] == result.notes
    assert text == result.to_csv()
    keys = [c.key for c in result.columns if c.in_rows]
    assert next(iter(csv.reader(io.StringIO(text)))) == keys


def test_thresholds_table_matches_its_mlflow_runs(mlflow_server, synthetic_csv, tmp_path):
    spec_path = tmp_path / "thresholds.yaml"
    spec_path.write_text(thresholds_spec(synthetic_csv), encoding="utf-8")
    result = run_experiment(spec_path, tracking_uri=mlflow_server, resplits=8)
    assert result.spec.settings["resplits"] == 8
    assert [r["method"] for r in result.rows] == ["fixed 0.8"] * 2 + ["fixed 0.8 (raw)"] * 2 + [
        "empirical"
    ] * 2 + ["certified"] * 2
    assert [r["target"] for r in result.rows] == [0.8, 0.9] * 4
    for row in result.rows:
        assert 0.0 <= row["coverage"] <= 1.0 and 0.0 <= row["violation_rate"] <= 1.0
        assert row["oracle_coverage"] >= 0.0
        assert (row["certified_rate"] is None) == (row["method"] != "certified")
    fixed = [r for r in result.rows if r["method"] == "fixed 0.8"]
    assert fixed[0]["coverage"] == fixed[1]["coverage"]  # a fixed threshold ignores the target
    assert_table_matches_mlflow(result, mlflow_server)

    from mlflow.tracking import MlflowClient

    client = MlflowClient(mlflow_server)
    parent = client.get_run(result.parent_run_id)
    assert parent.data.params["resplits"] == "8"
    assert parent.data.tags["hybridroute.resplits_override"] == "8"
    assert parent.data.metrics["n_train"] == 240
    assert {a.path for a in client.list_artifacts(result.parent_run_id, "spec")} == {
        "spec/spec.json",
        "spec/thresholds.yaml",
    }
    detail = client.list_artifacts(result.run_ids[-1])
    assert "detail.json" in {a.path for a in detail}


def test_oos_table_matches_its_mlflow_runs(mlflow_server, synthetic_csv):
    result = run_experiment(parse_spec(oos_spec(synthetic_csv)), tracking_uri=mlflow_server)
    assert [(r["score"], r["target"]) for r in result.rows] == [
        (s, t)
        for s in ("one_minus_confidence", "one_minus_raw_confidence", "entropy")
        for t in (0.7, 0.9)
    ]
    for row in result.rows:
        assert 0.0 <= row["oos_recall"] <= 1.0 and 0.0 <= row["false_alarm_rate"] <= 1.0
        assert row["auroc"] > 0.5
    # the out-of-scope share differs between validation (10%) and test (20%): the caution is in the output
    assert any("Caution" in n and "out-of-scope share" in n for n in result.notes)
    assert any("validation 11.1%" in n for n in result.notes)
    assert_table_matches_mlflow(result, mlflow_server)


def test_router_table_matches_its_mlflow_runs(mlflow_server, router_result):
    result = router_result
    assert [r["policy"] for r in result.rows] == ["certified 0.85", "empirical 0.9"]
    for row in result.rows:
        stages = sum(row[f"stage_{s}"] for s in ("rule", "model", "policy", "fallback"))
        assert stages == result.summary["n_test"]
        assert row["accuracy_ci_low"] <= row["accuracy"] <= row["accuracy_ci_high"]
        assert row["next_step_ci_low"] <= row["next_step_accuracy"] <= row["next_step_ci_high"]
    assert result.rows[0]["certified"] is True
    assert_table_matches_mlflow(result, mlflow_server)

    from mlflow.tracking import MlflowClient

    client = MlflowClient(mlflow_server)
    arts = {a.path for a in client.list_artifacts(result.run_ids[0], "policy")}
    assert arts == {"policy/policy.json"}


def test_same_spec_and_seed_give_identical_tables(synthetic_csv, synthetic_router):
    spec = parse_spec(thresholds_spec(synthetic_csv))
    a = run_experiment(spec, track=False, resplits=5)
    b = run_experiment(spec, track=False, resplits=5)
    assert a.rows == b.rows and a.details == b.details
    assert a.to_csv() == b.to_csv()
    assert a.parent_run_id is None and a.run_ids == []
    # resplit r is the same whatever the number of resplits
    c = run_experiment(spec, track=False, resplits=3)
    assert c.details[0]["coverage"] == a.details[0]["coverage"][:3]
    # another seed, other resplits
    d = run_experiment(
        parse_spec(thresholds_spec(synthetic_csv, seed="4")), track=False, resplits=5
    )
    assert d.details[0]["resplit_seeds"] != a.details[0]["resplit_seeds"]
    # the router: the same twice over (classifier, policies, bootstrap intervals)
    r1 = run_experiment(synthetic_router, track=False)
    r2 = run_experiment(synthetic_router, track=False)
    assert r1.rows == r2.rows and [r["policy"] for r in r1.rows] == [
        "precision 0.8",
        "coverage 0.5",
    ]
    assert r1.rows[0]["next_step_accuracy"] is None  # the synthetic rows have no gold next steps
    assert r1.row_artifacts[0]["policy/policy.json"] == r2.row_artifacts[0]["policy/policy.json"]


def test_an_unreachable_tracking_server_warns_once_and_keeps_the_table(synthetic_csv, tmp_path):
    spec = parse_spec(oos_spec(synthetic_csv, resplits="2"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = run_experiment(spec, tracking_uri="http://127.0.0.1:9", out_dir=tmp_path / "out")
    assert len([w for w in caught if "MLflow tracking" in str(w.message)]) == 1
    assert result.tracking_warning and result.parent_run_id is None
    assert result.run_ids == [None] * len(result.rows)
    assert json.loads((tmp_path / "out" / "table.json").read_text())["rows"] == result.rows
    assert (tmp_path / "out" / "table.csv").read_text() == result.to_csv()


@pytest.mark.parametrize(
    ("make", "field", "message"),
    [
        (
            lambda d: thresholds_spec(d, dataset=f"{{name: 'csv:{d}', splits: {{pool: holdout}}}}"),
            "dataset.splits.pool",
            "no split 'holdout'",
        ),
        (
            lambda d: thresholds_spec(d, dataset=f"{{name: 'csv:{d}', options: {{colour: red}}}}"),
            "dataset.options",
            "does not take colour",
        ),
        (
            lambda d: thresholds_spec(d, classifier="{params: {char_ngram_range: [4, 5]}}"),
            "classifier.params",
            "char_ngram_range",
        ),
        (
            # the file's `oos` rows would be out of scope by convention; null turns that off
            lambda d: oos_spec(d, dataset=f"{{name: 'csv:{d}', options: {{oos_label: null}}}}"),
            "oos_label",
            "no out-of-scope label",
        ),
        (
            lambda d: ROUTER_SPEC.replace("example:support_rules.yaml", "example:nope.yaml"),
            "rules",
            "no bundled example",
        ),
        (
            lambda d: synthetic_router_spec(d, rules="/no/such/rules.yaml"),
            None,
            "cannot read|not found",
        ),
        (
            lambda d: synthetic_router_spec(d, rules="example:support_rules.yaml"),
            None,
            "not a declared destination",
        ),
        (
            lambda d: synthetic_router_spec(d, policies="[{}, {objective: cost, per_class: true}]"),
            "policies[1]",
            "per_class",
        ),
    ],
)
def test_spec_values_the_data_refuses_name_the_field(synthetic_csv, tmp_path, make, field, message):
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / "synthetic.yaml").write_text(SYNTHETIC_RULES, encoding="utf-8")
    with pytest.raises(UserInputError, match=message) as info:
        run_experiment(parse_spec(make(synthetic_csv), path=str(tmp_path / "x.yaml")), track=False)
    if field is not None:  # a SpecError naming the field; else the rules file's own error
        assert isinstance(info.value, SpecError) and info.value.field == field


@pytest.mark.parametrize("value", [0, -3, True])
def test_resplits_override_is_checked(synthetic_csv, value):
    with pytest.raises(SpecError, match="positive integer") as info:
        run_experiment(parse_spec(thresholds_spec(synthetic_csv)), track=False, resplits=value)
    assert info.value.field == "resplits"


def test_a_router_spec_has_no_resplits_to_override():
    with pytest.raises(SpecError, match="no resplits") as info:
        run_experiment(parse_spec(ROUTER_SPEC), track=False, resplits=3)
    assert info.value.field == "resplits"


# ---------------------------------------------------------------------------- the command line


def cli(args: list[str]) -> None:
    """Invoke the ``experiment`` group on an app of its own (as ``hybridroute`` would)."""
    from hybridroute.cli._experiment import register

    app = typer.Typer()

    @app.callback()
    def _root() -> None:
        """test app"""

    register(app)
    typer.main.get_command(app).main(args=args, prog_name="hybridroute", standalone_mode=False)


def test_cli_json_prints_the_same_table(synthetic_csv, tmp_path, capsys):
    spec_path = tmp_path / "t.yaml"
    spec_path.write_text(thresholds_spec(synthetic_csv), encoding="utf-8")
    cli(
        [
            "experiment",
            "run",
            str(spec_path),
            "--no-track",
            "--json",
            "--resplits",
            "4",
            "--out",
            str(tmp_path / "out"),
        ]
    )
    out = json.loads(capsys.readouterr().out)
    expected = run_experiment(spec_path, track=False, resplits=4)
    assert out["rows"] == expected.rows
    assert out["settings"]["resplits"] == 4
    assert out["mlflow"]["parent_run_id"] is None
    assert json.loads((tmp_path / "out" / "table.json").read_text())["rows"] == expected.rows


def test_cli_prints_a_table_and_where_the_run_is(mlflow_server, synthetic_csv, tmp_path, capsys):
    spec_path = tmp_path / "o.yaml"
    spec_path.write_text(oos_spec(synthetic_csv, resplits="2"), encoding="utf-8")
    cli(["experiment", "run", str(spec_path), "--tracking-uri", mlflow_server])
    out = capsys.readouterr().out
    assert "oos-synthetic (oos)" in out and "OOS recall" in out and "entropy" in out
    assert "mlflow: parent run" in out and mlflow_server in out


def test_cli_with_a_dead_tracking_server_warns_once_and_still_prints(
    synthetic_csv, tmp_path, capsys
):
    spec_path = tmp_path / "o.yaml"
    spec_path.write_text(oos_spec(synthetic_csv, resplits="2"), encoding="utf-8")
    cli(["experiment", "run", str(spec_path), "--tracking-uri", "http://127.0.0.1:9", "--json"])
    captured = capsys.readouterr()
    assert captured.err.count("MLflow tracking") == 1
    out = json.loads(captured.out)
    assert out["rows"] and out["mlflow"]["parent_run_id"] is None and out["mlflow"]["warning"]


def test_cli_passes_spec_errors_up_for_the_one_line_message(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "kind: thresholds\nname: x\ndataset: banking77\ntargets: [2]\nmethods: [empirical]\n"
    )
    with pytest.raises(SpecError, match=r"bad.yaml, field 'targets\[0\]'"):
        cli(["experiment", "run", str(bad), "--no-track"])


def test_shipped_specs_load_from_the_repository():
    assert sorted(p.name for p in SHIPPED.glob("*.yaml")) == [
        "oos_clinc150.yaml",
        "router_support_tickets.yaml",
        "thresholds_banking77.yaml",
    ]
    for p in SHIPPED.glob("*.yaml"):
        assert load_spec(p).path == str(p)


@pytest.mark.slow
@pytest.mark.parametrize(
    "name", ["thresholds_banking77.yaml", "oos_clinc150.yaml", "router_support_tickets.yaml"]
)
def test_shipped_spec_runs_to_the_end_and_matches_mlflow(mlflow_server, name):
    """Each shipped spec, in full (minutes for the public sets; needs HYBRIDROUTE_DATA_DIR)."""
    result = run_experiment(SHIPPED / name, tracking_uri=mlflow_server)
    assert result.rows
    assert_table_matches_mlflow(result, mlflow_server)
    if result.spec.kind == "thresholds":
        # certified: at most delta, give or take resplit noise and the finite evaluation half
        delta = result.spec.settings["delta"]
        assert all(
            r["violation_rate"] <= 2 * delta for r in result.rows if r["method"] == "certified"
        )


def _printed(result) -> str:
    from rich.console import Console

    console = Console(width=200, record=True, file=io.StringIO())
    console.print(result.table())
    return console.export_text()


@pytest.mark.parametrize("failing", [None, TypeError("bad operand"), ValueError("bad shape")])
def test_the_router_table_says_what_its_counts_count(monkeypatch, failing):
    """The stage counts are labelled and explained; the rates name their denominators;
    fallbacks are listed by cause (reason code and exception type)."""
    import hybridroute.evaluation as evaluation
    from hybridroute.experiments.kinds.router import STAGES_NOTE

    real = evaluation.evaluate_router
    causes: list[int] = []

    def failing_evaluation(router, dataset, **kw):
        if failing is not None:
            inner = router.classifier

            class Failing(type(inner)):  # the fitted classifier, failing on refund tickets
                def predict_proba(self, texts):
                    if any("refund" in t.lower() for t in texts):
                        raise failing
                    return inner.predict_proba(texts)

            clone = Failing.__new__(Failing)
            clone.__dict__.update(inner.__dict__)
            router.classifier = clone
        ev = real(router, dataset, **kw)
        causes.append(ev["decisions_by_stage"].get("fallback", 0))
        return ev

    monkeypatch.setattr(evaluation, "evaluate_router", failing_evaluation)
    result = run_experiment(parse_spec(ROUTER_SPEC), track=False)
    text = _printed(result)
    assert "rule / model / policy / fallback" in text
    assert STAGES_NOTE in result.notes
    n_rule = result.rows[0]["stage_rule"]
    n_test = result.summary["n_test"]
    assert any(f"cover the {n_test - n_rule} test items no rule decided" in n for n in result.notes)
    fallback_notes = [n for n in result.notes if n.startswith("Fallbacks by cause")]
    if failing is None:
        assert fallback_notes == [] and causes == [0, 0]
    else:
        (note,) = fallback_notes
        name = type(failing).__name__
        for row, n in zip(result.rows, causes, strict=True):
            assert n > 0 and row["stage_fallback"] == n
            assert f"{row['policy']}: classifier_error ({name}) {n}" in note


@pytest.mark.parametrize(
    ("bad", "column", "message"),
    [
        ("maybe", "has_permission", "expected bool, got str 'maybe'"),
        ("2", "has_permission", "expected bool, got int '2'"),
    ],
)
def test_a_router_experiment_refuses_a_file_whose_facts_break_the_rules(
    synthetic_csv, tmp_path, capsys, bad, column, message
):
    """The set is checked against the rules' facts schema before anything is trained, and
    the CLI prints it as one line (exit 2), as ``hybridroute evaluate --router`` does."""
    from hybridroute.cli import main

    rows = list(csv.DictReader(synthetic_csv.open(encoding="utf-8")))
    for i, row in enumerate(rows):
        row["has_permission"] = bad if i == len(rows) - 1 else "true"
    data = tmp_path / "with_facts.csv"
    with data.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=[*rows[0]])
        writer.writeheader()
        writer.writerows(rows)
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / "synthetic.yaml").write_text(SYNTHETIC_RULES, encoding="utf-8")
    spec = tmp_path / "router.yaml"
    spec.write_text(synthetic_router_spec(data), encoding="utf-8")
    where = f"{data}, row {len(rows)}, column '{column}': {message}"
    with pytest.raises(DatasetError) as info:
        run_experiment(load_spec(spec), track=False)
    assert str(info.value).startswith(where)
    assert main(["experiment", "run", str(spec), "--no-track"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.startswith(f"error: {where}")
    assert captured.err.count("\n") == 1


def test_a_router_experiment_refuses_a_named_set_that_breaks_the_rules(tmp_path):
    from ..cli.facts_bundle import strict_rules

    spec = ROUTER_SPEC.replace("example:support_rules.yaml", str(strict_rules(tmp_path)))
    with pytest.raises(
        DatasetError, match=r"^support-tickets, row \d+, column 'attempts': "
    ) as info:
        run_experiment(parse_spec(spec), track=False)
    assert "1 is above the maximum 0 (row id 'st-" in str(info.value)
    assert "rows break the facts schema in all" in str(info.value)
