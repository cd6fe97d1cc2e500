"""The main job: ``hybridroute demo`` end to end, offline, with its MLflow run checked."""

from __future__ import annotations

import json
import logging
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
        "(stage 'rule')",
        "report",
        "mlflow run",
    ):
        assert words in out
    summary = json.loads((tmp_path / "demo" / "summary.json").read_text())
    assert summary["n"] > 200 and summary["mlflow_run_id"]
    assert_counts_are_labelled(out, summary)
    assert summary["fallbacks_by_cause"] == {}
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


def assert_counts_are_labelled(out: str, summary: dict) -> str:
    """Every count in the printed summary names what it counts; returns the flat text."""
    flat = " ".join(out.replace("│", " ").split())
    n, n_cls = summary["n"], summary["n_classified"]
    stages = summary["decisions_by_stage"]
    assert n_cls == n - stages["rule"]
    fallback = "fallback: the classifier failed or abstained (stage 'fallback')"
    for words in (
        f"tickets routed (the whole test split) {n}",
        f"decided by a rule, from the facts (stage 'rule') {stages['rule']}",
        f"auto-routed by the model (stage 'model') {stages.get('model', 0)}",
        f"held back: ask the user / human review (stage 'policy') {stages.get('policy', 0)}",
        f"{fallback} {stages.get('fallback', 0)}",
        f"intent accuracy (of {n_cls} classified)",
        f"coverage ({summary['n_auto_routed']} auto-routed / {n_cls} classified)",
        f"selective precision (of {summary['n_auto_routed']} auto-routed)",
        f"next-step accuracy (of {summary['n_next_step']} with a gold next step)",
        "classified = no rule decided",
    ):
        assert words in flat, words
    return flat


def test_the_demo_lists_fallbacks_by_cause_and_logs_the_cause_once(
    tmp_path, capsys, monkeypatch, caplog
):
    """A classifier that raises: the summary counts its fallbacks by cause, logged once."""
    from hybridroute.classifiers import LocalClassifier
    from hybridroute.router import HybridRouter

    # the classifier fails whenever the router asks it (training and calibration work)
    real_score, real_proba = HybridRouter._score, LocalClassifier.predict_proba
    routing = {"on": False}

    def score(self, texts):
        routing["on"] = True
        try:
            return real_score(self, texts)
        finally:
            routing["on"] = False

    def proba(self, texts):
        if routing["on"]:
            raise TypeError("unsupported operand type(s)")
        return real_proba(self, texts)

    monkeypatch.setattr(HybridRouter, "_score", score)
    monkeypatch.setattr(LocalClassifier, "predict_proba", proba)
    caplog.set_level(logging.INFO, logger="hybridroute")
    monkeypatch.chdir(tmp_path)
    assert main(["demo", "--out", "demo", "--no-track"]) == 0
    summary = json.loads((tmp_path / "demo" / "summary.json").read_text())
    flat = assert_counts_are_labelled(capsys.readouterr().out, summary)
    cause = "classifier_error (TypeError)"
    assert summary["fallbacks_by_cause"] == {cause: summary["n_classified"]}
    assert summary["decisions_by_stage"]["fallback"] == summary["n_classified"]
    assert f"cause {cause} {summary['n_classified']}" in flat
    logged = [r for r in caplog.records if r.name == "hybridroute.router._router"]
    assert len(logged) == 1 and cause in logged[0].getMessage()
