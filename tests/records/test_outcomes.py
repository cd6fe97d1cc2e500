"""Outcomes on both log backends: append-only, idempotent, conflicts kept and reported,
all or nothing with errors naming row and field; schema versions 3 and 4 and their
migrations. (What the log checks an outcome against: test_outcomes_checks.py.)"""

from __future__ import annotations

import sqlite3
import time
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from hybridroute.contracts import Decision
from hybridroute.exceptions import ArtifactError, UserInputError
from hybridroute.records import (
    SCHEMA_VERSION,
    AuditSampler,
    OutcomeError,
    OutcomeReport,
    open_log,
)

from .test_log_schema import V1


def decision(i: int, version: str = "1", stage: str = "model") -> Decision:
    return Decision(
        router="r",
        router_version=version,
        stage=stage,
        input_snapshot={"facts": {"n": i}, "text": f"ticket {i}"},
        allowed_destinations=("billing", "fail"),
        selected_destination="billing",
        reason_code="confident_intent",
        label="billing",
        confidence=0.9,
    )


#: The labels and destinations of router "r" (every version) as the tests register them.
LABELS = ("billing", "refund", "shipping")
DESTINATIONS = ("billing", "refund", "shipping", "fail", "human_review")


def register(log, version: str = "1") -> None:
    """Register router "r" ``version``: its outcomes may name LABELS / DESTINATIONS."""
    log.register_router(name="r", version=version, labels=LABELS, destinations=DESTINATIONS)


@pytest.fixture
def logged(log_url):
    """A log holding three audited decisions (request ids q0..q2, router r version 1)."""
    log = open_log(log_url, audit=AuditSampler(1.0, "k"))
    register(log)
    results = log.log_many([(decision(i), f"q{i}", "live") for i in range(3)])
    yield log, [r.decision_id for r in results]
    log.close()


def later(seconds: float = 1.0, offset_hours: int = 0) -> datetime:
    """A time after the decisions were logged (and not in the future), in a zone."""
    zone = timezone(timedelta(hours=offset_hours))
    return (datetime.now(UTC) - timedelta(seconds=seconds)).astimezone(zone)


def test_outcomes_attach_by_decision_id_or_request_id(logged):
    log, ids = logged
    time.sleep(0.01)
    at = later(0.001, offset_hours=2)
    report = log.add_outcomes(
        [
            {"decision_id": ids[0], "gold_intent": "billing", "source": "human_review"},
            {
                "request_id": "q1",
                "router": "r",
                "router_version": "1",
                "gold_next_step": "fail",
                "source": "agent_outcome",
                "at": at.isoformat(),
            },
        ]
    )
    assert isinstance(report, OutcomeReport)
    assert (report.added, report.already_present, report.conflicts) == (2, 0, ())
    stored = log.outcomes()
    assert [o["decision_id"] for o in stored] == [ids[0], ids[1]]
    assert stored[1]["gold_intent"] is None and stored[1]["gold_next_step"] == "fail"
    # stored in UTC
    assert stored[1]["observed_at"] == at.astimezone(UTC).isoformat(timespec="microseconds")
    assert [o["outcome_id"] for o in stored] == list(report.outcome_ids)
    assert log.outcomes(ids[1]) == [stored[1]] and log.outcomes("nope") == []
    assert report.to_dict() == {"added": 2, "already_present": 0, "conflicts": []}


@pytest.mark.parametrize("with_time", [True, False])
def test_an_identical_outcome_again_writes_nothing(logged, with_time):
    log, ids = logged
    item = {"decision_id": ids[0], "gold_intent": "billing", "source": "audit"}
    if with_time:
        time.sleep(0.01)
        item["at"] = later(0.001).isoformat().replace("+00:00", "Z")
    assert log.add_outcomes([item]).added == 1
    again = log.add_outcomes([item, dict(item)])  # a retry, and a copy within the call
    assert (again.added, again.already_present, again.conflicts) == (0, 2, ())
    assert len(log.outcomes()) == 1


