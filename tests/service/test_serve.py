"""``hybridroute serve`` for real: the command line, the real client against a real
server, multi-worker mode, and a server SIGKILLed in the middle of traffic."""

from __future__ import annotations

import contextlib
import io
import os
import signal
import subprocess
import threading
import time

import pytest

from hybridroute.cli import main
from hybridroute.client import AsyncRouterClient, RouterClient
from hybridroute.exceptions import ServiceError, ServiceUnavailableError

from .conftest import free_port, serve_command, uvicorn_thread, wait_healthy
from .helpers import TEXTS

pytestmark = pytest.mark.service


def run_cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def test_serve_without_the_extra_says_what_to_install(monkeypatch, bundles, tmp_path):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "uvicorn" else real(name, *a)
    )
    code, _, err = run_cli("serve", "--router", str(bundles["v1"]), "--log", str(tmp_path / "l"))
    assert code == 2
    assert err.strip().splitlines() == [
        "error: hybridroute serve needs the 'service' extra (uvicorn not installed): "
        "pip install 'hybridroute[service]'"
    ]


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("--router", "{tampered}", "--log", "{log}"), "checksum mismatch"),
        (("--router", "{v1}", "--shadow", "{nowhere}", "--log", "{log}"), "not a router bundle"),
        (("--router", "{v1}", "--log", "mysql://u:hunter2@h/db"), "not a decision-log URL"),
        (
            ("--router", "{v1}", "--log", "{log}", "--segment-fact", "queue"),
            "'queue' is not a fact",
        ),
        (("--router", "{v1}", "--log", "{log}", "--sensitive", "action"), "salt"),
    ],
)
def test_serve_refuses_before_starting(bundles, tmp_path, monkeypatch, args, words):
    monkeypatch.delenv("HYBRIDROUTE_LOG_SALT", raising=False)
    where = {
        "tampered": bundles["tampered"],
        "v1": bundles["v1"],
        "nowhere": tmp_path / "nowhere",
        "log": tmp_path / "log.sqlite",
    }
    code, _, err = run_cli("serve", *(a.format(**where) for a in args))
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and words in err
    assert "hunter2" not in err


def test_real_client_against_a_real_server(bundles, tmp_path):
    import asyncio

    from hybridroute.service import ServiceConfig, create_app

    config = ServiceConfig(router=bundles["v1"], log=f"sqlite:///{tmp_path / 'd.sqlite'}")
    with uvicorn_thread(create_app(config)) as url, RouterClient(url, retries=1) as client:
        assert client.health() == {"status": "ok"}
        one = client.route("where is my parcel", {"amount": 20}, request_id="c-1")
        assert one.decision.selected_destination == "order_status" and not one.duplicate
        again = client.route("where is my parcel", {"amount": 20}, request_id="c-1")
        assert again.duplicate and again.decision_id == one.decision_id
        batch = client.route_batch([{"text": t, "facts": {}} for t in TEXTS[:4]])
        assert [r.decision.input_snapshot["text"] for r in batch] == TEXTS[:4]
        assert [r["version"] for r in client.routers()] == ["1"]
        with pytest.raises(ServiceError, match="below the minimum") as info:
            client.route("x", {"amount": -1})
        assert (info.value.status, info.value.field) == (422, "facts.amount")

        async def use_async() -> str:
            async with AsyncRouterClient(url) as ac:
                return (await ac.route("refund me", {}, request_id="a-1")).decision_id

        assert asyncio.run(use_async())


def test_sensitive_facts_come_back_hashed_and_verifiable(bundles, tmp_path, monkeypatch):
    from hybridroute.service import ServiceConfig, create_app

    monkeypatch.setenv("HYBRIDROUTE_LOG_SALT", "pepper-" * 6)
    config = ServiceConfig(
        router=bundles["v1"], log=str(tmp_path / "d.sqlite"), sensitive_facts=("action",)
    )
    with uvicorn_thread(create_app(config)) as url, RouterClient(url) as client:
        result = client.route("refund me", {"action": "issue_refund"})
        shown = result.decision.input_snapshot["facts"]["action"]
        assert shown != "issue_refund"  # stored and answered as a salted hash


def _start(cmd: list[str], log_path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        cmd, stdout=open(log_path, "wb"), stderr=subprocess.STDOUT, env={**os.environ}
    )


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=15)


