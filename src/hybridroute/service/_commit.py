"""Group commit: decisions that arrive together share one log transaction.

Every answer waits for the commit that holds its decision, so a client never holds a
decision the log could lose; what group commit saves is transactions, not durability.
While traffic is concurrent (the previous group held more than one request), the first
decision of a group waits ``window_s`` for others to join; a lone client never waits.
Decisions that arrive while a commit is running form the next group, so under load groups
grow on their own.

One committer thread does every write (a log connection is used by one thread at a
time), off the event loop.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from .._redact import scrub_text

__all__ = ["GroupCommitter", "LogUnavailable"]

logger = logging.getLogger(__name__)

#: Most decisions in one transaction (a larger group is split).
MAX_GROUP = 5000

Entry = tuple[Any, str | None, str]  # (decision, request id, role)


class LogUnavailable(Exception):
    """The log refused a commit; the answers that waited for it get a 503."""


class GroupCommitter:
    """Commit ``(decision, request_id, role)`` entries to ``log`` in shared transactions.

    Parameters
    ----------
    log : object
        A decision log with ``log_many(entries) -> list[LoggedDecision]`` (see
        :func:`hybridroute.records.open_log`).
    window_s : float
        How long the first entry of a group waits for others.
    on_commit : callable, optional
        Called with (group size, seconds) after each commit (metrics).
    """

    def __init__(
        self,
        log: Any,
        window_s: float,
        on_commit: Callable[[int, float], None] | None = None,
    ) -> None:
        self._log = log
        self._window = float(window_s)
        self._on_commit = on_commit
        self._pending: list[tuple[Sequence[Entry], asyncio.Future[list[Any]]]] = []
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hybridroute-log")
        self._closed = False
        self._last_requests = 0  # requests in the latest group (1: no one to wait for)

    def _ensure_running(self) -> None:
        loop = asyncio.get_running_loop()
        if self._task is None or self._task.done() or self._loop is not loop:
            self._loop = loop
            self._wake = asyncio.Event()
            self._task = loop.create_task(self._run(), name="hybridroute-group-commit")

    async def submit(self, entries: Sequence[Entry]) -> list[Any]:
        """Log ``entries`` (in order) and return their logged decisions once committed.

        Raises
        ------
        LogUnavailable
            The transaction that held them failed (nothing of it was written).
        """
        if self._closed:
            raise LogUnavailable("the service is shutting down")
        if not entries:
            return []
        self._ensure_running()
        assert self._loop is not None and self._wake is not None
        future: asyncio.Future[list[Any]] = self._loop.create_future()
        self._pending.append((entries, future))
        self._wake.set()
        return await future

    async def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run ``fn(*args)`` on the committer thread (reads of the log, its checks)."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, fn, *args)

    async def _run(self) -> None:
        assert self._wake is not None
        wake = self._wake
        loop = asyncio.get_running_loop()
        while True:
            if self._closed and not self._pending:
                return
            await wake.wait()
            if self._window > 0 and not self._closed and self._last_requests > 1:
                await asyncio.sleep(self._window)
            wake.clear()
            group, size = [], 0
            while self._pending and size < MAX_GROUP:
                entries, future = self._pending.pop(0)
                group.append((entries, future))
                size += len(entries)
            if self._pending:
                wake.set()  # the rest makes the next group at once
            self._last_requests = len(group)
            flat = [e for entries, _ in group for e in entries]
            if not flat:
                continue
            start = time.perf_counter()
            try:
                results = await loop.run_in_executor(self._executor, self._log.log_many, flat)
            except Exception as exc:
                # the message may quote the log's URL: scrubbed, and never a request body
                logger.error(
                    "decision log commit of %d decision(s) failed: %s: %s",
                    len(flat),
                    type(exc).__name__,
                    scrub_text(str(exc)),
                )
                failure = LogUnavailable(
                    f"the decision log could not be written ({type(exc).__name__})"
                )
                for _, future in group:
                    if not future.done():
                        future.set_exception(failure)
                continue
            if self._on_commit is not None:
                try:
                    self._on_commit(len(flat), time.perf_counter() - start)
                except Exception as exc:  # a metrics bug must not stop every answer
                    logger.error("commit callback failed: %s", type(exc).__name__)
            pos = 0
            for entries, future in group:
                part = list(results[pos : pos + len(entries)])
                pos += len(entries)
                if not future.done():  # a client that went away: its decisions are logged
                    future.set_result(part)

    async def aclose(self) -> None:
        """Commit what is pending, then stop (the log itself is closed by its owner)."""
        self._closed = True
        task = self._task
        if task is not None and not task.done() and self._loop is asyncio.get_running_loop():
            assert self._wake is not None
            self._wake.set()
            await task  # it returns once nothing is pending
        self._executor.shutdown(wait=True)

    def shutdown_executor(self) -> None:
        """Stop the committer thread (for an app that never ran its lifespan)."""
        self._executor.shutdown(wait=True)
