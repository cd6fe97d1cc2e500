"""The read-only reader of a log's rows (what the Spark reader uses instead of its own SQL):
the rows the log holds, in order, and a log left exactly as it was found."""

from __future__ import annotations

import json
import os
import sqlite3
import stat

import pytest

from hybridroute.exceptions import ArtifactError, InputError
from hybridroute.records import SCHEMA_VERSION, open_log
from hybridroute.records._url import read_log_rows
from hybridroute.rules import reference_rules


@pytest.fixture
def log_path(tmp_path):
    """A log of 12 live decisions (some without a request id) and 3 shadow ones."""
    live, shadow = (
        reference_rules(retry_budget=1, amount_limit=100, max_steps=9, max_repeats=2, version=v)
        for v in ("1", "2")
    )
    entries = [
        (live.decide({"amount": 40 * i, "step": i}), f"id{i}" if i % 3 else None, "live")
        for i in range(12)
    ]
    entries += [(shadow.decide({"amount": i}), f"id{i}", "shadow") for i in range(1, 12, 4)]
    path = tmp_path / "log.sqlite"
    with open_log(path) as log:
        log.log_many(entries)
    return path


def _state(path):
    return path.read_bytes(), path.stat().st_mtime_ns


@pytest.mark.parametrize("as_url", [False, True])
def test_the_rows_are_the_logs_in_order(log_path, as_url):
    target = f"sqlite:///{log_path}" if as_url else log_path
    rows = read_log_rows(target)
    with open_log(log_path, create=False) as log:
        stored = list(log.rows())
    assert [(seq, item) for seq, item, _ in rows] == [(r["seq"], r["item_id"]) for r in stored]
    assert [json.loads(record) for *_, record in rows] == [r["record"] for r in stored]
    assert [seq for seq, *_ in rows] == sorted(seq for seq, *_ in rows)


def test_reading_leaves_the_log_as_it_was(log_path):
    """The file is not touched (a reader of a WAL log may leave SQLite's empty ``-wal`` /
    ``-shm`` index files beside it, as any SQLite reader does)."""
    before = _state(log_path)
    read_log_rows(log_path)
    assert _state(log_path) == before
    assert not log_path.with_name("log.sqlite-wal").stat().st_size


def test_a_read_only_log_reads(log_path):
    mode = log_path.stat().st_mode
    os.chmod(log_path, stat.S_IRUSR)
    try:
        assert len(read_log_rows(log_path)) == 15
    finally:
        os.chmod(log_path, mode)


def test_an_older_log_reads_as_it_is(log_path):
    """Never migrated: the stored schema version stays what it was."""
    with sqlite3.connect(log_path) as conn:
        conn.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
    conn.close()
    assert len(read_log_rows(log_path)) == 15
    with sqlite3.connect(log_path) as conn:
        (version,) = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    conn.close()
    assert version == "1"


def _newer(path):
    with sqlite3.connect(path) as conn:
        conn.execute(
            "UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION + 1),)
        )
    conn.close()
    return path


def _not_a_log(path):
    path = path.parent / "other.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE t (x INTEGER)")
    conn.close()
    return path


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (_newer, "schema version 5 is not one this hybridroute reads"),
        (_not_a_log, "not a readable decision log"),
        (lambda p: p.parent / "missing.sqlite", "no such decision log"),
        (lambda p: p.parent, "is a directory"),
    ],
    ids=["newer-schema", "not-a-log", "missing", "directory"],
)
def test_what_is_not_a_readable_log_is_refused_with_its_path(log_path, make, match):
    if "5" in match:
        match = match.replace("5", str(SCHEMA_VERSION + 1))
    target = make(log_path)
    with pytest.raises(ArtifactError, match=match) as info:
        read_log_rows(target)
    assert info.value.path == str(target)
    assert not (target.parent / "missing.sqlite").exists()  # nothing created


@pytest.mark.parametrize("url", ["mysql://u@h/db", "sqlite://relative.sqlite"])
def test_a_url_that_is_not_a_log_url_is_refused(url):
    with pytest.raises(InputError, match="not a"):
        read_log_rows(url)
