"""Every command that writes a path says in one line why it cannot, exit 2, before any work.

Each command is tried with the same bad outputs: a parent that is a regular file, a FIFO
or a symlink loop, a path under ``/proc``, a name too long, a FIFO or a directory where a
file goes (a file where a directory goes), a missing directory above a file, a directory
without write permission; and an error while writing (a full disk) is one line too. The
permission test drops the capability that lets ``root`` write anywhere (``setpriv``).
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from hybridroute.cli import main

from ..router.conftest import EXAMPLE, fitted_policy
from .test_route import bounded_main, one_error_line

PROBE = ".hybridroute-write-check-"


@pytest.fixture(scope="module")
def parts(tmp_path_factory) -> dict[str, Path]:
    """A saved model, a policy bound to it, a bundle, a log, a batch and a spec."""
    from hybridroute.calibration import CertifiedPrecisionThreshold
    from hybridroute.classifiers import LocalClassifier
    from hybridroute.classifiers._persistence import classifier_fingerprint
    from hybridroute.datasets import load_dataset
    from hybridroute.records import DecisionLog
    from hybridroute.router import HybridRouter
    from hybridroute.rules import load_rules

    root = tmp_path_factory.mktemp("outputs")
    ds = load_dataset("support-tickets")
    clf = LocalClassifier(Cs=(10.0,)).fit(ds.split("train").texts, ds.split("train").y)
    clf.save(root / "model")
    policy = fitted_policy(clf, ds, CertifiedPrecisionThreshold(0.85, 0.1))
    policy = policy.with_model_fingerprint(classifier_fingerprint(root / "model"))
    policy.save(root / "policy.json")
    router = HybridRouter(
        rules=load_rules(EXAMPLE), classifier=clf, policy=policy, name="s", version="1"
    )
    router.save(root / "bundle")
    DecisionLog(root / "log.sqlite").close()
    (root / "batch.jsonl").write_text('{"id": "a", "text": "where is my parcel"}\n')
    (root / "spec.yaml").write_text("not: a spec\n")
    return root


def _cmd(parts: Path, name: str, out: Path, scratch: Path | None = None) -> list[str]:
    p, o = parts, str(out)
    model, bundle, log = str(p / "model"), str(p / "bundle"), str(p / "log.sqlite")
    fresh = str((scratch or p) / "fresh-model")  # an --out that passes its checks
    return {
        "train": ["train", "--dataset", "support-tickets", "--out", o],
        "train-cache-dir": [
            "train",
            "--dataset",
            "support-tickets",
            "--out",
            fresh,
            "--cache-dir",
            o,
        ],
        "calibrate": ["calibrate", "--dataset", "support-tickets", "--model", model, "--out", o],
        "calibrate-from-log": ["calibrate", "--from-log", log, "--router", bundle, "--out", o],
        "router-build": [
            *("router", "build", "--rules", str(EXAMPLE), "--model", model),
            *("--policy", str(p / "policy.json"), "--name", "s", "--version", "2", "--out", o),
        ],
        "evaluate": [
            *("evaluate", "--dataset", "support-tickets", "--model", model),
            *("--no-track", "--n-boot", "10", "--report", o),
        ],
        "export": ["export", "--log", log, "--out", o],
        "datasets-export": ["datasets", "export", "support-tickets", "--out", o],
        "route-rejects": [
            *("route", "--router", bundle, "--input", str(p / "batch.jsonl")),
            *("--rejects", o),
        ],
        "route-log": ["route", "--rules", str(EXAMPLE), "--log", o],
        # no benchmarks directory: a regression fails instead of running the benchmarks
        "bench-json": ["bench", "--benchmarks", str(p / "none"), "--json", o],
        "bench-cache": ["bench", "--benchmarks", str(p / "none"), "--cache-dir", o],
        "experiment": ["experiment", "run", str(p / "spec.yaml"), "--no-track", "--out", o],
        "spark-output": ["spark", "evaluate", "--dataset", "support-tickets", "--output", o],
        # the demo's own check is its owner's; the last resort in cli/_app.py still gives
        # one line naming the path
        "demo": ["demo", "--no-track", "--out", o],
    }[name]


#: command -> what it writes: a file, a directory (created with its parents), a
#: decision log (a file whose directory must exist), a directory that must not exist
KINDS = {
    "train": "dir",
    "train-cache-dir": "dir",
    "calibrate": "file",
    "calibrate-from-log": "dir",
    "router-build": "dir",
    "evaluate": "dir",
    "export": "file",
    "datasets-export": "file",
    "route-rejects": "file",
    "route-log": "file",
    "bench-json": "file",
    "bench-cache": "dir",
    "experiment": "dir",
    "spark-output": "dir",
    "demo": "dir",
}

BAD = {
    # name -> (kinds it is bad for, path maker)
    "parent-is-a-file": ("file dir", lambda r: r / "afile.jsonl" / "out.jsonl"),
    "deep-under-a-file": ("file dir", lambda r: r / "afile.jsonl" / "a" / "b.jsonl"),
    "parent-is-a-fifo": ("file dir", lambda r: r / "fifo.jsonl" / "out.jsonl"),
    "parent-is-a-symlink-loop": ("file dir", lambda r: r / "loop.jsonl" / "out.jsonl"),
    "output-is-a-symlink-loop": ("file dir", lambda r: r / "loop.jsonl"),
    "under-proc": ("file dir", lambda r: Path("/proc/hybridroute-test-out.jsonl")),
    "under-proc-pid": ("file dir", lambda r: Path(f"/proc/{os.getpid()}/out.jsonl")),
    "name-too-long": ("file dir", lambda r: r / ("n" * 300 + ".jsonl")),
    "new-dir-name-too-long": ("dir", lambda r: r / "new" / ("n" * 300)),
    "output-is-a-fifo": ("file dir", lambda r: r / "fifo.jsonl"),
    "a-directory-for-a-file": ("file", lambda r: r / "adir.jsonl"),
    "a-file-for-a-directory": ("dir", lambda r: r / "afile.jsonl"),
    "missing-directory": ("file", lambda r: r / "no" / "such" / "out.jsonl"),
}

# the demo creates its directory with its parents before its own check (its owner's): a
# missing directory above a name too long is created first
NOT_YET = {("demo", "new-dir-name-too-long")}

CASES = [
    pytest.param(cmd, bad, id=f"{cmd}-{bad}")
    for cmd, kind in KINDS.items()
    for bad, (kinds, _) in BAD.items()
    if kind in kinds.split() and (cmd, bad) not in NOT_YET
]


@pytest.fixture
def hostile(tmp_path) -> Path:
    """A directory of traps: a file, a FIFO, a symlink loop, a directory named like a file."""
    root = tmp_path / "w"
    root.mkdir()
    (root / "afile.jsonl").write_text("x")
    os.mkfifo(root / "fifo.jsonl")
    os.symlink(root / "loop2", root / "loop.jsonl")
    os.symlink(root / "loop.jsonl", root / "loop2")
    (root / "adir.jsonl").mkdir()
    return root


def _snapshot(root: Path) -> list[str]:
    """Every name under ``root`` (symbolic links not followed)."""
    found = []
    for top, dirs, files in os.walk(root):
        found += [os.path.relpath(os.path.join(top, n), root) for n in dirs + files]
    return sorted(found)


@pytest.mark.parametrize(("cmd", "bad"), CASES)
def test_a_bad_output_is_one_line_naming_it(parts, hostile, capsys, cmd, bad):
    out = BAD[bad][1](hostile)
    before = _snapshot(hostile)
    argv = _cmd(parts, cmd, out, scratch=hostile.parent)
    rc = bounded_main(argv, timeout=60)  # a FIFO opened for writing would block
    captured = capsys.readouterr()
    assert rc == 2, captured.err
    line = one_error_line(captured.err)
    assert str(out) in line, line
    assert line.startswith("error: ")
    assert _snapshot(hostile) == before  # nothing created, no probe left behind
    assert not [p for p in parts.iterdir() if p.name.startswith(PROBE)]
    assert not (hostile.parent / "fresh-model").exists()


#: the options that name a path a command writes (a decision log: test_outputs_log.py)
OUTPUT_OPTIONS = ("--out", "--output", "--report", "--rejects", "--cache-dir")
#: (command, option) -> its row in KINDS
COVERED = {
    ("train", "--out"): "train",
    ("train", "--cache-dir"): "train-cache-dir",
    ("calibrate", "--out"): "calibrate",  # and calibrate-from-log
    ("router build", "--out"): "router-build",
    ("evaluate", "--report"): "evaluate",
    ("export", "--out"): "export",
    ("datasets export", "--out"): "datasets-export",
    ("route", "--rejects"): "route-rejects",
    ("bench", "--json"): "bench-json",
    ("bench", "--cache-dir"): "bench-cache",
    ("experiment run", "--out"): "experiment",
    ("spark evaluate", "--output"): "spark-output",
    ("demo", "--out"): "demo",
}


def _output_options() -> set[tuple[str, str]]:
    """(command, option) of every option of the CLI that names a path it writes."""
    import typer

    from hybridroute.cli._app import app

    found: set[tuple[str, str]] = set()

    # duck-typed: typer may build its commands on a copy of click
    def walk(cmd: Any, names: list[str]) -> None:
        for name, sub in getattr(cmd, "commands", {}).items():
            walk(sub, [*names, name])
        for param in cmd.params:
            if getattr(param, "param_type_name", None) != "option":
                continue
            for opt in param.opts:
                # --json is a flag (print JSON) except where it names a file
                if opt in OUTPUT_OPTIONS or (opt == "--json" and not param.is_flag):
                    found.add((" ".join(names), opt))

    walk(typer.main.get_command(app), [])
    return found


def test_every_output_option_is_tried():
    """A new option that writes a path fails here until it is in the table above."""
    assert _output_options() == set(COVERED)
    assert set(COVERED.values()) | {"calibrate-from-log", "route-log"} == set(KINDS)


# ---------------------------------------------------------------- a directory not writable

_DROP = ["--bounding-set", "-dac_override,-dac_read_search,-fowner"]


def _unprivileged(argv: list[str]) -> list[str]:
    """``argv`` run so that permission bits apply: as it is, or (root) without the
    capabilities that let root write anywhere."""
    if os.geteuid() != 0:
        return argv
    return [str(shutil.which("setpriv")), *_DROP, "--", *argv]


def _permissions_apply(locked: Path) -> str | None:
    """Why a directory without write permission (``locked``) cannot be tested here."""
    if os.geteuid() != 0:
        return None
    if shutil.which("setpriv") is None:
        return "running as root without setpriv: root writes into any directory"
    probe = subprocess.run(
        _unprivileged(["/bin/sh", "-c", 'test -w "$0"', str(locked)]),
        capture_output=True,
        timeout=30,
    )
    return None if probe.returncode != 0 else "setpriv cannot drop root's capabilities here"


@pytest.mark.parametrize(
    ("cmd", "leaf"),
    [("calibrate", "p.json"), ("router-build", "b"), ("route-log", "x.sqlite")],
)
def test_a_directory_without_write_permission(parts, tmp_path, cmd, leaf):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    try:
        why = _permissions_apply(locked)
        if why is not None:
            pytest.skip(why)
        out = locked / leaf
        argv = _unprivileged([sys.executable, "-m", "hybridroute", *_cmd(parts, cmd, out)])
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    finally:
        locked.chmod(0o755)
    assert proc.returncode == 2, proc.stderr
    line = one_error_line(proc.stderr)
    assert str(out) in line and "permission denied" in line, line
    assert list(locked.iterdir()) == []


# ---------------------------------------------------------------- errors while writing


def _full_disk(*args, **kwargs):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


WRITERS = {
    # command -> (the library writer it calls, an output that passes the checks)
    "calibrate": ("hybridroute.calibration.Policy.save", "p.json"),
    "router-build": ("hybridroute.router.HybridRouter.save", "b"),
    "train": ("hybridroute.classifiers.LocalClassifier.save", "m"),
    "evaluate": ("hybridroute.evaluation.write_report", "r"),
    "export": ("hybridroute.records._logbase.LogBase.to_jsonl", "e.jsonl"),
    "datasets-export": ("hybridroute.datasets.LabelledSet.export", "d.jsonl"),
}


@pytest.mark.parametrize("cmd", WRITERS)
def test_an_error_while_writing_is_one_line(parts, tmp_path, capsys, monkeypatch, cmd):
    target, leaf = WRITERS[cmd]
    monkeypatch.setattr(target, _full_disk)
    out = tmp_path / leaf
    assert bounded_main(_cmd(parts, cmd, out), timeout=120) == 2
    line = one_error_line(capsys.readouterr().err)
    assert str(out) in line and "no space left" in line, line


def test_the_last_resort_names_the_file_and_keeps_bugs_visible(capsys, monkeypatch, tmp_path):
    """An OSError naming a file that no command caught: one line; without a file: a
    traceback (it says nothing a person can act on, so it stays visible)."""
    import hybridroute.cli._datasets as datasets_cli

    where = tmp_path / "somewhere" / "x.csv"

    def fails(*args, **kwargs):
        raise OSError(errno.EIO, os.strerror(errno.EIO), str(where))

    monkeypatch.setattr(datasets_cli, "load_set", fails)
    argv = ["datasets", "export", "support-tickets", "--out", str(tmp_path / "t.jsonl")]
    assert main(argv) == 2
    line = one_error_line(capsys.readouterr().err)
    assert line == f"error: {where}: input/output error"

    def bug(*args, **kwargs):
        raise OSError(errno.EIO, "no file")

    monkeypatch.setattr(datasets_cli, "load_set", bug)
    with pytest.raises(OSError, match="no file"):
        main(argv)


@pytest.mark.parametrize("spelling", ["path", "url", "symlink"])
def test_an_output_is_never_the_log_it_reads(parts, tmp_path, capsys, spelling):
    """However the log is spelt, the output that would overwrite it is refused."""
    from hybridroute.records import DecisionLog

    log = tmp_path / "log.sqlite"
    DecisionLog(log).close()
    (tmp_path / "link.sqlite").symlink_to(log)
    given = {"path": str(log), "url": f"sqlite:///{log}", "symlink": str(tmp_path / "link.sqlite")}
    batch = str(parts / "batch.jsonl")
    other = str(tmp_path / "link.sqlite") if spelling == "url" else given[spelling]
    for argv in (
        ["export", "--log", given[spelling], "--out", str(log)],
        ["export", "--log", f"sqlite:///{log}", "--out", other],
        [
            *("route", "--router", str(parts / "bundle"), "--input", batch),
            *("--log", given[spelling], "--rejects", str(log)),
        ],
    ):
        assert bounded_main(argv) == 2
        assert "is also an input or the log" in one_error_line(capsys.readouterr().err)
    assert log.stat().st_size > 0 and DecisionLog(log).count() == 0
