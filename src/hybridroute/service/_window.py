"""The recent window the status page summarizes: the last N live decisions of this
process, and how each shadow's decision on the same requests compared.

Bounded by construction (``collections.deque`` with a ``maxlen``), so a long-running
service holds the same few kilobytes whatever its traffic. Counts are made when the page
is rendered, from the window's plain tuples.
"""

from __future__ import annotations

import threading
import time
from collections import Counter, deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .._fallback import fallback_cause
from ._metrics import segment_value

__all__ = ["RecentWindow", "ShadowSummary", "WindowSummary"]


@dataclass(frozen=True, slots=True)
class _Seen:
    at: float
    version: str
    stage: str
    destination: str
    reason_code: str
    cause: str | None
    segment: str | None


@dataclass(frozen=True, slots=True)
class _Compared:
    live_stage: str
    live_reason: str
    destination: bool
    stage: bool
    reason_code: bool


@dataclass(frozen=True, slots=True)
class ShadowSummary:
    """How one shadow version compared with live over the window."""

    version: str
    compared: int
    destination_agree: int
    stage_agree: int
    reason_agree: int
    #: disagreements on the destination, by the live decision's (stage, reason code)
    disagree_by: list[tuple[str, str, int]]


@dataclass(frozen=True, slots=True)
class WindowSummary:
    """Counts over the window, ready to render."""

    size: int
    capacity: int
    since: float | None
    by_destination: list[tuple[str, int]]
    by_reason: list[tuple[str, int]]
    by_stage: list[tuple[str, int]]
    by_version: list[tuple[str, int]]
    fallbacks: list[tuple[str, int]]
    #: (segment, decisions, ask_user, human_review)
    segments: list[tuple[str, int, int, int]]
    shadows: list[ShadowSummary]


def _ranked(counter: Counter[str]) -> list[tuple[str, int]]:
    return sorted(counter.items(), key=lambda kv: (-kv[1], kv[0]))


class RecentWindow:
    """The last ``capacity`` live decisions and the last ``capacity`` comparisons with
    each shadow version.

    Parameters
    ----------
    capacity : int
        Decisions kept (``ServiceConfig.status_window``).
    segment_fact : str, optional
        The fact the ask-user and human-review rates are broken down by.
    """

    def __init__(self, capacity: int, segment_fact: str | None) -> None:
        self.capacity = int(capacity)
        self.segment_fact = segment_fact
        self._live: deque[_Seen] = deque(maxlen=self.capacity)
        self._shadows: dict[str, deque[_Compared]] = {}
        self._lock = threading.Lock()

    def add_live(self, records: Iterable[Mapping[str, Any]]) -> None:
        """Add newly logged live decision records."""
        now = time.time()
        seen = [
            _Seen(
                at=now,
                version=str(r.get("router_version")),
                stage=str(r.get("stage")),
                destination=str(r.get("selected_destination")),
                reason_code=str(r.get("reason_code")),
                cause=fallback_cause(r),
                segment=segment_value(r, self.segment_fact),
            )
            for r in records
        ]
        with self._lock:
            self._live.extend(seen)

    def add_comparisons(
        self,
        version: str,
        live: Sequence[Mapping[str, Any]],
        shadow: Sequence[Mapping[str, Any] | None],
    ) -> None:
        """Compare a shadow's records with the live records of the same requests
        (``None``: the shadow could not route that item)."""
        out = [
            _Compared(
                live_stage=str(lv.get("stage")),
                live_reason=str(lv.get("reason_code")),
                destination=lv.get("selected_destination") == sh.get("selected_destination"),
                stage=lv.get("stage") == sh.get("stage"),
                reason_code=lv.get("reason_code") == sh.get("reason_code"),
            )
            for lv, sh in zip(live, shadow, strict=True)
            if sh is not None
        ]
        with self._lock:
            window = self._shadows.get(version)
            if window is None:
                window = self._shadows[version] = deque(maxlen=self.capacity)
            window.extend(out)

    def summary(self, shadow_versions: Iterable[str]) -> WindowSummary:
        """The window's counts; shadows listed in ``shadow_versions`` order."""
        with self._lock:
            live = list(self._live)
            compared = {v: list(self._shadows.get(v, ())) for v in shadow_versions}
        dest: Counter[str] = Counter(s.destination for s in live)
        reason: Counter[str] = Counter(s.reason_code for s in live)
        stage: Counter[str] = Counter(s.stage for s in live)
        version: Counter[str] = Counter(s.version for s in live)
        causes: Counter[str] = Counter(s.cause for s in live if s.cause is not None)
        seg: dict[str, list[int]] = {}
        for s in live:
            if s.segment is None:
                continue
            row = seg.setdefault(s.segment, [0, 0, 0])
            row[0] += 1
            row[1] += s.destination == "ask_user"
            row[2] += s.destination == "human_review"
        shadows = []
        for v, rows in compared.items():
            by: Counter[tuple[str, str]] = Counter(
                (c.live_stage, c.live_reason) for c in rows if not c.destination
            )
            shadows.append(
                ShadowSummary(
                    version=v,
                    compared=len(rows),
                    destination_agree=sum(c.destination for c in rows),
                    stage_agree=sum(c.stage for c in rows),
                    reason_agree=sum(c.reason_code for c in rows),
                    disagree_by=[
                        (st, rc, n)
                        for (st, rc), n in sorted(by.items(), key=lambda kv: (-kv[1], kv[0]))
                    ],
                )
            )
        return WindowSummary(
            size=len(live),
            capacity=self.capacity,
            since=live[0].at if live else None,
            by_destination=_ranked(dest),
            by_reason=_ranked(reason),
            by_stage=_ranked(stage),
            by_version=_ranked(version),
            fallbacks=_ranked(causes),
            segments=sorted(
                ((k, v[0], v[1], v[2]) for k, v in seg.items()), key=lambda t: (-t[1], t[0])
            ),
            shadows=shadows,
        )
