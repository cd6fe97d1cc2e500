"""Session fixtures shared by several test packages: a real MLflow tracking server on 127.0.0.1."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def mlflow_server(tmp_path_factory):
    root = tmp_path_factory.mktemp("mlflow-server")
    port = _free_port()
    env = dict(
        os.environ, MLFLOW_SERVER_ENABLE_JOB_EXECUTION="false", MLFLOW_DISABLE_TELEMETRY="true"
    )
    mlflow_bin = Path(sys.executable).with_name("mlflow")
    cmd = [
        str(mlflow_bin),
        "server",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--workers",
        "1",
        "--backend-store-uri",
        f"sqlite:///{root / 'mlflow.db'}",
        "--artifacts-destination",
        str(root / "artifacts"),
    ]
    log = open(root / "server.log", "w")
    proc = subprocess.Popen(cmd, cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while True:
        try:
            with urllib.request.urlopen(url + "/health", timeout=2) as resp:
                if resp.status == 200:
                    break
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError(
                f"mlflow server did not start:\n{(root / 'server.log').read_text()[-3000:]}"
            )
        time.sleep(0.5)
    yield url
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
    log.close()
