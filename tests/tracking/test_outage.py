"""Only an outage of the tracking store turns tracking off; a bug in a tracked call propagates."""

from __future__ import annotations

import sqlite3
import warnings

import pytest
import requests
import sqlalchemy.exc
import urllib3.exceptions
from mlflow.exceptions import MlflowException, RestException
from mlflow.protos.databricks_pb2 import (
    INTERNAL_ERROR,
    INVALID_PARAMETER_VALUE,
    RESOURCE_ALREADY_EXISTS,
    TEMPORARILY_UNAVAILABLE,
)

from hybridroute.tracking import Tracker, log_evaluation
from hybridroute.tracking._outage import is_outage, is_setup_failure


def _wrapped(inner: BaseException, message: str = "API request to http://h failed") -> Exception:
    """An MlflowException raised while handling ``inner``, as MLflow's REST client does."""
    try:
        raise inner
    except BaseException:
        try:
            raise MlflowException(f"{message} with exception {inner}")
        except MlflowException as exc:
            return exc


def _caused(inner: BaseException, code: int) -> Exception:
    """``raise MlflowException(...) from inner``, as MLflow's SQL store does."""
    try:
        raise MlflowException(str(inner), error_code=code) from inner
    except MlflowException as exc:
        return exc


def _type_error_in_os_handler() -> Exception:
    try:
        raise OSError("unrelated")
    except OSError:
        try:
            raise TypeError("a bug while handling it")
        except TypeError as exc:
            return exc


def _sa_operational() -> Exception:
    return sqlalchemy.exc.OperationalError("SELECT 1", {}, sqlite3.OperationalError("locked"))


OUTAGES = {
    "connection refused": ConnectionRefusedError(111, "Connection refused"),
    "timeout": TimeoutError("timed out"),
    "read-only store directory": PermissionError(13, "Permission denied"),
    "requests connection error": requests.exceptions.ConnectionError("refused"),
    "REST client wrapping a connection error": _wrapped(
        requests.exceptions.ConnectionError("Max retries exceeded")
    ),
    "REST client wrapping urllib3": _wrapped(urllib3.exceptions.ProtocolError("reset")),
    "server 500": RestException({"error_code": "INTERNAL_ERROR", "message": "boom"}),
    "server unavailable": RestException({"error_code": "TEMPORARILY_UNAVAILABLE"}),
    "rate limited": RestException({"error_code": "REQUEST_LIMIT_EXCEEDED"}),
    "credentials refused": RestException({"error_code": "PERMISSION_DENIED"}),
    "proxy 502 (not MLflow's JSON)": MlflowException(
        "API request to endpoint /api/2.0/mlflow/runs/log-batch failed with error code "
        "502 != 200. Response body: '<html>Bad Gateway</html>'"
    ),
    "database locked (SQL store)": _caused(_sa_operational(), TEMPORARILY_UNAVAILABLE),
    "database locked (raw)": _sa_operational(),
    "sqlite disk I/O error": sqlite3.OperationalError("disk I/O error"),
    "not a database": sqlite3.DatabaseError("file is not a database"),
}

BUGS = {
    "TypeError": TypeError("unsupported operand type(s)"),
    "ValueError": ValueError("bad value"),
    "KeyError": KeyError("run_id"),
    "AttributeError": AttributeError("'NoneType' object has no attribute 'info'"),
    "TypeError raised while handling an OSError": _type_error_in_os_handler(),
    "MLflow refuses a value": MlflowException(
        "Changing param values is not allowed", error_code=INVALID_PARAMETER_VALUE
    ),
    "server refuses a value (400)": RestException(
        {"error_code": "INVALID_PARAMETER_VALUE", "message": "Param key too long"}
    ),
    "already exists": RestException({"error_code": "RESOURCE_ALREADY_EXISTS"}),
    "SQL store wrapping a TypeError": _caused(TypeError("bad bind"), INTERNAL_ERROR),
    "SQL store wrapping an integrity error": _caused(
        sqlalchemy.exc.IntegrityError("INSERT", {}, sqlite3.IntegrityError("UNIQUE")),
        RESOURCE_ALREADY_EXISTS,
    ),
    "REST client wrapping a TypeError": _wrapped(TypeError("unexpected keyword 'x'")),
    "run already active in the host": Exception("Run with UUID abc is already active."),
}


@pytest.mark.parametrize("exc", OUTAGES.values(), ids=OUTAGES.keys())
def test_outages_are_recognised(exc):
    assert is_outage(exc)
    assert is_setup_failure(exc)


@pytest.mark.parametrize("exc", BUGS.values(), ids=BUGS.keys())
def test_bugs_and_refusals_are_not_outages(exc):
    assert not is_outage(exc)


@pytest.mark.parametrize(
    "exc",
    [
        MlflowException("unsupported URI 'foo://bar'", error_code=INVALID_PARAMETER_VALUE),
        ModuleNotFoundError("No module named 'psycopg'"),
        sqlalchemy.exc.ArgumentError("Could not parse SQLAlchemy URL"),
    ],
    ids=["unsupported scheme", "missing database driver", "malformed database URL"],
)
def test_a_store_that_cannot_be_set_up_is_unusable_but_no_outage_later(exc):
    assert is_setup_failure(exc) and not is_outage(exc)


