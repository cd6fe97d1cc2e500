"""``dev.py``: jobs run where they should, and stdout carries only the job's output.

Each test copies ``dev.py`` into a scratch checkout whose ``.venv`` points at the
environment running the tests, with a current stamp, so ``dev.py`` never installs
anything (no network, no pip) and is run exactly as a user runs it, from another
directory.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
SHARED_DATA = next(
    (
        d
        for d in (
            Path(os.environ.get("HYBRIDROUTE_DATA_DIR") or REPO / "missing"),
            REPO.parent / "shared" / "datasets",
        )
        if (d / "banking77" / "train.csv").is_file()
    ),
    None,
)


def _load(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"dev_under_test_{abs(hash(path))}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def checkout(tmp_path, monkeypatch) -> Path:
    """``tmp/checkout`` with dev.py, pyproject.toml and a ready ``.venv``; ``tmp/shared``
    beside it holding the public sets when they are here."""
    root = tmp_path / "checkout"
    (root / ".venv" / "bin").mkdir(parents=True)
    shutil.copy2(REPO / "dev.py", root / "dev.py")
    shutil.copy2(REPO / "pyproject.toml", root / "pyproject.toml")
    # python runs the tests' interpreter but refuses pip: a dev.py that tried to install
    # fails the test instead of changing an environment
    python = root / ".venv" / "bin" / "python"
    python.write_text(
        "#!/bin/sh\n"
        'case "$1 $2" in "-m pip") echo "dev.py tried to install" >&2; exit 97;; esac\n'
        f'exec "{sys.executable}" "$@"\n'
    )
    python.chmod(0o755)
    (root / ".venv" / "bin" / "hybridroute").symlink_to(BIN / "hybridroute")
    if SHARED_DATA is not None:
        (tmp_path / "shared").mkdir()
        (tmp_path / "shared" / "datasets").symlink_to(SHARED_DATA)
    monkeypatch.delenv("HYBRIDROUTE_DATA_DIR", raising=False)
    dev = _load(root / "dev.py")
    dev.STAMP.write_text(dev._wanted_stamp())  # current: dev.py installs nothing
    return root


@pytest.fixture
def user_dir(tmp_path) -> Path:
    """The caller's own directory, away from the checkout."""
    path = tmp_path / "me" / "work"
    path.mkdir(parents=True)
    return path


