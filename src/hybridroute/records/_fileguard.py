"""Acknowledged means durable: the SQLite log notices when its file is gone or full.

SQLite writes through the file descriptors it opened. When the log's file (or its
write-ahead file) is deleted or replaced while a connection is open, commits still
succeed -- into an inode no other process can see, lost when the connection closes or the
process dies. :class:`FileGuard` remembers which files the connection opened (device and
inode of the log and of its ``-wal`` file) and checks, before and after every write
transaction, that the path still names them: a log whose file was removed or replaced
refuses every later write (nothing more is acknowledged) and says why, until it is
reopened.

Readiness also asks whether the filesystem holding the log has room
(:func:`free_bytes`): SQLite only finds out that a disk is full when a write needs a new
page, which a readiness probe that rewrites one row may never need.
"""

from __future__ import annotations

import os

from ..exceptions import ArtifactError

__all__ = ["MIN_FREE_BYTES", "FileGuard", "free_bytes"]

#: Below this much free space on the log's filesystem the log is reported not ready.
MIN_FREE_BYTES = 1024 * 1024

Identity = tuple[int, int]


def _identity(path: str) -> Identity | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return (st.st_dev, st.st_ino)


def free_bytes(path: str) -> int:
    """Bytes this process may still write on the filesystem holding ``path`` (root may use
    the blocks reserved for it)."""
    st = os.statvfs(path)
    blocks = st.f_bfree if os.geteuid() == 0 else st.f_bavail
    return int(blocks * st.f_frsize)


class FileGuard:
    """Checks that an open SQLite log's path still names the files its connection holds.

    Parameters
    ----------
    path : str
        The log file (made absolute: a later change of directory does not matter).
    where : str
        The log's name in messages.
    """

    def __init__(self, path: str, where: str) -> None:
        self.path = os.path.abspath(path)
        self.where = where
        self._main = _identity(self.path)
        self._wal = _identity(self.path + "-wal")
        self._broken: str | None = None

    def check(self) -> None:
        """Raise :class:`~hybridroute.exceptions.ArtifactError` when the log's file or its
        write-ahead file was removed or replaced since the log was opened (and from then
        on: a broken log stays broken until reopened)."""
        if self._broken is None:
            self._broken = self._problem()
        if self._broken is not None:
            raise ArtifactError(self._broken, path=self.where)

    def _problem(self) -> str | None:
        restart = (
            "; decisions written now would be lost, so none is acknowledged (restore the "
            "file, or reopen the log / restart the service to start a new one)"
        )
        main = _identity(self.path)
        if main is None:
            return "the decision log file was removed while the log was open" + restart
        if main != self._main:
            return "the decision log file was replaced while the log was open" + restart
        wal = _identity(self.path + "-wal")
        if self._wal is None:
            self._wal = wal  # created by the first write after the log was opened
        elif wal != self._wal:
            what = "removed" if wal is None else "replaced"
            return f"the decision log's write-ahead file (-wal) was {what}" + restart
        return None

    def check_room(self) -> None:
        """Raise :class:`~hybridroute.exceptions.ArtifactError` when the filesystem holding
        the log has less than :data:`MIN_FREE_BYTES` free."""
        free = free_bytes(os.path.dirname(self.path))
        if free < MIN_FREE_BYTES:
            raise ArtifactError(
                f"the disk holding the decision log is full ({free // 1024:,} KiB free; at "
                f"least {MIN_FREE_BYTES // 1024:,} KiB needed)",
                path=self.where,
            )