@pytest.mark.parametrize("exc", [TypeError("x"), ValueError("x"), KeyError("x")])
def test_bugs_during_set_up_propagate(exc):
    assert not is_setup_failure(exc)


# ---------------------------------------------------------------------- the tracker


@pytest.fixture
def tracker(sqlite_store):
    return Tracker(sqlite_store, experiment="outages")


def _raise(exc):
    def fn(*args, **kwargs):
        raise exc

    return fn


@pytest.mark.parametrize(
    "exc",
    [OUTAGES[k] for k in ("connection refused", "server 500", "database locked (SQL store)")],
    ids=["connection refused", "server 500", "database locked"],
)
def test_an_outage_mid_run_warns_once_turns_tracking_off_and_ends_the_run(
    tracker, monkeypatch, exc
):
    import mlflow

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with tracker.run("outage") as run_id:
            assert run_id is not None
            monkeypatch.setattr(mlflow, "log_params", _raise(exc))
            tracker.log_params({"a": 1})
            # off now: later calls do not reach MLflow at all
            monkeypatch.setattr(mlflow, "log_metrics", _raise(AssertionError("called")))
            tracker.log_metrics({"m": 1.0})
            tracker.log_dict({"x": 1}, "x.json")
    mine = [w for w in caught if "MLflow tracking" in str(w.message)]
    assert len(mine) == 1 and tracker.warning and not tracker.enabled
    assert mlflow.active_run() is None  # our run was ended anyway


@pytest.mark.parametrize(
    "call",
    [
        pytest.param(
            lambda t, mp: (
                mp.setattr("mlflow.log_params", _raise(TypeError("bad argument"))),
                t.log_params({"a": 1}),
            ),
            id="TypeError inside MLflow's call",
        ),
        pytest.param(
            lambda t, mp: t.log_metrics({"a": 1.0}, step="x"),  # type: ignore[arg-type]
            id="a bad step type",
        ),
        pytest.param(
            lambda t, mp: (t.log_params({"p": 1}), t.log_params({"p": 2})),
            id="a changed parameter",
        ),
        pytest.param(lambda t, mp: t.log_params({"k" * 300: 1}), id="a parameter key too long"),
        pytest.param(
            lambda t, mp: t.log_artifact("/nonexistent/hybridroute/report.html"),
            id="a missing artifact file",
        ),
    ],
)
def test_a_bug_inside_a_tracked_call_propagates_and_tracking_stays_on(tracker, monkeypatch, call):
    import mlflow

    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # no "tracking is unavailable"
        with pytest.raises((TypeError, MlflowException, OSError)):
            with tracker.run("bug"):
                call(tracker, monkeypatch)
    assert tracker.enabled and tracker.warning is None
    assert mlflow.active_run() is None


def test_a_failed_block_ends_its_run_as_failed(tracker):
    from mlflow.tracking import MlflowClient

    with pytest.raises(ZeroDivisionError):
        with tracker.run("fails") as run_id:
            1 / 0  # noqa: B018
    assert MlflowClient(tracker.tracking_uri).get_run(run_id).info.status == "FAILED"


def test_a_bad_router_bundle_is_an_error_not_an_outage(tracker, tmp_path):
    from hybridroute.exceptions import ArtifactError

    with pytest.raises(ArtifactError, match="not a router bundle"):
        log_evaluation(tracker, {"accuracy": 0.5}, run_name="x", router_bundle=tmp_path)
    assert tracker.enabled and tracker.warning is None


def _corrupt_db(tmp_path) -> str:
    path = tmp_path / "corrupt.db"
    path.write_bytes(b"this is not a database " * 100)
    return f"sqlite:///{path}"


@pytest.mark.parametrize(
    "make_uri",
    [
        pytest.param(lambda tmp: "http://127.0.0.1:9", id="nothing listening"),
        pytest.param(lambda tmp: "foo://nowhere", id="unsupported scheme"),
        pytest.param(lambda tmp: f"file://{tmp}/mlruns", id="MLflow's retired file store"),
        pytest.param(_corrupt_db, id="a file that is not a database"),
        pytest.param(
            lambda tmp: "postgresql://u:pw@127.0.0.1:9/db",
            id="nothing listening on the database port",
        ),
        pytest.param(
            lambda tmp: "mysql+pymysql://u:pw@127.0.0.1:9/db", id="a database URI with a driver"
        ),
    ],
)
def test_an_unusable_store_finishes_with_one_warning(tmp_path, make_uri):
    tracker = Tracker(make_uri(tmp_path), experiment="nowhere", probe_timeout_s=1)
    with pytest.warns(RuntimeWarning, match="MLflow tracking") as caught:
        run_id = log_evaluation(tracker, {"accuracy": 0.5}, run_name="x")
        log_evaluation(tracker, {"accuracy": 0.5}, run_name="y")
    assert run_id is None and tracker.warning
    assert len([w for w in caught if "MLflow tracking" in str(w.message)]) == 1
    assert "pw" not in tracker.warning


def test_a_deleted_experiment_is_named_in_the_warning(sqlite_store):
    from mlflow.tracking import MlflowClient

    client = MlflowClient(sqlite_store)
    client.delete_experiment(client.create_experiment("gone"))
    tracker = Tracker(sqlite_store, experiment="gone")
    with pytest.warns(RuntimeWarning, match="experiment 'gone' is deleted"):
        with tracker.run("x") as run_id:
            assert run_id is None
