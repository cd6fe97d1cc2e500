"""Schema version 2: a version-1 SQLite log is migrated in place; who can write a log."""

from __future__ import annotations

import os
import re
import sqlite3
import subprocess
from contextlib import contextmanager
from pathlib import Path

import pytest

from hybridroute.contracts import Decision
from hybridroute.exceptions import ArtifactError, RequestIdConflictError
from hybridroute.records import open_log

# The layout hybridroute wrote before decision ids and roles (schema version 1).
V1 = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE decisions (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, logged_at TEXT NOT NULL, item_id TEXT,
    router TEXT NOT NULL, router_version TEXT NOT NULL, stage TEXT NOT NULL,
    selected_destination TEXT NOT NULL, reason_code TEXT NOT NULL,
    snapshot_hash TEXT NOT NULL, label TEXT, confidence REAL, record TEXT NOT NULL
);
CREATE INDEX decisions_hash ON decisions (snapshot_hash);
CREATE INDEX decisions_version ON decisions (router_version, logged_at);
CREATE INDEX decisions_request ON decisions (router, router_version, item_id)
    WHERE item_id IS NOT NULL;
INSERT INTO meta VALUES ('schema_version', '1'), ('created_at', '2026-01-01T00:00:00+00:00'),
    ('created_by', 'hybridroute 0.0.9');
