"""`hybridroute monitor --track`: a reading of the live guarantee logged as an MLflow run."""

from __future__ import annotations

import json

import numpy as np

from hybridroute.cli import main
from hybridroute.contracts import Decision
from hybridroute.records import AuditSampler, open_log


def test_monitor_track_logs_metrics_tags_and_the_state(
    support_router, sqlite_store, tmp_path, capsys
):
    from mlflow.tracking import MlflowClient

    router, bundle, _ = support_router
    url = f"sqlite:///{tmp_path / 'log.sqlite'}"
    label = next(c for c in router.classes if c in router.destinations)
    rng = np.random.default_rng(0)
    with open_log(url, audit=AuditSampler(1.0, "k")) as log:
        log.register_router(router)  # the labels its outcomes may name
        decisions = [
            Decision(
                router=router.name,
                router_version=router.version,
                stage="model",
                input_snapshot={"facts": {}, "text": f"t {i}"},
                allowed_destinations=(router.destinations[label],),
                selected_destination=router.destinations[label],
                reason_code="confident_intent",
                label=label,
                confidence=0.99,
            )
            for i in range(80)
        ]
        logged = log.log_many([(d, f"id-{i}", "live") for i, d in enumerate(decisions)])
        log.add_outcomes(
            [
                {"decision_id": d.decision_id, "gold_intent": label, "source": "audit"}
                for d in logged
                if rng.uniform() < 0.9
            ]
        )
    argv = ["monitor", "--log", url, "--router", str(bundle), "--track"]
    assert main([*argv, "--tracking-uri", sqlite_store, "--json"]) == 0
    state = json.loads(capsys.readouterr().out)
    run = MlflowClient(sqlite_store).get_run(state["mlflow_run_id"])
    assert run.data.tags["hybridroute.monitor.status"] == state["status"]
    assert run.data.tags["hybridroute.router_version"] == router.version
    assert run.data.metrics["labels"] == state["labels"] > 0
    assert run.data.metrics["precision_lower"] == state["precision"]["lower"]
    assert run.data.metrics["shift_total_variation"] == state["shift"]["total_variation"]
    assert run.data.params["log"] == url
    path = MlflowClient(sqlite_store).download_artifacts(
        run.info.run_id, "monitor/state.json", str(tmp_path)
    )
    assert json.loads(open(path, encoding="utf-8").read())["status"] == state["status"]
    # the plain output names the run too
    assert main([*argv, "--tracking-uri", sqlite_store]) == 0
    assert "mlflow run " in capsys.readouterr().out
