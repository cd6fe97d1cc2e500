"""Both log backends through one suite: the same calls give the same results.

Every test taking ``log_url`` runs on SQLite and on a real PostgreSQL server (a fresh
database per test; ``@pytest.mark.postgres``, reported as not run without a server).
"""

from __future__ import annotations

import json
import re
import threading

import pytest

from hybridroute.contracts import Decision
from hybridroute.exceptions import ArtifactError, DuplicateDecisionError, RequestIdConflictError
from hybridroute.records import LoggedDecision, open_log


def decision(
    i: int = 0,
    *,
    router: str = "r",
    version: str = "1",
    destination: str = "fail",
    reason: str = "default_exit",
    stage: str = "rule",
    **facts,
) -> Decision:
    return Decision(
        router=router,
        router_version=version,
        stage=stage,
        input_snapshot={"facts": {"n": i, **facts}},
        allowed_destinations=("fail", "human_review", "ask_user"),
        selected_destination=destination,
        reason_code=reason,
    )


def test_log_many_writes_new_rows_and_returns_them_in_order(log_url):
    with open_log(log_url) as log:
        out = log.log_many([(decision(0), "a", "live"), (decision(1), None, "shadow")])
        assert [type(r) for r in out] == [LoggedDecision, LoggedDecision]
        assert [r.duplicate for r in out] == [False, False]
        assert [r.role for r in out] == ["live", "shadow"]
        assert all(re.fullmatch(r"[0-9a-f]{32}", r.decision_id) for r in out)
        assert out[0].decision_id != out[1].decision_id
        assert out[0].record == decision(0).to_dict()
        rows = list(log.rows())
        assert [(r["item_id"], r["role"], r["decision_id"]) for r in rows] == [
            ("a", "live", out[0].decision_id),
            (None, "shadow", out[1].decision_id),
        ]
        assert log.count() == 2 and log.meta()["schema_version"] == "4"
        assert log.log_many([]) == []


def test_a_duplicate_writes_nothing_and_carries_the_stored_row(log_url):
    with open_log(log_url) as log:
        first = log.log_many([(decision(0), "a", "live")])[0]
        # within one call: the first of an id is written, the second is its duplicate
        out = log.log_many(
            [
                (decision(5), "b", "live"),
                (decision(5), "b", "live"),  # the same request again
                (decision(0), "a", "shadow"),  # logged by the first call
                (decision(8), None, "live"),
                (decision(8), None, "live"),  # no id: never a duplicate
            ]
        )
        assert [r.duplicate for r in out] == [False, True, True, False, False]
        assert out[1].decision_id == out[0].decision_id and out[1].record == out[0].record
        assert out[2].decision_id == first.decision_id
        assert out[2].record == decision(0).to_dict() and out[2].role == "live"  # stored role
        assert log.count() == 4
        # across calls and connections
        with open_log(log_url) as other:
            again = other.log_many([(decision(5), "b", "live")])[0]
        assert again.duplicate and again.decision_id == out[0].decision_id
        # the same id for another version or router is a new decision
        more = log.log_many(
            [(decision(0, version="2"), "a", "live"), (decision(0, router="q"), "a", "live")]
        )
        assert [r.duplicate for r in more] == [False, False]
        assert log.count() == 6


def test_lookup(log_url):
    with open_log(log_url) as log:
        (stored,) = log.log_many([(decision(3), 17, "shadow")])  # ids are stored as strings
        hit = log.lookup("r", "1", "17")
        assert hit == LoggedDecision(stored.decision_id, stored.record, False, "shadow")
        assert log.lookup("r", "1", 17) == hit
        assert log.lookup("r", "2", "17") is None
        assert log.lookup("q", "1", "17") is None
        assert log.lookup("r", "1", "18") is None


