"""What one app holds while it runs: its routers, log, committer, shadows and counts.

Routing is CPU work (rules, a TF-IDF transform, a logistic regression): it runs on a
small thread pool of its own, never on the event loop. Each item is checked once by the
library (:meth:`HybridRouter.check`) and the checked values are routed with its batch path
(:meth:`HybridRouter.route_many`), so the service accepts exactly what the library
accepts, and refuses what it refuses with its words.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from .._redact import scrub_text
from ..contracts import Decision, RouteRequest
from ..exceptions import RequestIdConflictError, UserInputError
from ..records._url import display_url
from ._batcher import RouteBatcher, Ticket, settings_from_env
from ._commit import GroupCommitter, LogUnavailable
from ._config import ServiceConfig
from ._input import RequestProblem, route_problem
from ._metrics import ServiceMetrics
from ._monitor import MonitorCache
from ._routers import LoadedRouter, Routers, RouterSet
from ._shadow import ShadowJob, ShadowRunner
from ._window import RecentWindow

if TYPE_CHECKING:
    from ..records import AuditSampler
    from ..records._logbase import LogBase
    from ..router import HybridRouter

__all__ = ["ServiceState"]

logger = logging.getLogger(__name__)

#: Threads that route live requests.
ROUTE_THREADS = 2
#: The longest ``/readyz`` waits for the log's answer before it says "not ready".
READY_TIMEOUT_S = 5.0


class ServiceState:
    """The running service of one app (``app.state.hybridroute``).

    Parameters
    ----------
    config : ServiceConfig
        What is served.
    routers : RouterSet
        The live router and the shadows, loaded and verified.
    admin_token : str or None
        The admin bearer token (``None``: admin endpoints are off).
    audit : AuditSampler or None
        The audit sampling of live auto-routed decisions (``None``: no audit).
    """

    def __init__(
        self,
        config: ServiceConfig,
        routers: RouterSet,
        admin_token: str | None,
        audit: AuditSampler | None = None,
    ) -> None:
        self.config = config
        self.routers = routers
        self.admin_token = admin_token
        # outcomes and audits need the admin token too, but stay on with several workers
        self.review_token = os.environ.get(config.admin_token_env) or None
        self.audit = audit
        self.sensitive = frozenset(config.sensitive_facts)
        self.metrics = ServiceMetrics(config.segment_fact, config.max_segments)
        self.window = RecentWindow(config.status_window, config.segment_fact)
        self.metrics.set_routers(routers.current.all())
        self.log_shown = display_url(config.log)
        self.started_at = time.time()
        self.log: LogBase | None = None
        self.committer: GroupCommitter | None = None
        self.shadows: ShadowRunner | None = None
        self.monitor = MonitorCache()
        self._ready_check: asyncio.Future[Any] | None = None
        self._executor: ThreadPoolExecutor | None = None
        # single-item requests are micro-batched (see _batcher); made with the executor
        self._batch_settings = settings_from_env()
        self.batcher: RouteBatcher | None = None

    # ------------------------------------------------------------------ lifespan
    async def start(self) -> None:
        """Open the log (on the committer's thread) and start the committer and shadows."""
        config = self.config
        self._executor = ThreadPoolExecutor(
            max_workers=ROUTE_THREADS, thread_name_prefix="hybridroute-route"
        )
        self.batcher = RouteBatcher(
            self._executor, *self._batch_settings, on_batch=self.metrics.on_micro_batch
        )
        log = await asyncio.to_thread(config.open_log, audit=self.audit)
        try:  # the labels and destinations the outcomes of their decisions may name
            for loaded in self.routers.current.all():
                await asyncio.to_thread(log.register_router, loaded.router)
        except BaseException:
            await asyncio.to_thread(log.close)
            raise
        self.log = log
        self.committer = GroupCommitter(log, config.commit_window_s, self.metrics.on_commit)
        self.shadows = ShadowRunner(self.committer, self.metrics, self.window, config.shadow_queue)
        self.shadows.start()

    async def stop(self) -> None:
        """Finish shadow work and pending commits, then close the log."""
        if self.shadows is not None:
            await self.shadows.aclose()
        if self.committer is not None:
            await self.committer.aclose()
        if self.log is not None:
            log, self.log = self.log, None
            await asyncio.to_thread(log.close)
        if self._executor is not None:
            self._executor.shutdown(wait=False)

    def _running(self) -> tuple[GroupCommitter, ThreadPoolExecutor]:
        if self.committer is None or self._executor is None:
            raise RequestProblem(503, "unavailable", "the service is not started (no lifespan)")
        return self.committer, self._executor

    # ------------------------------------------------------------------ routing
    async def route(
        self, loaded: LoadedRouter, requests: Sequence[RouteRequest], batch: bool
    ) -> list[Decision]:
        """Route ``requests`` with ``loaded`` (off the event loop), all or nothing.

        Raises
        ------
        RequestProblem
            422 naming the field (``facts.amount``; ``items[3].facts.amount`` in a batch)
            when the router refuses an item; nothing is routed then.
        """
        _, executor = self._running()
        loop = asyncio.get_running_loop()
        start = time.perf_counter()
        try:
            if len(requests) == 1 and loaded.inline:
                # a thread hop costs more than the routing itself here (and, under load,
                # a wait for the GIL); the loop is held a fraction of a millisecond
                decisions = _check_and_route(loaded.router, requests)
            else:
                decisions = await loop.run_in_executor(
                    executor, _check_and_route, loaded.router, requests
                )
        except _Refused as refused:
            prefix = f"items[{refused.index}]." if batch else ""
            raise route_problem(refused.error, prefix, self.sensitive) from None
        except UserInputError as exc:  # refused in routing, by no one item's check
            raise route_problem(exc, "", self.sensitive) from None
        self.metrics.child(self.metrics.route_seconds, "live").observe(time.perf_counter() - start)
        return decisions

    @contextmanager
    def serving(self) -> Iterator[Ticket | None]:
        """Count a single-item request from its arrival to its answer (micro-batching)."""
        if self.batcher is None:
            yield None
            return
        with self.batcher.coming() as ticket:
            yield ticket

    async def route_one(
        self, loaded: LoadedRouter, request: RouteRequest, ticket: Ticket | None = None
    ) -> Decision:
        """Route one item, micro-batched with concurrent single-item requests.

        Raises
        ------
        RequestProblem
            422 naming the field (``facts.amount``) when the router refuses the item.
        """
        self._running()
        batcher = self.batcher
        assert batcher is not None
        start = time.perf_counter()
        try:
            decision = await batcher.route(loaded, request, ticket)
        except UserInputError as exc:
            raise route_problem(exc, "", self.sensitive) from None
        self.metrics.child(self.metrics.route_seconds, "live").observe(time.perf_counter() - start)
        return decision

    async def log_live(
        self,
        routers: Routers,
        requests: Sequence[RouteRequest],
        decisions: Sequence[Decision],
        *,
        batch: bool = False,
    ) -> tuple[list[dict[str, Any]], ShadowJob | None]:
        """Log the live decisions (committed before this returns) and count them, under
        the requests' request ids.

        Returns the answers (``{"decision_id", "duplicate", "decision"}`` each, in order)
        and the job the shadows should route once the answer is sent (``None`` without
        shadows, or when every item was a duplicate).

        Raises
        ------
        RequestProblem
            503 ``unavailable`` when the log refused the commit; 409 ``conflict`` when a
            request id is logged for this router version with another request (nothing of
            this request is written; ``batch``: the field names ``items[i].request_id``).
        """
        committer, _ = self._running()
        request_ids = [r.request_id for r in requests]
        entries = [(d, rid, "live") for d, rid in zip(decisions, request_ids, strict=True)]
        try:
            logged = await committer.submit(entries)
        except LogUnavailable as exc:
            raise RequestProblem(503, "unavailable", str(exc)) from None
        except RequestIdConflictError as exc:
            raise _conflict(exc, batch) from None
        fresh = [r.record for r in logged if not r.duplicate]
        self.metrics.observe(fresh, "live")
        self.window.add_live(fresh)
        dup_version = routers.live.version
        for r in logged:
            if r.duplicate:
                self.metrics.duplicates.labels(dup_version).inc()
        answers = [
            {"decision_id": r.decision_id, "duplicate": r.duplicate, "decision": r.record}
            for r in logged
        ]
        job = None
        if routers.shadows:
            keep = [i for i, r in enumerate(logged) if not r.duplicate]
            if keep:
                job = ShadowJob(
                    routers=routers,
                    items=[requests[i] for i in keep],
                    request_ids=[request_ids[i] or logged[i].decision_id for i in keep],
                    live=[logged[i].record for i in keep],
                )
        return answers, job

    async def queue_shadows(self, job: ShadowJob | None) -> None:
        """Hand ``job`` to the shadows (the background task of a sent answer)."""
        if job is not None and self.shadows is not None:
            self.shadows.submit(job)

    # ------------------------------------------------------------------ the log
    async def check_log(self) -> str | None:
        """``None`` when the log is writable, else why not (for ``/readyz``), within
        :data:`READY_TIMEOUT_S` whatever the log does.

        The check (:meth:`~hybridroute.records.DecisionLog.check_writable`: a committed
        write, the file and the disk for SQLite; the server for PostgreSQL) runs on the
        committer's thread, behind the commits waiting there: a log that cannot commit in
        time is not ready. One check runs at a time; readiness requests meanwhile wait for
        it (never a queue of checks behind a stuck log).
        """
        if self.log is None or self.committer is None:
            return "the decision log is not open (the service is starting or stopping)"
        task = self._ready_check
        if task is None or task.done():
            log = self.log
            task = asyncio.ensure_future(
                self.committer.call(lambda: log.check_writable(timeout_s=READY_TIMEOUT_S / 2))
            )
            self._ready_check = task
        try:
            await asyncio.wait_for(asyncio.shield(task), READY_TIMEOUT_S)
        except TimeoutError:
            return (
                f"the decision log did not answer within {READY_TIMEOUT_S:g} s (a write "
                "or the check itself is waiting for it)"
            )
        except Exception as exc:
            return scrub_text(" ".join(str(exc).split())) or type(exc).__name__
        return None

    async def add_outcomes(self, outcomes: Sequence[Any]) -> Any:
        """:meth:`add_outcomes` of the log, on the committer thread (one writer at a time).

        Raises
        ------
        OutcomeError
            A bad outcome (naming its row and field); nothing written.
        RequestProblem
            503 ``unavailable`` when the log cannot be written now.
        """
        from ..records import OutcomeError

        committer, _ = self._running()
        log = self.log
        if log is None:  # closed by a shutdown this request raced with
            raise RequestProblem(503, "unavailable", "the decision log is not open")
        try:
            return await committer.call(log.add_outcomes, outcomes)
        except OutcomeError:
            raise
        except UserInputError as exc:  # the log refused the write (ArtifactError)
            raise RequestProblem(503, "unavailable", str(exc)) from None

    def pending_audits(self, router_version: str | None, limit: int) -> list[dict[str, Any]]:
        """The log's pending audits, read through a connection of its own (blocking)."""
        log = self.config.open_log()
        try:
            pending: list[dict[str, Any]] = log.pending_audits(
                router_version=router_version, limit=limit
            )
        finally:
            log.close()
        return pending

    def shadow_report(
        self, current: Routers, live_version: str | None, shadow_version: str | None
    ) -> dict[str, Any]:
        """:func:`hybridroute.records.shadow_disagreement` over the whole log (blocking).

        Read through a connection of its own, so a long read never holds up the commits
        that live answers wait for (SQLite readers do not block its writer; PostgreSQL
        readers never do).
        """
        from ..records import shadow_disagreement

        log = self.config.open_log()
        try:
            report = shadow_disagreement(
                log, live_version=live_version, shadow_version=shadow_version
            )
        finally:
            log.close()
        return {
            "live": {"name": current.live.name, "version": current.live.version},
            "shadows": [{"name": s.name, "version": s.version} for s in current.shadows],
            **report.to_dict(),
        }


def _conflict(exc: RequestIdConflictError, batch: bool) -> RequestProblem:
    """A request id that names another request, as a 409 naming the (first) item."""
    pos = exc.positions[0] if exc.positions else 0
    field = f"items[{pos}].request_id" if batch else "request_id"
    ids = ", ".join(repr(i) for i in exc.item_ids[:5])
    plural = "s" if len(exc.item_ids) > 1 else ""
    where = f"items[{pos}]: " if batch else ""
    return RequestProblem(
        409,
        "conflict",
        f"{where}request id{plural} {ids} already logged with another request (its text, "
        "facts or evidence differ): a request id names one request; send this one under a "
        "new id. Nothing of this request was routed or logged",
        field,
    )


class _Refused(Exception):
    """The item of a request that the router's check refused: its position and error."""

    def __init__(self, index: int, error: UserInputError) -> None:
        super().__init__(index, error)
        self.index = index
        self.error = error


def _check_and_route(router: HybridRouter, requests: Sequence[RouteRequest]) -> list[Decision]:
    """Check every request (facts against the schema, rules that cannot be evaluated, text,
    evidence), then route the checked values: each item is checked once, and the first
    one refused is named (:class:`_Refused`) before anything is classified."""
    checked = []
    for i, request in enumerate(requests):
        try:
            checked.append(router.check(request))
        except UserInputError as exc:
            raise _Refused(i, exc) from None
    return router.route_many(checked)
