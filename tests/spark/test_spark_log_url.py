"""The Spark reader takes a log URL: ``sqlite:///PATH`` and ``postgresql://`` read alike."""

from __future__ import annotations

import json

import pytest

from hybridroute.contracts import Decision

pytestmark = [
    pytest.mark.spark,
    pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning"),
]


def decision(i: int, version: str = "1") -> Decision:
    return Decision(
        router="r",
        router_version=version,
        stage="rule",
        input_snapshot={"facts": {"n": i}, "text": f"ticket {i} – ünïcode"},
        allowed_destinations=("fail",),
        selected_destination="fail",
        reason_code="default_exit",
    )


def _fill(url: str) -> list[dict]:
    from hybridroute.records import open_log

    entries = [(decision(i), f"id{i}" if i % 3 else None, "live") for i in range(40)]
    entries += [(decision(i, "2"), f"id{i}", "shadow") for i in range(1, 40, 3)]
    with open_log(url) as log:
        log.log_many(entries)
        return list(log.rows())


def _read(spark, url: str) -> list[tuple]:
    from hybridroute.spark import read_decision_log

    rows = read_decision_log(spark, url).orderBy("position").collect()
    return [(r["position"], r["seq"], r["item_id"], json.loads(r["record"])) for r in rows]


@pytest.mark.postgres
def test_a_postgres_log_reads_like_its_sqlite_twin(spark, tmp_path, postgres_db_url):
    sqlite_url = f"sqlite:///{tmp_path / 'log.sqlite'}"
    stored = _fill(sqlite_url)
    assert [r["record"] for r in _fill(postgres_db_url)] == [r["record"] for r in stored]
    from_sqlite, from_postgres = _read(spark, sqlite_url), _read(spark, postgres_db_url)
    assert len(from_sqlite) == len(stored) == 40 + 13
    assert [(p, item, rec) for p, _, item, rec in from_sqlite] == [
        (p, item, rec) for p, _, item, rec in from_postgres
    ]
    assert [rec for *_, rec in from_sqlite] == [r["record"] for r in stored]
    # positions follow log order on both
    assert [p for p, *_ in from_postgres] == list(range(len(stored)))


@pytest.mark.postgres
def test_a_postgres_url_without_a_log_is_refused(spark, postgres_db_url):
    from hybridroute.exceptions import ArtifactError
    from hybridroute.spark import read_decision_log

    with pytest.raises(ArtifactError, match="no decision log in this database"):
        read_decision_log(spark, postgres_db_url)
