"""Scale-out on Spark (the ``spark`` extra): score, evaluate or replay with a router.

The router travels as an MLflow pyfunc model (:func:`log_router`) and runs on the
executors through ``mlflow.pyfunc.spark_udf``; metrics and replay mismatches are
aggregated in Spark with the definitions of the single-machine
:func:`~hybridroute.evaluation.evaluate_router` and :func:`~hybridroute.records.replay`.

>>> from hybridroute.spark import SparkRouter, local_session   # doctest: +SKIP
>>> spark = local_session()                                     # doctest: +SKIP
>>> sr = SparkRouter.from_bundle(spark, "router-bundle/")       # doctest: +SKIP
>>> result = sr.evaluate(spark.read.json("labelled/*.jsonl"))   # doctest: +SKIP

pyspark (and MLflow) are imported only when a function needs them; nothing else in
hybridroute imports this package.
"""

from __future__ import annotations

from ._evaluate import SparkEvaluation, evaluate_scored
from ._frames import ITEM_COLUMNS, dataset_items, prepare_items
from ._model import RESULT_TYPE, LoggedRouter, log_router, router_udf
from ._replay import read_decision_log, replay_records
from ._router import SparkRouter
from ._session import local_session

__all__ = [
    "ITEM_COLUMNS",
    "RESULT_TYPE",
    "LoggedRouter",
    "SparkEvaluation",
    "SparkRouter",
    "dataset_items",
    "evaluate_scored",
    "local_session",
    "log_router",
    "prepare_items",
    "read_decision_log",
    "replay_records",
    "router_udf",
]