def test_rows_count_and_exports_filter_by_version_and_role(log_url, tmp_path):
    with open_log(log_url) as log:
        log.log_many(
            [
                (decision(0), "a", "live"),
                (decision(0, version="2"), "a", "shadow"),
                (decision(1), "b", "live"),
                (decision(1, version="3"), "b", "shadow"),
            ]
        )
        assert log.count(role="shadow") == 2 and log.count(role="live") == 2
        assert log.count(router_version="2") == 1
        assert log.count(router_version="1", role="shadow") == 0
        shadow = list(log.rows(role="shadow"))
        assert [(r["router_version"], r["role"]) for r in shadow] == [
            ("2", "shadow"),
            ("3", "shadow"),
        ]
        assert [r["router_version"] for r in log.records(router_version="1")] == ["1", "1"]
        assert [d.router_version for d in log.decisions(role="live")] == ["1", "1"]
        n = log.to_jsonl(tmp_path / "all.jsonl")
        lines = [json.loads(x) for x in (tmp_path / "all.jsonl").read_text().splitlines()]
        assert n == 4 and [x["role"] for x in lines] == ["live", "shadow", "live", "shadow"]
        assert all({"seq", "logged_at", "item_id", "decision_id", "role"} <= set(x) for x in lines)
        assert log.to_jsonl(tmp_path / "v3.jsonl", router_version="3") == 1
        frame = log.to_frame(role="live")
        assert list(frame["item_id"]) == ["a", "b"] and "decision_id" in frame.columns
        assert str(frame["logged_at"].dtype).startswith("datetime64")


def test_append_and_flush_report_skips_and_conflicts(log_url):
    with open_log(log_url, batch_size=3) as log:
        log.append(decision(0), item_id="x")
        log.append(decision(1), item_id="y")
        log.append(decision(1), item_id="y")  # fills the batch: flushed
        assert log.pending == 0 and log.count() == 2 and log.last_skipped == ["y"]
        log.append(decision(0), item_id="x")  # same input: no conflict
        assert log.flush() == 0 and log.last_skipped == ["x"]
        log.append(decision(2), item_id="y")  # other input: a conflict, refused
        log.append(decision(3), item_id="w")
        with pytest.raises(RequestIdConflictError, match="'y'"):
            log.flush()
        assert log.count() == 2 and log.pending == 1  # w stays buffered, y is dropped
        assert log.skipped == 2
        assert log.flush() == 1
        log.append(decision(4), item_id="z")
        assert log.discard() == 1 and log.flush() == 0
    with open_log(log_url) as log:
        assert [r["item_id"] for r in log.rows()] == ["x", "y", "w"]


def test_on_duplicate_error_refuses_the_flush_and_keeps_the_rest(log_url):
    with open_log(log_url, batch_size=100, on_duplicate="error") as log:
        log.append(decision(0), item_id="a")
        log.flush()
        log.extend([decision(1), decision(0), decision(1)], item_ids=["b", "a", "b"])
        with pytest.raises(DuplicateDecisionError, match="2 decision") as info:
            log.flush()
        assert info.value.item_ids == ("a", "b")
        assert log.count() == 1 and log.pending == 1
        assert log.flush() == 1
        assert [r["item_id"] for r in log.rows()] == ["a", "b"]


def test_sensitive_facts_are_hashed_on_every_backend(log_url):
    with open_log(log_url, sensitive_fields=["email"], salt="pepper") as log:
        (out,) = log.log_many([(decision(0, email="ann@example.org"), "a", "live")])
        (row,) = log.rows()
    stored = row["record"]["input_snapshot"]["facts"]["email"]
    assert stored.startswith("hmac-sha256:") and out.record == row["record"]
    assert "ann@example.org" not in json.dumps(row, default=str)


def test_reads_page_through_a_long_log(log_url):
    n = 4500  # more than two pages
    with open_log(log_url) as log:
        log.log_many([(decision(i), f"id{i}", "live") for i in range(n)])
        ids = [r["item_id"] for r in log.rows()]
        assert ids == [f"id{i}" for i in range(n)] and log.count() == n
        again = log.log_many([(decision(i), f"id{i}", "live") for i in range(0, n, 7)])
        assert all(r.duplicate for r in again) and log.count() == n


def test_threads_sharing_one_log(log_url):
    """The service writes from a pool of threads through one log object."""
    errors: list[BaseException] = []
    with open_log(log_url) as log:

        def work(t: int) -> None:
            try:
                for k in range(25):
                    log.log_many(
                        [(decision(k), f"t{t}-{k}", "live"), (decision(k), f"shared-{k}", "live")]
                    )
                    assert log.lookup("r", "1", f"t{t}-{k}") is not None
            except BaseException as exc:  # reported below
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert not any(t.is_alive() for t in threads) and errors == []
        assert log.count() == 4 * 25 + 25


def test_bad_role_and_settings(log_url):
    with open_log(log_url) as log:
        with pytest.raises(ValueError, match="role must be one of"):
            log.log_many([(decision(0), "a", "canary")])
        assert log.count() == 0
    with pytest.raises(ValueError, match="on_duplicate"):
        open_log(log_url, on_duplicate="overwrite")
    with pytest.raises(ValueError, match="batch_size"):
        open_log(log_url, batch_size=0)


