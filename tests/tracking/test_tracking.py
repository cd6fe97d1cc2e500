"""MLflow tracking against a real server: runs, artifacts, pyfunc routers, and outages."""

from __future__ import annotations

import warnings

import pandas as pd
import pytest

from hybridroute.evaluation import evaluate_router, write_report
from hybridroute.tracking import Tracker, log_evaluation


@pytest.fixture(scope="module")
def setup(tmp_path_factory, support_router):
    router, bundle, ds = support_router
    root = tmp_path_factory.mktemp("tracking")
    router.policy.save(root / "policy.json")
    test = ds.split("test")
    ev = evaluate_router(router, test, n_boot=100)
    files = write_report(ev, root / "report")
    return ds, router, bundle, root, ev, files


def test_evaluation_run_holds_metrics_tags_and_artifacts(mlflow_server, setup):
    import mlflow
    from mlflow.tracking import MlflowClient

    ds, router, bundle, root, ev, _ = setup
    tracker = Tracker(mlflow_server, experiment="t-eval")
    run_id = log_evaluation(
        tracker,
        ev,
        run_name="support eval",
        params={"dataset": "support-tickets"},
        tags={
            "hybridroute.dataset_fingerprint": ds.fingerprint,
            "hybridroute.router_version": router.version,
        },
        report_dir=root / "report",
        policy_path=root / "policy.json",
        router_bundle=bundle,
    )
    assert run_id is not None and tracker.warning is None
    client = MlflowClient(mlflow_server)
    run = client.get_run(run_id)
    assert run.data.metrics["next_step_accuracy"] == pytest.approx(ev["next_step_accuracy"])
    assert run.data.metrics["accuracy"] == pytest.approx(ev["accuracy"])
    assert run.data.tags["hybridroute.dataset_fingerprint"] == ds.fingerprint
    assert run.data.tags["hybridroute.router_version"] == "7"
    assert run.data.tags["hybridroute.code_revision"]
    arts = {a.path for a in client.list_artifacts(run_id, "evaluation")}
    assert {"evaluation/report.html", "evaluation/errors.csv", "evaluation/summary.json"} <= arts
    assert {a.path for a in client.list_artifacts(run_id, "policy")} == {"policy/policy.json"}

    # the logged router is a pyfunc model that routes a DataFrame of facts + text
    mlflow.set_tracking_uri(mlflow_server)
    models = client.search_logged_models(experiment_ids=[run.info.experiment_id])
    assert models, "the router was not logged as a model"
    model = mlflow.pyfunc.load_model(models[0].model_uri)
    test = ds.split("test")
    frame = pd.DataFrame(
        {
            "text": test.texts[:40],
            "facts": [{k: v for k, v in test.facts(i).items() if v is not None} for i in range(40)],
        }
    )
    out = model.predict(frame)
    expected = router.route_many(
        [{"facts": f, "text": t} for f, t in zip(frame["facts"], frame["text"], strict=True)]
    )
    assert list(out["destination"]) == [d.selected_destination for d in expected]
    assert list(out["snapshot_hash"]) == [d.snapshot_hash for d in expected]


def test_unreachable_server_warns_once_and_loses_nothing(setup, tmp_path):
    _, _, _, root, ev, files = setup
    tracker = Tracker("http://127.0.0.1:9", experiment="nowhere", probe_timeout_s=1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run_id = log_evaluation(tracker, ev, run_name="x", report_dir=root / "report")
        log_evaluation(tracker, ev, run_name="y", report_dir=root / "report")
    assert run_id is None
    mine = [w for w in caught if "MLflow tracking" in str(w.message)]
    assert len(mine) == 1
    assert files["html"].exists()  # local results are untouched


def test_cli_evaluate_with_a_dead_tracking_server_still_reports(setup, tmp_path, capsys):
    from hybridroute.cli import main

    _, _, bundle, _, _, _ = setup
    rc = main(
        [
            "evaluate",
            "--dataset",
            "support-tickets",
            "--router",
            str(bundle),
            "--report",
            str(tmp_path / "r"),
            "--tracking-uri",
            "http://127.0.0.1:9",
            "--n-boot",
            "100",
            "--json",
        ]
    )
    captured = capsys.readouterr()
    assert rc == 0
    assert captured.err.count("MLflow tracking") == 1
    import json

    out = json.loads(captured.out)
    for key in (
        "n",
        "accuracy",
        "macro_f1",
        "accuracy_ci",
        "ece",
        "coverage",
        "selective_precision",
    ):
        assert key in out
    assert out["mlflow_run_id"] is None
    assert (tmp_path / "r" / "report.html").exists()
