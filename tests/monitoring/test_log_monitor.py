"""The incremental monitor (issue 27 item 5): LogMonitor.update == monitor_log, always.

Decisions, audits, late outcomes, adjudications and out-of-scope decisions arrive in
steps; after each step the kept state gives exactly what a full recompute gives, while
reading only the rows after what it settled. Rows that appear below what was seen (a
PostgreSQL transaction that commits late) are re-read within the overlap.
"""

from __future__ import annotations

import numpy as np
import pytest

from hybridroute.contracts import Decision
from hybridroute.monitoring import monitor_log
from hybridroute.monitoring._from_log import LogMonitor
from hybridroute.records import AuditSampler, open_log

REFERENCE = {"label_counts": {"billing": 30, "refund": 20, "oos": 5}, "out_of_scope_label": "oos"}
ARGS = {"target": 0.8, "delta": 0.1, "window": 50, "reference": REFERENCE}


def _decision(i: int, kind: int) -> Decision:
    label = ("billing", "refund", "oos")[kind]
    oos = kind == 2
    return Decision(
        router="r",
        router_version="1",
        stage="policy" if oos else "model",
        input_snapshot={"facts": {"n": i}, "text": f"ticket {i}"},
        allowed_destinations=("billing", "refund", "human_review"),
        selected_destination="human_review" if oos else label,
        reason_code="out_of_scope" if oos else "confident_intent",
        label=label,
        confidence=0.9,
    )


