"""``hybridroute spark evaluate`` / ``spark replay`` on the 273-row support-tickets test split."""

from __future__ import annotations

import json

import pytest
import typer
from typer.testing import CliRunner

from ..support_router import support_router

pytestmark = [
    pytest.mark.spark,
    pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning"),
]


@pytest.fixture(scope="module")
def cli():
    from hybridroute.cli._spark import register

    app = typer.Typer()

    @app.callback()
    def _root() -> None:
        """Test app."""

    register(app)
    runner = CliRunner()

    def invoke(*args: str):
        return runner.invoke(app, list(args), catch_exceptions=False)

    return invoke


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    from hybridroute.records import DecisionLog

    root = tmp_path_factory.mktemp("spark-cli")
    router, ds = support_router()
    test = ds.split("test")
    names = set(router.rules.schema.names)
    decisions = router.route_many(
        [
            {"facts": {k: v for k, v in f.items() if v is not None and k in names}, "text": t}
            for f, t in zip(test.iter_facts(), test.texts, strict=True)
        ]
    )
    with DecisionLog(root / "log.sqlite") as log:
        log.extend(decisions)
    return {
        "router": router,
        "test": test,
        "bundle": router.save(root / "bundle"),
        "log": root / "log.sqlite",
        "tracking_uri": f"sqlite:///{root / 'mlflow.db'}",
    }


def _evaluate_support(cli, setup, *extra: str):
    """``spark evaluate`` of the support-tickets test split with the setup's bundle."""
    args = ["--router", str(setup["bundle"]), "--dataset", "support-tickets"]
    result = cli("spark", "evaluate", *args, "--tracking-uri", setup["tracking_uri"], *extra)
    assert result.exit_code == 0, result.output
    return result


def test_spark_evaluate_prints_the_single_machine_metrics(spark, cli, setup):
    from hybridroute.evaluation import evaluate_router

    got = json.loads(_evaluate_support(cli, setup, "--json").stdout)
    want = evaluate_router(setup["router"], setup["test"], n_boot=10)
    keys = ("n", "accuracy", "macro_f1", "coverage", "next_step_accuracy", "rules")
    for key in (*keys, "n_with_confidence", "fallbacks_by_cause"):
        assert got[key] == want[key], key
    assert spark.range(3).count() == 3  # the shared session was not stopped


def test_spark_evaluate_says_what_each_count_counts(spark, cli, setup):
    result = _evaluate_support(cli, setup)
    lines = result.stdout.splitlines()
    assert lines[0] == "routed on Spark with support 1"
    labels = {
        line.split("  ")[1].strip(): line
        for line in lines[1:]
        if line.startswith("  ") and not line.startswith("    ")
    }
    assert "rows of the set, all routed" in labels["items"]
    assert "items no rule decided" in labels["classified"]
    assert "share of the classified items" in labels["accuracy"]
    stages = lines.index("  decisions by stage (of the 273 items):")
    assert lines[stages + 1].split()[0] == "rule" and "a rule decided" in lines[stages + 1]


def test_spark_replay_with_the_same_router_changes_nothing(spark, cli, setup):
    result = cli(
        "spark",
        "replay",
        "--router",
        str(setup["bundle"]),
        "--log",
        str(setup["log"]),
        "--tracking-uri",
        setup["tracking_uri"],
    )
    assert result.exit_code == 0, result.output
    assert "replayed 273 decisions with support 1 (rescored): 0 mismatches" in result.output


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (("--dataset", "support-tickets"), "exactly one of --router"),
        (
            ("--router", "x", "--model-uri", "models:/m", "--dataset", "d"),
            "exactly one of --router",
        ),
        (("--router", "x"), "exactly one of --dataset or --input"),
        (("--router", "x", "--input", "p", "--format", "csv"), "json or parquet"),
    ],
)
def test_spark_evaluate_usage_errors(spark, cli, args, match):
    result = CliRunner().invoke(_app_for_errors(), ["spark", "evaluate", *args])
    assert result.exit_code == 2
    assert match in result.output


def _app_for_errors():
    from hybridroute.cli._spark import register

    app = typer.Typer()

    @app.callback()
    def _root() -> None:
        """Test app."""

    register(app)
    return app


@pytest.fixture(scope="module")
def facts_bundles(tmp_path_factory):
    from ..cli.facts_bundle import build_bundles

    return build_bundles(tmp_path_factory.mktemp("spark-facts"))


@pytest.mark.parametrize(
    ("bundle", "rows", "where"),
    [
        # a named set breaking the router's schema: row, column and row id named
        ("strict", None, "support-tickets, row "),
        # a file: the bad cell's row and column, each cell read as its declared type
        (
            "example",
            "bad one,order_status,test,maybe,0,0,",
            "{path}, row 5, column 'has_permission'",
        ),
        ("example", "bad one,order_status,test,true,two,0,", "{path}, row 5, column 'attempts'"),
    ],
)
def test_spark_evaluate_refuses_facts_that_break_the_router_schema(
    spark, facts_bundles, tmp_path, capsys, bundle, rows, where
):
    from hybridroute.cli import main

    from ..cli.facts_bundle import GOOD, HEADER

    dataset = "support-tickets"
    if rows is not None:
        path = tmp_path / "tickets.csv"
        path.write_text("\n".join([HEADER, *GOOD, rows]) + "\n", encoding="utf-8")
        dataset, where = f"csv:{path}", where.format(path=path)
    argv = ["spark", "evaluate", "--router", str(facts_bundles[bundle]), "--dataset", dataset]
    argv += ["--tracking-uri", f"sqlite:///{tmp_path / 'mlflow.db'}"]
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith(f"error: {where}")
    assert captured.err.count("\n") == 1
    if rows is None:
        assert "column 'attempts': 1 is above the maximum 0 (row id 'st-" in captured.err
    assert spark.range(3).count() == 3  # the shared session was not stopped
