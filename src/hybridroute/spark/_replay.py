"""Replay a decision log on Spark: re-route the logged input snapshots, count what changes.

The log's records are read as raw JSON strings -- from a JSONL export (by Spark, on any
file system it reads), or from the rows of a SQLite or PostgreSQL log (on the driver,
through the records package's read-only reader: the log's tables are the records
package's business) -- and only the fields replay needs are pulled out with
``get_json_object``, so no record schema has to be inferred. Mismatches are aggregated in
Spark with the definitions of :func:`hybridroute.records.replay` (``rescore=True``: the
pyfunc model scores the text again).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..exceptions import ArtifactError

__all__ = ["read_decision_log", "replay_records"]

_RECORD_SCHEMA = "position long, seq long, item_id string, record string"
# Log URLs read through the records package (a bare path is sniffed for SQLite's header).
_DATABASE_URLS = ("sqlite:", "postgresql:", "postgres:")


def _is_sqlite(path: Path) -> bool:
    if not path.is_file():
        return False
    with open(path, "rb") as fh:
        return fh.read(16) == b"SQLite format 3\x00"


def _database_rows(target: str | os.PathLike[str]) -> list[tuple[int, int, str | None, str]]:
    """The rows of a log in a database (a SQLite file, a log URL), numbered in log order,
    read through the records API: never created, migrated or written."""
    from ..records._url import read_log_rows

    return [(pos, seq, item, rec) for pos, (seq, item, rec) in enumerate(read_log_rows(target))]


def read_decision_log(spark: Any, path: str | os.PathLike[str]) -> Any:
    """The records of a decision log as a Spark DataFrame.

    Parameters
    ----------
    spark : SparkSession
    path : path or URI
        A SQLite decision log (read on the driver: a SQLite file lives on one machine),
        its ``sqlite:///PATH`` URL, a ``postgresql://`` log URL (read on the driver), or
        a JSONL export (:meth:`DecisionLog.to_jsonl`) -- a file or a directory of part
        files, on any file system Spark reads (HDFS, S3, a shared mount). A log is read
        through the records package, never created, migrated or written.

    Returns
    -------
    pyspark.sql.DataFrame
        ``position`` (0-based, in log order: ``seq`` for SQLite, line order for a JSONL
        file), ``seq``, ``item_id`` and ``record`` (the record's JSON text).
    """
    from pyspark.sql import functions as F

    text = os.fspath(path)
    if str(text).lower().startswith(_DATABASE_URLS) or _is_sqlite(Path(text)):
        return spark.createDataFrame(_database_rows(text), schema=_RECORD_SCHEMA)
    local = Path(text)
    if "://" not in str(path) and not local.exists():
        raise ArtifactError("no such decision log", path=str(path))
    lines = spark.read.text(str(path)).where(F.trim(F.col("value")) != "")
    indexed = lines.rdd.zipWithIndex().map(lambda p: (p[1], p[0][0]))
    frame = spark.createDataFrame(indexed, schema="position long, record string")
    return frame.select(
        "position",
        F.get_json_object("record", "$.seq").cast("long").alias("seq"),
        F.get_json_object("record", "$.item_id").alias("item_id"),
        "record",
    )


def replay_records(
    records: Any,
    udf: Any,
    *,
    router: str,
    router_version: str,
    max_examples: int = 10,
) -> Any:
    """Re-route each record's input snapshot with ``udf`` and aggregate the changes in Spark.

    Returns a :class:`hybridroute.records.ReplayReport` with the keys of
    :func:`hybridroute.records.replay` (``rescore=True``), plus ``hash_changes`` (records
    whose snapshot hash the router now computes differently: hashed sensitive facts, or a
    changed fact schema) and ``engine: "spark"``. The scored rows are in the report's
    ``replayed`` attribute (a Spark DataFrame).

    Parameters
    ----------
    records : pyspark.sql.DataFrame
        Logged records, as :func:`read_decision_log` returns them (``position``, ``seq``,
        ``item_id``, ``record``).
    udf : pyspark UDF
        The router UDF (:func:`~hybridroute.spark.router_udf`) to re-route with; it is
        applied to ``struct(text, facts)`` of each record's input snapshot.
    router, router_version : str
        The replaying router's name and version, written into the report.
    max_examples : int, default 10
        How many changed decisions the report shows in full, first in log order (a
        negative value shows none).

    Returns
    -------
    ReplayReport
    """
    from pyspark.sql import functions as F

    from ..records import ReplayReport

    def field(path: str) -> Any:
        return F.get_json_object(F.col("record"), path)

    base = records.select(
        "position",
        "seq",
        "item_id",
        field("$.input_snapshot.text").alias("text"),
        field("$.input_snapshot.facts").alias("facts"),
        field("$.selected_destination").alias("old_destination"),
        field("$.reason_code").alias("old_reason_code"),
        field("$.stage").alias("old_stage"),
        field("$.router_version").alias("old_router_version"),
        field("$.confidence").cast("double").alias("old_confidence"),
        field("$.threshold").cast("double").alias("old_threshold"),
        field("$.snapshot_hash").alias("old_snapshot_hash"),
    )
    routed = base.withColumn("_d", udf(F.struct("text", "facts")))
    d = F.col("_d")
    new_decision = d["decision"]
    replayed = routed.select(
        *base.columns,
        d["destination"].alias("new_destination"),
        d["reason_code"].alias("new_reason_code"),
        d["stage"].alias("new_stage"),
        F.get_json_object(new_decision, "$.router_version").alias("new_router_version"),
        F.when(~F.isnan(d["confidence"]), d["confidence"]).alias("new_confidence"),
        F.get_json_object(new_decision, "$.threshold").cast("double").alias("new_threshold"),
        d["snapshot_hash"].alias("new_snapshot_hash"),
    ).withColumn("changed", ~F.col("new_destination").eqNullSafe(F.col("old_destination")))
    replayed = replayed.persist()
    try:
        report = _report(replayed, router, router_version, max_examples, ReplayReport)
    finally:
        replayed.unpersist()
    report.replayed = replayed
    return report


def _report(replayed: Any, router: str, version: str, max_examples: int, cls: Any) -> Any:
    from pyspark.sql import functions as F

    def count_if(cond: Any) -> Any:
        return F.sum(F.when(cond, 1).otherwise(0))

    changed = F.col("changed")
    tot = replayed.agg(
        F.count(F.lit(1)).alias("n"),
        count_if(changed).alias("mismatches"),
        count_if(~F.col("new_reason_code").eqNullSafe(F.col("old_reason_code"))).alias(
            "reason_changes"
        ),
        count_if(~F.col("new_snapshot_hash").eqNullSafe(F.col("old_snapshot_hash"))).alias(
            "hash_changes"
        ),
    ).first()
    n = int(tot["n"])
    mismatches = int(tot["mismatches"] or 0)

    def breakdown(column: str) -> dict[str, dict[str, int]]:
        # str() of a missing value is "None" in records.replay
        key = F.coalesce(F.col(column), F.lit("None")).alias("k")
        rows = (
            replayed.groupBy(key)
            .agg(
                F.count(F.lit(1)).alias("n"),
                count_if(changed).alias("m"),
                F.min("position").alias("first"),
            )
            .orderBy("first")  # first appearance: the single-machine dict's insertion order
            .collect()
        )
        return {r["k"]: {"n": int(r["n"]), "mismatches": int(r["m"])} for r in rows}

    # Counter.most_common: by count, ties in order of first appearance
    transitions = (
        replayed.where(changed)
        .groupBy(
            F.concat_ws(
                " -> ",
                F.coalesce(F.col("old_destination"), F.lit("None")),
                F.col("new_destination"),
            ).alias("t")
        )
        .agg(F.count(F.lit(1)).alias("c"), F.min("position").alias("first"))
        .orderBy(F.col("c").desc(), F.col("first").asc())
        .collect()
    )
    examples = []
    for r in replayed.where(changed).orderBy("position").limit(max(0, max_examples)).collect():
        examples.append(
            {
                "position": int(r["position"]),
                "snapshot_hash": r["old_snapshot_hash"],
                "text": r["text"],
                "old": {
                    "destination": r["old_destination"],
                    "reason_code": r["old_reason_code"],
                    "stage": r["old_stage"],
                    "router_version": r["old_router_version"],
                    "confidence": r["old_confidence"],
                    "threshold": r["old_threshold"],
                },
                "new": {
                    "destination": r["new_destination"],
                    "reason_code": r["new_reason_code"],
                    "stage": r["new_stage"],
                    "router_version": r["new_router_version"],
                    "confidence": r["new_confidence"],
                    "threshold": r["new_threshold"],
                },
            }
        )
    report = cls(
        router=router,
        router_version=version,
        rescore=True,
        n=n,
        mismatches=mismatches,
        mismatch_rate=(mismatches / n) if n else 0.0,
        reason_changes=int(tot["reason_changes"] or 0),
        unreplayable=0,
        by_stage=breakdown("old_stage"),
        by_reason_code=breakdown("old_reason_code"),
        transitions={r["t"]: int(r["c"]) for r in transitions},
        examples=examples,
        errors=[],
        hash_changes=int(tot["hash_changes"] or 0),
        engine="spark",
    )
    return report
