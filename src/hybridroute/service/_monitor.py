"""The live guarantee as the service shows it: ``GET /v1/monitor``, gauges, the status page.

:func:`hybridroute.monitoring.monitor_log` over the live router version's audited
decisions, against the target and ``delta`` its policy promises, kept up to date by a
:class:`~hybridroute.monitoring._from_log.LogMonitor`: each recompute reads only the rows
logged since the last (plus the overlap a PostgreSQL log needs), so its cost follows the
traffic, not the size of the log. It runs on a thread, on a connection of its own, and at
most once per :data:`REFRESH_S` (a scrape of ``/metrics`` or a look at the status page in
between gets the last result).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

__all__ = ["REFRESH_S", "MonitorCache"]

#: Seconds a computed monitor state is served before it is computed again.
REFRESH_S = 30.0


class MonitorCache:
    """The latest monitor state of the live router version, recomputed when stale."""

    def __init__(self) -> None:
        self._state: dict[str, Any] | None = None
        self._at = 0.0
        self._key: tuple[str, str] | None = None
        self._lock = asyncio.Lock()
        self._monitor: Any = None  # the LogMonitor of the live version (of _key)

    @property
    def last(self) -> dict[str, Any] | None:
        """The last state computed (``None`` before the first)."""
        return self._state

    async def get(self, service: Any, *, fresh: bool = False) -> dict[str, Any]:
        """The state for the live version (computed on a thread when stale or ``fresh``)."""
        live = service.routers.current.live
        key = (live.name, live.version)
        async with self._lock:
            stale = time.monotonic() - self._at > REFRESH_S or key != self._key
            if self._state is None or stale or fresh:
                if key != self._key:
                    self._monitor = None  # another version: its state starts afresh
                state, self._monitor = await asyncio.to_thread(
                    compute_kept, service, live, self._monitor
                )
                self._state = state
                self._at, self._key = time.monotonic(), key
                service.metrics.set_monitor(state)
                return state
            return self._state


def compute(service: Any, live: Any) -> dict[str, Any]:
    """The monitor state of ``live`` (blocking), or why there is none, read afresh."""
    return compute_kept(service, live, None)[0]


def compute_kept(service: Any, live: Any, kept: Any) -> tuple[dict[str, Any], Any]:
    """The monitor state of ``live`` (blocking), or why there is none, and the
    :class:`~hybridroute.monitoring._from_log.LogMonitor` that keeps it (``kept``, or a new
    one), to hand back next time."""
    from ..monitoring._from_log import LogMonitor

    base = {"router": live.name, "router_version": live.version}
    if not service.config.audit_rate:
        return {
            **base,
            "status": "unavailable",
            "reason": "this service audits nothing (start it with --audit-rate)",
        }, None
    target, delta = live.policy.get("target"), live.policy.get("delta")
    if target is None or delta is None:
        reason = "the live policy promises no target"
        return {**base, "status": "unavailable", "reason": reason}, None
    if kept is None:
        kept = LogMonitor(
            target=float(target),
            delta=float(delta),
            router_version=live.version,
            reference=live.router.policy.calibration_data,
            routers=(live.router,),
        )
    log = service.config.open_log()
    try:
        state = kept.update(log)
    except ValueError as exc:  # no audited decision of this version (yet)
        return {**base, "status": "unavailable", "reason": str(exc)}, kept
    finally:
        log.close()
    return {**base, **state}, kept
