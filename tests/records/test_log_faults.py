"""SIGKILL faults: two processes write batches with request ids to one log, one is killed.

Afterwards every batch a process reported as committed is there whole, no batch is there
in part, no (router, version, request id) is there twice, and the survivor's writes are
all there -- on SQLite and on PostgreSQL (``log_url``: both backends).
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from hybridroute.records import open_log

BATCH = 20
#: batches the survivor commits after the kill before it is told to stop
AFTER_KILL = 10

WRITER = r"""
import sys
from hybridroute.contracts import Decision
from hybridroute.records import open_log

import os
url, tag, stop, size = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])

def decision(i):
    return Decision(router="r", router_version="1", stage="rule",
                    input_snapshot={"facts": {"n": i}}, allowed_destinations=("fail",),
                    selected_destination="fail", reason_code="default_exit")

with open_log(url) as log:
    b = 0
    while not os.path.exists(stop):  # runs until told to stop (or killed)
        own = [(decision(k), f"{tag}-{b}-{k}", "live") for k in range(size)]
        shared = [(decision(k), f"both-{b}-{k}", "live") for k in range(3)]  # both write these
        out = log.log_many(own + shared)
        assert not any(r.duplicate for r in out[:size])
        print(f"committed {b}", flush=True)
        b += 1
print("done", flush=True)
"""


class Lines:
    """Lines of a process's stdout, read with a deadline (a hang fails, never blocks)."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.proc = proc
        self.sel = selectors.DefaultSelector()
        self.sel.register(proc.stdout, selectors.EVENT_READ)
        self.buf = b""
        self.lines: list[str] = []

    def pump(self, timeout: float) -> None:
        for _key, _ in self.sel.select(timeout):
            chunk = os.read(self.proc.stdout.fileno(), 65536)
            if not chunk:
                return
            self.buf += chunk
            *done, self.buf = self.buf.split(b"\n")
            self.lines += [d.decode() for d in done]

    def drain(self, timeout: float = 30) -> None:
        """Read to the end of the stream of a process that has exited."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            before = (len(self.lines), self.buf)
            self.pump(0.2)
            if (len(self.lines), self.buf) == before:  # EOF, or nothing more within 0.2 s
                return

    def committed(self) -> list[int]:
        return [int(x.split()[1]) for x in self.lines if x.startswith("committed ")]


def spawn(url: str, tag: str, stop: Path) -> subprocess.Popen:
    """A writer committing batches until ``stop`` exists; neither can finish on its own, so
    a slow start of one (a loaded machine) cannot end the race before the kill."""
    return subprocess.Popen(
        [sys.executable, "-c", WRITER, url, tag, str(stop), str(BATCH)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def test_sigkill_of_one_of_two_writers_loses_no_committed_batch(log_url, tmp_path):
    open_log(log_url).close()  # the tables exist before the race
    stop = tmp_path / "stop"
    victim = spawn(log_url, "v", tmp_path / "never")  # runs until killed
    survivor = spawn(log_url, "s", stop)
    out_v, out_s = Lines(victim), Lines(survivor)
    deadline = time.monotonic() + 60
    try:
        # both are writing: kill the victim without warning in the middle of its run
        while len(out_v.committed()) < 8 or len(out_s.committed()) < 3:
            assert time.monotonic() < deadline, "writers did not get going"
            for proc in (victim, survivor):
                if proc.poll() is not None:
                    raise AssertionError(f"a writer died early: {proc.stderr.read()[-3000:]!r}")
            out_v.pump(0.2)
            out_s.pump(0.2)
        os.kill(victim.pid, signal.SIGKILL)
        victim.wait(timeout=30)
        at_kill = len(out_s.committed())
        while len(out_s.committed()) < at_kill + AFTER_KILL:  # it goes on writing
            assert survivor.poll() is None, survivor.stderr.read()[-3000:]
            assert time.monotonic() < deadline, "the survivor stopped writing after the kill"
            out_s.pump(0.2)
        stop.touch()
        while survivor.poll() is None:
            assert time.monotonic() < deadline, "the survivor did not finish"
            out_s.pump(0.2)
        out_s.drain()
        _, err = survivor.communicate(timeout=30)
        assert survivor.returncode == 0, err.decode()[-3000:]
    finally:
        for proc in (victim, survivor):
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=30)
    out_v.pump(0.5)
    assert victim.returncode == -signal.SIGKILL

    with open_log(log_url) as log:
        rows = list(log.rows())
        if hasattr(log, "integrity_check"):
            assert log.integrity_check() == "ok"
    ids = [r["item_id"] for r in rows]
    counts = Counter((r["router"], r["router_version"], r["item_id"]) for r in rows)
    assert max(counts.values()) == 1  # no request id twice
    present = set(ids)

    def batch_state(tag: str, b: int) -> str:
        have = [f"{tag}-{b}-{k}" in present for k in range(BATCH)]
        return "whole" if all(have) else "absent" if not any(have) else "partial"

    reported_v = out_v.committed()
    assert reported_v == list(range(len(reported_v))) and len(reported_v) >= 8
    last = max(int(i.split("-")[1]) for i in ids if i.startswith("v-"))
    states = [batch_state("v", b) for b in range(last + 2)]
    assert "partial" not in states  # a batch is all there or not at all
    assert all(states[b] == "whole" for b in reported_v)  # every reported commit is there
    # at most the batch in flight when it was killed was committed unreported
    assert states[len(reported_v) + 1 :] == ["absent"] * (len(states) - len(reported_v) - 1)
    done_s = len(out_s.committed())
    assert out_s.committed() == list(range(done_s)) and out_s.lines[-1] == "done"
    assert all(batch_state("s", b) == "whole" for b in range(done_s))
    assert not any(i.startswith(f"s-{done_s}-") for i in ids)  # nothing after its last batch
    # the ids both wrote: there once each, for every batch the survivor committed
    assert all(f"both-{b}-{k}" in present for b in range(done_s) for k in range(3))


SAME_IDS = r"""
import json, os, sys, time
from hybridroute.contracts import Decision
from hybridroute.records import open_log