"""


def decision(i: int, version: str = "1") -> Decision:
    return Decision(
        router="r",
        router_version=version,
        stage="rule",
        input_snapshot={"facts": {"n": i}},
        allowed_destinations=("fail",),
        selected_destination="fail",
        reason_code="default_exit",
    )


def v1_log(path: Path, ids: list[str | None]) -> None:
    conn = sqlite3.connect(path)
    conn.executescript(V1)
    for i, item in enumerate(ids):
        d = decision(i)
        conn.execute(
            "INSERT INTO decisions (logged_at, item_id, router, router_version, stage, "
            "selected_destination, reason_code, snapshot_hash, record) VALUES (?,?,?,?,?,?,?,?,?)",
            (f"2026-01-01T00:00:0{i}+00:00", item, d.router, d.router_version, d.stage,
             d.selected_destination, d.reason_code, d.snapshot_hash, d.to_json()),
        )  # fmt: skip
    conn.commit()
    conn.close()


def columns(path: Path) -> set[str]:
    conn = sqlite3.connect(path)
    try:
        return {r[1] for r in conn.execute("PRAGMA table_info(decisions)")}
    finally:
        conn.close()


@pytest.mark.parametrize("ids", [["a", "b", None, "a"], [None], []])
def test_a_version_1_log_is_migrated_in_place(tmp_path, ids):
    path = tmp_path / "old.sqlite"
    v1_log(path, ids)
    with open_log(path) as log:
        meta = log.meta()
        rows = list(log.rows())
    assert meta["schema_version"] == "4" and meta["migrated_from"] == "1"
    assert meta["created_by"] == "hybridroute 0.0.9"  # the log's history is kept
    assert [r["item_id"] for r in rows] == ids
    assert [r["record"] for r in rows] == [decision(i).to_dict() for i in range(len(ids))]
    assert all(r["role"] == "live" for r in rows)
    assert all(re.fullmatch(r"[0-9a-f]{32}", r["decision_id"]) for r in rows)
    assert len({r["decision_id"] for r in rows}) == len(rows)
    # decision ids are stable once assigned, and the migrated rows take part in the dedupe
    with open_log(path) as log:
        assert [r["decision_id"] for r in log.rows()] == [r["decision_id"] for r in rows]
        if "a" in ids:
            (again,) = log.log_many([(decision(0), "a", "live")])
            assert again.duplicate and again.decision_id == rows[0]["decision_id"]
            with pytest.raises(RequestIdConflictError):  # compared with the first logged
                log.log_many([(decision(3), "a", "live")])
            assert log.lookup("r", "1", "a").decision_id == rows[0]["decision_id"]


def test_a_failed_migration_leaves_the_version_1_log_as_it_was(tmp_path):
    path = tmp_path / "old.sqlite"
    v1_log(path, ["a", "b", "c"])
    conn = sqlite3.connect(path)  # a fault half-way through the row updates
    conn.execute(
        "CREATE TRIGGER boom BEFORE UPDATE ON decisions WHEN OLD.seq = 2 "
        "BEGIN SELECT RAISE(ABORT, 'injected fault'); END"
    )
    conn.commit()
    conn.close()
    with pytest.raises(ArtifactError, match="injected fault"):
        open_log(path)
    assert "decision_id" not in columns(path) and "role" not in columns(path)
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone() == ("1",)
    conn.execute("DROP TRIGGER boom")
    conn.commit()
    conn.close()
    with open_log(path) as log:
        assert log.count() == 3 and log.meta()["schema_version"] == "4"


def test_the_read_only_reader_of_spark_reads_versions_1_and_up(tmp_path):
    from hybridroute.records._log import read_rows

    old, new = tmp_path / "v1.sqlite", tmp_path / "v2.sqlite"
    v1_log(old, ["a", None])
    with open_log(new) as log:
        log.log_many([(decision(0), "a", "live"), (decision(1), None, "shadow")])
    for path in (old, new):
        rows = read_rows(path)
        assert [item for _, item, _ in rows] == ["a", None]
    assert "decision_id" not in columns(old)  # read, never migrated


@contextmanager
def read_only(path: Path):
    """The file made read-only for this process: chattr +i as root (root ignores modes)."""
    if os.geteuid() == 0:
        subprocess.run(["chattr", "+i", str(path)], check=True, timeout=30)
        try:
            yield
        finally:
            subprocess.run(["chattr", "-i", str(path)], check=True, timeout=30)
    else:
        path.chmod(0o444)
        try:
            yield
        finally:
            path.chmod(0o644)


def test_check_writable_fails_on_a_read_only_sqlite_file(tmp_path):
    path = tmp_path / "log.sqlite"
    with open_log(path) as log:
        log.log_many([(decision(0), "a", "live")])
    with read_only(path):
        log = open_log(path)  # readable: it opens, and reads work
        try:
            assert log.count() == 1
            with pytest.raises(
                ArtifactError, match=r"log\.sqlite: the decision log is not writable"
            ):
                log.check_writable()
            with pytest.raises(ArtifactError, match="cannot write the decision log"):
                log.log_many([(decision(1), "b", "live")])
        finally:
            log._conn.close()
    with open_log(path) as log:
        log.check_writable()
        assert log.count() == 1


def test_check_writable_waits_only_its_timeout_for_a_held_lock(tmp_path):
    import time

    path = tmp_path / "log.sqlite"
    with open_log(path) as log:
        other = sqlite3.connect(path, timeout=0)
        other.execute("BEGIN EXCLUSIVE")
        t0 = time.perf_counter()
        with pytest.raises(ArtifactError, match=r"not writable .*locked"):
            log.check_writable(timeout_s=0.2)
        assert time.perf_counter() - t0 < 3
        other.rollback()
        other.close()
        log.check_writable()
        assert log._conn.execute("PRAGMA busy_timeout").fetchone()[0] == 60_000  # restored


def test_check_writable_fails_when_the_sqlite_file_is_gone(tmp_path):
    path = tmp_path / "log.sqlite"
    with open_log(path) as log:
        path.unlink()
        with pytest.raises(ArtifactError, match="file was removed"):
            log.check_writable()


@pytest.mark.postgres
def test_check_writable_fails_on_a_stopped_postgres_server_and_recovers(make_postgres_server):
    server = make_postgres_server()  # its own: this test stops it
    url = server.url("postgres", password="hunter2-secret")
    log = open_log(url)
    try:
        log.check_writable(timeout_s=1)
        log.log_many([(decision(0), "a", "live")])
        server.stop()
        with pytest.raises(ArtifactError, match="not writable") as info:
            log.check_writable()
        assert "hunter2-secret" not in str(info.value) and "***" in str(info.value)
        with pytest.raises(ArtifactError, match="decision log"):
            log.log_many([(decision(1), "b", "live")])
        with pytest.raises(ArtifactError, match="cannot connect"):
            open_log(url)
        server.start()  # the same socket: the log reconnects by itself
        log.check_writable()
        (out,) = log.log_many([(decision(1), "b", "live")])
        assert not out.duplicate and log.count() == 2
    finally:
        log.close()
