#!/usr/bin/env python3
"""One entry point for a fresh machine: creates or reuses ``.venv`` and runs a job in it.

    python3 dev.py demo     # the main job (``hybridroute demo``)
    python3 dev.py test     # the test suite (fast suite + marked groups whose extras are installed;
                            # two pytest-xdist workers on a 2+ core machine, see _workers)
    python3 dev.py slow     # the long statistical checks (``pytest -m slow``)
    python3 dev.py bench    # the benchmark scripts
    python3 dev.py docs     # build the documentation site strictly, serve it on 127.0.0.1
    python3 dev.py hr ARGS  # any ``hybridroute`` command inside the environment

Where each job runs, from whichever directory you call it (``python3 path/to/dev.py ...``):

* ``hr``, ``demo`` and ``bench`` run in *your* directory: relative paths you pass
  (``--rules my_rules.yaml``, ``--json bench.json``) are read there and what they write
  (models, reports, ``mlflow.db``) lands there, as with the ``hybridroute`` command itself.
* ``test`` and ``slow`` run in the checkout, the suite's root (its pytest configuration and
  ``tests/``): test paths you pass are relative to the checkout (``tests/rules``).

Standard output carries only the job's own output (``dev.py hr ... --json | python3 -m
json.tool`` works): the ``+ command`` echo and the environment set-up go to standard error.
Only the standard library is used here, so this runs on any Python >= 3.11.
The environment is rebuilt when ``pyproject.toml`` changes (a hash stamp in ``.venv``).
"""

from __future__ import annotations

import hashlib
import os
import shlex
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
PY = BIN / "python"
STAMP = VENV / ".hybridroute-stamp"
# Always installed: the test tools, the benchmark-only dependency and the two light
# extras of the routing service (service: fastapi, uvicorn, prometheus-client; postgres:
# psycopg). The heavy extras (embeddings: torch + sentence-transformers; spark: pyspark,
# needs Java 17; llm-local: llama-cpp-python, built from source once, and a 98 MB model) are
# added with HYBRIDROUTE_EXTRAS=embeddings,spark,llm-local; their tests run only when they
# are installed (HYBRIDROUTE_REQUIRE_LLM=1 makes the real-model tests required, as CI does).
BASE_EXTRAS = ("dev", "bench", "service", "postgres")


def _extras() -> str:
    more = [e.strip() for e in os.environ.get("HYBRIDROUTE_EXTRAS", "").split(",") if e.strip()]
    if (BIN / "mkdocs").exists():  # `dev.py docs` installed the docs extra: keep it current
        more.append("docs")
    return ",".join(dict.fromkeys([*BASE_EXTRAS, *more]))


def _wanted_stamp() -> str:
    h = hashlib.sha256((ROOT / "pyproject.toml").read_bytes())
    h.update(_extras().encode())
    h.update(sys.version.encode())
    return h.hexdigest()


def _run(cmd: list[object], *, cwd: Path | None, **kw) -> int:
    """Echo ``cmd`` on stderr and run it in ``cwd`` (``None``: the caller's directory)."""
    return subprocess.call(_echo(cmd, cwd), cwd=cwd, **kw)


def _echo(cmd: list[object], cwd: Path | None) -> list[str]:
    """``cmd`` as strings, echoed on stderr as ``+ (in CWD) command``."""
    args = [str(c) for c in cmd]
    where = "" if cwd is None else f"(in {cwd}) "
    print(f"+ {where}{shlex.join(args)}", file=sys.stderr, flush=True)
    return args


def _install(cmd: list[object]) -> None:
    """A set-up step: run in the checkout, its output on stderr; exit if it fails."""
    rc = _run(cmd, cwd=ROOT, stdout=sys.stderr)
    if rc:
        sys.exit(rc)


def ensure_env() -> None:
    """Create ``.venv`` and install the project with its extras unless already current."""
    if sys.version_info < (3, 11):  # noqa: UP036 - this script runs on any Python
        sys.exit(f"hybridroute needs Python >= 3.11 (this is {sys.version.split()[0]})")
    want = _wanted_stamp()
    if PY.exists() and STAMP.exists() and STAMP.read_text() == want:
        return
    if not PY.exists():
        print(f"creating {VENV} ...", file=sys.stderr, flush=True)
        venv.EnvBuilder(with_pip=True, clear=False).create(VENV)
    pip = [PY, "-m", "pip", "install", "--disable-pip-version-check", "-q"]
    _install([*pip, "--upgrade", "pip"])
    _install([*pip, "-e", f".[{_extras()}]"])
    STAMP.write_text(want)


