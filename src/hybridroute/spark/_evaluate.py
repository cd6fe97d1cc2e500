"""Router metrics aggregated in Spark, with the definitions of ``evaluate_router``.

Every count is a Spark aggregation (``agg`` / ``groupBy``) over the scored frame; the
driver turns the resulting integers into metrics with the functions
:func:`hybridroute.evaluation.evaluate_router` uses (``hybridroute.evaluation._stats``:
per-class scores, macro-F1, shares and their rounding, what counts as auto-routed), so
the two agree exactly; fallbacks are counted by the cause
:func:`hybridroute._fallback.fallback_cause` reads from each decision record, on the
executors. Bootstrap intervals, ECE and AURC need the per-item values (resampling, sorting
by confidence) and are left to ``evaluate_router`` on a sample.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from .._fallback import FALLBACK_STAGE, fallback_cause
from ..evaluation._stats import (
    AUTO_REASON,
    AUTO_STAGE,
    DEFAULT_EXIT,
    DEFERRED_STAGES,
    RULE_STAGE,
    macro_f1_from_counts,
    per_class_from_confusion,
    round_metric,
    selective_summary,
    share,
)
from ..exceptions import UserInputError

__all__ = ["SparkEvaluation", "evaluate_scored", "scrubbed_rows", "with_outcomes"]


class SparkEvaluation(dict):
    """Router metrics computed on Spark (a JSON-able dict); the scored rows are in :attr:`scored`."""

    scored: Any = None

    def metrics(self) -> dict[str, float]:
        """The scalar metrics, flattened (for MLflow)."""
        keys = (
            "n",
            "n_classified",
            "accuracy",
            "macro_f1",
            "coverage",
            "selective_precision",
            "next_step_accuracy",
            "abstention_rate",
        )
        out = {}
        for k in keys:
            v = self.get(k)
            if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
                out[k] = float(v)
        return out


def with_outcomes(scored: Any) -> Any:
    """Add ``correct`` (intent label, model-stage rows only) and ``next_step_correct``."""
    from pyspark.sql import functions as F

    if "gold" not in scored.columns:
        raise UserInputError("evaluating needs a 'gold' (or 'label') column in the item frame")
    classified = F.col("stage") != RULE_STAGE
    out = scored.withColumn(
        "correct",
        F.when(classified, F.coalesce(F.col("label") == F.col("gold"), F.lit(False))),
    )
    if "gold_next_step" in scored.columns:
        out = out.withColumn(
            "next_step_correct",
            F.when(
                F.col("gold_next_step").isNotNull(),
                F.col("destination") == F.col("gold_next_step"),
            ),
        )
    else:
        out = out.withColumn("next_step_correct", F.lit(None).cast("boolean"))
    return out


def scrubbed_rows(scored: Any, scrubber: Any) -> Any:
    """The scored rows as they may be written out (``spark evaluate --output``).

    Each text column is scrubbed (:meth:`hybridroute._scrub.Scrubber.text`), ``facts`` is
    scrubbed as a document, and ``decision`` is the record as the decision log would store
    it (:meth:`~hybridroute._scrub.Scrubber.record`), with ``snapshot_hash`` the hash of
    that stored snapshot. Same schema, same rows; done on the executors, which receive the
    scrubber (and so the driver's credential-like environment values it looks for).
    """
    import json

    from pyspark.sql.types import StringType

    schema = scored.schema
    texts = [f.name for f in schema.fields if isinstance(f.dataType, StringType)]
    scrub = scrubber

    def doc(s: Any, fn: Any) -> Any:
        if not isinstance(s, str):
            return s  # null (None, or NaN in a pandas batch)
        try:
            value = json.loads(s)
        except ValueError:
            return scrub.text(s)
        return json.dumps(fn(value), ensure_ascii=False)

    def put(pdf: Any, col: str, values: list[Any]) -> None:
        import pandas as pd

        # object dtype: PySpark's Arrow conversion refuses pandas' own string arrays here
        pdf[col] = pd.Series(values, index=pdf.index, dtype=object)

    def batches(frames: Any) -> Any:
        for pdf in frames:
            for col in texts:
                if col == "decision":
                    records = [
                        scrub.record(json.loads(s)) if isinstance(s, str) else None
                        for s in pdf[col]
                    ]
                    if "snapshot_hash" in pdf:
                        put(
                            pdf,
                            "snapshot_hash",
                            [
                                h if r is None else r["snapshot_hash"]
                                for h, r in zip(pdf["snapshot_hash"], records, strict=True)
                            ],
                        )
                    put(
                        pdf,
                        col,
                        [None if r is None else json.dumps(r, ensure_ascii=False) for r in records],
                    )
                elif col == "facts":
                    put(pdf, col, [doc(s, scrub.value) for s in pdf[col]])
                elif col != "snapshot_hash":
                    put(pdf, col, [scrub.text(s) if isinstance(s, str) else s for s in pdf[col]])
            yield pdf

    return scored.mapInPandas(batches, schema=schema)


def _count_if(cond: Any) -> Any:
    from pyspark.sql import functions as F

    return F.sum(F.when(cond, 1).otherwise(0))


def _record_cause(stage: str | None, reason_code: str | None, decision: str | None) -> str | None:
    """The cause of one scored row's decision (run on the executors): its record's
    ``detail`` read by :func:`~hybridroute._fallback.fallback_cause`."""
    detail = json.loads(decision).get("detail") if decision else None
    return fallback_cause({"stage": stage, "reason_code": reason_code, "detail": detail})


def _cause_column(scored: Any) -> Any:
    """A column with each row's fallback cause (from the ``decision`` record when the frame
    has one, else the reason code)."""
    from pyspark.sql import functions as F

    decision = F.col("decision") if "decision" in scored.columns else F.lit(None).cast("string")
    # a plain row-at-a-time UDF (fallbacks are few); saying so spares Spark guessing the
    # UDF kind from the type hints (which warns)
    cause = F.udf(_record_cause, "string", useArrow=False)
    return cause(F.col("stage"), F.col("reason_code"), decision)


def evaluate_scored(
    scored: Any,
    *,
    labels: Sequence[str] | None = None,
    router: str | None = None,
    router_version: str | None = None,
) -> SparkEvaluation:
    """Aggregate a scored item frame (with ``gold``) into router metrics, in Spark.

    Parameters
    ----------
    scored : pyspark.sql.DataFrame
        Output of :meth:`SparkRouter.score` on a frame with a ``gold`` column
        (and optionally ``gold_next_step``). Fallbacks are counted by the cause in each
        row's ``decision`` record (a frame without that column: by reason code).
    labels : sequence of str, optional
        The label set (default: the gold and predicted labels seen). ``evaluate_router``
        uses the router's classes plus the gold labels.
    router, router_version : str, optional
        Written into the result.
    """
    from pyspark.sql import functions as F

    scored = with_outcomes(scored) if "correct" not in scored.columns else scored
    # the conditions of evaluation._stats.is_auto_routed and DEFERRED_STAGES, as columns
    classified = F.col("stage") != RULE_STAGE
    auto = classified & ((F.col("stage") == AUTO_STAGE) | (F.col("reason_code") == AUTO_REASON))
    deferred = F.col("stage").isin(*DEFERRED_STAGES)
    scored_next = F.col("next_step_correct").isNotNull()

    tot = scored.agg(
        F.count(F.lit(1)).alias("n"),
        _count_if(classified).alias("n_classified"),
        _count_if(F.col("correct")).alias("n_correct"),
        _count_if(auto).alias("n_auto"),
        _count_if(auto & F.col("correct")).alias("n_auto_correct"),
        _count_if(classified & F.col("confidence").isNotNull()).alias("n_confidence"),
        _count_if(scored_next).alias("n_next"),
        _count_if(F.col("next_step_correct")).alias("n_next_correct"),
        _count_if(deferred).alias("n_deferred"),
    ).first()
    n = int(tot["n"])
    n_cls = int(tot["n_classified"] or 0)

    result: dict[str, Any]
    if n_cls:
        # confusion counts: (gold, predicted) over the classified rows; gold labels of
        # every row, so the label set matches evaluate_router's
        pairs = (
            scored.groupBy(classified.alias("classified"), "gold", "label")
            .agg(F.count(F.lit(1)).alias("count"))
            .collect()
        )
        if labels is None:
            labs = sorted({p["gold"] for p in pairs} | {p["label"] for p in pairs if p["label"]})
        else:
            labs = sorted(set(labels) | {p["gold"] for p in pairs})
        index = {lab: i for i, lab in enumerate(labs)}
        k = len(labs)
        cm = np.zeros((k, k), dtype=np.int64)
        support = np.zeros(k, dtype=np.int64)
        for p in pairs:
            if not p["classified"]:
                continue
            t = index[p["gold"]]
            support[t] += p["count"]  # abstentions count in the support
            j = index.get(p["label"], -1) if p["label"] is not None else -1
            if j >= 0:
                cm[t, j] += p["count"]
        result = {
            "accuracy": share(int(tot["n_correct"]), n_cls),
            "macro_f1": round_metric(macro_f1_from_counts(np.diag(cm), cm.sum(axis=0), support)),
            "per_class": per_class_from_confusion(cm, labs, support),
            "confusion": {"labels": labs, "matrix": cm.tolist()},
            **selective_summary(n_cls, int(tot["n_auto"]), int(tot["n_auto_correct"])),
            "n_with_confidence": int(tot["n_confidence"] or 0),  # what ECE and AURC are over
        }
    else:
        result = {"accuracy": None, "macro_f1": None, "coverage": None, "selective_precision": None}
    result["n"] = n
    result["n_classified"] = n_cls
    n_next = int(tot["n_next"] or 0)
    if n_next:
        result["next_step_accuracy"] = share(int(tot["n_next_correct"]), n_next)
        result["n_next_step"] = n_next
    else:
        result["next_step_accuracy"] = None

    def counts(frame: Any, key: Any) -> dict[str, int]:
        got = frame.groupBy(key.alias("k")).agg(F.count(F.lit(1)).alias("c")).collect()
        return dict(sorted((r["k"], int(r["c"])) for r in got))

    result["decisions_by_stage"] = counts(scored, F.col("stage"))
    result["decisions_by_destination"] = counts(scored, F.col("destination"))
    result["abstention_rate"] = share(int(tot["n_deferred"]), n)
    result["abstentions_by_reason"] = counts(scored.where(deferred), F.col("reason_code"))
    fallbacks = scored.where(F.col("stage") == FALLBACK_STAGE)
    result["fallbacks_by_cause"] = counts(fallbacks, _cause_column(fallbacks))
    rule_rows = (
        scored.where(~classified)
        .groupBy(
            F.when(F.coalesce(F.col("rule_id"), F.lit("")) == "", F.lit(DEFAULT_EXIT))
            .otherwise(F.col("rule_id"))
            .alias("rule")
        )
        .agg(
            F.count(F.lit(1)).alias("fires"),
            _count_if(scored_next).alias("scored"),
            _count_if(F.col("next_step_correct")).alias("matches_gold"),
        )
        .collect()
    )
    rules = {}
    for r in sorted(rule_rows, key=lambda r: r["rule"]):
        fires, scored_n, matches = int(r["fires"]), int(r["scored"]), int(r["matches_gold"])
        rules[r["rule"]] = {
            "fires": fires,
            "matches_gold": matches,
            "scored": scored_n,
            "match_rate": share(matches, scored_n),
        }
    result["rules"] = rules
    result["mode"] = "router"
    result["engine"] = "spark"
    result["router"] = router
    result["router_version"] = router_version
    out = SparkEvaluation(result)
    out.scored = scored
    return out
