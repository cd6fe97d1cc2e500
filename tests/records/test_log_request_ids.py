"""The decision log keeps one decision per request id (router, router version, item id)."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from hybridroute.contracts import Decision
from hybridroute.exceptions import DuplicateDecisionError, RequestIdConflictError, UserInputError
from hybridroute.records import DecisionLog
from hybridroute.rules import load_rules

EXAMPLE = (
    Path(__file__).resolve().parents[2] / "src" / "hybridroute" / "examples" / "support_rules.yaml"
)
RULES = load_rules(EXAMPLE)


def decision(i: int = 0, *, router: str = "r", version: str = "1", step: int = 0) -> Decision:
    return Decision(
        router=router,
        router_version=version,
        stage="rule",
        input_snapshot={"facts": {"step": step, "n": i}},
        allowed_destinations=("fail",),
        selected_destination="fail",
        reason_code="default_exit",
    )


def ids_in(path: Path) -> list[str | None]:
    with DecisionLog(path) as log:
        return [r["item_id"] for r in log.rows()]


@pytest.mark.parametrize("batch_size", [1, 3, 100])
def test_a_second_decision_for_a_logged_id_is_skipped_and_counted(tmp_path, batch_size):
    path = tmp_path / "log.sqlite"
    with DecisionLog(path, batch_size=batch_size) as log:
        for i in range(5):
            log.append(decision(i), item_id=f"a{i}")
        log.flush()
        assert log.skipped == 0
        # the same ids again, interleaved with new ones
        for i in range(5):
            log.append(decision(i), item_id=f"a{i}")
            log.append(decision(i), item_id=f"b{i}")
        log.flush()
        assert log.skipped == 5
        assert log.count() == 10
    assert ids_in(path) == [f"a{i}" for i in range(5)] + [f"b{i}" for i in range(5)]


def test_flush_returns_what_it_wrote_and_names_what_it_skipped(tmp_path):
    with DecisionLog(tmp_path / "log.sqlite", batch_size=100) as log:
        log.extend([decision(i) for i in range(3)], item_ids=["x", "y", "z"])
        assert log.flush() == 3
        log.extend(
            [decision(1), decision(9), decision(1), decision(0)], item_ids=["y", "w", "y", "x"]
        )
        assert log.flush() == 1
        assert log.last_skipped == ["y", "y", "x"]
        assert log.skipped == 3
        assert log.flush() == 0 and log.last_skipped == []


def test_duplicates_inside_one_batch_keep_the_first(tmp_path):
    path = tmp_path / "log.sqlite"
    with DecisionLog(path, batch_size=100) as log:
        for _ in range(3):
            log.append(decision(1), item_id="same")
        assert log.flush() == 1
        assert log.last_skipped == ["same", "same"]
        (row,) = list(log.rows())
    assert row["record"]["input_snapshot"]["facts"]["n"] == 1


def test_one_id_with_other_input_in_one_batch_refuses_the_batch(tmp_path):
    path = tmp_path / "log.sqlite"
    with DecisionLog(path, batch_size=100) as log:
        log.append(decision(0), item_id="other")
        log.append(decision(1), item_id="same")
        log.append(decision(2), item_id="same")
        with pytest.raises(RequestIdConflictError, match="'same'") as info:
            log.flush()
        assert info.value.positions == (2,) and log.count() == 0
        # the conflicting decision is dropped from the buffer, the others stay
        assert log.pending == 2 and log.flush() == 2


def test_a_rerun_with_the_same_input_is_no_conflict(tmp_path):
    path = tmp_path / "log.sqlite"
    with DecisionLog(path) as log:
        log.append(decision(1), item_id="k")
    with DecisionLog(path) as log:
        log.append(decision(1), item_id="k")
        log.append(decision(2), item_id="k2")
        assert log.flush() == 1
        assert log.last_skipped == ["k"]


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ({"version": "1"}, {"version": "2"}),
        ({"router": "a"}, {"router": "b"}),
        ({"router": "a", "version": "1"}, {"router": "b", "version": "2"}),
    ],
)
def test_the_same_id_for_another_router_or_version_is_a_new_decision(tmp_path, first, second):
    path = tmp_path / "log.sqlite"
    with DecisionLog(path) as log:
        log.append(decision(0, **first), item_id="req-1")
        log.append(decision(0, **second), item_id="req-1")
        assert log.flush() == 2 and log.skipped == 0


def test_decisions_without_an_id_are_never_deduplicated(tmp_path):
    path = tmp_path / "log.sqlite"
    for _ in range(3):
        with DecisionLog(path) as log:
            log.extend([decision(0), decision(0)])
            assert log.flush() == 2 and log.skipped == 0
    assert ids_in(path) == [None] * 6


def test_reopened_log_still_skips(tmp_path):
    path = tmp_path / "log.sqlite"
    for _ in range(3):
        with DecisionLog(path) as log:
            log.extend([decision(i) for i in range(4)], item_ids=[str(i) for i in range(4)])
    assert ids_in(path) == ["0", "1", "2", "3"]


@pytest.mark.parametrize("item_id", [7, "7"])
def test_ids_are_compared_as_stored_strings(tmp_path, item_id):
    with DecisionLog(tmp_path / "log.sqlite") as log:
        log.append(decision(0), item_id="7")
        log.append(decision(0), item_id=item_id)  # type: ignore[arg-type]
        assert log.flush() == 1 and log.last_skipped == ["7"]


def test_on_duplicate_error_refuses_the_batch_and_keeps_the_rest(tmp_path):
    path = tmp_path / "log.sqlite"
    with DecisionLog(path) as log:
        log.append(decision(0), item_id="old")
    log = DecisionLog(path, batch_size=100, on_duplicate="error")
    log.extend([decision(i) for i in range(3)], item_ids=["n1", "old", "n2"])
    with pytest.raises(DuplicateDecisionError, match=r"'old' already logged") as info:
        log.flush()
    assert isinstance(info.value, UserInputError)
    assert info.value.item_ids == ("old",)
    assert str(path) in str(info.value)
    assert log.count() == 1  # nothing of that batch was written
    assert log.pending == 2  # the refused one is dropped, the others wait
    assert log.flush() == 2
    log.close()
    assert ids_in(path) == ["old", "n1", "n2"]


def test_on_duplicate_error_within_one_batch(tmp_path):
    log = DecisionLog(tmp_path / "log.sqlite", batch_size=100, on_duplicate="error")
    log.extend([decision(0), decision(0)], item_ids=["d", "d"])
    with pytest.raises(DuplicateDecisionError, match="1 decision"):
        log.flush()
    assert log.count() == 0 and log.pending == 1
    log.close()


@pytest.mark.parametrize("bad", ["ignore", "", "SKIP", None])
def test_on_duplicate_must_be_skip_or_error(tmp_path, bad):
    with pytest.raises(ValueError, match="on_duplicate must be one of"):
        DecisionLog(tmp_path / "log.sqlite", on_duplicate=bad)  # type: ignore[arg-type]


def test_append_returns_the_record_as_stored(tmp_path):
    with DecisionLog(tmp_path / "log.sqlite", sensitive_fields=["n"], salt="pepper-long") as log:
        rec = log.append(decision(42), item_id="r")
        log.flush()
        (stored,) = list(log.records())
    assert rec == stored
    assert rec["input_snapshot"]["facts"]["n"].startswith("hmac-sha256:")


def test_a_log_written_before_request_ids_gains_the_index_and_the_check(tmp_path):
    """A log from before the check (no index, duplicates already inside) keeps working."""
    path = tmp_path / "old.sqlite"
    with DecisionLog(path) as log:
        log.extend([decision(0), decision(0)], item_ids=["dup", "dup"])
    conn = sqlite3.connect(path)
    conn.execute("DROP INDEX decisions_request")
    # what the old writer allowed: the same id twice
    conn.execute(
        "INSERT INTO decisions (logged_at, item_id, router, router_version, stage, "
        "selected_destination, reason_code, snapshot_hash, record) "
        "SELECT logged_at, item_id, router, router_version, stage, selected_destination, "
        "reason_code, snapshot_hash, record FROM decisions"
    )
    conn.commit()
    conn.close()
    with DecisionLog(path) as log:
        n = log.count()
        log.append(decision(0), item_id="dup")
        assert log.flush() == 0 and log.last_skipped == ["dup"]
        assert log.count() == n
    conn = sqlite3.connect(path)
    names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='index'")}
    conn.close()
    assert "decisions_request" in names


WRITER = r"""
import sys
from hybridroute.records import DecisionLog
from hybridroute.rules import load_rules
rules = load_rules(sys.argv[1])
with DecisionLog(sys.argv[2], batch_size=int(sys.argv[3])) as log:
    for i in range(int(sys.argv[4])):
        log.append(rules.decide({"step": i % 20, "amount": i}), item_id=f"req-{i}")
    log.flush()
    print(log.skipped, flush=True)