def test_a_conflicting_outcome_is_kept_and_reported(logged):
    log, ids = logged
    log.add_outcomes([{"decision_id": ids[0], "gold_intent": "billing", "source": "audit"}])
    report = log.add_outcomes(
        [
            {"decision_id": ids[0], "gold_intent": "refund", "source": "audit"},
            # another source is another opinion, not a conflict
            {"decision_id": ids[0], "gold_intent": "shipping", "source": "user_feedback"},
            # and a conflict within one call
            {"decision_id": ids[1], "gold_intent": "refund", "source": "human_review"},
            {"decision_id": ids[1], "gold_intent": "shipping", "source": "human_review"},
        ]
    )
    assert report.added == 4 and report.already_present == 0
    assert [(c["row"], c["decision_id"]) for c in report.conflicts] == [(1, ids[0]), (4, ids[1])]
    assert report.conflicts[0]["previous"] == [{"gold_intent": "billing", "gold_next_step": None}]
    assert report.conflicts[1]["previous"] == [{"gold_intent": "refund", "gold_next_step": None}]
    golds = [o["gold_intent"] for o in log.outcomes(ids[0])]
    assert golds == ["billing", "refund", "shipping"]  # nothing overwritten
    said = "\n".join(report.summary_lines())
    assert "conflict at row 1" in said and "until an outcome of source adjudication" in said


@pytest.mark.parametrize(
    ("bad", "row", "field"),
    [
        ({"decision_id": "0" * 32}, 2, "decision_id"),
        ({"request_id": "q9", "router": "r", "router_version": "1"}, 2, "request_id"),
        ({"request_id": "q0", "router": "r", "router_version": "2"}, 2, "request_id"),
        ({"request_id": "q0", "router": "other", "router_version": "1"}, 2, "request_id"),
    ],
)
def test_an_unknown_decision_names_its_row_and_nothing_is_written(logged, bad, row, field):
    log, ids = logged
    good = {"decision_id": ids[0], "gold_intent": "billing", "source": "audit"}
    with pytest.raises(OutcomeError, match=f"row {row}, column '{field}': the log holds no") as e:
        log.add_outcomes([good, {**bad, "gold_intent": "x", "source": "audit"}, good])
    assert isinstance(e.value, UserInputError) and (e.value.row, e.value.field) == (row, field)
    assert log.outcomes() == []


@pytest.mark.parametrize(
    ("change", "field", "words"),
    [
        ({"source": "oracle"}, "source", "must be one of human_review, audit"),
        ({"source": "Adjudication"}, "source", "must be one of"),
        ({"source": None}, "source", "is required"),
        ({"source": 3}, "source", "must be one of"),
        ({"gold_intent": None}, "gold_intent", "no gold given"),
        ({"gold_intent": ""}, "gold_intent", "non-empty string"),
        ({"gold_intent": 7}, "gold_intent", "non-empty string"),
        ({"gold_next_step": "a\x00b"}, "gold_next_step", "NUL"),
        ({"gold_intent": "x" * 300}, "gold_intent", "longer than 256"),
        ({"at": "yesterday"}, "at", "not an ISO 8601 time"),
        ({"at": "2026-01-01T00:00:00"}, "at", "needs a UTC offset"),
        ({"at": "2999-01-01T00:00:00Z"}, "at", "in the future"),
        ({"at": 1700000000}, "at", "ISO 8601 time"),
        ({"colour": "red"}, "colour", "not an outcome field"),
        ({"request_id": "q0"}, "request_id", "decision_id, or request_id"),
    ],
)
def test_a_bad_outcome_names_row_and_field(logged, change, field, words):
    log, ids = logged
    good = {"decision_id": ids[0], "gold_intent": "billing", "source": "audit"}
    bad = {**good, **change}
    with pytest.raises(OutcomeError, match=f"row 3, column '{field}': .*{words}"):
        log.add_outcomes([good, good, bad])
    assert log.outcomes() == []


