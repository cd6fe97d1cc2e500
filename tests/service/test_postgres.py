"""Two ``hybridroute serve`` processes on one PostgreSQL log (a real server, started by
tests/conftest.py): one is SIGKILLed mid-traffic; nothing answered is lost and a request
id sent to both is logged once."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time

import pytest

from hybridroute.client import RouterClient
from hybridroute.exceptions import ServiceUnavailableError

from .conftest import free_port, serve_command, wait_healthy
from .helpers import TEXTS

pytestmark = [pytest.mark.service, pytest.mark.postgres]


def test_two_servers_one_postgres_log_survive_a_kill(bundles, postgres_server, tmp_path):
    from hybridroute.records import open_log

    name = f"hr_service_{os.getpid()}"
    postgres_server.admin(f"CREATE DATABASE {name}")
    log_url = postgres_server.url(name, password="pg-secret-pw")
    servers = []
    try:
        for k in range(2):
            port = free_port()
            out = tmp_path / f"out{k}"
            cmd = serve_command(bundles, log_url, port, "--no-access-log")
            proc = subprocess.Popen(cmd, stdout=open(out, "wb"), stderr=subprocess.STDOUT)
            servers.append((proc, f"http://127.0.0.1:{port}", out))
        for proc, url, _ in servers:
            wait_healthy(url, proc, timeout=45)
        start_line = servers[0][2].read_text().splitlines()[0]
        assert "log postgresql://hybridroute:" in start_line and name in start_line
        assert "pg-secret-pw" not in start_line

        answers: dict[str, list[tuple[str | None, str]]] = {"0": [], "1": []}
        lock = threading.Lock()
        stop = threading.Event()

        def traffic(k: int, url: str) -> None:
            with RouterClient(url, timeout=5, retries=0) as client:
                for i in range(2000):
                    if stop.is_set():
                        return
                    rid = f"shared-{i}" if i % 2 == 0 else None  # the same ids on both
                    try:
                        got = client.route(TEXTS[i % 10], {"amount": i}, rid)
                    except ServiceUnavailableError:
                        return
                    with lock:
                        answers[str(k)].append((rid, got.decision_id))

        threads = [
            threading.Thread(target=traffic, args=(k, url), daemon=True)
            for k, (_, url, _) in enumerate(servers)
        ]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 30
        while len(answers["0"]) < 60 and time.monotonic() < deadline:
            time.sleep(0.01)
        os.kill(servers[0][0].pid, signal.SIGKILL)
        servers[0][0].wait(timeout=10)
        killed_at = len(answers["1"])
        while len(answers["1"]) < killed_at + 30 and time.monotonic() < deadline:
            time.sleep(0.01)  # the survivor keeps answering
        stop.set()
        for t in threads:
            t.join(timeout=15)
            assert not t.is_alive()
    finally:
        for proc, _, _ in servers:
            if proc.poll() is None:
                proc.terminate()
                proc.wait(timeout=15)
    received = answers["0"] + answers["1"]
    assert len(answers["0"]) >= 60, f"server 0 answered only {len(answers['0'])}"
    assert len(answers["1"]) > killed_at, "the surviving server stopped answering"
    with open_log(log_url) as log:
        rows = list(log.rows(role="live"))
    logged = {row["decision_id"] for row in rows}
    lost = {d for _, d in received} - logged
    assert not lost, f"{len(lost)} answered decision(s) are not in the log"
    ids = [row["item_id"] for row in rows if row["item_id"] is not None]
    assert len(ids) == len(set(ids)), "a request id was logged twice"
    by_rid: dict[str, set[str]] = {}
    for rid, d in received:
        if rid is not None:
            by_rid.setdefault(rid, set()).add(d)
    split = {rid: ds for rid, ds in by_rid.items() if len(ds) > 1}
    assert not split, f"one request id, several decisions: {split}"