def dev(checkout: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "HYBRIDROUTE_DATA_DIR"}
    env.update(HYBRIDROUTE_OFFLINE="1", HYBRIDROUTE_CACHE_DIR=str(cwd.parent / "cache"))
    return subprocess.run(
        [sys.executable, str(checkout / "dev.py"), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_hr_prints_only_the_command_output_on_stdout(checkout, user_dir):
    from hybridroute import __version__

    out = dev(checkout, user_dir, "hr", "--version")
    assert out.returncode == 0, out.stderr
    assert out.stdout == f"hybridroute {__version__}\n"
    assert out.stderr.startswith("+ ") and "hybridroute --version" in out.stderr


@pytest.mark.skipif(SHARED_DATA is None, reason="the public sets (../shared/datasets) are absent")
def test_hr_json_output_pipes_into_json_tool(checkout, user_dir):
    out = dev(checkout, user_dir, "hr", "datasets", "show", "banking77", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["name"] == "banking77"  # dev.py found ../shared/datasets
    piped = subprocess.run(
        [sys.executable, "-m", "json.tool"],
        input=out.stdout,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert piped.returncode == 0, piped.stderr


@pytest.mark.parametrize("rules", ["my_rules.yaml", "rules/mine.yaml", "./deep/er/r.yaml"])
def test_hr_reads_relative_paths_in_the_callers_directory(checkout, user_dir, rules):
    target = user_dir / rules
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(REPO / "src" / "hybridroute" / "examples" / "support_rules.yaml", target)
    out = dev(checkout, user_dir, "hr", "route", "--rules", rules, "--facts", "{}")
    assert out.returncode == 0, out.stderr
    assert "default_exit" in out.stdout
    assert "+ " not in out.stdout


def test_hr_writes_outputs_in_the_callers_directory(checkout, user_dir):
    rules = user_dir / "r.yaml"
    shutil.copy2(REPO / "src" / "hybridroute" / "examples" / "support_rules.yaml", rules)
    out = dev(
        checkout,
        user_dir,
        "hr",
        "route",
        "--rules",
        "r.yaml",
        "--facts",
        "{}",
        "--log",
        "decisions.sqlite",
    )
    assert out.returncode == 0, out.stderr
    assert (user_dir / "decisions.sqlite").is_file()
    assert not (checkout / "decisions.sqlite").exists()


def test_a_user_mistake_keeps_its_exit_code_and_stays_off_stdout(checkout, user_dir):
    out = dev(checkout, user_dir, "hr", "route", "--rules", "absent.yaml", "--facts", "{}")
    assert out.returncode == 2
    assert out.stdout == ""
    assert "absent.yaml" in out.stderr


def test_an_unknown_job_installs_nothing_and_exits_2(checkout, user_dir):
    (checkout / ".venv" / ".hybridroute-stamp").write_text("stale")  # would reinstall
    out = dev(checkout, user_dir, "nope")
    assert out.returncode == 2
    assert "unknown job 'nope'" in out.stderr
    assert out.stdout == ""


def test_set_up_output_goes_to_stderr(checkout, user_dir):
    # a stale stamp: dev.py installs first (the fake python refuses pip, exit 97)
    (checkout / ".venv" / ".hybridroute-stamp").write_text("stale")
    out = dev(checkout, user_dir, "hr", "--version")
    assert out.returncode == 97
    assert out.stdout == ""
    assert "-m pip install" in out.stderr and "dev.py tried to install" in out.stderr


@pytest.mark.parametrize(
    ("job", "runs_in_checkout", "head"),
    [
        ("hr", False, ["hybridroute"]),
        ("demo", False, ["hybridroute", "demo"]),
        ("bench", False, ["python", "-m", "benchmarks"]),
        ("test", True, ["python", "-m", "pytest", "-q"]),
        ("slow", True, ["python", "-m", "pytest", "-q", "-m", "slow"]),
    ],
)
def test_each_job_runs_where_its_docstring_says(checkout, monkeypatch, job, runs_in_checkout, head):
    monkeypatch.setenv("HYBRIDROUTE_TEST_WORKERS", "1")  # the suite's workers: the next test
    module = _load(checkout / "dev.py")
    planned = module.plan(job, ["--x"])
    assert planned is not None
    cmd, cwd = planned
    assert [Path(str(c)).name if i == 0 else str(c) for i, c in enumerate(cmd)] == [*head, "--x"]
    assert cwd == (module.ROOT if runs_in_checkout else None)
    assert module.plan("nope", []) is None


#: whole files to a worker, in collection order (tests/conftest.py puts the slow-starting first)
_IN_ORDER = ["--dist", "loadfile", "--no-loadscope-reorder"]


@pytest.mark.parametrize(
    ("workers", "cpus", "rest", "added"),
    [
        ("", 2, [], ["-n", "2", *_IN_ORDER]),
        ("", 16, ["tests/rules"], ["-n", "2", *_IN_ORDER]),  # at most two by default
        ("", 1, [], []),  # one core: no workers
        ("4", 2, [], ["-n", "4", *_IN_ORDER]),
        ("1", 2, [], []),
        ("", 2, ["-n", "3"], []),  # the caller chose
        ("", 2, ["-n3"], []),
        ("", 2, ["-p", "no:xdist"], []),
        ("", 2, ["-pno:xdist"], []),
        ("", 2, ["-p", "no:cacheprovider"], ["-n", "2", *_IN_ORDER]),  # not xdist's
        ("", 2, ["--dist", "load"], []),
    ],
)
def test_the_suite_runs_on_two_workers_unless_told_otherwise(
    checkout, monkeypatch, workers, cpus, rest, added
):
    module = _load(checkout / "dev.py")
    monkeypatch.setenv("HYBRIDROUTE_TEST_WORKERS", workers)
    monkeypatch.setattr(module.os, "cpu_count", lambda: cpus)
    cmd, _ = module.plan("test", rest)
    assert [str(c) for c in cmd[1:]] == ["-m", "pytest", "-q", *added, *rest]
    slow, _ = module.plan("slow", [])
    assert "-n" not in [str(c) for c in slow]  # the slow group keeps one process


def test_a_bad_worker_count_is_a_clear_exit(checkout, monkeypatch) -> None:
    module = _load(checkout / "dev.py")
    monkeypatch.setenv("HYBRIDROUTE_TEST_WORKERS", "two")
    with pytest.raises(SystemExit, match="HYBRIDROUTE_TEST_WORKERS must be a whole number"):
        module.plan("test", [])


def test_bench_finds_the_benchmarks_from_any_directory(checkout, user_dir):
    (checkout / "benchmarks").symlink_to(REPO / "benchmarks")
    out = dev(checkout, user_dir, "bench", "--list")
    assert out.returncode == 0, out.stderr
    assert "rules" in out.stdout
    assert "+ " not in out.stdout


def test_the_job_is_dev_py_itself_so_a_signal_reaches_it(checkout, tmp_path):
    """dev.py becomes its job (the same process): a SIGTERM sent to dev.py -- `kill PID`, a
    CI runner's timeout -- stops the job itself, and nothing is left running behind it."""
    import signal
    import time

    pid_file = tmp_path / "job.pid"
    (checkout / "tests").mkdir()
    (checkout / "tests" / "test_wait.py").write_text(
        "import os, pathlib, time\n"
        "def test_wait():\n"
        f"    pathlib.Path({str(pid_file)!r}).write_text(str(os.getpid()))\n"
        "    time.sleep(120)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "HYBRIDROUTE_DATA_DIR"}
    proc = subprocess.Popen(
        [sys.executable, str(checkout / "dev.py"), "test", "-p", "no:xdist", "tests/test_wait.py"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not pid_file.exists() or not pid_file.read_text():
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.05)
        assert int(pid_file.read_text()) == proc.pid  # the test runs in dev.py's own process
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGTERM  # pytest ended by the signal, not orphaned


def test_a_job_that_cannot_start_is_one_line(checkout, user_dir):
    (checkout / ".venv" / "bin" / "hybridroute").unlink()
    out = dev(checkout, user_dir, "hr", "--version")
    assert out.returncode == 127
    assert out.stderr.splitlines()[-1].startswith("dev.py: cannot run ")
    assert "Traceback" not in out.stderr
