"""Can this path be written? One check for every file and directory the toolkit writes.

:func:`output_problem` answers before any work is done, in words a person can act on:
a parent that is a regular file (or a FIFO, a device), a symlink loop, a name or path too
long for the filesystem, a directory where a file is expected (or the reverse), a missing
directory above a file, a directory where nothing may be created (read-only, no write
permission, ``/proc``). Whether a directory takes new files is *tried* (a temporary file
created and removed at once), not guessed from permission bits: ``root`` passes every
permission check, and a pseudo filesystem such as ``/proc`` claims to be writable.

:func:`os_reason` turns an :class:`OSError` raised while writing into the same words, so
a failure that no early check can see (the disk filling up half-way) still reads as one
line naming the path.

It imports only :mod:`hybridroute._safeio` (a leaf), so the command line, the decision
log and the dataset writers can all use it.
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from pathlib import Path

from ._safeio import _kind_of as _safeio_kind_of

__all__ = ["os_reason", "output_problem"]

#: Longest file name (one path component) on Linux filesystems, in bytes.
_NAME_MAX = 255
#: Longest path the kernel accepts, in bytes (including the terminating NUL).
_PATH_MAX = 4096
_PROBE_PREFIX = ".hybridroute-write-check-"

_REASONS = {
    errno.ENOTDIR: "a part of the path is not a directory",
    errno.ELOOP: "too many levels of symbolic links (a symlink loop?)",
    errno.ENAMETOOLONG: "a name in the path, or the path, is too long",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
    errno.EROFS: "read-only file system",
    errno.ENOSPC: "no space left on the device",
    errno.EDQUOT: "disk quota exceeded",
    errno.EISDIR: "is a directory",
    errno.EEXIST: "already exists",
    errno.ENOENT: "no such file or directory",
}


def os_reason(exc: OSError) -> str:
    """What went wrong, in a few lower-case words (no errno, no Python type)."""
    if exc.errno in _REASONS:
        return _REASONS[exc.errno]
    return (exc.strerror or str(exc) or type(exc).__name__).lower()


def _shown(path: Path) -> str:
    return "the current directory" if str(path) in ("", ".") else str(path)


def _stat(path: Path) -> os.stat_result | OSError | None:
    """``os.stat`` following links: the result, ``None`` if absent, or the error."""
    try:
        return os.stat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return exc


def _kind_of(mode: int) -> str:
    # the readers' words (a FIFO, a device...), and the one kind they never refuse
    return "a regular file" if stat.S_ISREG(mode) else _safeio_kind_of(mode)


def _not_a_directory(path: Path) -> str:
    """The reason for ENOTDIR: name the part of ``path`` that is not a directory."""
    for parent in reversed(path.parents):
        found = _stat(parent)
        if isinstance(found, os.stat_result) and not stat.S_ISDIR(found.st_mode):
            return f"{parent} is not a directory: it is {_kind_of(found.st_mode)}"
    return _REASONS[errno.ENOTDIR]


def _reason(path: Path, exc: OSError) -> str:
    if exc.errno == errno.ENOTDIR:
        return _not_a_directory(path)
    return os_reason(exc)


def _length_problem(path: Path, missing: list[str], directory: Path) -> str | None:
    if len(os.fsencode(os.path.abspath(path))) >= _PATH_MAX:
        return f"the path is too long (the limit is {_PATH_MAX - 1} bytes)"
    try:
        name_max = os.pathconf(directory, "PC_NAME_MAX")
    except (OSError, ValueError):
        name_max = _NAME_MAX
    for name in missing:
        size = len(os.fsencode(name))
        if size > name_max:
            return f"the name {name[:24]!r}... is {size} bytes long (the limit is {name_max})"
    return None


def _probe(directory: Path) -> str | None:
    """Create and remove a file in ``directory``: the only honest test of writing there."""
    try:
        fd, name = tempfile.mkstemp(dir=directory, prefix=_PROBE_PREFIX)
    except OSError as exc:
        return f"cannot create files in {_shown(directory)} ({_reason(directory, exc)})"
    os.close(fd)
    try:
        os.unlink(name)
    except OSError:  # pragma: no cover - removed by someone else in between
        pass
    return None


def output_problem(
    path: str | os.PathLike[str], *, kind: str = "file", parents: bool
) -> str | None:
    """Why ``path`` cannot be written as a file or directory, or ``None`` when it can.

    Parameters
    ----------
    path : path-like
        The file or directory to write (it may exist; whether replacing what is there is
        allowed is the caller's rule).
    kind : {"file", "dir"}
        A file is written in place or beside it and renamed (its directory must take new
        files); a directory is created (with the missing directories above it when
        ``parents``) and filled.
    parents : bool
        Whether the writer creates the missing directories above ``path``. When it does not,
        a missing directory is the problem (a typo in a path never grows a tree).

    Returns
    -------
    str or None
        The reason, in lower case, without the path itself: the caller names it, e.g.
        ``"--out x/y: x is not a directory: it is a regular file"``.
    """
    if kind not in ("file", "dir"):
        raise ValueError(f"kind must be 'file' or 'dir', got {kind!r}")
    p = Path(path)
    if not str(path):
        return "the path is empty"
    found = _stat(p)
    if isinstance(found, OSError):
        return _reason(p, found)
    if found is not None:
        mode = found.st_mode
        if kind == "file":
            if stat.S_ISDIR(mode):
                return "is a directory (a file is written here)"
            if not stat.S_ISREG(mode):
                return f"is not a regular file: it is {_kind_of(mode)}"
            if not os.access(p, os.W_OK):
                return "is not writable (permission denied)"
            return _probe(p.parent)
        if not stat.S_ISDIR(mode):
            return f"exists and is not a directory: it is {_kind_of(mode)}"
        return _probe(p)
    if os.path.islink(p):
        return "is a symbolic link to a path that does not exist"
    # absent: find the nearest directory above it that exists
    missing = [p.name]
    directory: Path | None = None
    for parent in p.parents:
        up = _stat(parent)
        if up is None or (isinstance(up, OSError) and up.errno == errno.ENOTDIR):
            missing.append(parent.name)
            continue
        if isinstance(up, OSError):
            return _reason(parent, up)
        if not stat.S_ISDIR(up.st_mode):
            return f"{parent} is not a directory: it is {_kind_of(up.st_mode)}"
        directory = parent
        break
    if directory is None:  # pragma: no cover - the root always exists
        return "no directory above it exists"
    if not parents and directory != p.parent:
        return f"the directory {p.parent} does not exist"
    problem = _length_problem(p, missing, directory)
    if problem is not None:
        return problem
    return _probe(directory)
