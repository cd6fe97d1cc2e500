"""The main job: ``hybridroute demo`` end to end, offline, with its MLflow run checked."""

from __future__ import annotations

import json
import os

from hybridroute.cli import main


def test_demo_runs_end_to_end_and_its_mlflow_store_holds_the_run(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    assert main(["demo", "--out", "demo"]) == 0
    out = capsys.readouterr().out
    for words in (
        "intent accuracy",
        "coverage",
        "selective precision",
        "next-step accuracy",
        "decisions at stage",
        "report",
        "mlflow run",
    ):
        assert words in out
    summary = json.loads((tmp_path / "demo" / "summary.json").read_text())
    assert summary["n"] > 200 and summary["mlflow_run_id"]
    for name in (
        "model/manifest.json",
        "policy.json",
        "router/manifest.json",
        "decisions.sqlite",
        "report/report.html",
    ):
        assert (tmp_path / "demo" / name).exists(), name

    # the embedded store in the working directory holds the run, its metrics and artifacts
    assert (tmp_path / "mlflow.db").exists()
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    run = client.get_run(summary["mlflow_run_id"])
    assert run.data.metrics["next_step_accuracy"] == summary["next_step_accuracy"]
    assert run.data.metrics["coverage"] == summary["coverage"]
    assert run.data.tags["hybridroute.router_version"] == "1"
    assert run.data.params["objective"] == "precision"
    top = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {"evaluation", "policy"} <= top
    report = {a.path for a in client.list_artifacts(run.info.run_id, "evaluation")}
    assert "evaluation/report.html" in report and "evaluation/errors.csv" in report
    assert os.path.isdir(tmp_path / "demo" / "router")
