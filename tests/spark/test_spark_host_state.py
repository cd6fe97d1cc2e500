"""Spark jobs leave their host as they found it, and reach MLflow only through tracking."""

from __future__ import annotations

import logging
import os
import shutil
import sys

import pytest

from ..support_router import support_router

pytestmark = [
    pytest.mark.spark,
    pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning"),
]

# read when the module is collected, before any test starts the session
PYSPARK_PYTHON_BEFORE = os.environ.get("PYSPARK_PYTHON")


def test_starting_a_session_leaves_pyspark_python_as_it_was(spark):
    assert os.environ.get("PYSPARK_PYTHON") == PYSPARK_PYTHON_BEFORE


def test_the_workers_run_this_interpreter_unless_the_user_chose_one(spark):
    rdd = spark.sparkContext.parallelize([0], 1).map(lambda _: __import__("sys").executable)
    (seen,) = rdd.collect()
    chosen = PYSPARK_PYTHON_BEFORE
    if chosen is None:  # this very interpreter (a virtual environment's, not its base)
        assert seen == sys.executable
    else:
        assert os.path.realpath(seen) == os.path.realpath(shutil.which(chosen) or chosen)


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    router, _ = support_router()
    return router, router.save(tmp_path_factory.mktemp("spark-host") / "bundle")


def _state():
    import mlflow

    return (
        dict(os.environ),
        {n: logging.getLogger(n).level for n in ["", *logging.root.manager.loggerDict]},
        mlflow.get_tracking_uri() if mlflow.is_tracking_uri_set() else None,
    )


def test_logging_loading_and_applying_the_router_leave_the_host_as_it_was(
    spark, bundle, tmp_path, monkeypatch
):
    # the import-time set-up of MLflow and SQLAlchemy (which gives its own logger a level
    # when it has none) is theirs, not the job's
    import mlflow  # noqa: F401
    import sqlalchemy  # noqa: F401

    from hybridroute.spark import SparkRouter

    router, path = bundle
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    env, levels, uri = _state()
    sr = SparkRouter.from_bundle(spark, path, tracking_uri=f"sqlite:///{tmp_path / 'm.db'}")
    assert sr.router.version == router.version  # loaded on the driver, through tracking
    frame = spark.createDataFrame(
        [("my card was charged twice", '{"has_permission": true}')], "text string, facts string"
    )
    (row,) = sr.score(frame).collect()
    expected = router.route({"has_permission": True}, "my card was charged twice")
    assert row["snapshot_hash"] == expected.snapshot_hash
    env_after, levels_after, uri_after = _state()
    changed = {
        k: (env.get(k), env_after.get(k))
        for k in set(env) | set(env_after)
        if env.get(k) != env_after.get(k)
    }
    assert changed == {}
    # every logger the host had keeps its level (a dependency's own logger, created and set
    # by its first import during the job -- sqlalchemy's, a migration's -- is not the host's)
    assert {n: (lv, levels_after[n]) for n, lv in levels.items() if levels_after[n] != lv} == {}
    assert uri_after == uri


def test_a_running_session_keeps_the_log_level_its_owner_chose(spark):
    from hybridroute.spark import local_session

    spark.sparkContext.setLogLevel("WARN")
    try:
        assert local_session("again") is spark
        level = spark.sparkContext._jvm.org.apache.logging.log4j.LogManager.getRootLogger()
        assert str(level.getLevel()) == "WARN"
    finally:
        spark.sparkContext.setLogLevel("ERROR")