@pytest.mark.parametrize(
    ("bad", "field", "words"),
    [
        ({"gold_intent": "x", "source": "audit"}, "decision_id", "which decision"),
        ({"request_id": "q0", "router_version": "1", "gold_intent": "x", "source": "audit"},
         "router", "required with request_id"),
        ({"request_id": "q0", "router": "r", "gold_intent": "x", "source": "audit"},
         "router_version", "required with request_id"),
        ({"request_id": True, "router": "r", "router_version": "1", "gold_intent": "x",
          "source": "audit"}, "request_id", "non-empty string"),
    ],
)  # fmt: skip
def test_a_bad_reference_names_the_field(logged, bad, field, words):
    log, _ = logged
    with pytest.raises(OutcomeError, match=f"row 1, column '{field}': .*{words}"):
        log.add_outcomes([bad])


@pytest.mark.parametrize("item", [["decision_id"], "x", 3])
def test_an_outcome_that_is_not_an_object_is_refused(logged, item):
    log, _ = logged
    with pytest.raises(OutcomeError, match="row 1: an outcome must be an object"):
        log.add_outcomes([item])


def test_row_numbers_and_path_come_from_the_caller(logged):
    log, _ = logged
    with pytest.raises(OutcomeError, match=r"^in\.jsonl, row 7, column 'source'"):
        log.add_outcomes([{"decision_id": "x", "gold_intent": "a"}], rows=[7], path="in.jsonl")
    assert log.add_outcomes([]) == OutcomeReport(0, 0)


def test_integer_request_ids_match_the_stored_string(log_url):
    with open_log(log_url) as log:
        register(log)
        (first,) = log.log_many([(decision(0), 42, "live")])
        report = log.add_outcomes(
            [{"request_id": 42, "router": "r", "router_version": "1", "gold_intent": "refund",
              "source": "user_feedback"}]
        )  # fmt: skip
        assert report.added == 1 and log.outcomes()[0]["decision_id"] == first.decision_id


def test_a_new_log_has_schema_version_4_with_the_outcomes_and_routers_tables(log_url):
    with open_log(log_url) as log:
        assert SCHEMA_VERSION == 4 and log.meta()["schema_version"] == "4"
        assert log.router_vocabularies() == {}
        log.log_many([(decision(0), None, "live")])
        (row,) = log.rows()
        assert row["audit_p"] is None and row["audited"] is None  # no audit declared


# --------------------------------------------------------------------------- migration
# The layout of schema version 2: version 1's plus decision ids and roles (no outcomes
# table, no audit columns).
V2 = (
    V1.replace("'schema_version', '1'", "'schema_version', '2'")
    + """
ALTER TABLE decisions ADD COLUMN decision_id TEXT;
ALTER TABLE decisions ADD COLUMN role TEXT NOT NULL DEFAULT 'live';
CREATE UNIQUE INDEX decisions_decision_id ON decisions (decision_id);
CREATE INDEX decisions_role ON decisions (role, router_version);
"""
)


def v2_log(path: Path, n: int) -> list[str]:
    conn = sqlite3.connect(path)
    conn.executescript(V2)
    ids = []
    for i in range(n):
        d = decision(i)
        ids.append(f"{i:032x}")
        conn.execute(
            "INSERT INTO decisions (logged_at, item_id, router, router_version, stage, "
            "selected_destination, reason_code, snapshot_hash, label, confidence, record, "
            "decision_id, role) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (f"2026-06-01T00:00:0{i}+00:00", f"q{i}", d.router, d.router_version, d.stage,
             d.selected_destination, d.reason_code, d.snapshot_hash, d.label, d.confidence,
             d.to_json(), ids[-1], "live"),
        )  # fmt: skip
    conn.commit()
    conn.close()
    return ids