def test_check_writable_passes_on_a_usable_log(log_url):
    with open_log(log_url) as log:
        log.check_writable()
        assert log.count() == 0  # nothing written by the check
    closed = open_log(log_url)
    closed.close()
    with pytest.raises(ArtifactError, match="closed"):
        closed.check_writable()


@pytest.mark.postgres
def test_both_backends_give_the_same_results(tmp_path, postgres_db_url):
    def script(url: str) -> list:
        with open_log(url, batch_size=2) as log:
            out = [
                log.log_many([(decision(0), "a", "live"), (decision(0), "a", "live")]),
                log.log_many(
                    [(decision(0), "a", "shadow"), (decision(3, version="2"), "a", "shadow")]
                ),
            ]
            log.extend([decision(4), decision(5), decision(4)], item_ids=["b", None, "b"])
            skipped = log.last_skipped
            log.flush()
            ids = {r.decision_id: n for n, r in enumerate(x for call in out for x in call)}
            shape = [[(ids[r.decision_id], r.duplicate, r.role, r.record) for r in c] for c in out]
            rows = [
                {k: v for k, v in r.items() if k not in ("seq", "logged_at", "decision_id")}
                for r in log.rows()
            ]
            path = tmp_path / f"{len(url)}.jsonl"
            log.to_jsonl(path)
            lines = [
                {
                    k: v
                    for k, v in json.loads(x).items()
                    if k not in ("seq", "logged_at", "decision_id")
                }
                for x in path.read_text().splitlines()
            ]
            return [shape, skipped, rows, lines, log.count(), log.count(role="shadow")]

    assert script(f"sqlite:///{tmp_path / 'x.sqlite'}") == script(postgres_db_url)


@pytest.mark.postgres
def test_a_newer_postgres_schema_is_refused(postgres_db_url, postgres_server):
    open_log(postgres_db_url).close()
    import psycopg

    with psycopg.connect(postgres_db_url, autocommit=True) as conn:
        conn.execute("UPDATE hybridroute_meta SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(ArtifactError, match="schema version 99 is newer"):
        open_log(postgres_db_url)


@pytest.mark.postgres
def test_two_processes_creating_the_tables_at_once(postgres_db_url):
    """Schema creation is serialised: two logs opened at once on an empty database."""
    logs: list = []
    errors: list[BaseException] = []

    def go() -> None:
        try:
            logs.append(open_log(postgres_db_url))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=go) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert errors == [] and len(logs) == 4
    for log in logs:
        log.close()


@pytest.mark.postgres
def test_a_call_blocked_by_a_lock_ends_at_the_statement_timeout(postgres_db_url):
    """A write or read waiting on another session's lock is cancelled by the server after
    ``statement_timeout_s``, with a clear error; the log works again once the lock is gone."""
    import time

    import psycopg

    log = open_log(postgres_db_url, statement_timeout_s=1)
    log.log_many([(decision(0), "before", "live")])
    with psycopg.connect(postgres_db_url) as other:  # a transaction holding the table
        other.execute("LOCK TABLE hybridroute_decisions IN ACCESS EXCLUSIVE MODE")
        for call in (
            lambda: log.log_many([(decision(1), "blocked", "live")]),
            lambda: log.count(),
        ):
            t0 = time.monotonic()
            with pytest.raises(ArtifactError, match="statement timeout") as info:
                call()
            assert time.monotonic() - t0 < 10
            assert "hr_test_" in str(info.value)  # names the log
        other.rollback()
    out = log.log_many([(decision(2), "after", "live")])
    assert [r.duplicate for r in out] == [False]
    assert [r["item_id"] for r in log.rows()] == ["before", "after"]  # the blocked one: not
    log.close()


def test_the_timeouts_keep_what_the_url_sets() -> None:
    from hybridroute.records._postgres import _timeouts

    got = _timeouts({}, 60)
    assert got["options"] == "-c statement_timeout=60000"
    assert got["tcp_user_timeout"] == 60000 and got["keepalives"] == 1
    got = _timeouts({"options": "-c search_path=x", "keepalives_idle": "5"}, 2.5)
    assert got["options"] == "-c search_path=x -c statement_timeout=2500"
    assert "keepalives_idle" not in got
    assert "options" not in _timeouts({"options": "-c statement_timeout=0"}, 60)
    assert _timeouts({}, None) == {}
    for bad in (0, -1, "10", float("nan")):
        with pytest.raises(ValueError, match="statement_timeout_s must be > 0 or None"):
            _timeouts({}, bad)
