"""Fixtures of the documentation tests: the site built once, strictly, and served.

The site and the notebook need the ``docs`` extra (MkDocs, Material, mkdocstrings,
mkdocs-jupyter, nbclient). Without it their tests (``test_site.py``, ``test_notebook.py``)
are not collected and the run's summary says so (never silently); with
``HYBRIDROUTE_REQUIRE_EXTRAS=1`` (CI) a missing extra is an error. The pages' code
(``test_pages.py``) and ``dev.py docs`` (``test_serve.py``) are tested either way.

* ``built_site`` (session): ``mkdocs build --strict`` of the real ``mkdocs.yml`` into a
  temporary directory -- one build per test session (the site tests live in one module,
  so pytest-xdist's ``--dist loadfile`` gives them one worker);
* ``site_url``: that directory served on 127.0.0.1 from a thread.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import importlib.util
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: The modules the docs extra provides (pyproject's ``docs`` extra).
DOCS_MODULES = ("mkdocs", "material", "mkdocstrings_handlers.python", "mkdocs_jupyter", "nbclient")
#: A strict build of the whole site takes ~30 s on a 2-core machine; this bounds a hang.
BUILD_TIMEOUT_S = 600


def _missing() -> list[str]:
    out = []
    for name in DOCS_MODULES:
        try:
            found = importlib.util.find_spec(name) is not None
        except ModuleNotFoundError:  # the parent package of a dotted name is missing
            found = False
        if not found:
            out.append(name)
    return out


_MISSING = _missing()
if _MISSING:
    if os.environ.get("HYBRIDROUTE_REQUIRE_EXTRAS") == "1":
        raise pytest.UsageError(
            f"the docs tests are required (HYBRIDROUTE_REQUIRE_EXTRAS=1) but "
            f"{', '.join(_MISSING)} is missing; to install: HYBRIDROUTE_EXTRAS=docs python3 "
            "dev.py test"
        )
    collect_ignore = ["test_site.py", "test_notebook.py"]
    _LINE = (
        f"NOT run: tests/docs/test_site.py and test_notebook.py, of the 'docs' extra "
        f"({', '.join(_MISSING)} missing); "
        "to run them: python3 dev.py docs --build-only (installs it), then python3 dev.py test"
    )
    # the root conftest's list: it carries the line from pytest-xdist workers to the summary
    _root = next(
        (
            m
            for m in list(sys.modules.values())
            if getattr(m, "__file__", None) == str(ROOT / "tests" / "conftest.py")
            and hasattr(m, "_NOT_RUN")
        ),
        None,
    )
    if _root is not None:
        if _LINE not in _root._NOT_RUN:
            _root._NOT_RUN.append(_LINE)
    else:

        def pytest_terminal_summary(terminalreporter):  # type: ignore[no-untyped-def]
            terminalreporter.write_line(_LINE, yellow=True, bold=True)


def build_site(site_dir: Path, config: Path = ROOT / "mkdocs.yml") -> subprocess.CompletedProcess:
    """``mkdocs build --strict`` of ``config`` into ``site_dir`` (output captured)."""
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1", MLFLOW_DISABLE_TELEMETRY="true")
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "-f",
            str(config),
            "-d",
            str(site_dir),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT_S,
    )


@pytest.fixture(scope="session")
def built_site(tmp_path_factory) -> Path:
    """The whole site, built strictly from the checkout (a warning fails the build)."""
    site = tmp_path_factory.mktemp("site")
    done = build_site(site)
    if done.returncode != 0:
        pytest.fail(
            "the documentation site did not build strictly:\n" + (done.stdout + done.stderr)[-6000:]
        )
    return site


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@contextlib.contextmanager
def serve_directory(directory: Path) -> Iterator[str]:
    """``directory`` served on 127.0.0.1 (a free port) from a thread; yields the base URL."""
    handler = functools.partial(_Quiet, directory=str(directory))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=10)


@pytest.fixture(scope="session")
def site_url(built_site) -> Iterator[str]:
    with serve_directory(built_site) as url:
        yield url