def _env(job: str) -> dict[str, str]:
    env = dict(os.environ)
    # Read the public labelled sets from the shared directory beside the checkout when it
    # exists and the user has not chosen another one.
    shared = ROOT.parent / "shared" / "datasets"
    if "HYBRIDROUTE_DATA_DIR" not in env and shared.is_dir():
        env["HYBRIDROUTE_DATA_DIR"] = str(shared)
    if job == "bench":
        # ``python -m benchmarks`` from the caller's directory: the checkout on the path
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    return env


def _workers(rest: list[str]) -> list[str]:
    """pytest-xdist options for the suite: one worker per core, at most two, whole files to a
    worker (a module's fixtures are built once) in collection order; none when the caller
    chose (``-n``, ``-p no:xdist``) or ``HYBRIDROUTE_TEST_WORKERS`` is 1 or less."""
    chose = any(
        a.startswith(("-n", "--numprocesses", "--dist"))
        or (a.startswith("-p") and "xdist" in a + nxt)  # -p no:xdist, -pno:xdist
        for a, nxt in zip(rest, [*rest[1:], ""], strict=False)
    )
    wanted = os.environ.get("HYBRIDROUTE_TEST_WORKERS", "").strip()
    try:
        n = int(wanted) if wanted else min(2, os.cpu_count() or 1)
    except ValueError:
        sys.exit(f"HYBRIDROUTE_TEST_WORKERS must be a whole number, got {wanted!r}")
    if chose or n <= 1:
        return []
    # in collection order: tests/conftest.py puts the files that start a JVM, a browser or a
    # model first (xdist's default order, by tests per file, left them for the end)
    return ["-n", str(n), "--dist", "loadfile", "--no-loadscope-reorder"]


def plan(job: str, rest: list[str]) -> tuple[list[object], Path | None] | None:
    """The command of ``job`` and where it runs (``None``: the caller's directory).

    ``None`` for an unknown job. See the module docstring for why each runs where it does.
    """
    hybridroute = BIN / "hybridroute"
    jobs: dict[str, tuple[list[object], Path | None]] = {
        "test": ([PY, "-m", "pytest", "-q", *_workers(rest), *rest], ROOT),
        "slow": ([PY, "-m", "pytest", "-q", "-m", "slow", *rest], ROOT),
        "demo": ([hybridroute, "demo", *rest], None),
        "bench": ([PY, "-m", "benchmarks", *rest], None),
        "hr": ([hybridroute, *rest], None),
        "docs": ([PY, ROOT / "docs" / "_tools" / "serve.py", *rest], ROOT),
    }
    return jobs.get(job)


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    job, rest = argv[0], argv[1:]
    planned = plan(job, rest)
    if planned is None:
        print(f"unknown job {job!r}\n{__doc__}", file=sys.stderr)
        return 2
    if job == "docs":  # the docs extra (MkDocs, Material, mkdocstrings) for this job
        os.environ["HYBRIDROUTE_EXTRAS"] = os.environ.get("HYBRIDROUTE_EXTRAS", "") + ",docs"
    ensure_env()
    cmd, cwd = planned
    return _become(cmd, cwd=cwd, env=_env(job))


def _become(cmd: list[object], *, cwd: Path | None, env: dict[str, str]) -> int:
    """Run the job as this very process (``exec`` on POSIX, the same PID): a signal sent to
    dev.py -- ``kill PID``, a CI runner's timeout -- reaches the job itself, which stops as it
    would when started on its own, and no child is left running behind a dead dev.py.
    Elsewhere the job runs as a child and its exit status is returned."""
    if os.name != "posix":
        return _run(cmd, cwd=cwd, env=env)
    args = _echo(cmd, cwd)
    sys.stdout.flush()
    try:
        if cwd is not None:
            os.chdir(cwd)
        os.execve(args[0], args, env)
    except OSError as exc:
        print(f"dev.py: cannot run {args[0]}: {exc.strerror or exc}", file=sys.stderr)
        return 127
    raise AssertionError("unreachable: execve returns only by raising")  # pragma: no cover


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
