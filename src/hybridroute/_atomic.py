"""Writing artifacts atomically: a file replaced in one step, a directory swapped in whole.

A reader never sees half an artifact: a file is written under a temporary name beside its
target and renamed over it (:func:`write_atomic`); a directory is built in a staging
directory beside its target and swapped in when complete (:func:`replace_directory`). A
failure leaves the old artifact as it was and removes what was staged.

A leaf module: the standard library only.
"""

from __future__ import annotations

import os
import secrets
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["replace_directory", "write_atomic"]


def write_atomic(path: str | os.PathLike[str], data: str | bytes) -> Path:
    """Write ``data`` (text is UTF-8 encoded) to ``path`` in one step.

    The bytes go to a new file beside ``path`` (created with the usual permissions, i.e.
    the process umask applies), are flushed to disk, and the file is renamed over
    ``path``. On any error the temporary file is removed and ``path`` is untouched.

    Parameters
    ----------
    path : path-like
        The file to write; its directory must exist.
    data : str or bytes
        The content.

    Returns
    -------
    pathlib.Path
        ``path``.
    """
    target = Path(path)
    raw = data.encode("utf-8") if isinstance(data, str) else data
    tmp = target.with_name(f".{target.name}.{secrets.token_hex(6)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(raw)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return target


@contextmanager
def replace_directory(target: str | os.PathLike[str]) -> Iterator[Path]:
    """Build ``target``'s new content in a staging directory, then swap it in whole.

    Yields a new, empty directory beside ``target`` (its parents are created). When the
    block ends without an error the staging directory gets the usual permissions
    (``0o755``; ``mkdtemp`` makes it owner-only) and replaces ``target``: an existing
    ``target`` is renamed aside first and removed after, so ``target`` is at every moment
    either the old directory or the new one. On an error the staging directory is removed
    and ``target`` is untouched.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> root = pathlib.Path(tempfile.mkdtemp()) / "bundle"
    >>> with replace_directory(root) as staging:
    ...     _ = (staging / "a.txt").write_text("new")
    >>> sorted(p.name for p in root.iterdir())
    ['a.txt']
    """
    root = Path(target)
    root.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{root.name}.", dir=root.parent))
    try:
        yield staging
        os.chmod(staging, 0o755)
        if root.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{root.name}.old.", dir=root.parent))
            old.rmdir()
            root.rename(old)
            staging.rename(root)
            shutil.rmtree(old)
        else:
            staging.rename(root)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
