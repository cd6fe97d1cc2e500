"""``hybridroute spark evaluate`` and ``hybridroute spark replay``: the same jobs on Spark.

Needs the ``spark`` extra (pyspark) and Java 17. Without ``--master`` the job runs on the
master ``spark-submit`` gave it, or else in ``local[2]``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import typer

_MASTER_HELP = "Spark master URL (default: spark-submit's, else local[2])."


def _session(master: str | None) -> tuple[Any, bool]:
    """The Spark session to use, and whether this command started it (and so stops it)."""
    from ..exceptions import UserInputError
    from ..spark import local_session

    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise UserInputError(
            "the spark commands need pyspark: pip install 'hybridroute[spark]' (and Java 17)"
        ) from None

    active = SparkSession.getActiveSession()
    if active is not None:
        return active, False
    if master is None and "PYSPARK_GATEWAY_PORT" in os.environ:
        # launched by spark-submit: its master and settings are already in the JVM
        return SparkSession.builder.appName("hybridroute").getOrCreate(), True
    return local_session("hybridroute", master=master or "local[2]"), True


def _spark_router(
    spark: Any,
    router: Path | None,
    model_uri: str | None,
    tracking_uri: str | None,
    env_manager: str,
) -> Any:
    from ..spark import SparkRouter

    if (router is None) == (model_uri is None):
        raise typer.BadParameter("give exactly one of --router (a bundle) or --model-uri")
    if router is not None:
        return SparkRouter.from_bundle(
            spark, router, tracking_uri=tracking_uri, env_manager=env_manager
        )
    assert model_uri is not None  # checked above
    return SparkRouter(spark, model_uri, tracking_uri=tracking_uri, env_manager=env_manager)


def _check_local_output(output: str) -> None:
    """``--output`` on this machine (a path or ``file:``): a new directory Spark can create.

    A URI of another filesystem (``hdfs://``, ``s3a://``) is Spark's to check.
    """
    import re

    from ..exceptions import UserInputError
    from ._outputs import check_output

    scheme = re.match(r"^([A-Za-z][A-Za-z0-9+.\-]+):", output)
    if scheme is not None and scheme.group(1).lower() != "file":
        return
    path = Path(re.sub(r"^file:(//)?", "", output) if scheme is not None else output)
    if os.path.lexists(path):
        raise UserInputError(f"--output {output}: exists; Spark writes a new directory")
    check_output(path, "--output", kind="dir")


def evaluate_cmd(
    router: Path | None = typer.Option(None, "--router", help="Router bundle directory."),
    model_uri: str | None = typer.Option(
        None, "--model-uri", help="An already logged router (models:/..., runs:/...)."
    ),
    dataset: str | None = typer.Option(
        None, "--dataset", help="A labelled set reference (support-tickets, jsonl:PATH...)."
    ),
    split: str = typer.Option("test", "--split", help="Split of --dataset ('all' for every row)."),
    input_path: str | None = typer.Option(
        None, "--input", help="Items read by Spark (file, directory or URI): text, facts, label."
    ),
    input_format: str = typer.Option("json", "--format", help="Format of --input: json, parquet."),
    partitions: int | None = typer.Option(None, "--partitions", help="Repartition the items."),
    output: str | None = typer.Option(
        None, "--output", help="Write the scored rows here (Parquet directory)."
    ),
    master: str | None = typer.Option(None, "--master", help=_MASTER_HELP),
    tracking_uri: str | None = typer.Option(
        None, "--tracking-uri", help="MLflow store for the model (default: a temporary one)."
    ),
    env_manager: str = typer.Option(
        "local", "--env-manager", help="spark_udf env_manager: local, virtualenv, uv, conda."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the metrics as JSON."),
) -> None:
    """Route a labelled set on Spark and print the router metrics (aggregated in Spark)."""
    if (dataset is None) == (input_path is None):
        raise typer.BadParameter("give exactly one of --dataset or --input")
    if input_format not in ("json", "parquet"):
        raise typer.BadParameter("--format is json or parquet")
    from .._scrub import Scrubber

    if output is not None:
        _check_local_output(output)  # before Spark starts
    scrub = Scrubber()
    spark, started = _session(master)
    try:
        sr = _spark_router(spark, router, model_uri, tracking_uri, env_manager)
        if dataset is not None:
            from ._datasets import load_set

            # every fact checked against the router's schema before anything is routed:
            # a bad one is exit 2 naming row and column, as in `hybridroute evaluate --router`
            ds = load_set(dataset, {}, sr.router.rules.schema)
            if split != "all":
                ds = ds.split(split)
            items = sr.items(ds, num_partitions=partitions)
        else:
            items = spark.read.format(input_format).load(input_path)
            if partitions is not None:
                items = items.repartition(partitions)
        result = sr.evaluate(items)
        if output is not None:
            from ..spark._evaluate import scrubbed_rows

            # the scored rows carry ticket texts, facts and decision records
            scrubbed_rows(result.scored, scrub).write.mode("errorifexists").parquet(output)
        result.scored.unpersist()
    finally:
        if started:
            spark.stop()
    if as_json:
        typer.echo(scrub.json(result, indent=2))
        return
    from ._evaluate import headline_lines

    shown = scrub.value(dict(result))
    typer.echo(f"routed on Spark with {shown['router']} {shown['router_version']}")
    for line in headline_lines(shown):  # the labels of `hybridroute evaluate` and the report
        typer.echo(line)


def replay_cmd(
    log: str = typer.Option(
        ...,
        "--log",
        help="Decision log: a SQLite file or sqlite:/// URL, a postgresql:// URL, or a JSONL "
        "export (file, directory, URI).",
    ),
    router: Path | None = typer.Option(None, "--router", help="Router bundle to replay with."),
    model_uri: str | None = typer.Option(
        None, "--model-uri", help="An already logged router (models:/..., runs:/...)."
    ),
    max_examples: int = typer.Option(10, "--max-examples", help="Changed decisions shown."),
    master: str | None = typer.Option(None, "--master", help=_MASTER_HELP),
    tracking_uri: str | None = typer.Option(
        None, "--tracking-uri", help="MLflow store for the model (default: a temporary one)."
    ),
    env_manager: str = typer.Option(
        "local", "--env-manager", help="spark_udf env_manager: local, virtualenv, uv, conda."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
) -> None:
    """Re-route logged inputs on Spark (rescoring the text) and report what changes."""
    from .._scrub import Scrubber

    scrub = Scrubber()
    spark, started = _session(master)
    try:
        sr = _spark_router(spark, router, model_uri, tracking_uri, env_manager)
        report = sr.replay(log, max_examples=max_examples)
    finally:
        if started:
            spark.stop()
    if as_json:
        typer.echo(scrub.json(report, indent=2))
    else:
        for line in report.summary_lines():
            typer.echo(scrub.text(line))


def register(app: typer.Typer) -> None:
    """Register the ``spark`` command group (``evaluate``, ``replay``) on ``app``."""
    group = typer.Typer(
        help="Evaluate a labelled set or replay a decision log on Spark (needs the spark extra).",
        no_args_is_help=True,
    )
    group.command("evaluate")(evaluate_cmd)
    group.command("replay")(replay_cmd)
    app.add_typer(group, name="spark")
