"""One rule for decision-log paths: a writer creates the log file, never a directory; a
reader refuses a log that does not exist. The library and every command agree."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hybridroute.cli import main
from hybridroute.exceptions import ArtifactError
from hybridroute.records import DecisionLog, open_log

from ..router.conftest import EXAMPLE
from .test_route import bounded_main, one_error_line


def _targets(tmp_path: Path) -> dict[str, tuple[str, Path]]:
    """name -> (what is given as --log, the directory that must not appear)."""
    missing = tmp_path / "no" / "such"
    return {
        "absolute-url": (f"sqlite:///{missing / 'x.db'}", tmp_path / "no"),
        "bare-path": (str(missing / "x.sqlite"), tmp_path / "no"),
        "relative-url": ("sqlite:///rel/dir/x.db", tmp_path / "rel"),
        "relative-path": ("rel/x.sqlite", tmp_path / "rel"),
        "one-level": (str(tmp_path / "typo" / "x.sqlite"), tmp_path / "typo"),
    }


NAMES = ["absolute-url", "bare-path", "relative-url", "relative-path", "one-level"]


@pytest.mark.parametrize("name", NAMES)
def test_route_does_not_create_directories(tmp_path, monkeypatch, capsys, name):
    monkeypatch.chdir(tmp_path)
    log, tree = _targets(tmp_path)[name]
    assert main(["route", "--rules", str(EXAMPLE), "--log", log]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert "does not exist" in line and "existing directory" in line, line
    assert not tree.exists()


#: readers: every command that reads a log, with what else it needs
READERS = {
    "export": lambda log, tmp: ["export", "--log", log, "--out", str(tmp / "e.jsonl")],
    "drift": lambda log, tmp: ["drift", "--log", log],
    "replay": lambda log, tmp: ["replay", "--log", log, "--router", str(tmp)],
    "monitor": lambda log, tmp: ["monitor", "--log", log, "--target", "0.9", "--delta", "0.1"],
    "audits-pending": lambda log, tmp: ["audits", "pending", "--log", log],
}


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("name", NAMES)
def test_readers_refuse_the_same_urls(tmp_path, monkeypatch, capsys, reader, name):
    monkeypatch.chdir(tmp_path)
    log, tree = _targets(tmp_path)[name]
    assert bounded_main(READERS[reader](log, tmp_path)) == 2
    line = one_error_line(capsys.readouterr().err)
    assert "no such decision log" in line, line
    assert not tree.exists()


@pytest.mark.parametrize("name", NAMES)
def test_the_library_does_not_create_directories(tmp_path, monkeypatch, name):
    monkeypatch.chdir(tmp_path)
    log, tree = _targets(tmp_path)[name]
    with pytest.raises(ArtifactError, match="does not exist"):
        open_log(log)
    with pytest.raises(ArtifactError, match="no such decision log"):
        open_log(log, create=False)
    if "url" not in name:
        with pytest.raises(ArtifactError, match="does not exist"):
            DecisionLog(log)
    assert not tree.exists()


def test_a_writer_creates_the_file_in_an_existing_directory(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "logs").mkdir()
    for log in ("sqlite:///logs/a.db", str(tmp_path / "logs" / "b.sqlite"), "c.sqlite"):
        assert main(["route", "--rules", str(EXAMPLE), "--log", log]) == 0
    capsys.readouterr()
    assert sorted(p.name for p in (tmp_path / "logs").glob("*.*")) == ["a.db", "b.sqlite"]
    assert (tmp_path / "c.sqlite").is_file()
    assert main(["export", "--log", "sqlite:///logs/a.db", "--out", "e.jsonl"]) == 0
    assert len((tmp_path / "e.jsonl").read_text().splitlines()) == 1


@pytest.fixture
def traps(tmp_path) -> Path:
    (tmp_path / "afile").write_text("x")
    os.mkfifo(tmp_path / "fifo")
    os.symlink(tmp_path / "loop2", tmp_path / "loop")
    os.symlink(tmp_path / "loop", tmp_path / "loop2")
    (tmp_path / "adir").mkdir()
    os.symlink(tmp_path / "gone", tmp_path / "dangling")
    return tmp_path


@pytest.mark.parametrize(
    ("where", "reason"),
    [
        ("afile/x.sqlite", "afile is not a directory"),
        ("fifo/x.sqlite", "fifo is not a directory"),
        ("fifo", "not a regular file"),
        ("loop/x.sqlite", "symbolic links"),
        ("loop", "symbolic links"),
        ("adir", "is a directory"),
        ("dangling", "symbolic link to a path that does not exist"),
        ("n" * 300 + ".sqlite", "too long"),
        ("/proc/hybridroute-test.sqlite", "cannot create files in /proc"),
    ],
)
@pytest.mark.parametrize("create", [True, False])
def test_a_log_path_that_is_no_file(traps, monkeypatch, where, reason, create):
    monkeypatch.chdir(traps)
    if not create and where.startswith("/proc"):
        reason = "no such decision log"
    with pytest.raises(ArtifactError, match=reason) as info:
        open_log(where, create=create)
    assert str(info.value).startswith(f"{where}: ")
    assert not Path("/proc/hybridroute-test.sqlite").exists()


def test_a_fifo_as_log_does_not_block(traps, capsys):
    """A regression would open the FIFO: bounded."""
    argv = ["route", "--rules", str(EXAMPLE), "--log", str(traps / "fifo")]
    assert bounded_main(argv, timeout=30) == 2
    assert "not a regular file" in one_error_line(capsys.readouterr().err)


@pytest.mark.parametrize(
    ("command", "says"),
    [
        (["route"], "a SQLite file is created when missing, in a directory that must exist"),
        (["export"], "(it must exist)"),
        (["drift"], "(it must exist)"),
    ],
)
def test_the_help_says_the_rule(capsys, command, says):
    assert main([*command, "--help"]) == 0
    assert says in " ".join(capsys.readouterr().out.split())
