"""Fixtures of the service tests: two small router bundles, apps on SQLite logs, servers.

* ``bundles`` (session): ``v1`` (live) and ``v2`` (a shadow: the same model, a stricter
  policy, so the two disagree on some texts) built once from the support tickets; plus a
  ``tampered`` copy of ``v2`` with one file changed after it was sealed.
* ``make_app``: ``make_app(tmp_path, **config)`` -> a TestClient (lifespan running) of a
  fresh app on a SQLite log under ``tmp_path``.
* ``serve_subprocess``: ``hybridroute serve`` as a real process on a free port.

The browser test needs Debian's ``chromium`` and ``chromedriver``: the root conftest
deselects it when they are missing and the run's summary says it was NOT run, unless
``HYBRIDROUTE_REQUIRE_BROWSER=1`` (CI), where a missing browser is an error.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

#: Debian's chromium and its driver; the root conftest deselects (or, with
#: HYBRIDROUTE_REQUIRE_BROWSER=1, refuses) the browser test when they are missing
from ..conftest import CHROMEDRIVER, CHROMIUM  # noqa: F401

# --------------------------------------------------------------------------- bundles


@pytest.fixture(scope="session")
def bundles(tmp_path_factory) -> dict[str, Path]:
    from hybridroute.calibration import CertifiedPrecisionThreshold
    from hybridroute.classifiers import LocalClassifier
    from hybridroute.datasets import load_dataset
    from hybridroute.router import HybridRouter, save_router
    from hybridroute.rules import load_rules

    from ..router.conftest import EXAMPLE, fitted_policy

    root = tmp_path_factory.mktemp("service-bundles")
    ds = load_dataset("support-tickets")
    train = ds.split("train")
    clf = LocalClassifier(Cs=(10.0,)).fit(train.texts, train.y)
    rules = load_rules(EXAMPLE)
    out = {}
    for version, target in (("1", 0.85), ("2", 0.97)):
        router = HybridRouter(
            rules=rules,
            classifier=clf,
            policy=fitted_policy(clf, ds, CertifiedPrecisionThreshold(target, 0.1)),
            name="support",
            version=version,
        )
        out[f"v{version}"] = save_router(router, root / f"bundle-v{version}")
    tampered = root / "bundle-tampered"
    shutil.copytree(out["v2"], tampered)
    dest = tampered / "destinations.json"
    dest.write_text(dest.read_text().replace("order_status", "complaint", 1))
    out["tampered"] = tampered
    return out


@pytest.fixture
def make_app(bundles, monkeypatch) -> Iterator[Any]:
    """``make_app(log_dir, shadows=("v2",), token=None, **config)`` -> a running TestClient."""
    from fastapi.testclient import TestClient

    from hybridroute.service import ServiceConfig, create_app

    stack = contextlib.ExitStack()

    def make(log_dir: Path, *, shadows=(), token: str | None = None, **kw: Any) -> Any:
        if token is None:
            monkeypatch.delenv("HYBRIDROUTE_ADMIN_TOKEN", raising=False)
        else:
            monkeypatch.setenv("HYBRIDROUTE_ADMIN_TOKEN", token)
        log_dir.mkdir(parents=True, exist_ok=True)  # a log is made only in a directory
        config = ServiceConfig(
            router=bundles["v1"],
            shadows=tuple(bundles[s] for s in shadows),
            log=f"sqlite:///{log_dir / 'decisions.sqlite'}",
            **kw,
        )
        client = TestClient(create_app(config), raise_server_exceptions=False)
        stack.enter_context(client)
        return client

    with stack:
        yield make


# --------------------------------------------------------------------------- servers


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_healthy(url: str, proc: subprocess.Popen[bytes] | None = None, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"the server exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url + "/readyz", timeout=1) as resp:
                if resp.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"{url} did not become ready in {timeout} s")


def serve_command(bundles: dict[str, Path], log: str, port: int, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "hybridroute",
        "serve",
        "--router",
        str(bundles["v1"]),
        "--log",
        log,
        "--port",
        str(port),
        *extra,
    ]


@contextlib.contextmanager
def uvicorn_thread(app: Any) -> Iterator[str]:
    """Serve ``app`` with uvicorn on a free port in a thread; yields its URL."""
    import uvicorn

    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url)
        yield url
    finally:
        server.should_exit = True
        thread.join(timeout=15)
