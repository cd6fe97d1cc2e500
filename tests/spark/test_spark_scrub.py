"""``spark evaluate --output`` writes scored rows without the credentials their texts held."""

from __future__ import annotations

import json

import pytest
import typer
from typer.testing import CliRunner

from ..support_router import support_router
from ..test_scrubbing import CANARIES, EMAILS, ENV, NEEDLE, assert_clean, canary_texts

pytestmark = [
    pytest.mark.spark,
    pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning"),
]


@pytest.fixture()
def setup(tmp_path, monkeypatch):
    for k, v in ENV.items():
        monkeypatch.setenv(k, v)
    router, _ = support_router(
        Cs=(3.0,), word_ngram_range=(1, 1), char_ngram_range=(3, 3), tol=0.001
    )
    data = tmp_path / "canaries.jsonl"
    rows = [
        {
            "text": t,
            "label": ("refund", "order_status")[i % 2],
            "split": "test",
            "note": CANARIES[i % len(CANARIES)],
        }
        for i, t in enumerate(canary_texts())
    ]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return {"bundle": router.save(tmp_path / "bundle"), "data": data, "root": tmp_path}


def test_scored_rows_written_by_spark_evaluate_hold_no_canary(spark, setup):
    import pyarrow.parquet as pq

    from hybridroute.cli._spark import register

    app = typer.Typer()

    @app.callback()
    def _root() -> None:
        """Test app."""

    register(app)
    out = setup["root"] / "scored"
    result = CliRunner().invoke(
        app,
        [
            "spark",
            "evaluate",
            "--router",
            str(setup["bundle"]),
            "--dataset",
            f"jsonl:{setup['data']}",
            "--tracking-uri",
            f"sqlite:///{setup['root'] / 'mlflow.db'}",
            "--output",
            str(out),
            "--json",
        ],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    table = pq.read_table(out).to_pylist()
    assert len(table) == len(canary_texts())
    dumped = json.dumps(table, default=str, ensure_ascii=False)
    # an email is no credential (nothing is declared sensitive here)
    assert_clean({"output": result.output.encode(), "rows": dumped.encode()}, allow=tuple(EMAILS))
    assert "[REDACTED]" in dumped and NEEDLE in dumped.lower().encode()  # the emails
    # the written record's hash is the hash of the snapshot written
    from hybridroute.contracts import snapshot_hash

    for row in table:
        record = json.loads(row["decision"])
        assert row["snapshot_hash"] == record["snapshot_hash"]
        assert record["snapshot_hash"] == snapshot_hash(record["input_snapshot"])
