"""``SparkRouter``: a logged router applied to Spark DataFrames."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from ._evaluate import SparkEvaluation, evaluate_scored, with_outcomes
from ._frames import dataset_items, prepare_items
from ._model import log_router, router_udf
from ._replay import read_decision_log, replay_records

if TYPE_CHECKING:
    from ..router import HybridRouter

__all__ = ["SparkRouter"]


class SparkRouter:
    """Score, evaluate and replay with a router logged as an MLflow pyfunc model.

    Parameters
    ----------
    spark : pyspark.sql.SparkSession
        The session to run on (``local[N]`` or a cluster).
    model_uri : str
        The logged router (``models:/...``, ``runs:/.../router``, a path or an artifact
        store URI), as returned by :func:`log_router`.
    tracking_uri : str, optional
        The MLflow tracking store that resolves ``model_uri`` (default: MLflow's current
        one).
    env_manager : str
        Passed to ``mlflow.pyfunc.spark_udf``: ``"local"`` (the executors' Python, which
        must have hybridroute installed), or ``"virtualenv"`` / ``"uv"`` / ``"conda"``.

    Notes
    -----
    The router is also loaded once on the driver, for its fact schema, label set, name
    and version; the rows themselves are routed on the executors.
    """

    def __init__(
        self,
        spark: Any,
        model_uri: str,
        *,
        tracking_uri: str | None = None,
        env_manager: str = "local",
    ) -> None:
        self.spark = spark
        self.model_uri = model_uri
        self.tracking_uri = tracking_uri
        self.env_manager = env_manager
        self._router: HybridRouter | None = None
        self._udf: Any = None

    @classmethod
    def from_bundle(
        cls,
        spark: Any,
        bundle_dir: str | os.PathLike[str],
        *,
        tracking_uri: str | None = None,
        experiment: str = "hybridroute-spark",
        env_manager: str = "local",
    ) -> SparkRouter:
        """Log a router bundle (see :func:`log_router`) and return a SparkRouter over it.

        Parameters
        ----------
        spark : pyspark.sql.SparkSession
            The session to run on.
        bundle_dir : str or path-like
            A router bundle (:func:`~hybridroute.router.save_router`); verified against its
            manifest before it is logged.
        tracking_uri : str or None, default None
            The MLflow tracking store the model is logged to. ``None``: a new SQLite store
            in a temporary directory, enough for ``local[N]``; on a cluster give a store
            whose artifacts the executors can read.
        experiment : str, default "hybridroute-spark"
            The MLflow experiment of the run that logs the model (created when missing).
        env_manager : str, default "local"
            As for the class: ``"local"`` (the executors' Python, with hybridroute
            installed), or ``"virtualenv"`` / ``"uv"`` / ``"conda"``.

        Returns
        -------
        SparkRouter

        Raises
        ------
        ArtifactError
            If the bundle does not verify. MLflow's own errors (an unreachable store)
            propagate: this never turns tracking off.
        """
        logged = log_router(bundle_dir, tracking_uri=tracking_uri, experiment=experiment)
        return cls(
            spark, logged.model_uri, tracking_uri=logged.tracking_uri, env_manager=env_manager
        )

    # ------------------------------------------------------------------ parts
    @property
    def router(self) -> HybridRouter:
        """The :class:`~hybridroute.router.HybridRouter` inside the model, loaded on the driver."""
        if self._router is None:
            from ..tracking import load_router_model

            self._router = load_router_model(self.model_uri, tracking_uri=self.tracking_uri)
        return self._router

    @property
    def udf(self) -> Any:
        """The ``mlflow.pyfunc.spark_udf`` over the model (apply to ``struct("text", "facts")``)."""
        if self._udf is None:
            self._udf = router_udf(
                self.spark,
                self.model_uri,
                tracking_uri=self.tracking_uri,
                env_manager=self.env_manager,
            )
        return self._udf

    @property
    def fact_names(self) -> tuple[str, ...]:
        """The facts the router's rules declare."""
        return tuple(self.router.rules.schema.names)

    # ------------------------------------------------------------------ frames
    def items(self, dataset: Any, *, num_partitions: int | None = None) -> Any:
        """A :class:`~hybridroute.datasets.LabelledSet` as an item frame (see :func:`dataset_items`)."""
        return dataset_items(self.spark, dataset, self.fact_names, num_partitions=num_partitions)

    def prepare(self, frame: Any) -> Any:
        """Normalise a Spark DataFrame to an item frame (see :func:`prepare_items`)."""
        return prepare_items(frame, self.fact_names)

    def score(self, frame: Any) -> Any:
        """Route every row on the executors; one output row per input row.

        Returns the item columns plus ``destination``, ``reason_code``, ``stage``,
        ``label``, ``confidence`` (null where none), ``rule_id``, ``action``,
        ``snapshot_hash`` and ``decision`` (the full decision record as JSON). Lazy, like
        any Spark transformation; write it out or aggregate it.
        """
        from pyspark.sql import functions as F

        items = self.prepare(frame)
        routed = items.withColumn("_d", self.udf(F.struct("text", "facts")))
        d = F.col("_d")
        decision = d["decision"]
        return routed.select(
            *items.columns,
            d["destination"].alias("destination"),
            d["reason_code"].alias("reason_code"),
            d["stage"].alias("stage"),
            F.get_json_object(decision, "$.label").alias("label"),
            F.when(~F.isnan(d["confidence"]), d["confidence"]).alias("confidence"),
            F.get_json_object(decision, "$.rule_id").alias("rule_id"),
            # as evaluate_router's rows: "rule" for rule decisions, else the policy's action
            F.when(d["stage"] == "rule", F.lit("rule"))
            .otherwise(F.get_json_object(decision, "$.detail.policy_action"))
            .alias("action"),
            d["snapshot_hash"].alias("snapshot_hash"),
            decision.alias("decision"),
        )

    # ------------------------------------------------------------------ jobs
    def evaluate(self, frame: Any, *, cache: bool = True) -> SparkEvaluation:
        """Route a labelled item frame and aggregate the router metrics in Spark.

        ``frame`` needs ``gold`` (or ``label``); ``gold_next_step`` (or ``next_step``)
        adds next-step accuracy and per-rule match rates. The metrics have the
        definitions of :func:`hybridroute.evaluation.evaluate_router` (the label set is
        the router's classes plus the gold labels). The scored rows, with ``correct`` and
        ``next_step_correct``, are the result's ``scored`` attribute; with ``cache`` they
        are persisted so that the aggregations route each row once (call
        ``result.scored.unpersist()`` when done).
        """
        scored = with_outcomes(self.score(frame))
        if cache:
            scored = scored.persist()
        router = self.router
        return evaluate_scored(
            scored,
            labels=list(router.classes),
            router=router.name,
            router_version=router.version,
        )

    def replay(self, records: Any, *, max_examples: int = 10) -> Any:
        """Replay a decision log on Spark (see :func:`replay_records`).

        ``records`` is a path (SQLite log or JSONL export) or a frame from
        :func:`read_decision_log`.
        """
        if isinstance(records, (str, os.PathLike)):
            records = read_decision_log(self.spark, records)
        router = self.router
        return replay_records(
            records,
            self.udf,
            router=router.name,
            router_version=router.version,
            max_examples=max_examples,
        )

    def __repr__(self) -> str:
        return f"SparkRouter(model_uri={self.model_uri!r})"
