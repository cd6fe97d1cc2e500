"""A tracked run leaves its host as it found it: environment, MLflow's URI, logger levels."""

from __future__ import annotations

import logging
import os

import pytest

from hybridroute.tracking import Tracker, log_evaluation
from hybridroute.tracking._scope import mlflow_scope


def _levels() -> dict[str, int]:
    names = ["", *logging.root.manager.loggerDict]
    return {name: logging.getLogger(name).level for name in names}


def _state():
    import mlflow

    return {
        "env": dict(os.environ),
        "levels": _levels(),
        "uri": mlflow.get_tracking_uri() if mlflow.is_tracking_uri_set() else None,
        "active": mlflow.active_run(),
    }


def _compare(before, after):
    env_changed = {
        k: (before["env"].get(k), after["env"].get(k))
        for k in set(before["env"]) | set(after["env"])
        if before["env"].get(k) != after["env"].get(k)
    }
    assert env_changed == {}
    # every logger the host had keeps its level (a dependency's own logger, created and set
    # by its first import during the run, is not the host's)
    changed = {
        name: (level, after["levels"][name])
        for name, level in before["levels"].items()
        if after["levels"][name] != level
    }
    assert changed == {}
    assert after["uri"] == before["uri"] and after["active"] is None


@pytest.fixture(params=["nothing set", "env var set", "mlflow global set"])
def host(request, monkeypatch, tmp_path):
    """The host's own MLflow set-up: none, MLFLOW_TRACKING_URI, or mlflow.set_tracking_uri."""
    import mlflow

    other = f"sqlite:///{tmp_path / 'host.db'}"
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.delenv("MLFLOW_EXPERIMENT_ID", raising=False)
    monkeypatch.delenv("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", raising=False)
    if request.param == "env var set":
        monkeypatch.setenv("MLFLOW_TRACKING_URI", other)
    if request.param == "mlflow global set":
        mlflow.set_tracking_uri(other)
    yield request.param
    mlflow.set_tracking_uri(None)  # type: ignore[arg-type]


def test_a_tracked_run_leaves_environment_uri_and_logger_levels_as_they_were(
    host, sqlite_store, support_router, tmp_path
):
    import mlflow  # noqa: F401 - its import-time logger set-up is not the run's doing

    _, bundle, _ = support_router
    report = tmp_path / "report"
    report.mkdir()
    (report / "report.md").write_text("# report\n", encoding="utf-8")
    before = _state()
    tracker = Tracker(sqlite_store, experiment=f"host-state-{host}")
    run_id = log_evaluation(
        tracker,
        {"accuracy": 0.5, "n": 10},
        run_name="host state",
        params={"p": 1},
        tags={"t": "v"},
        report_dir=report,
        router_bundle=bundle,
    )
    assert run_id is not None and tracker.warning is None
    _compare(before, _state())


def test_an_http_store_leaves_its_fail_fast_settings_behind_no_more(mlflow_server, host):
    import mlflow  # noqa: F401

    before = _state()
    with mlflow_scope(mlflow_server):  # inside a call MLflow fails fast...
        assert os.environ["MLFLOW_HTTP_REQUEST_MAX_RETRIES"] == "1"
        assert os.environ["MLFLOW_TRACKING_URI"] == mlflow_server
    tracker = Tracker(mlflow_server, experiment="host-state-http")
    with tracker.run("http") as run_id:
        assert run_id is not None
        tracker.log_metrics({"m": 1.0})
    _compare(before, _state())  # ...and after it nothing of that is left


def test_the_users_own_settings_win_inside_a_call(monkeypatch, sqlite_store):
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "7")
    monkeypatch.setenv("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "true")
    with mlflow_scope("http://127.0.0.1:9"):
        assert os.environ["MLFLOW_HTTP_REQUEST_MAX_RETRIES"] == "7"
        assert os.environ["MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR"] == "true"


@pytest.mark.parametrize(
    ("host_level", "inside"),
    [
        (logging.NOTSET, logging.WARNING),  # MLflow's INFO lines are kept out of our output
        (logging.INFO, logging.WARNING),
        (logging.DEBUG, logging.DEBUG),  # a host that asked for everything gets everything
        (logging.ERROR, logging.ERROR),
    ],
)
def test_mlflows_log_is_quieted_inside_a_call_only(host_level, inside):
    import mlflow  # noqa: F401

    logger = logging.getLogger("mlflow")
    saved = logger.level
    logger.setLevel(host_level)
    try:
        with mlflow_scope():
            assert logger.getEffectiveLevel() == inside
        assert logger.level == host_level
    finally:
        logger.setLevel(saved)


def test_scopes_nest_and_restore_mlflows_uri(tmp_path):
    import mlflow

    a, b = f"sqlite:///{tmp_path / 'a.db'}", f"sqlite:///{tmp_path / 'b.db'}"
    before = mlflow.get_tracking_uri() if mlflow.is_tracking_uri_set() else None
    with mlflow_scope(a):
        assert mlflow.get_tracking_uri() == a
        with mlflow_scope(b):
            assert mlflow.get_tracking_uri() == b
        assert mlflow.get_tracking_uri() == a
    after = mlflow.get_tracking_uri() if mlflow.is_tracking_uri_set() else None
    assert after == before
