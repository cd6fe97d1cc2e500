"""A client-side deadline for a database call that the server may never answer.

A PostgreSQL server that is frozen (``SIGSTOP``, a hung host whose kernel still runs) keeps
acknowledging TCP segments, so neither keepalives nor ``tcp_user_timeout`` fire, and its
own ``statement_timeout`` is frozen with it: a call would wait forever. :class:`Deadline`
bounds each call from the client: a watchdog thread shuts the connection's socket down
once the call has run past its deadline, the driver's blocked read returns at once with an
error, and the caller reports that the server did not answer in time. The connection is
then broken and is replaced on the next call.

Shutting down a socket (not closing its descriptor) is safe from another thread: the
descriptor stays valid for the driver, which simply reads the end of the stream.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["Deadline"]


class Deadline:
    """Arms one deadline at a time (calls on one connection are serialised by its owner).

    Parameters
    ----------
    name : str
        The watchdog thread's name.
    """

    def __init__(self, name: str) -> None:
        self._name = name
        self._cond = threading.Condition()
        self._until: float | None = None
        self._fd: int | None = None
        self._fired = False
        self._thread: threading.Thread | None = None
        self._stopped = False
        self._waiting_for: float | None = None  # the watchdog's wake-up time (None: idle)

    @contextmanager
    def armed(self, seconds: float | None, fd: int | None) -> Iterator[Deadline]:
        """Within the block, the socket ``fd`` is shut down once ``seconds`` have passed;
        :attr:`fired` tells afterwards whether it was. ``None`` for either: no deadline."""
        with self._cond:
            self._fired = False
            if seconds is not None and fd is not None and fd >= 0:
                self._until = time.monotonic() + seconds
                self._fd = fd
                self._ensure_thread()
                wake = self._waiting_for
                if wake is None or self._until < wake:  # else it wakes in time by itself
                    self._cond.notify()
        try:
            yield self
        finally:
            with self._cond:
                self._until = None
                self._fd = None

    @property
    def fired(self) -> bool:
        """Whether the latest armed call ran past its deadline (its socket was shut down)."""
        return self._fired

    def clear(self) -> None:
        """Forget that the latest call ran past its deadline (a new call begins)."""
        self._fired = False

    def stop(self) -> None:
        """End the watchdog thread."""
        with self._cond:
            self._stopped = True
            self._cond.notify()

    def _ensure_thread(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._stopped = False
            self._thread = threading.Thread(target=self._watch, name=self._name, daemon=True)
            self._thread.start()

    def _watch(self) -> None:
        with self._cond:
            while not self._stopped:
                until = self._until
                if until is None:
                    self._waiting_for = None
                    self._cond.wait()
                    continue
                left = until - time.monotonic()
                if left > 0:
                    self._waiting_for = until
                    self._cond.wait(left)
                    continue
                fd = self._fd
                self._until = None
                self._fd = None
                if fd is not None:
                    self._fired = True
                    _shutdown(fd)


def _shutdown(fd: int) -> None:
    """Shut a socket down through a duplicate of its descriptor (the owner keeps its own)."""
    try:
        dup = os.dup(fd)
    except OSError:
        return
    try:
        sock = socket.socket(fileno=dup)
    except OSError:
        os.close(dup)
        return
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    finally:
        sock.close()
