"""Micro-batching: concurrent single-item requests share one classifier call.

The dynamic batching of inference servers. A single-item request that arrives while
others are on their way to routing waits a bounded moment -- :data:`DEFAULT_WINDOW_S`, or
until every request known to be coming has joined, or :data:`DEFAULT_MAX_ITEMS` are
waiting -- and the gathered requests are routed with one
:meth:`~hybridroute.router.HybridRouter.route_many` call (on the event loop for a batch of
at most :data:`INLINE_ITEMS` items of a router that may route there, else on a worker
thread). Their
decisions then reach the group committer together, so they share one log transaction;
every answer is still sent only after the commit that holds its own decision, and a
request id is still logged once (the committer's rules, unchanged).

A lone client never waits: when no other request is coming, its item is routed at once,
as without batching (on the event loop for a router that allows it, see
:attr:`~._routers.LoadedRouter.inline`). Under load, requests that arrive while a batch is
being routed form the next batch, so batches grow on their own.

Each request keeps its own refusal: an item the router's check refuses fails alone, and
when the router refuses a batch as a whole (no one item's check), each of its items is
routed alone so that only the ones at fault fail.

``HYBRIDROUTE_BATCH_WINDOW_MS`` sets the moment (milliseconds, 0 to 50; ``0`` turns
micro-batching off: each request is routed alone, as before) and
``HYBRIDROUTE_BATCH_MAX`` the most items in one batch (1 to 4096).
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Executor
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from ..exceptions import UserInputError

if TYPE_CHECKING:
    from ..contracts import Decision, RouteRequest
    from ..router import HybridRouter
    from ._routers import LoadedRouter

__all__ = ["DEFAULT_MAX_ITEMS", "DEFAULT_WINDOW_S", "RouteBatcher", "Ticket", "route_each"]

logger = logging.getLogger(__name__)

#: How long a request waits for others to join its batch (while others are coming).
DEFAULT_WINDOW_S = 0.001
#: The most items routed in one batch.
DEFAULT_MAX_ITEMS = 64
#: A batch this small of a router that may route on the event loop is routed there.
INLINE_ITEMS = 32
WINDOW_ENV = "HYBRIDROUTE_BATCH_WINDOW_MS"
MAX_ENV = "HYBRIDROUTE_BATCH_MAX"


def _env_number(name: str, default: float, low: float, high: float) -> float:
    """A number from the environment, or ``default``; a bad value is refused loudly."""
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return default
    try:
        value = float(raw)
    except ValueError:
        raise UserInputError(f"{name} must be a number, got {raw[:40]!r}") from None
    if not low <= value <= high:
        raise UserInputError(f"{name} must be between {low:g} and {high:g}, got {value:g}")
    return value


def settings_from_env() -> tuple[float, int]:
    """``(window in seconds, most items)`` from the environment (see the module)."""
    window_ms = _env_number(WINDOW_ENV, DEFAULT_WINDOW_S * 1e3, 0.0, 50.0)
    most = _env_number(MAX_ENV, DEFAULT_MAX_ITEMS, 1, 4096)
    if most != int(most):
        raise UserInputError(f"{MAX_ENV} must be a whole number, got {most:g}")
    return window_ms / 1e3, int(most)


def route_each(
    router: HybridRouter, requests: Sequence[RouteRequest]
) -> list[Decision | UserInputError]:
    """Check every request, route the checked ones in one call: per request, its decision
    or the refusal that is its own (see the module)."""
    out: list[Decision | UserInputError | None] = [None] * len(requests)
    checked: list[Any] = []
    where: list[int] = []
    for i, request in enumerate(requests):
        try:
            checked.append(router.check(request))
        except UserInputError as exc:
            out[i] = exc
            continue
        where.append(i)
    if len(checked) == 1:
        try:
            out[where[0]] = router.route_many(checked)[0]
        except UserInputError as exc:
            out[where[0]] = exc
    elif checked:
        try:
            decisions: list[Decision] | None = router.route_many(checked)
        except UserInputError:
            decisions = None  # refused as a whole: each alone, so only the items at fault fail
        for k, i in enumerate(where):
            if decisions is not None:
                out[i] = decisions[k]
                continue
            try:
                out[i] = router.route_many([checked[k]])[0]
            except UserInputError as exc:
                out[i] = exc
    return [r for r in out if r is not None]


class _Waiting:
    """One request in a batch: its router, its item and the future of its decision."""

    __slots__ = ("future", "loaded", "request")

    def __init__(
        self, loaded: LoadedRouter, request: RouteRequest, future: asyncio.Future[Decision]
    ) -> None:
        self.loaded = loaded
        self.request = request
        self.future = future


class Ticket:
    """A request on its way to the batcher (see :meth:`RouteBatcher.coming`)."""

    __slots__ = ("arrived",)

    def __init__(self) -> None:
        self.arrived = False


class RouteBatcher:
    """Gather concurrent single-item requests into batches (see the module).

    Parameters
    ----------
    executor : Executor
        The threads batches are routed on.
    window_s : float
        The longest a request waits for others (``0``: no batching).
    max_items : int
        The most items in one batch.
    on_batch : callable, optional
        Called with the number of items of each batch routed (metrics).
    """

    def __init__(
        self,
        executor: Executor,
        window_s: float,
        max_items: int,
        on_batch: Callable[[int], None] | None = None,
    ) -> None:
        self._executor = executor
        self._on_batch = on_batch
        self.window_s = float(window_s)
        self.max_items = int(max_items)
        self._coming = 0  # requests that arrived and have not reached the batcher yet
        self._active = 0  # requests from their arrival to their answer (commit included)
        self._pending: list[_Waiting] = []
        self._busy = False  # a batch (or a lone item) is being routed
        self._last = 0  # items in the latest batch (1: no one to wait for)
        self._task: asyncio.Task[None] | None = None
        self._waiter: asyncio.Future[None] | None = None
        #: Batches routed and the items they held (for metrics and tests).
        self.batches = 0
        self.items = 0

    @contextmanager
    def coming(self) -> Iterator[Ticket]:
        """Count a request while it is served: from its arrival (its body still being read
        and checked) to its :meth:`route` call as *coming*, and to its answer (after its
        commit) as *active*. Another active request is what makes one join a batch."""
        ticket = Ticket()
        self._coming += 1
        self._active += 1
        try:
            yield ticket
        finally:
            self._active -= 1
            if not ticket.arrived:
                self._coming -= 1
                self._release_if_complete()

    def _gathering(self) -> bool:
        """Whether the batch being formed should wait for more items."""
        if len(self._pending) >= self.max_items:
            return False
        return self._coming > 0 or self._last > 1

    def _release_if_complete(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            if len(self._pending) >= self.max_items or (self._coming == 0 and self._last <= 1):
                waiter.set_result(None)

    async def route(
        self, loaded: LoadedRouter, request: RouteRequest, ticket: Ticket | None = None
    ) -> Decision:
        """The decision for one item (raises the item's own ``UserInputError``)."""
        if ticket is not None and not ticket.arrived:
            ticket.arrived = True
            self._coming -= 1
        # alone: nothing routing or waiting, and no other request being served
        alone = not self._busy and not self._pending and self._active <= 1
        if self.window_s <= 0 or alone:
            return await self._alone(loaded, request)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Decision] = loop.create_future()
        self._pending.append(_Waiting(loaded, request, future))
        if self._task is None or self._task.done():
            self._task = loop.create_task(self._drain(), name="hybridroute-micro-batch")
        else:
            self._release_if_complete()
        return await future

    async def _alone(self, loaded: LoadedRouter, request: RouteRequest) -> Decision:
        """One item routed at once (no one to wait for, or batching off)."""
        self._busy = True
        try:
            if loaded.inline:
                # a thread hop costs more than the routing itself here (and, under load,
                # a wait for the GIL); the loop is held a fraction of a millisecond
                (result,) = route_each(loaded.router, [request])
            else:
                loop = asyncio.get_running_loop()
                (result,) = await loop.run_in_executor(
                    self._executor, route_each, loaded.router, [request]
                )
        finally:
            self._busy = False
            self._last = 1
            self._start_drain()
        self._count(1)
        if isinstance(result, UserInputError):
            raise result
        return result

    def _count(self, size: int) -> None:
        self.batches += 1
        self.items += size
        if self._on_batch is not None:
            try:
                self._on_batch(size)
            except Exception as exc:  # a metrics bug must not fail the requests
                logger.error("micro-batch callback failed: %s", type(exc).__name__)

    def _start_drain(self) -> None:
        if self._pending and (self._task is None or self._task.done()):
            loop = asyncio.get_running_loop()
            self._task = loop.create_task(self._drain(), name="hybridroute-micro-batch")

    async def _drain(self) -> None:
        """Route what is pending, batch after batch, until nothing is."""
        loop = asyncio.get_running_loop()
        while self._pending and not self._busy:  # a lone item being routed drains after
            if self._gathering():
                waiter: asyncio.Future[None] = loop.create_future()
                self._waiter = waiter
                handle = loop.call_later(self.window_s, _release, waiter)
                self._release_if_complete()
                try:
                    await waiter
                finally:
                    handle.cancel()
                    self._waiter = None
            batch = self._pending[: self.max_items]
            del self._pending[: len(batch)]
            self._busy = True
            self._last = len(batch)
            try:
                await self._route_batch(loop, batch)
            finally:
                self._busy = False

    async def _route_batch(self, loop: asyncio.AbstractEventLoop, batch: list[_Waiting]) -> None:
        """Route ``batch`` (one call per router it names) and settle every future."""
        by_router: dict[int, list[_Waiting]] = {}
        for w in batch:
            by_router.setdefault(id(w.loaded), []).append(w)
        for group in by_router.values():
            router = group[0].loaded.router
            requests = [w.request for w in group]
            try:
                if group[0].loaded.inline and len(group) <= INLINE_ITEMS:
                    # a few milliseconds at most: cheaper than a thread hop and the GIL
                    # passed back and forth with the event loop
                    results = route_each(router, requests)
                else:
                    results = await loop.run_in_executor(
                        self._executor, route_each, router, requests
                    )
            except Exception as exc:  # not an item's refusal: every item of it fails
                for w in group:
                    if not w.future.done():
                        w.future.set_exception(exc)
                continue
            self._count(len(group))
            for w, result in zip(group, results, strict=True):
                if w.future.done():  # a client that went away
                    continue
                if isinstance(result, UserInputError):
                    w.future.set_exception(result)
                else:
                    w.future.set_result(result)


def _release(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)