def test_sigkill_mid_traffic_loses_no_answered_decision(bundles, tmp_path):
    from hybridroute.records import open_log

    log_url = f"sqlite:///{tmp_path / 'decisions.sqlite'}"
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = _start(serve_command(bundles, log_url, port, "--no-access-log"), tmp_path / "out")
    try:
        wait_healthy(url, proc)
        start_line = (tmp_path / "out").read_text().splitlines()[0]
        assert start_line.startswith(f"hybridroute serve: {url} · live support 1")
        assert "admin endpoints off" in start_line
        received: list[str] = []
        lock = threading.Lock()
        stop = threading.Event()

        def traffic(k: int) -> None:
            with RouterClient(url, timeout=5, retries=0) as client:
                i = 0
                while not stop.is_set() and i < 5000:
                    i += 1
                    try:
                        if i % 3 == 0:
                            items = [{"text": t, "facts": {}} for t in TEXTS[:5]]
                            got = [r.decision_id for r in client.route_batch(items)]
                        else:
                            rid = f"k{k}-{i}" if i % 2 else None
                            got = [client.route(TEXTS[i % 10], {"amount": i}, rid).decision_id]
                    except ServiceUnavailableError:
                        return  # the server is gone
                    with lock:
                        received.extend(got)

        threads = [threading.Thread(target=traffic, args=(k,), daemon=True) for k in range(3)]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 30
        while len(received) < 150 and time.monotonic() < deadline:
            time.sleep(0.01)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        stop.set()
        for t in threads:
            t.join(timeout=15)
            assert not t.is_alive()
    finally:
        _stop(proc)
    assert len(received) >= 150
    with open_log(log_url) as log:
        assert log.integrity_check() == "ok"
        logged = {row["decision_id"] for row in log.rows()}
    missing = set(received) - logged
    assert not missing, f"{len(missing)} answered decision(s) are not in the log"
    # a restarted server serves on the same log
    proc = _start(serve_command(bundles, log_url, port, "--no-access-log"), tmp_path / "out2")
    try:
        wait_healthy(url, proc)
        with RouterClient(url) as client:
            assert client.route("where is my parcel", {}, request_id="after").decision_id
    finally:
        _stop(proc)


def test_multi_worker_mode_serves_with_admin_off(bundles, tmp_path):
    log_url = f"sqlite:///{tmp_path / 'decisions.sqlite'}"
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env_token = {"HYBRIDROUTE_ADMIN_TOKEN": "secret-token-123456"}
    cmd = serve_command(bundles, log_url, port, "--workers", "2", "--no-access-log")
    out = tmp_path / "out"
    proc = subprocess.Popen(
        cmd, stdout=open(out, "wb"), stderr=subprocess.STDOUT, env={**os.environ, **env_token}
    )
    try:
        wait_healthy(url, proc, timeout=45)
        with RouterClient(url) as client:
            ids = {client.route(t, {}, request_id=f"m{i}").decision_id for i, t in enumerate(TEXTS)}
            assert len(ids) == len(TEXTS)
        import httpx

        r = httpx.post(
            url + "/v1/admin/promote",
            json={"version": "2"},
            headers={"authorization": "Bearer secret-token-123456"},
        )
        assert r.status_code == 403 and "multi-worker" in r.json()["error"]["message"]
    finally:
        _stop(proc)
    first = out.read_text().splitlines()[0]
    assert "admin endpoints off (2 workers" in first


@pytest.mark.parametrize(
    ("option", "value", "words"),
    [
        ("--batch-window-ms", "51", "HYBRIDROUTE_BATCH_WINDOW_MS must be between 0 and 50"),
        ("--batch-window-ms", "-1", "HYBRIDROUTE_BATCH_WINDOW_MS must be between 0 and 50"),
        ("--batch-max", "0", "HYBRIDROUTE_BATCH_MAX must be between 1 and 4096"),
        ("--batch-max", "5000", "HYBRIDROUTE_BATCH_MAX must be between 1 and 4096"),
    ],
)
def test_bad_batching_options_are_refused_before_anything(
    monkeypatch, bundles, tmp_path, option, value, words
):
    monkeypatch.delenv("HYBRIDROUTE_BATCH_WINDOW_MS", raising=False)
    monkeypatch.delenv("HYBRIDROUTE_BATCH_MAX", raising=False)
    log = tmp_path / "log.sqlite"
    code, out, err = run_cli(
        "serve", "--router", str(bundles["v1"]), "--log", str(log), option, value
    )
    assert code == 2 and words in err and option in err and out == "", err
    assert not log.exists()
    # a refused value is not left in the environment for the next command
    assert "HYBRIDROUTE_BATCH_WINDOW_MS" not in os.environ
    assert "HYBRIDROUTE_BATCH_MAX" not in os.environ


def test_batching_options_reach_every_worker_through_the_environment(monkeypatch):
    from hybridroute.cli._serve import _batch_settings
    from hybridroute.service._batcher import settings_from_env

    monkeypatch.setenv("HYBRIDROUTE_BATCH_WINDOW_MS", "1")
    monkeypatch.delenv("HYBRIDROUTE_BATCH_MAX", raising=False)
    _batch_settings(0, 8)
    assert settings_from_env() == (0.0, 8)  # 0 ms: micro-batching off
    _batch_settings(2.5, None)
    assert settings_from_env() == (0.0025, 8)