def test_a_version_2_sqlite_log_is_migrated_in_place(tmp_path):
    path = tmp_path / "v2.sqlite"
    ids = v2_log(path, 3)
    with open_log(path, create=False) as log:
        meta = log.meta()
        rows = list(log.rows())
        assert meta["schema_version"] == "4" and meta["migrated_from"] == "2"
        assert meta["created_by"] == "hybridroute 0.0.9"
        assert [r["decision_id"] for r in rows] == ids  # ids kept
        assert all(r["audit_p"] is None and r["audited"] is None for r in rows)
        register(log)
        assert log.add_outcomes(
            [{"decision_id": ids[2], "gold_intent": "refund", "source": "human_review"}]
        )
        assert log.pending_audits() == []
    with open_log(path) as log:  # opened again: nothing more to migrate
        assert log.meta()["schema_version"] == "4" and len(log.outcomes()) == 1


def test_a_failed_migration_leaves_the_version_2_log_as_it_was(tmp_path):
    path = tmp_path / "v2.sqlite"
    v2_log(path, 2)
    conn = sqlite3.connect(path)  # a view where the outcomes table goes: its index fails
    conn.execute("CREATE VIEW outcomes AS SELECT 1 AS decision_id, 2 AS source")
    conn.commit()
    conn.close()
    with pytest.raises(ArtifactError, match="not a usable decision log"):
        open_log(path)
    conn = sqlite3.connect(path)
    have = {r[1] for r in conn.execute("PRAGMA table_info(decisions)")}
    assert "audit_p" not in have and "audited" not in have
    assert conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone() == ("2",)
    conn.execute("DROP VIEW outcomes")
    conn.commit()
    conn.close()
    with open_log(path) as log:
        assert log.count() == 2 and log.meta()["schema_version"] == "4"


@pytest.mark.postgres
def test_a_version_2_postgres_log_is_brought_to_version_4(postgres_db_url):
    import psycopg

    with open_log(postgres_db_url) as log:
        (first,) = log.log_many([(decision(0), "q0", "live")])
    with psycopg.connect(postgres_db_url, autocommit=True) as conn:  # back to the v2 layout
        conn.execute("DROP TABLE hybridroute_outcomes")
        conn.execute("DROP TABLE hybridroute_routers")
        conn.execute("DROP INDEX hybridroute_decisions_audited")
        conn.execute("ALTER TABLE hybridroute_decisions DROP COLUMN audit_p, DROP COLUMN audited")
        conn.execute("UPDATE hybridroute_meta SET value = '2' WHERE key = 'schema_version'")
    with open_log(postgres_db_url, create=False) as log:  # a reader's open migrates too
        meta = log.meta()
        assert meta["schema_version"] == "4" and meta["migrated_from"] == "2"
        (row,) = log.rows()
        assert row["decision_id"] == first.decision_id and row["audit_p"] is None
        register(log)
        report = log.add_outcomes(
            [{"decision_id": first.decision_id, "gold_intent": "refund", "source": "agent_outcome"}]
        )
        assert report.added == 1


def test_writers_racing_with_the_same_outcome_store_it_once(log_url):
    import threading

    with open_log(log_url, audit=AuditSampler(1.0, "k")) as log:
        register(log)
        (logged,) = log.log_many([(decision(0), "q0", "live")])
    outcome = {"decision_id": logged.decision_id, "gold_intent": "billing", "source": "audit"}
    logs = [open_log(log_url) for _ in range(4)]  # a connection each, as separate processes
    start = threading.Barrier(len(logs))
    reports: list[OutcomeReport] = []

    def add(log) -> None:
        start.wait(timeout=30)
        reports.append(log.add_outcomes([outcome]))

    threads = [threading.Thread(target=add, args=(log,), daemon=True) for log in logs]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads), "an outcome writer hung"
    try:
        assert sorted(r.added for r in reports) == [0, 0, 0, 1]
        assert len(logs[0].outcomes()) == 1
    finally:
        for log in logs:
            log.close()