url, order, n, size, go = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]

def decision(i):
    return Decision(router="r", router_version="1", stage="rule",
                    input_snapshot={"facts": {"n": i}}, allowed_destinations=("fail",),
                    selected_destination="fail", reason_code="default_exit")

seen, written = {}, 0
with open_log(url) as log:
    print("ready", flush=True)
    while not os.path.exists(go):  # both start together
        time.sleep(0.002)
    for start in range(0, n, size):
        ids = list(range(start, start + size))
        if order == "down":
            ids.reverse()  # the same ids, the other order: index locks must not deadlock
        out = log.log_many([(decision(i), f"req-{i}", "live") for i in ids])
        for i, r in zip(ids, out):
            seen[f"req-{i}"] = r.decision_id
            written += not r.duplicate
print(json.dumps({"written": written, "seen": seen}), flush=True)
"""


def test_two_processes_logging_the_same_ids_agree_on_each_stored_row(log_url, tmp_path):
    """Each id is stored once, and both writers are told the same (stored) decision id."""
    import json

    open_log(log_url).close()
    n, size = 1200, 40
    go = tmp_path / "go"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", SAME_IDS, log_url, order, str(n), str(size), str(go)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for order in ("up", "down")
    ]
    results = []
    try:
        lines = [Lines(p) for p in procs]
        deadline = time.monotonic() + 60
        while not all("ready" in x.lines for x in lines):
            assert time.monotonic() < deadline and all(p.poll() is None for p in procs)
            for x in lines:
                x.pump(0.1)
        go.touch()
        t0 = time.monotonic()
        for p, x in zip(procs, lines, strict=True):
            rest, err = p.communicate(timeout=60)
            assert p.returncode == 0, err.decode()[-3000:]
            results.append(json.loads((x.buf + rest).decode().splitlines()[-1]))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=30)
    with open_log(log_url) as log:
        stored = {r["item_id"]: r["decision_id"] for r in log.rows()}
        assert log.count() == n
    assert set(stored) == {f"req-{i}" for i in range(n)}
    assert results[0]["seen"] == results[1]["seen"] == stored
    assert results[0]["written"] + results[1]["written"] == n
    assert time.monotonic() - t0 < 30
    if log_url.startswith("postgresql"):
        # the rows went in in key order: not one deadlock (detected after 1 s, then retried)
        import psycopg

        with psycopg.connect(log_url, autocommit=True) as conn:
            for _ in range(50):  # a backend's statistics reach the view shortly after it exits
                (deadlocks,) = conn.execute(
                    "SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()"
                ).fetchone()
                if deadlocks:
                    break
                time.sleep(0.02)
        assert deadlocks == 0
