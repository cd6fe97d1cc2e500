"""Group commit: decisions that arrive together share one log transaction.

Every answer waits for the commit that holds its decision, so a client never holds a
decision the log could lose; what group commit saves is transactions, not durability.
While traffic is concurrent (the previous group held more than one request), the first
decision of a group waits ``window_s`` for others to join; a lone client never waits.
Decisions that arrive while a commit is running form the next group, so under load groups
grow on their own.

One committer thread does every write (a log connection is used by one thread at a
time), off the event loop.

Each request is its own group in the shared transaction
(:meth:`~hybridroute.records.DecisionLog.log_groups`): a request whose request id already
names another request is refused alone (``RequestIdConflictError``), the others of the
transaction are written. Two requests carrying the same request id never share a
transaction: the later one waits for the next, so it is compared with what the first
wrote.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Protocol

from .._redact import scrub_text
from ..contracts import Decision

if TYPE_CHECKING:
    from ..records import LoggedDecision

__all__ = ["GroupCommitter", "GroupLog", "LogUnavailable"]

logger = logging.getLogger(__name__)

#: Most decisions in one transaction (a larger group is split).
MAX_GROUP = 5000

Entry = tuple[Decision, str | None, str]  # (decision, request id, role)
Key = tuple[str, str, str]


class GroupLog(Protocol):
    """What the committer needs of a decision log (``DecisionLog`` and the PostgreSQL
    log are ones): :meth:`~hybridroute.records.DecisionLog.log_groups`."""

    def log_groups(
        self, groups: Sequence[Sequence[Entry]]
    ) -> Sequence[list[LoggedDecision] | Exception]: ...


def _keys(entries: Sequence[Entry]) -> set[Key]:
    return {(d.router, d.router_version, str(rid)) for d, rid, _ in entries if rid is not None}


def _reason(exc: BaseException) -> str:
    """Why a commit failed, for the client: the error's message without the log's name
    (a path or URL of the server's), scrubbed, on one line."""
    text = " ".join(str(exc).split())
    where = getattr(exc, "path", None)
    if where and text.startswith(f"{where}: "):
        text = text[len(where) + 2 :]
    elif where:
        text = text.replace(str(where), "the log")
    return scrub_text(text)[:300] or type(exc).__name__


class _Request:
    """One submitted request: its groups (one, or one per entry) and its future."""

    __slots__ = ("future", "groups", "keys", "size")

    def __init__(
        self, groups: list[list[Entry]], future: asyncio.Future[Sequence[Any]], keys: set[Key]
    ) -> None:
        self.groups = groups
        self.future = future
        self.keys = keys
        self.size = sum(len(g) for g in groups)


class LogUnavailable(Exception):
    """The log refused a commit; the answers that waited for it get a 503."""


class GroupCommitter:
    """Commit ``(decision, request_id, role)`` entries to ``log`` in shared transactions.

    Parameters
    ----------
    log : GroupLog
        A decision log with ``log_groups(groups)`` (see
        :func:`hybridroute.records.open_log`).
    window_s : float
        How long the first entry of a group waits for others.
    on_commit : callable, optional
        Called with (group size, seconds) after each commit (metrics).
    """

    def __init__(
        self,
        log: GroupLog,
        window_s: float,
        on_commit: Callable[[int, float], None] | None = None,
    ) -> None:
        self._log = log
        self._window = float(window_s)
        self._on_commit = on_commit
        self._pending: list[_Request] = []
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

    async def submit(self, entries: Sequence[Entry], *, atomic: bool = True) -> list[Any]:
        """Log ``entries`` (in order) and return their logged decisions once committed.

        ``atomic``: the entries are one request, written all or nothing; otherwise each
        entry stands alone (shadow decisions) and one whose request id names another
        request comes back as ``None``.

        Raises
        ------
        LogUnavailable
            The transaction that held them failed (nothing of it was written).
        RequestIdConflictError
            (``atomic``) A request id of ``entries`` is logged with another request;
            nothing of ``entries`` was written.
        """
        if self._closed:
            raise LogUnavailable("the service is shutting down")
        if not entries:
            return []
        self._ensure_running()
        assert self._loop is not None and self._wake is not None
        future: asyncio.Future[Sequence[Any]] = self._loop.create_future()
        keys = _keys(entries)
        alone = not atomic and len(keys) == sum(rid is not None for _, rid, _ in entries)
        groups = [[e] for e in entries] if alone else [list(entries)]
        self._pending.append(_Request(groups, future, keys))
        self._wake.set()
        result = await future
        if alone:
            return [None if isinstance(r, Exception) else r[0] for r in result]
        if isinstance(result[0], Exception):
            raise result[0]
        return list(result[0])

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
            group: list[_Request] = []
            size = 0
            taken: set[Key] = set()  # request ids in this transaction, or waiting
            rest: list[_Request] = []
            for req in self._pending:
                # a request id in two requests of one transaction: the later waits (and so
                # does any later request sharing an id with a waiting one), so each is
                # compared with what the one before it wrote, in arrival order
                if size >= MAX_GROUP or not taken.isdisjoint(req.keys):
                    rest.append(req)
                    taken |= req.keys
                    continue
                group.append(req)
                size += req.size
                taken |= req.keys
            self._pending = rest
            if self._pending:
                wake.set()  # the rest makes the next group at once
            self._last_requests = len(group)
            groups = [g for req in group for g in req.groups]
            if not groups:
                continue
            start = time.perf_counter()
            try:
                results = await loop.run_in_executor(self._executor, self._log.log_groups, groups)
            except Exception as exc:
                # the message may quote the log's URL: scrubbed, and never a request body
                logger.error(
                    "decision log commit of %d decision(s) failed: %s: %s",
                    size,
                    type(exc).__name__,
                    scrub_text(str(exc)),
                )
                failure = LogUnavailable(f"the decision log could not be written: {_reason(exc)}")
                for req in group:
                    if not req.future.done():
                        req.future.set_exception(failure)
                continue
            if self._on_commit is not None:
                try:
                    self._on_commit(size, time.perf_counter() - start)
                except Exception as exc:  # a metrics bug must not stop every answer
                    logger.error("commit callback failed: %s", type(exc).__name__)
            pos = 0
            for req in group:
                part = results[pos : pos + len(req.groups)]
                pos += len(req.groups)
                if not req.future.done():  # a client that went away: its decisions are logged
                    req.future.set_result(part)

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
