"""The router as an MLflow pyfunc model, and as a Spark UDF over that model.

A router bundle is logged with :func:`hybridroute.tracking.log_router_run` (the bundle
travels as the model's artifact; MLflow loads it "from code", nothing pickled) and applied
with :func:`hybridroute.tracking.router_spark_udf` (``mlflow.pyfunc.spark_udf``): MLflow is
reached only through the tracking layer. With no tracking store given, the model goes to a
fresh SQLite store in a temporary directory; on a cluster, give the URI of a tracking
server (or any store whose artifacts the executors can read).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from ..tracking import LoggedRouter, log_router_run, router_spark_udf

__all__ = ["RESULT_TYPE", "LoggedRouter", "log_router", "router_udf"]

#: What the UDF returns per row: the columns of ``RouterModel.predict`` that Spark needs.
#: ``label`` is left out on purpose: MLflow casts a string struct field with ``str()``,
#: which would turn a missing label into the text "None"; it is read from the decision
#: record instead (``get_json_object``), where a missing label stays null.
RESULT_TYPE = (
    "destination string, reason_code string, stage string, confidence double, "
    "snapshot_hash string, decision string"
)


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
    artifact_location = None
    if tracking_uri is None:
        root = Path(tempfile.mkdtemp(prefix="hybridroute-spark-mlflow-"))
        tracking_uri = f"sqlite:///{root / 'mlflow.db'}"
        artifact_location = (root / "artifacts").as_uri()
    return log_router_run(
        bundle_dir,
        tracking_uri=tracking_uri,
        experiment=experiment,
        run_name=run_name,
        artifact_location=artifact_location,
    )


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

    Parameters
    ----------
    spark : pyspark.sql.SparkSession
        The session the UDF runs in.
    model_uri : str
        The logged router (``LoggedRouter.model_uri``, ``models:/...``, ``runs:/.../router``
        or a path).
    tracking_uri : str or None, default None
        The store that resolves ``model_uri`` (default: MLflow's current one).
    env_manager : str, default "local"
        ``"local"``, ``"virtualenv"``, ``"uv"`` or ``"conda"`` (see above).

    Returns
    -------
    pyspark.sql.functions.udf
        A UDF of one ``struct("text", "facts")`` argument returning a struct of
        :data:`RESULT_TYPE`.
    """
    return router_spark_udf(
        spark,
        model_uri,
        result_type=RESULT_TYPE,
        tracking_uri=tracking_uri,
        env_manager=env_manager,
    )
