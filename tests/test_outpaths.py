"""``output_problem``: why a path cannot be written, said before any work."""

from __future__ import annotations

import errno
import os
import re
from pathlib import Path

import pytest

from hybridroute._outpaths import os_reason, output_problem
from hybridroute.cli._outputs import check_output, output_errors
from hybridroute.exceptions import UserInputError


@pytest.fixture
def traps(tmp_path) -> Path:
    (tmp_path / "afile").write_text("x")
    os.mkfifo(tmp_path / "fifo")
    os.symlink(tmp_path / "loop2", tmp_path / "loop")
    os.symlink(tmp_path / "loop", tmp_path / "loop2")
    os.symlink(tmp_path / "gone", tmp_path / "dangling")
    (tmp_path / "adir").mkdir()
    return tmp_path


BAD = [
    # (path under traps, kind, parents, reason)
    ("afile/x", "file", False, "afile is not a directory: it is a regular file"),
    ("afile/x", "dir", True, "afile is not a directory: it is a regular file"),
    ("afile/a/b/c", "dir", True, "afile is not a directory: it is a regular file"),
    ("fifo/x", "file", False, "fifo is not a directory: it is a FIFO"),
    ("loop/x", "file", False, "symbolic links"),
    ("loop", "file", False, "symbolic links"),
    ("loop", "dir", True, "symbolic links"),
    ("dangling", "file", False, "symbolic link to a path that does not exist"),
    ("fifo", "file", False, "is not a regular file: it is a FIFO"),
    ("fifo", "dir", True, "exists and is not a directory: it is a FIFO"),
    ("adir", "file", False, "is a directory"),
    ("afile", "dir", True, "exists and is not a directory: it is a regular file"),
    ("no/such/x.json", "file", False, "the directory .*no/such does not exist"),
    ("n" * 300, "file", False, "too long"),
    ("new/" + "n" * 300, "dir", True, "is 300 bytes long"),
    ("/".join(["d"] * 2100), "dir", True, "too long"),
    ("/proc/hybridroute-x", "file", False, "cannot create files in /proc"),
    ("/proc/hybridroute-x/y", "dir", True, "cannot create files in /proc"),
    ("/sys/hybridroute-x", "dir", True, "cannot create files in /sys"),
    ("/dev/null", "file", False, "is not a regular file: it is a character device"),
]


@pytest.mark.parametrize(("where", "kind", "parents", "reason"), BAD)
def test_a_path_that_cannot_be_written(traps, monkeypatch, where, kind, parents, reason):
    monkeypatch.chdir(traps)
    before = sorted(os.listdir(traps))
    problem = output_problem(where, kind=kind, parents=parents)
    assert problem is not None and re.search(reason, problem), problem
    assert sorted(os.listdir(traps)) == before  # the write test leaves nothing


@pytest.mark.parametrize(
    ("where", "kind", "parents"),
    [
        ("new.json", "file", False),
        ("afile", "file", False),  # an existing file is replaced
        ("adir/new.json", "file", False),
        ("new/dir/tree", "dir", True),
        ("adir", "dir", True),
        (".", "dir", True),
    ],
)
def test_a_path_that_can_be_written(traps, monkeypatch, where, kind, parents):
    monkeypatch.chdir(traps)
    before = sorted(os.listdir(traps))
    assert output_problem(where, kind=kind, parents=parents) is None
    assert sorted(os.listdir(traps)) == before


def test_check_output_names_the_option_and_refuses_an_input(traps):
    with pytest.raises(UserInputError, match=r"^--out .*afile/x: .*afile is not a directory"):
        check_output(traps / "afile" / "x", "--out")
    with pytest.raises(UserInputError, match="is also an input or the log"):
        check_output(traps / "afile", "--out", inputs=[None, str(traps / "afile")])
    (traps / "adir" / "x").write_text("x")
    with pytest.raises(UserInputError, match=r"exists and is not empty; choose a new directory$"):
        check_output(traps / "adir", "--out", kind="dir", new_dir=True)  # no --force option
    check_output(traps / "adir", "--out", kind="dir", new_dir=True, force=True)


@pytest.mark.parametrize(
    ("exc", "said"),
    [
        (OSError(errno.ENOSPC, "No space left on device"), "no space left on the device"),
        (OSError(errno.EROFS, "Read-only file system"), "read-only file system"),
        (OSError(errno.EIO, "Input/output error", "x/y.tmp"), "x/y.tmp (input/output error)"),
    ],
)
def test_an_error_while_writing_is_one_line(tmp_path, exc, said):
    out = tmp_path / "out.json"
    with pytest.raises(UserInputError, match=r"^--out .*out\.json: cannot write") as info:
        with output_errors(out, "--out"):
            raise exc
    assert said in str(info.value) and "\n" not in str(info.value)
    assert os_reason(exc) in str(info.value)
