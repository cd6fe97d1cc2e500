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


def test_spark_evaluate_prints_the_single_machine_metrics(spark, cli, setup):
    from hybridroute.evaluation import evaluate_router

    result = cli(
        "spark",
        "evaluate",
        "--router",
        str(setup["bundle"]),
        "--dataset",
        "support-tickets",
        "--tracking-uri",
        setup["tracking_uri"],
        "--json",
    )
    assert result.exit_code == 0, result.output
    got = json.loads(result.stdout)
    want = evaluate_router(setup["router"], setup["test"], n_boot=10)
    for key in ("n", "accuracy", "macro_f1", "coverage", "next_step_accuracy", "rules"):
        assert got[key] == want[key], key
    assert spark.range(3).count() == 3  # the shared session was not stopped


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
