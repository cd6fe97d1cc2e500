"""How to open a run: a command that copy-pastes (no PATH needed), and the run's page."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from hybridroute.tracking import Tracker
from hybridroute.tracking._tracker import mlflow_command


@pytest.fixture(scope="module")
def tracked(sqlite_store):
    tracker = Tracker(sqlite_store, experiment="ui-hint")
    with tracker.run("hint") as run_id:
        pass
    return tracker, run_id


def test_a_local_store_gets_the_command_that_serves_it_and_the_runs_page(tracked):
    tracker, run_id = tracked
    serve, page = tracker.ui_hint(run_id)
    assert all("\n" not in line for line in (serve, page))
    words = shlex.split(serve.removeprefix("serve it: "))
    program = Path(words[0])
    # the environment's own mlflow, by absolute path: `mlflow` need not be on PATH
    assert program.is_absolute() and os.access(program, os.X_OK)
    assert words[1:] == ["ui", "--backend-store-uri", tracker.tracking_uri]
    assert page.startswith("then open http://127.0.0.1:5000/#/experiments/")
    assert page.endswith(f"/runs/{run_id}?workflowType=machine_learning")


def test_the_printed_command_runs_as_printed(tracked):
    tracker, run_id = tracked
    serve = tracker.ui_hint(run_id)[0].removeprefix("serve it: ")
    done = subprocess.run(
        [*shlex.split(serve), "--help"],
        capture_output=True,
        text=True,
        timeout=120,
        env={k: v for k, v in os.environ.items() if k != "PATH"} | {"PATH": "/nonexistent"},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "--backend-store-uri" in done.stdout


def test_without_a_script_beside_python_the_command_is_python_dash_m(tmp_path, monkeypatch):
    python = tmp_path / "my env" / "bin" / "python"
    monkeypatch.setattr(sys, "executable", str(python))
    assert mlflow_command() == f"'{python}' -m mlflow"


def test_an_http_server_gets_the_runs_page(mlflow_server):
    tracker = Tracker(mlflow_server, experiment="ui-hint-http")
    with tracker.run("hint") as run_id:
        pass
    (line,) = tracker.ui_hint(run_id)
    assert line.startswith(f"open {mlflow_server}/#/experiments/")
    assert line.endswith(f"/runs/{run_id}?workflowType=machine_learning")


def test_no_run_no_hint():
    assert Tracker("http://127.0.0.1:9", probe_timeout_s=0.2).ui_hint(None) == []


def test_a_password_in_the_uri_is_not_printed():
    tracker = Tracker("postgresql://me:s3cr3t-pw@db.internal/mlflow", enabled=False)
    assert all("s3cr3t" not in line for line in tracker.ui_hint("abc"))


def test_evaluate_prints_the_hint_lines_whole(support_router, sqlite_store, tmp_path, capsys):
    from hybridroute.cli import main

    _, bundle, _ = support_router
    args = ["evaluate", "--dataset", "support-tickets", "--router", str(bundle)]
    args += ["--tracking-uri", sqlite_store, "--experiment", "ui-hint-cli", "--n-boot", "20"]
    assert main(args) == 0
    lines = capsys.readouterr().out.splitlines()
    (serve,) = [line for line in lines if "serve it:" in line]
    (page,) = [line for line in lines if "then open" in line]
    assert serve.strip().endswith(f"ui --backend-store-uri {shlex.quote(sqlite_store)}")
    assert "workflowType=machine_learning" in page
    assert any(line.strip().startswith("mlflow: run ") for line in lines)
