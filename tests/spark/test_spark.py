"""Scale-out on Spark: the same router in ``local[2]`` gives the single-machine results exactly.

10,000 items are made deterministically from the bundled support tickets (every row
repeated, later copies with a reference number in the text and a scaled amount), routed
once on one machine (``route_many`` / ``evaluate_router`` / ``records.replay``) and once
on Spark through ``mlflow.pyfunc.spark_udf``; rows, decision records, snapshot hashes,
metrics and replay reports must be equal, not close.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from ..evaluation.one_set import (
    CLASSES,
    FALLBACKS_BY_CAUSE,
    ROUTER_METRIC_KEYS,
    FixedRouter,
    reference_macro_f1,
    router_dataset,
    router_rows,
    scored_rows,
)
from ..router.conftest import EXAMPLE, fitted_policy

pytestmark = [
    pytest.mark.spark,
    # pyspark 4.3 warns that pandas 3 is "not yet fully supported"; the features used
    # here (Arrow conversion, iterator pandas UDFs) are checked by these very tests.
    pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning"),
]

N_ROWS = 10_000


def _ten_thousand(ds):
    """The support tickets repeated and perturbed, deterministically, to N_ROWS rows."""
    from hybridroute.datasets import LabelledSet

    base = ds.frame
    pos = np.arange(N_ROWS) % len(base)
    copy = np.arange(N_ROWS) // len(base)
    big = base.iloc[pos].reset_index(drop=True)
    big["id"] = [f"{i}~{c}" for i, c in zip(big["id"], copy, strict=True)]
    big["text"] = [
        t if c == 0 else f"{t} (ref {1000 + 37 * c})"
        for t, c in zip(big["text"], copy, strict=True)
    ]
    # distinct money amounts per copy: floats, and integral floats that must hash as ints
    big["amount"] = [
        a if a is None or a != a or c == 0 else round(float(a) * (1.0 + c / 8.0), 2)
        for a, c in zip(big["amount"], copy, strict=True)
    ]
    return LabelledSet.from_frame(big, name="support-tickets-10k")


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    from hybridroute.calibration import CertifiedPrecisionThreshold
    from hybridroute.classifiers import LocalClassifier
    from hybridroute.datasets import load_dataset
    from hybridroute.evaluation import evaluate_router
    from hybridroute.records import DecisionLog
    from hybridroute.router import HybridRouter
    from hybridroute.rules import load_rules

    root = tmp_path_factory.mktemp("spark")
    ds = load_dataset("support-tickets")
    train = ds.split("train")
    clf = LocalClassifier(Cs=(10.0,)).fit(train.texts, train.y)
    rules = load_rules(EXAMPLE)
    v1 = HybridRouter(
        rules=rules,
        classifier=clf,
        policy=fitted_policy(clf, ds, CertifiedPrecisionThreshold(0.85, 0.1)),
        name="support",
        version="1",
    )
    # a stricter policy: replaying v1's log with it changes some decisions
    v2 = HybridRouter(
        rules=rules,
        classifier=clf,
        policy=fitted_policy(clf, ds, CertifiedPrecisionThreshold(0.97, 0.1)),
        name="support",
        version="2",
    )
    big = _ten_thousand(ds)
    names = set(rules.schema.names)
    items = [
        {"facts": {k: v for k, v in f.items() if v is not None and k in names}, "text": t}
        for f, t in zip(big.iter_facts(), big.texts, strict=True)
    ]
    decisions = v1.route_many(items)
    evaluation = evaluate_router(v1, big, n_boot=10)
    log_path = root / "decisions.sqlite"
    with DecisionLog(log_path, batch_size=2000) as log:
        log.extend(decisions, item_ids=big.ids)
        log.to_jsonl(root / "decisions.jsonl")
    return SimpleNamespace(
        root=root,
        big=big,
        v1=v1,
        v2=v2,
        bundle_v1=v1.save(root / "bundle-v1"),
        bundle_v2=v2.save(root / "bundle-v2"),
        decisions=decisions,
        evaluation=evaluation,
        log_path=log_path,
        jsonl_path=root / "decisions.jsonl",
        tracking_uri=f"sqlite:///{root / 'mlflow.db'}",
    )


@pytest.fixture(scope="module")
def spark_v1(spark, world):
    from hybridroute.spark import SparkRouter

    # no tracking URI: the default, a fresh SQLite store in a temporary directory
    sr = SparkRouter.from_bundle(spark, world.bundle_v1)
    store = Path(sr.tracking_uri.removeprefix("sqlite:///")).parent
    assert store.name.startswith("hybridroute-spark-mlflow-")
    yield sr
    shutil.rmtree(store, ignore_errors=True)


@pytest.fixture(scope="module")
def spark_eval(spark_v1, world):
    items = spark_v1.items(world.big, num_partitions=4)
    result = spark_v1.evaluate(items)
    rows = result.scored.orderBy("row").collect()
    yield result, rows
    result.scored.unpersist()


# ---------------------------------------------------------------------- scoring


def test_the_set_is_ten_thousand_distinct_items(world):
    assert len(world.big) == N_ROWS
    assert len({d.snapshot_hash for d in world.decisions}) == N_ROWS
    stages = {d.stage for d in world.decisions}
    assert {"rule", "model", "policy"} <= stages


def test_spark_rows_equal_single_machine_row_for_row(spark_eval, world):
    result, rows = spark_eval
    assert result.scored.rdd.getNumPartitions() == 4
    assert [r["row"] for r in rows] == list(range(N_ROWS))
    for r, d, e in zip(rows, world.decisions, world.evaluation.rows, strict=True):
        assert r["decision"] == d.to_json(), f"row {r['row']}"
        assert r["snapshot_hash"] == d.snapshot_hash
        assert (r["destination"], r["reason_code"], r["stage"]) == (
            d.selected_destination,
            d.reason_code,
            d.stage,
        )
        assert (r["label"], r["confidence"], r["rule_id"], r["action"]) == (
            e["predicted"],
            e["confidence"],
            e["rule_id"],
            e["action"],
        )
        assert (r["gold"], r["gold_next_step"]) == (e["gold"], e["gold_next_step"])
        assert (r["correct"], r["next_step_correct"]) == (e["correct"], e["next_step_correct"])


@pytest.mark.parametrize("key", [*ROUTER_METRIC_KEYS, "router", "router_version"])
def test_spark_metrics_equal_evaluate_router(spark_eval, world, key):
    result, _ = spark_eval
    assert key in world.evaluation
    assert result[key] == world.evaluation[key]


def test_spark_metrics_are_flat_numbers(spark_eval):
    result, _ = spark_eval
    metrics = result.metrics()
    assert metrics["n"] == N_ROWS
    assert 0.0 < metrics["accuracy"] <= 1.0
    assert set(metrics) >= {"coverage", "next_step_accuracy", "abstention_rate"}


@pytest.mark.parametrize("layout", ["facts-struct", "fact-columns"])
def test_items_read_by_spark_from_an_exported_file_route_the_same(spark, spark_v1, world, layout):
    """The scale-out input path: a JSONL export read by Spark, not built on the driver."""
    from hybridroute.datasets import LabelledSet

    lo, hi = (0, 1500) if layout == "facts-struct" else (1500, 3000)
    part = LabelledSet.from_frame(world.big.frame.iloc[lo:hi], name="part")
    frame = spark.read.json(str(part.export(world.root / f"part-{layout}.jsonl")))
    if layout == "fact-columns":  # one column per fact, as a table would hold them
        frame = frame.select("id", "text", "label", "next_step", "facts.*")
    scored = spark_v1.score(frame)
    got = {
        r["id"]: (r["snapshot_hash"], r["destination"], r["reason_code"], r["gold"])
        for r in scored.collect()
    }
    want = {
        i: (d.snapshot_hash, d.selected_destination, d.reason_code, g)
        for i, d, g in zip(
            world.big.ids[lo:hi], world.decisions[lo:hi], world.big.y[lo:hi], strict=True
        )
    }
    assert got == want


# ---------------------------------------------------------------------- replay


def test_both_log_formats_read_the_same_records(spark, world):
    from hybridroute.spark import read_decision_log

    sqlite_rows = read_decision_log(spark, world.log_path).orderBy("position").collect()
    jsonl_rows = read_decision_log(spark, world.jsonl_path).orderBy("position").collect()
    assert len(sqlite_rows) == len(jsonl_rows) == N_ROWS
    for a, b in zip(sqlite_rows, jsonl_rows, strict=True):
        assert (a["position"], a["seq"], a["item_id"]) == (b["position"], b["seq"], b["item_id"])
        rec_b = json.loads(b["record"])
        for extra in ("seq", "logged_at", "item_id", "decision_id", "role"):
            rec_b.pop(extra)
        assert json.loads(a["record"]) == rec_b


@pytest.fixture(scope="module")
def replays(spark, world):
    from hybridroute.records import DecisionLog, replay
    from hybridroute.spark import SparkRouter

    with DecisionLog(world.log_path) as log:
        single = replay(log.records(), world.v2, rescore=True)
    spark_v2 = SparkRouter.from_bundle(spark, world.bundle_v2, tracking_uri=world.tracking_uri)
    return single, spark_v2.replay(world.jsonl_path)


@pytest.mark.parametrize(
    "key",
    [
        "router",
        "router_version",
        "rescore",
        "n",
        "mismatches",
        "mismatch_rate",
        "reason_changes",
        "unreplayable",
        "by_stage",
        "by_reason_code",
        "transitions",
        "examples",
    ],
)
def test_spark_replay_equals_single_machine_replay(replays, key):
    single, on_spark = replays
    assert on_spark[key] == single[key]


def test_spark_replay_finds_the_changes_in_the_same_order(replays):
    single, on_spark = replays
    assert on_spark["mismatches"] > 0
    assert list(on_spark["transitions"].items()) == list(single["transitions"].items())
    assert on_spark["hash_changes"] == 0  # same facts schema, nothing redacted
    assert on_spark.summary_lines()[0] == single.summary_lines()[0]


# ---------------------------------------------------------------------- errors


def test_a_frame_without_text_is_refused(spark, spark_v1):
    from hybridroute.exceptions import UserInputError

    frame = spark.createDataFrame([("a", "{}")], schema="body string, facts string")
    with pytest.raises(UserInputError, match="no 'text' column"):
        spark_v1.score(frame)


def test_evaluating_needs_gold_labels(spark, spark_v1):
    from hybridroute.exceptions import UserInputError

    frame = spark.createDataFrame([("hello", "{}")], schema="text string, facts string")
    with pytest.raises(UserInputError, match="'gold'"):
        spark_v1.evaluate(frame, cache=False)


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda root: root / "missing.jsonl", "no such decision log"),
        (lambda root: _not_a_log(root / "other.sqlite"), "not a readable decision log"),
    ],
)
def test_unreadable_logs_are_refused_with_their_path(spark, tmp_path, make, match):
    from hybridroute.exceptions import ArtifactError
    from hybridroute.spark import read_decision_log

    path = make(tmp_path)
    with pytest.raises(ArtifactError, match=match) as info:
        read_decision_log(spark, path)
    assert info.value.path == str(path)


def _not_a_log(path):
    import sqlite3

    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE t (x INTEGER)")
    conn.commit()
    conn.close()
    return path


def test_logging_something_that_is_not_a_bundle_fails_before_spark(tmp_path):
    from hybridroute.exceptions import ArtifactError
    from hybridroute.spark import log_router

    with pytest.raises(ArtifactError, match="not a router bundle"):
        log_router(tmp_path)


def test_importing_the_package_imports_neither_pyspark_nor_mlflow():
    code = (
        "import sys, hybridroute.spark; "
        "bad = [m for m in ('pyspark', 'mlflow', 'pandas') if m in sys.modules]; "
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_public_names_are_pinned():
    import hybridroute.spark as hs

    assert sorted(hs.__all__) == [
        "ITEM_COLUMNS",
        "LoggedRouter",
        "RESULT_TYPE",
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
    assert all(hasattr(hs, name) for name in hs.__all__)


def test_spark_gives_the_numbers_of_every_other_path_on_one_set(spark):
    """One definition per number: macro-F1 (gold ∪ answered labels, abstentions a miss),
    per-class scores, coverage... equal on Spark, in memory and streamed."""
    from pyspark.sql.types import DoubleType, StringType, StructField, StructType

    from hybridroute.evaluation import evaluate_router, evaluate_stream
    from hybridroute.spark import evaluate_scored

    columns = ("stage", "label", "confidence", "destination", "reason_code", "rule_id")
    columns += ("gold", "gold_next_step", "decision")
    schema = StructType(
        [StructField(c, DoubleType() if c == "confidence" else StringType(), True) for c in columns]
    )
    frame = spark.createDataFrame([tuple(r[c] for c in columns) for r in scored_rows()], schema)
    on_spark = evaluate_scored(frame, labels=list(CLASSES))
    in_memory = evaluate_router(FixedRouter(), router_dataset(), n_boot=20)
    streamed = evaluate_stream(FixedRouter(), router_rows(), n_boot=5)
    for key in ROUTER_METRIC_KEYS:
        assert on_spark[key] == in_memory[key] == streamed[key], key
    assert on_spark["macro_f1"] == reference_macro_f1()
    assert on_spark["fallbacks_by_cause"] == FALLBACKS_BY_CAUSE  # read from each record
    # a frame without decision records counts each fallback under its reason code
    bare = evaluate_scored(frame.drop("decision"), labels=list(CLASSES))
    assert bare["fallbacks_by_cause"] == {"classifier_abstained": 1, "classifier_error": 1}
