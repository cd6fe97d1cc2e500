"""Shadows: candidate routers that route every request after its answer is sent.

A request hands its items, the live records and the request ids to :meth:`ShadowRunner.submit`
from a background task that runs once the response is sent; that call only puts the job
on a bounded queue (a full queue drops the job and counts it), so a shadow can never
delay, change or fail a live answer. One task takes the jobs in order, routes them with
each shadow of the router set the request started with (on a thread of its own), logs
the decisions with role ``shadow`` under the same request ids -- a request without one
uses the live decision's id, so live and shadow rows of one request always pair -- and
compares them with the live decisions for the status page.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .._redact import scrub_text
from ..contracts import Decision, RouteRequest
from ..exceptions import UserInputError
from ._commit import GroupCommitter, LogUnavailable
from ._metrics import ServiceMetrics
from ._routers import LoadedRouter, Routers
from ._window import RecentWindow

if TYPE_CHECKING:
    from ..router import CheckedRequest, HybridRouter

__all__ = ["ShadowJob", "ShadowRunner"]

logger = logging.getLogger(__name__)

#: Seconds the service waits at shutdown for queued shadow work.
DRAIN_TIMEOUT_S = 10.0


@dataclass(frozen=True, slots=True)
class ShadowJob:
    """One request's items for the shadows.

    Attributes
    ----------
    routers : Routers
        The router set the request was answered with (its shadows route the job).
    items : sequence of RouteRequest
        The requests, as the live router got them (each shadow checks them itself: its
        rules, schema and limits may differ).
    request_ids : sequence of str
        Per item: its request id, or the live decision's id when it had none.
    live : sequence of mapping
        The live decision records (for the comparison shown on the status page).
    """

    routers: Routers
    items: Sequence[RouteRequest]
    request_ids: Sequence[str]
    live: Sequence[Mapping[str, Any]]


class ShadowRunner:
    """A bounded queue of shadow jobs and the one task that works through it.

    Parameters
    ----------
    committer : GroupCommitter
        Logs the shadow decisions (role ``shadow``).
    metrics : ServiceMetrics
        Counts them, and the dropped jobs and shadow failures.
    window : RecentWindow
        Receives the live-vs-shadow comparisons.
    queue_size : int
        Jobs held before new ones are dropped.
    """

    def __init__(
        self,
        committer: GroupCommitter,
        metrics: ServiceMetrics,
        window: RecentWindow,
        queue_size: int,
    ) -> None:
        self._committer = committer
        self._metrics = metrics
        self._window = window
        self._queue: asyncio.Queue[ShadowJob] = asyncio.Queue(maxsize=int(queue_size))
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hybridroute-shadow")
        self._task: asyncio.Task[None] | None = None
        self._closed = False

    def start(self) -> None:
        """Start the task that routes queued jobs (on the running loop)."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name="hybridroute-shadows"
            )

    def submit(self, job: ShadowJob) -> None:
        """Queue ``job`` (never blocks; a full queue drops it, counted)."""
        if self._closed or not job.routers.shadows or not job.items:
            return
        try:
            self._queue.put_nowait(job)
        except asyncio.QueueFull:
            self._metrics.shadow_dropped.inc()

    async def join(self, timeout: float) -> bool:
        """Wait until every queued job is done (``False`` on timeout)."""
        try:
            await asyncio.wait_for(self._queue.join(), timeout)
        except TimeoutError:
            return False
        return True

    async def aclose(self, timeout: float = DRAIN_TIMEOUT_S) -> None:
        """Finish the queued jobs (at most ``timeout`` seconds), then stop."""
        self._closed = True
        if self._task is not None:
            if not await self.join(timeout):
                logger.warning(
                    "shadow work left undone at shutdown: %d request(s)", self._queue.qsize()
                )
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        self._executor.shutdown(wait=True)

    async def _run(self) -> None:
        while True:
            job = await self._queue.get()
            try:
                for shadow in job.routers.shadows:
                    await self._one(shadow, job)
            except Exception as exc:  # a bug must not stop the shadows for good
                logger.error(
                    "shadow routing failed: %s: %s", type(exc).__name__, scrub_text(str(exc))
                )
            finally:
                self._queue.task_done()

    async def _one(self, shadow: LoadedRouter, job: ShadowJob) -> None:
        loop = asyncio.get_running_loop()
        decisions = await loop.run_in_executor(self._executor, _route_all, shadow, job.items)
        failed = sum(d is None for d in decisions)
        if failed:
            self._metrics.shadow_errors.labels(shadow.version).inc(failed)
        entries = [
            (d, rid, "shadow")
            for d, rid in zip(decisions, job.request_ids, strict=True)
            if d is not None
        ]
        try:
            # each shadow decision stands alone: one whose request id the shadow version
            # logged with another request is left out (None), the others are written
            logged = await self._committer.submit(entries, atomic=False)
        except LogUnavailable:
            self._metrics.shadow_errors.labels(shadow.version).inc(len(entries))
            return
        refused = sum(r is None for r in logged)
        if refused:
            self._metrics.shadow_errors.labels(shadow.version).inc(refused)
        fresh = [r.record for r in logged if r is not None and not r.duplicate]
        self._metrics.observe(fresh, "shadow")
        it = iter(logged)
        records = [None if d is None else getattr(next(it), "record", None) for d in decisions]
        self._window.add_comparisons(shadow.version, job.live, records)


def _route_all(shadow: LoadedRouter, items: Sequence[RouteRequest]) -> list[Decision | None]:
    """The shadow's decisions; an item it refuses is ``None`` (the others route).

    Each item is checked once by the shadow; the checked ones are routed as one batch.
    """
    router = shadow.router
    checked: list[CheckedRequest | None] = []
    for item in items:
        try:
            checked.append(router.check(item))
        except UserInputError:
            checked.append(None)
    good = [c for c in checked if c is not None]
    decided: list[Decision | None]
    try:
        decided = list(router.route_many(good))
    except UserInputError:  # refused in routing (e.g. an evidence source its policy lacks)
        decided = [_route_one(router, c) for c in good]
    rest = iter(decided)
    return [None if c is None else next(rest) for c in checked]


def _route_one(router: HybridRouter, checked: CheckedRequest) -> Decision | None:
    try:
        return router.route_many([checked])[0]
    except UserInputError:
        return None
