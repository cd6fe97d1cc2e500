"""The router as an MLflow pyfunc model, and as a Spark UDF over that model.

A router bundle is logged with :func:`hybridroute.tracking.log_router_model` (the bundle
travels as the model's artifact; MLflow loads it "from code", nothing pickled) and applied
with ``mlflow.pyfunc.spark_udf``. With no tracking store given, the model goes to a fresh
SQLite store in a temporary directory; on a cluster, give the URI of a tracking server (or
any store whose artifacts the executors can read).
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["RESULT_TYPE", "LoggedRouter", "log_router", "router_udf", "use_tracking_uri"]

#: What the UDF returns per row: the columns of ``RouterModel.predict`` that Spark needs.
#: ``label`` is left out on purpose: MLflow casts a string struct field with ``str()``,
#: which would turn a missing label into the text "None"; it is read from the decision
#: record instead (``get_json_object``), where a missing label stays null.
RESULT_TYPE = (
    "destination string, reason_code string, stage string, confidence double, "
    "snapshot_hash string, decision string"
)


@dataclass(frozen=True, slots=True, kw_only=True)
class LoggedRouter:
    """Where a logged router lives: its model URI and the tracking store that resolves it."""

    model_uri: str
    tracking_uri: str
    run_id: str | None = None


@contextlib.contextmanager
def use_tracking_uri(uri: str | None) -> Iterator[None]:
    """Point MLflow at ``uri`` for the duration of the block, then restore what was there."""
    import mlflow

    if uri is None:
        yield
        return
    was_set = mlflow.is_tracking_uri_set()
    previous = mlflow.get_tracking_uri() if was_set else None
    env_before = os.environ.get("MLFLOW_TRACKING_URI")
    mlflow.set_tracking_uri(uri)
    try:
        yield
    finally:
        # None unsets MLflow's global and its environment variable (typed str there)
        mlflow.set_tracking_uri(previous)  # type: ignore[arg-type]
        if env_before is not None:
            os.environ["MLFLOW_TRACKING_URI"] = env_before


def log_router(
    bundle_dir: str | os.PathLike[str],
    *,
    tracking_uri: str | None = None,
    experiment: str = "hybridroute-spark",
    run_name: str = "router for spark",
) -> LoggedRouter:
    """Log a router bundle as a pyfunc model and return where it is.

    Parameters
    ----------
    bundle_dir : path
        A router bundle (verified against its manifest before logging).
    tracking_uri : str, optional
        The MLflow tracking store. Default: a new SQLite store (``mlflow.db``, artifacts
        beside it) in a temporary directory, which is enough for ``local[N]`` Spark.
    experiment, run_name : str
        Where the run goes.

    Returns
    -------
    LoggedRouter
    """
    from ..router import load_router

    load_router(bundle_dir)  # a bad bundle fails here, with its path, not on an executor
    quiet_mlflow()
    import mlflow
    from mlflow.tracking import MlflowClient

    from ..tracking import log_router_model

    artifact_location = None
    if tracking_uri is None:
        root = Path(tempfile.mkdtemp(prefix="hybridroute-spark-mlflow-"))
        tracking_uri = f"sqlite:///{root / 'mlflow.db'}"
        artifact_location = (root / "artifacts").as_uri()
    with use_tracking_uri(tracking_uri):
        client = MlflowClient(tracking_uri)
        found = client.get_experiment_by_name(experiment)
        exp_id = (
            found.experiment_id
            if found is not None
            else client.create_experiment(experiment, artifact_location=artifact_location)
        )
        with mlflow.start_run(experiment_id=exp_id, run_name=run_name) as run:
            info = log_router_model(bundle_dir)
            run_id = run.info.run_id
    return LoggedRouter(model_uri=info.model_uri, tracking_uri=tracking_uri, run_id=run_id)


def router_udf(
    spark: Any,
    model_uri: str,
    *,
    tracking_uri: str | None = None,
    env_manager: str = "local",
) -> Any:
    """``mlflow.pyfunc.spark_udf`` over a logged router, returning :data:`RESULT_TYPE`.

    Call it on ``struct("text", "facts")`` (facts as a JSON string per row).
    ``env_manager="local"`` runs the model in the executors' own Python, which must have
    hybridroute installed; ``"virtualenv"`` / ``"uv"`` / ``"conda"`` rebuild the logged
    environment on each executor instead.
    """
    quiet_mlflow()
    import mlflow.pyfunc

    # MLflow warns on every env_manager="local" UDF that it does not rebuild the logged
    # environment; here that is the documented choice, so keep the log to errors.
    pyfunc_log = logging.getLogger("mlflow.pyfunc")
    level = pyfunc_log.level
    pyfunc_log.setLevel(logging.ERROR)
    try:
        with use_tracking_uri(tracking_uri):
            return mlflow.pyfunc.spark_udf(
                spark, model_uri, result_type=RESULT_TYPE, env_manager=env_manager
            )
    finally:
        pyfunc_log.setLevel(level)


def quiet_mlflow() -> None:
    """Offline-safe MLflow defaults, and no progress bars when artifacts are copied."""
    from .._offline import apply_offline_defaults

    apply_offline_defaults()
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    import mlflow  # noqa: F401 - configures its loggers on import; set the level after

    # MLflow's INFO lines ("Creating initial MLflow database tables") are noise here
    logging.getLogger("mlflow").setLevel(logging.WARNING)
