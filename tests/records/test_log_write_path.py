"""The log's write path, made lean: the same ids, times, texts and dedupe as before.

Each shortcut of issue 27 (decision ids without a UUID object, the time of a row from a
per-second prefix, one JSON encoder, no index on ``snapshot_hash``, a flush that builds
no results) is checked against what it replaced.
"""

from __future__ import annotations

import json
import random
import sqlite3
import uuid
from datetime import UTC, datetime

import pytest

from hybridroute.records import DecisionLog
from hybridroute.records._logbase import dumps_record, new_decision_id
from hybridroute.records._schema import now_iso
from hybridroute.rules import load_rules

from .test_log import EXAMPLE


@pytest.fixture()
def decisions():
    rules = load_rules(EXAMPLE)
    return [rules.decide({"step": i % 20, "amount": i}) for i in range(8)]


def test_decision_ids_are_uuid4_hex():
    ids = [new_decision_id() for _ in range(2000)]
    assert len(set(ids)) == len(ids)
    for i in ids:
        u = uuid.UUID(hex=i)
        assert u.hex == i and len(i) == 32
        assert u.version == 4 and u.variant == uuid.RFC_4122


def _reference_iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=UTC).isoformat(timespec="microseconds")


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_row_times_are_what_datetime_writes(seed):
    rng = random.Random(seed)
    edges = [0.0, -1.0, 1.9999995, 1.0000005, 1.0000015, 1700000000.9999995, -1.9999995]
    cases = edges + [rng.uniform(-1e9, 4e9) for _ in range(20_000)]
    cases += [rng.randrange(0, 2_000_000_000) + rng.random() for _ in range(20_000)]
    cases += [rng.randrange(0, 2_000_000_000) + 0.9999995 for _ in range(2_000)]
    assert [now_iso(t) for t in cases] == [_reference_iso(t) for t in cases]
    now = now_iso()
    assert now.endswith("+00:00") and datetime.fromisoformat(now).tzinfo is not None


@pytest.mark.parametrize(
    "record",
    [
        {"a": 1, "b": [0.1, 1e-17, 12345678.9, None, True], "t": 'é \u2028 "q" \\ \n'},
        {"nested": {"x": [{"y": "z"}], "empty": {}}, "n": -0.0, "big": 10**30},
        {"detail": {"classifier": {"labels": ["a", "b"], "scores": [0.3, 0.7]}}},
    ],
)
def test_the_stored_text_is_json_dumps(record):
    assert dumps_record(record) == json.dumps(record, ensure_ascii=False, separators=(",", ":"))


def test_a_new_log_has_no_snapshot_hash_index_and_an_old_one_keeps_it(tmp_path, decisions):
    path = tmp_path / "new.sqlite"
    with DecisionLog(path) as log:
        log.log_many([(d, f"r{i}", "live") for i, d in enumerate(decisions[:3])])
    conn = sqlite3.connect(path)
    names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    conn.execute("CREATE INDEX decisions_hash ON decisions (snapshot_hash)")  # as before
    conn.commit()
    conn.close()
    assert "decisions_hash" not in names
    assert {"decisions_request", "decisions_decision_id", "decisions_audited"} <= names
    with DecisionLog(path) as log:  # an older log with the index opens and writes
        (again,) = log.log_many([(decisions[0], "r0", "live")])
        assert again.duplicate and log.count() == 3
        log.log_many([(decisions[3], "r3", "live")])
        assert log.count() == 4 and log.integrity_check() == "ok"


@pytest.mark.parametrize("on_duplicate", ["skip", "error"])
def test_a_flush_reports_duplicates_and_conflicts_in_order(tmp_path, decisions, on_duplicate):
    from hybridroute.exceptions import DuplicateDecisionError, RequestIdConflictError

    with DecisionLog(tmp_path / "log.sqlite", on_duplicate=on_duplicate, batch_size=100) as log:
        log.extend(decisions[:4], item_ids=["a", "b", "c", "d"])
        assert log.flush() == 4
        log.extend(decisions[:4], item_ids=["d", "c", "b", "a"])  # the same ids, swapped
        with pytest.raises(RequestIdConflictError) as info:
            log.flush()
        assert info.value.item_ids == ("d", "c", "b", "a")
        assert log.pending == 0 and log.count() == 4
        log.extend([decisions[1], decisions[4]], item_ids=["b", "e"])
        if on_duplicate == "skip":
            assert log.flush() == 1 and log.last_skipped == ["b"]
        else:
            with pytest.raises(DuplicateDecisionError, match="'b'"):
                log.flush()
            assert log.pending == 1 and log.flush() == 1
        assert log.count() == 5


def test_a_new_log_has_large_pages_and_an_old_one_keeps_its_own(tmp_path, decisions):
    from hybridroute.records._log import PAGE_SIZE

    with DecisionLog(tmp_path / "new.sqlite") as log:
        log.log_many([(decisions[0], "r0", "live")])
    conn = sqlite3.connect(tmp_path / "new.sqlite")
    assert conn.execute("PRAGMA page_size").fetchone()[0] == PAGE_SIZE == 16384
    conn.close()
    old = tmp_path / "old.sqlite"
    conn = sqlite3.connect(old)
    conn.execute("PRAGMA page_size = 4096")
    conn.execute("CREATE TABLE t (x)")  # a file that exists already, 4 KB pages
    conn.commit()
    conn.close()
    with DecisionLog(old) as log:
        log.log_many([(d, f"r{i}", "live") for i, d in enumerate(decisions)])
        assert log.count() == len(decisions) and log.integrity_check() == "ok"
    conn = sqlite3.connect(old)
    assert conn.execute("PRAGMA page_size").fetchone()[0] == 4096
    conn.close()


def test_decision_ids_in_a_forked_child_are_its_own():
    import os

    new_decision_id()  # the pool holds the parent's next ids now
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its next ids, sent to the parent
        try:
            os.write(write, "".join(new_decision_id() for _ in range(20)).encode())
        finally:
            os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    with os.fdopen(read) as f:
        text = f.read()
    child = {text[i : i + 32] for i in range(0, len(text), 32)}
    parent = {new_decision_id() for _ in range(20)}
    assert len(child) == 20 and not child & parent
