#!/usr/bin/env python3
"""One entry point for a fresh machine: creates or reuses ``.venv`` and runs a job in it.

    python3 dev.py demo     # the main job (``hybridroute demo``)
    python3 dev.py test     # the test suite (fast suite + marked groups whose extras are installed)
    python3 dev.py slow     # the long statistical checks (``pytest -m slow``)
    python3 dev.py bench    # the benchmark scripts
    python3 dev.py hr ARGS  # any ``hybridroute`` command inside the environment

Only the standard library is used here, so this runs on any Python >= 3.11.
The environment is rebuilt when ``pyproject.toml`` changes (a hash stamp in ``.venv``).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
PY = BIN / "python"
STAMP = VENV / ".hybridroute-stamp"
# Always installed: the test tools and the benchmark-only dependency. Optional extras
# (embeddings: torch + sentence-transformers; spark: pyspark, needs Java 17) are added with
# HYBRIDROUTE_EXTRAS=embeddings,spark; their tests run only when they are installed.
BASE_EXTRAS = ("dev", "bench")


def _extras() -> str:
    more = [e.strip() for e in os.environ.get("HYBRIDROUTE_EXTRAS", "").split(",") if e.strip()]
    return ",".join(dict.fromkeys([*BASE_EXTRAS, *more]))


def _wanted_stamp() -> str:
    h = hashlib.sha256((ROOT / "pyproject.toml").read_bytes())
    h.update(_extras().encode())
    h.update(sys.version.encode())
    return h.hexdigest()


def _run(cmd: list[str], **kw) -> int:
    print("+ " + " ".join(str(c) for c in cmd), flush=True)
    return subprocess.call([str(c) for c in cmd], cwd=ROOT, **kw)


def ensure_env() -> None:
    """Create ``.venv`` and install the project with its extras unless already current."""
    if sys.version_info < (3, 11):  # noqa: UP036 - this script runs on any Python
        sys.exit(f"hybridroute needs Python >= 3.11 (this is {sys.version.split()[0]})")
    want = _wanted_stamp()
    if PY.exists() and STAMP.exists() and STAMP.read_text() == want:
        return
    if not PY.exists():
        print(f"creating {VENV} ...", flush=True)
        venv.EnvBuilder(with_pip=True, clear=False).create(VENV)
    rc = _run([PY, "-m", "pip", "install", "--disable-pip-version-check", "-q", "--upgrade", "pip"])
    if rc:
        sys.exit(rc)
    rc = _run(
        [PY, "-m", "pip", "install", "--disable-pip-version-check", "-q", "-e", f".[{_extras()}]"]
    )
    if rc:
        sys.exit(rc)
    STAMP.write_text(want)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    # Read the public labelled sets from the shared directory beside the checkout when it
    # exists and the user has not chosen another one.
    shared = ROOT.parent / "shared" / "datasets"
    if "HYBRIDROUTE_DATA_DIR" not in env and shared.is_dir():
        env["HYBRIDROUTE_DATA_DIR"] = str(shared)
    return env


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    job, rest = argv[0], argv[1:]
    ensure_env()
    env = _env()
    if job == "test":
        return _run([PY, "-m", "pytest", "-q", *rest], env=env)
    if job == "slow":
        return _run([PY, "-m", "pytest", "-q", "-m", "slow", *rest], env=env)
    if job == "demo":
        return _run([BIN / "hybridroute", "demo", *rest], env=env)
    if job == "bench":
        return _run([PY, "-m", "benchmarks", *rest], env=env)
    if job == "hr":
        return _run([BIN / "hybridroute", *rest], env=env)
    print(f"unknown job {job!r}\n{__doc__}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