class Stream:
    """Decisions and outcomes written in steps, with a seeded mix."""

    def __init__(self, log, seed: int) -> None:
        self.log = log
        self.rng = np.random.default_rng(seed)
        self.logged: list = []
        self.n = 0
        log.register_router(
            name="r",
            version="1",
            labels=("billing", "refund"),
            oos_label="oos",
            destinations=("billing", "refund", "human_review"),
        )

    def decisions(self, k: int) -> None:
        entries = []
        for _ in range(k):
            entries.append((_decision(self.n, int(self.rng.integers(0, 3))), f"q{self.n}", "live"))
            self.n += 1
        self.logged += [d for d in self.log.log_many(entries) if d.record["stage"] == "model"]

    def outcomes(self, k: int, *, late: bool = False) -> None:
        audited = {r["decision_id"] for r in self.log.pending_audits(router_version="1")}
        pool = [d for d in (self.logged[: len(self.logged) // 2] if late else self.logged)]
        pool = [d for d in pool if d.decision_id in audited]
        out = []
        for d in pool[:k]:
            gold = "billing" if self.rng.uniform() < 0.85 else "refund"
            out.append({"decision_id": d.decision_id, "gold_intent": gold, "source": "audit"})
            if self.rng.uniform() < 0.2:  # a second audit, sometimes disagreeing
                other = "refund" if gold == "billing" else "billing"
                out.append({"decision_id": d.decision_id, "gold_intent": other, "source": "audit"})
        if out:
            self.log.add_outcomes(out)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def url(request, tmp_path):
    """An empty decision log on each backend: a SQLite file, a fresh PostgreSQL database."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'log.sqlite'}"
    return request.getfixturevalue("postgres_db_url")


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_every_update_is_the_full_recompute(url, seed):
    with open_log(url, audit=AuditSampler(0.5, "k")) as log:
        stream = Stream(log, seed)
        monitor = LogMonitor(router_version="1", **ARGS)
        stream.decisions(40)
        stream.outcomes(10)
        for step in range(6):
            assert monitor.update(log) == monitor_log(log, router_version="1", **ARGS)
            stream.decisions(int(stream.rng.integers(0, 30)))
            stream.outcomes(int(stream.rng.integers(0, 8)), late=step % 2 == 0)
        assert monitor.update(log) == monitor_log(log, router_version="1", **ARGS)


def test_an_update_reads_only_what_is_new(tmp_path):
    with open_log(f"sqlite:///{tmp_path / 'log.sqlite'}", audit=AuditSampler(1.0, "k")) as log:
        stream = Stream(log, 3)
        stream.decisions(300)
        stream.outcomes(50)
        monitor = LogMonitor(router_version="1", **ARGS)
        first = monitor.update(log)
        assert monitor.last_read[0] == first["audited"] > 150  # the audited model decisions
        stream.decisions(20)
        second = monitor.update(log)
        assert second == monitor_log(log, router_version="1", **ARGS)
        assert monitor.last_read == (second["audited"] - first["audited"], 0)
        monitor.update(log)
        assert monitor.last_read == (0, 0)


def test_no_audited_decision_is_the_same_error(tmp_path):
    with open_log(f"sqlite:///{tmp_path / 'log.sqlite'}") as log:
        Stream(log, 0).decisions(5)  # no audit sampler: nothing audited
        with pytest.raises(ValueError, match="no audited decision") as full:
            monitor_log(log, router_version="1", **ARGS)
        with pytest.raises(ValueError, match="no audited decision") as kept:
            LogMonitor(router_version="1", **ARGS).update(log)
        assert str(full.value) == str(kept.value)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize("wait", [0.0, 10.0, 119.0])
def test_rows_that_appear_below_what_was_seen_are_read_within_the_overlap(tmp_path, wait):
    """A PostgreSQL log shows a row when its transaction commits: a row numbered below
    the highest seen may appear later. Simulated on SQLite: rows taken out, the monitor
    updated, the rows put back under their own seq."""
    path = tmp_path / "log.sqlite"
    with open_log(f"sqlite:///{path}", audit=AuditSampler(1.0, "k")) as log:
        stream = Stream(log, 4)
        stream.decisions(60)
        stream.outcomes(20)
        held = log._conn.execute("SELECT * FROM decisions WHERE seq BETWEEN 20 AND 30").fetchall()
        log._conn.execute("DELETE FROM decisions WHERE seq BETWEEN 20 AND 30")
        log.commits_in_seq_order = False  # as a PostgreSQL log says
        clock = Clock()
        monitor = LogMonitor(router_version="1", overlap_s=120.0, clock=clock, **ARGS)
        assert monitor.update(log) == monitor_log(log, router_version="1", **ARGS)
        stream.decisions(5)
        clock.now += wait
        monitor.update(log)
        marks = ",".join("?" * len(held[0]))
        log._conn.executemany(f"INSERT INTO decisions VALUES ({marks})", held)  # committed late
        clock.now += 0.5
        assert monitor.update(log) == monitor_log(log, router_version="1", **ARGS)
        clock.now += 500  # past the overlap: what was seen settles, the state stays exact
        assert monitor.update(log) == monitor_log(log, router_version="1", **ARGS)
        stream.decisions(5)
        assert monitor.update(log) == monitor_log(log, router_version="1", **ARGS)
        assert monitor.last_read[0] <= 5 + 1


def test_misplaced_outcomes_are_counted_once_and_kept(tmp_path):
    """Outcomes an older version accepted (an audit of an unaudited decision): counted in
    the state as the full recompute counts them, before and after they settle."""
    with open_log(f"sqlite:///{tmp_path / 'log.sqlite'}", audit=AuditSampler(0.3, "k")) as log:
        stream = Stream(log, 5)
        stream.decisions(40)
        stream.outcomes(10)
        monitor = LogMonitor(router_version="1", **ARGS)
        monitor.update(log)
        unaudited = log._conn.execute(
            "SELECT decision_id FROM decisions WHERE audited = 0 LIMIT 3"
        ).fetchall()
        for k, (decision_id,) in enumerate(unaudited):
            log._conn.execute(
                "INSERT INTO outcomes (outcome_id, decision_id, gold_intent, gold_next_step, "
                "source, observed_at, recorded_at) VALUES (?, ?, 'billing', NULL, 'audit', "
                "'2026-01-01T00:00:00+00:00', '2026-01-01T00:00:00+00:00')",
                (f"old-{k}", decision_id),
            )
        for _ in range(2):
            state = monitor.update(log)
            assert state == monitor_log(log, router_version="1", **ARGS)
            assert state["invalid_outcomes"]["audit_not_audited"] == len(unaudited) == 3
