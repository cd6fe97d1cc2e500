"""One long-lived event loop for the LLM classifier's synchronous calls.

:func:`run_sync` runs a coroutine to completion from synchronous code on one event loop in
a daemon thread (:class:`BackgroundLoop`), shared by every synchronous call in the
process. Running each synchronous batch in a fresh ``asyncio.run`` loop would leave
litellm's per-loop HTTP connection pools open behind it (file descriptors leak with every
call); one long-lived loop keeps reusing them, and the seam's HTTP clients for that loop
are kept with it (:meth:`BackgroundLoop.clients_for`) and closed at exit.

This module imports no HTTP stack: the seam (and litellm) is imported only when a batch on
the loop first needs its clients.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

__all__ = ["BackgroundLoop", "run_sync"]

T = TypeVar("T")


class BackgroundLoop:
    """One event loop in a daemon thread, shared by every synchronous call (see the
    module docstring); a fork gets a loop of its own."""

    _lock = threading.Lock()
    _loop: asyncio.AbstractEventLoop | None = None
    _thread: threading.Thread | None = None
    _pid: int | None = None
    #: The LLM seam's HTTP clients on this loop (a ``_clients.ClientCache``), kept for
    #: the life of the loop so that batches reuse connections, as litellm's own cache does.
    _clients: Any = None
    _exit_hook = False

    @classmethod
    def get(cls) -> asyncio.AbstractEventLoop:
        """The running background loop, started (again) when none runs in this process."""
        with cls._lock:
            alive = cls._thread is not None and cls._thread.is_alive()
            if cls._loop is None or not alive or cls._pid != os.getpid():
                loop = asyncio.new_event_loop()
                thread = threading.Thread(
                    target=loop.run_forever, name="hybridroute-llm-loop", daemon=True
                )
                thread.start()
                cls._loop, cls._thread, cls._pid = loop, thread, os.getpid()
                cls._clients = None  # clients belong to their loop (and process)
            return cls._loop

    @classmethod
    def clients_for(cls, loop: asyncio.AbstractEventLoop) -> Any:
        """The seam's shared client cache when ``loop`` is this background loop, else
        ``None`` (a caller's own loop: each batch builds and closes its clients)."""
        with cls._lock:
            if loop is not cls._loop or cls._pid != os.getpid():
                return None
            if cls._clients is None:
                from ._clients import ClientCache  # imports litellm: only when asking

                cls._clients = ClientCache()
                if not cls._exit_hook:
                    atexit.register(cls._close_clients)
                    cls._exit_hook = True
            return cls._clients

    @classmethod
    def _close_clients(cls) -> None:
        """At exit: close the shared clients on their own loop, so no connection pool is
        left for the interpreter's teardown to complain about (bounded wait)."""
        with cls._lock:
            loop, clients, pid = cls._loop, cls._clients, cls._pid
            cls._clients = None
        if clients is None or loop is None or pid != os.getpid() or not loop.is_running():
            return
        future = asyncio.run_coroutine_threadsafe(clients.aclose(), loop)
        with contextlib.suppress(Exception):
            future.result(timeout=5)


def run_sync(factory: Callable[[], Awaitable[T]]) -> T:
    """Run a coroutine to completion from synchronous code (also from inside a loop)."""
    loop = BackgroundLoop.get()
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:  # a coroutine on our own loop must await aclassify instead
        raise RuntimeError("call aclassify() from a coroutine running on this loop")

    async def call() -> T:
        return await factory()

    future = asyncio.run_coroutine_threadsafe(call(), loop)
    try:
        return future.result()
    except BaseException:
        future.cancel()  # e.g. KeyboardInterrupt: stop the batch, not only the wait
        raise