"""


def test_two_processes_logging_the_same_ids_keep_one_each(tmp_path):
    path = tmp_path / "log.sqlite"
    DecisionLog(path).close()
    n = 2000
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(EXAMPLE), str(path), str(batch), str(n)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for batch in (50, 70)
    ]
    skipped = 0
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err[-2000:]
        skipped += int(out.strip())
    ids = ids_in(path)
    assert len(ids) == n and sorted(ids) == sorted(f"req-{i}" for i in range(n))  # type: ignore[arg-type]
    assert skipped == n  # every id was written by exactly one of the two


def test_logging_throughput_with_ids_stays_high(tmp_path):
    """The insert-if-absent is an indexed lookup: batches with ids stay fast."""
    import time

    ds = [RULES.decide({"step": i % 20, "amount": i}) for i in range(5000)]
    path = tmp_path / "log.sqlite"
    t0 = time.perf_counter()
    with DecisionLog(path, batch_size=1000) as log:
        log.extend(ds, item_ids=[f"i{i}" for i in range(len(ds))])
    first = time.perf_counter() - t0
    t0 = time.perf_counter()
    with DecisionLog(path, batch_size=1000) as log:
        log.extend(ds, item_ids=[f"i{i}" for i in range(len(ds))])
        assert log.skipped == len(ds)
    again = time.perf_counter() - t0
    # generous bounds (a shared machine): well under a millisecond a decision
    assert first < 5.0 and again < 5.0


def test_discard_drops_the_buffer_unwritten(tmp_path):
    path = tmp_path / "log.sqlite"
    with DecisionLog(path, batch_size=100) as log:
        log.extend([decision(i) for i in range(7)], item_ids=[str(i) for i in range(7)])
        assert log.discard() == 7 and log.pending == 0
        assert log.discard() == 0
    assert ids_in(path) == []
