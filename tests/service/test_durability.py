"""Ready means writable, acknowledged means durable, at the service: a log file removed or
replaced while serving, a full disk, a PostgreSQL server that freezes."""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from .helpers import PARCEL, state

pytestmark = pytest.mark.service


def _remove(path):
    path.unlink()


def _replace(path):
    from hybridroute.records import open_log

    other = path.with_name("other.sqlite")
    open_log(other).close()
    os.replace(other, path)


@pytest.mark.parametrize(("vanish", "what"), [(_remove, "removed"), (_replace, "replaced")])
def test_a_vanished_log_file_acknowledges_nothing(make_app, tmp_path, vanish, what):
    client = make_app(tmp_path)
    assert client.get("/readyz").status_code == 200
    assert client.post("/v1/route", json={**PARCEL, "request_id": "a"}).status_code == 200
    vanish(tmp_path / "decisions.sqlite")
    ready = client.get("/readyz")
    assert ready.status_code == 503 and what in ready.json()["error"]["message"]
    for body in (PARCEL, {**PARCEL, "request_id": "b"}):
        r = client.post("/v1/route", json=body)
        assert r.status_code == 503, r.text
        assert "decision" not in r.json() and what in r.json()["error"]["message"]
    r = client.post("/v1/route/batch", json={"items": [PARCEL, PARCEL]})
    assert r.status_code == 503
    assert str(tmp_path) not in r.text  # the server's path is not the client's business


def test_a_full_disk_is_not_ready_and_acknowledges_nothing(make_app, small_disk):
    client = make_app(small_disk)
    assert client.get("/readyz").status_code == 200
    filler = small_disk / "filler"
    with open(filler, "wb") as fh:
        try:
            while True:
                fh.write(b"\0" * 65536)
                fh.flush()
        except OSError:
            pass
    ready = client.get("/readyz")
    assert ready.status_code == 503 and "full" in ready.json()["error"]["message"]
    refused = 0
    for k in range(60):
        items = [{"text": f"ticket {k}-{j} " + "x" * 400, "facts": {}} for j in range(40)]
        r = client.post("/v1/route/batch", json={"items": items})
        if r.status_code == 503:
            assert "full" in r.json()["error"]["message"]
            refused += 1
        else:
            assert r.status_code == 200
    assert refused > 0
    filler.unlink()
    assert client.get("/readyz").status_code == 200
    assert client.post("/v1/route", json=PARCEL).status_code == 200


@pytest.mark.postgres
def test_a_frozen_postgres_log(bundles, make_postgres_server, monkeypatch):
    """SIGSTOP on every process of the server: routes give up at the log's client-side
    deadline with 503, /readyz answers 503 within its own, and all recovers after."""
    from fastapi.testclient import TestClient

    from hybridroute.service import ServiceConfig, _state, create_app

    server = make_postgres_server()
    server.stop()
    server.start(tcp=True)
    server.admin("CREATE DATABASE frozen_service")
    config = ServiceConfig(
        router=bundles["v1"], log=server.url("frozen_service", tcp=True), log_timeout_s=2
    )
    monkeypatch.setattr(_state, "READY_TIMEOUT_S", 2.0)
    with TestClient(create_app(config)) as client:
        assert client.post("/v1/route", json=PARCEL).status_code == 200
        with server.frozen():
            start = time.monotonic()
            with ThreadPoolExecutor(4) as pool:
                routes = list(pool.map(lambda _: client.post("/v1/route", json=PARCEL), range(4)))
                ready = client.get("/readyz")
            took = time.monotonic() - start
            assert [r.status_code for r in routes] == [503] * 4
            assert ready.status_code == 503
            assert took < 20, took
        deadline = time.monotonic() + 30
        while client.get("/readyz").status_code != 200:
            assert time.monotonic() < deadline, "the service did not recover"
            time.sleep(0.2)
        assert client.post("/v1/route", json=PARCEL).status_code == 200
        assert state(client).log is not None


def test_readiness_answers_within_its_own_deadline(make_app, tmp_path, monkeypatch):
    """A log that does not answer (a stuck commit, a hung server): /readyz says so in
    READY_TIMEOUT_S, and repeated probes wait on the one check in flight."""
    import threading

    from hybridroute.service import _state

    monkeypatch.setattr(_state, "READY_TIMEOUT_S", 0.5)
    client = make_app(tmp_path)
    log = state(client).log
    release = threading.Event()
    calls = []

    def stuck(**kw) -> None:
        calls.append(kw)
        release.wait(20)

    monkeypatch.setattr(log, "check_writable", stuck)
    try:
        for _ in range(3):
            start = time.monotonic()
            r = client.get("/readyz")
            assert time.monotonic() - start < 3
            assert r.status_code == 503 and "did not answer within" in r.text
        assert len(calls) == 1  # one check in flight, not a queue of them
    finally:
        release.set()
