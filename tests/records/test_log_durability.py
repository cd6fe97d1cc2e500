"""Acknowledged means durable, ready means writable: a log whose file was removed or
replaced refuses every write; readiness commits a row and looks at the disk; a PostgreSQL
server that stops answering is given up on by a client-side deadline."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from hybridroute.contracts import Decision
from hybridroute.exceptions import ArtifactError
from hybridroute.records import open_log


def decision(i: int = 0) -> Decision:
    return Decision(
        router="r",
        router_version="1",
        stage="rule",
        input_snapshot={"facts": {"n": i}},
        allowed_destinations=("fail",),
        selected_destination="fail",
        reason_code="default_exit",
    )


def _remove(path: Path) -> None:
    path.unlink()


def _replace(path: Path) -> None:
    other = path.with_name("other.sqlite")
    with open_log(other) as log:
        log.log_many([(decision(99), None, "live")])
    os.replace(other, path)


def _move_away(path: Path) -> None:
    path.rename(path.with_name("moved.sqlite"))


def _remove_dir(path: Path) -> None:
    shutil.rmtree(path.parent)
    path.parent.mkdir()


def _remove_wal(path: Path) -> None:
    Path(str(path) + "-wal").unlink()


@pytest.mark.parametrize(
    ("vanish", "what"),
    [
        (_remove, "file was removed"),
        (_replace, "file was replaced"),
        (_move_away, "file was removed"),
        (_remove_dir, "file was removed"),
        (_remove_wal, "write-ahead file"),
    ],
)
def test_a_log_whose_file_vanished_acknowledges_nothing(tmp_path, vanish, what):
    path = tmp_path / "logs" / "log.sqlite"
    path.parent.mkdir()
    log = open_log(path)
    try:
        log.log_many([(decision(0), "a", "live")])
        log.check_writable()
        vanish(path)
        for attempt in (
            lambda: log.log_many([(decision(1), "b", "live")]),
            lambda: log.add_outcomes(
                [{"decision_id": "x" * 32, "gold_next_step": "fail", "source": "audit"}]
            ),
            log.check_writable,
        ):
            with pytest.raises(ArtifactError, match=what):
                attempt()
        # still refused later: a broken log stays broken until reopened
        with pytest.raises(ArtifactError, match=what):
            log.log_many([(decision(2), None, "live")])
    finally:
        log._closed = True  # its buffer is empty; closing only drops the connection
        log._close_connection()
    if path.exists():
        with open_log(path) as fresh:
            assert all(r["item_id"] != "b" for r in fresh.rows())


def test_readiness_commits_a_row(tmp_path):
    path = tmp_path / "log.sqlite"
    with open_log(path) as log:
        log.check_writable()
        first = log.meta()["ready_check"]
        time.sleep(0.01)
        log.check_writable()
        assert log.meta()["ready_check"] > first
        assert log.count() == 0


def test_readiness_refuses_a_full_disk(tmp_path, monkeypatch):
    from hybridroute.records import _fileguard

    with open_log(tmp_path / "log.sqlite") as log:
        monkeypatch.setattr(_fileguard, "free_bytes", lambda path: 4096)
        with pytest.raises(ArtifactError, match="disk holding the decision log is full"):
            log.check_writable()


def test_a_really_full_disk(small_disk):
    log = open_log(small_disk / "log.sqlite")
    try:
        log.log_many([(decision(i), f"id{i}", "live") for i in range(20)])
        log.check_writable()
        filler = small_disk / "filler"
        with open(filler, "wb") as fh:  # take every free byte
            try:
                while True:
                    fh.write(b"\0" * 65536)
                    fh.flush()
            except OSError:
                pass
        with pytest.raises(ArtifactError, match="full"):
            log.check_writable()
        failed = 0
        for k in range(40):  # enough new pages to need the disk
            try:
                log.log_many([(decision(1000 + k), f"x{k}-{j}", "live") for j in range(50)])
            except ArtifactError as exc:
                assert "full" in str(exc)
                failed += 1
        assert failed > 0
        filler.unlink()
        log.check_writable()  # room again: ready again
        log.log_many([(decision(5000), "after", "live")])
    finally:
        log.close()


# ------------------------------------------------------------------ a frozen server


@pytest.fixture
def tcp_server(make_postgres_server):
    server = make_postgres_server()
    server.stop()
    server.start(tcp=True)
    server.admin("CREATE DATABASE frozen")
    return server


@pytest.mark.postgres
def test_a_frozen_postgres_server_is_given_up_on(tcp_server):
    url = tcp_server.url("frozen", tcp=True)
    log = open_log(url, statement_timeout_s=1, connect_timeout_s=2)
    try:
        log.log_many([(decision(0), "before", "live")])
        with tcp_server.frozen():
            for call, limit in (
                (lambda: log.log_many([(decision(1), "during", "live")]), 3.0),
                (lambda: log.check_writable(timeout_s=1), 1.5),
                (lambda: log.count(), 3.0),
            ):
                start = time.monotonic()
                with pytest.raises(ArtifactError) as info:
                    call()
                took = time.monotonic() - start
                # the call's own deadline, plus at most one reconnect attempt (2 s)
                assert took < limit + 2 + 1.5, (took, str(info.value))
                assert "did not answer" in str(info.value) or "timeout" in str(info.value)
        # the server answers again: the log reconnects by itself
        deadline = time.monotonic() + 30
        while True:
            try:
                log.log_many([(decision(2), "after", "live")])
                break
            except ArtifactError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        ids = {r["item_id"] for r in log.rows()}
        assert {"before", "after"} <= ids
    finally:
        log.close()
