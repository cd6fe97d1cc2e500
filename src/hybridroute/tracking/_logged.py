"""A router logged as an MLflow model, for the parts that run it elsewhere (Spark).

:func:`log_router_run` logs a router bundle as a pyfunc model in a run of its own and
says where it is (:class:`LoggedRouter`); :func:`load_router_model` loads it back as the
:class:`~hybridroute.router.HybridRouter` it wraps; :func:`router_spark_udf` applies it
to a Spark DataFrame with ``mlflow.pyfunc.spark_udf``. Unlike :class:`~._tracker.Tracker`
these never turn themselves off: a job that needs the model cannot run without it, so
every error propagates. Each call runs inside :func:`._scope.mlflow_scope`, so MLflow's
tracking URI, the environment and the logger levels are as they were after it.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ._scope import QUIET, mlflow_scope

if TYPE_CHECKING:
    from ..router import HybridRouter

__all__ = ["LoggedRouter", "load_router_model", "log_router_run", "router_spark_udf"]


@dataclass(frozen=True, slots=True, kw_only=True)
class LoggedRouter:
    """Where a logged router lives: its model URI and the tracking store that resolves it.

    Parameters
    ----------
    model_uri : str
        The logged pyfunc model (e.g. ``models:/m-...``), as MLflow returned it.
    tracking_uri : str
        The MLflow tracking store that resolves ``model_uri``.
    run_id : str or None, default None
        The run the model was logged in.
    """

    model_uri: str
    tracking_uri: str
    run_id: str | None = None


def log_router_run(
    bundle_dir: str | os.PathLike[str],
    *,
    tracking_uri: str,
    experiment: str,
    run_name: str,
    artifact_location: str | None = None,
) -> LoggedRouter:
    """Log a router bundle as a pyfunc model, in a new run of its own, and say where it is.

    Parameters
    ----------
    bundle_dir : path
        A router bundle; verified against its manifest first (a bad one raises
        :class:`~hybridroute.exceptions.ArtifactError` with its path).
    tracking_uri : str
        The MLflow tracking store.
    experiment, run_name : str
        Where the run goes; the experiment is created when missing.
    artifact_location : str, optional
        Where a newly created experiment keeps its artifacts (default: the store's).

    Returns
    -------
    LoggedRouter
    """
    from ..router import load_router
    from ._pyfunc import _log_router_model

    router = load_router(bundle_dir)
    with mlflow_scope(tracking_uri) as mlflow:
        from mlflow.tracking import MlflowClient

        client = MlflowClient(tracking_uri)
        found = client.get_experiment_by_name(experiment)
        exp_id = (
            found.experiment_id
            if found is not None
            else client.create_experiment(experiment, artifact_location=artifact_location)
        )
        with mlflow.start_run(experiment_id=exp_id, run_name=run_name) as run:
            info = _log_router_model(bundle_dir, router, name="router")
            run_id = run.info.run_id
    return LoggedRouter(model_uri=info.model_uri, tracking_uri=tracking_uri, run_id=run_id)


def load_router_model(model_uri: str, *, tracking_uri: str | None = None) -> HybridRouter:
    """The :class:`~hybridroute.router.HybridRouter` inside a logged router model.

    Parameters
    ----------
    model_uri : str
        ``models:/...``, ``runs:/.../router``, a path or an artifact-store URI.
    tracking_uri : str, optional
        The store that resolves ``model_uri`` (default: MLflow's current one).
    """
    with mlflow_scope(tracking_uri) as mlflow:
        model = mlflow.pyfunc.load_model(model_uri)
    return model.unwrap_python_model().router


def router_spark_udf(
    spark: Any,
    model_uri: str,
    *,
    result_type: str,
    tracking_uri: str | None = None,
    env_manager: str = "local",
) -> Any:
    """``mlflow.pyfunc.spark_udf`` over a logged router.

    Parameters
    ----------
    spark : pyspark.sql.SparkSession
        The session the UDF runs in.
    model_uri : str
        The logged router.
    result_type : str
        The Spark DDL type of the UDF's result (a struct of the model's output columns).
    tracking_uri : str, optional
        The store that resolves ``model_uri`` (default: MLflow's current one).
    env_manager : str
        ``"local"`` runs the model in the executors' own Python, which must have
        hybridroute installed; ``"virtualenv"`` / ``"uv"`` / ``"conda"`` rebuild the logged
        environment on each executor instead.
    """
    # MLflow warns on every env_manager="local" UDF that it does not rebuild the logged
    # environment; here that is the documented choice, so its pyfunc log keeps to errors
    # while the UDF is built.
    quiet = {**QUIET, "mlflow.pyfunc": logging.ERROR}
    with mlflow_scope(tracking_uri, quiet=quiet) as mlflow:
        return mlflow.pyfunc.spark_udf(
            spark, model_uri, result_type=result_type, env_manager=env_manager
        )
