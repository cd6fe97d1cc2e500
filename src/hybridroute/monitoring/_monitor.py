"""The live guarantee: auto-route precision from audited outcomes, safe to read at any time."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any

import numpy as np

from ..calibration import label_mix_departure
from ..calibration._base import check_fraction
from ._confseq import (
    BettingConfidenceSequence,
    BettingDropTest,
    _as_observations,
    _check_delta,
)

__all__ = [
    "MONITOR_STATES",
    "PrecisionMonitor",
    "TrafficShift",
    "labels_to_certify",
    "traffic_shift",
]

#: The states of :class:`PrecisionMonitor`, in the order a healthy deployment meets them.
MONITOR_STATES = ("insufficient", "holding", "certified_online", "breach")

# labels_to_certify gives up past this many labels (a target this close to 1 is not
# something a monitor can certify in practice).
_MAX_LABELS = 200_000


def _check_target(target: Any) -> float:
    return check_fraction(target, "target")


@lru_cache(maxsize=64)
def labels_to_certify(target: float, delta: float = 0.05, grid: int = 1000) -> int:
    """Fewest labels after which even a perfect stream certifies ``target``.

    The number of consecutive correct labels (unit weight) after which the lower end of
    :class:`BettingConfidenceSequence` ``(delta, grid)`` first exceeds ``target``. No
    stream certifies sooner: all-correct labels give every gambler betting on a higher
    precision its largest possible gain. Below this many labels a monitor is
    ``insufficient``.

    Parameters
    ----------
    target : float in (0, 1)
    delta : float in (0, 1), default 0.05
    grid : int, default 1000

    Raises
    ------
    ValueError
        If ``target`` or ``delta`` is outside (0, 1), or ``target`` is so close to 1 that
        the grid cannot resolve it or more than 200,000 labels would be needed.
    """
    target = _check_target(target)
    cs = BettingConfidenceSequence(delta=delta, grid=grid)
    if target >= cs.grid_[-2]:
        raise ValueError(
            f"target {target} is too close to 1 for a grid of {grid} points "
            f"(the highest certifiable target is below {cs.grid_[-2]:.6f})"
        )
    block = 256
    while cs.n < _MAX_LABELS:
        lower, _ = cs.trace(np.ones(block))
        above = np.flatnonzero(lower > target)
        if above.size:
            return int(cs.n - block + above[0] + 1)
        block = min(block * 2, 8192)
    raise ValueError(
        f"target {target} needs more than {_MAX_LABELS} labels to certify at delta {delta}"
    )


def _as_time(at: datetime | str | None) -> str | None:
    if at is None:
        return None
    if isinstance(at, datetime):
        return at.isoformat()
    if isinstance(at, str):
        return at
    raise ValueError(f"a detection time must be a datetime, an ISO string or None, got {at!r}")


class PrecisionMonitor:
    """Is a router's auto-route precision still at least ``target``? Ask after every label.

    Feed it the audited outcomes of one router version's auto-routed decisions, in the
    order they arrived (``1`` = the audit found the routed destination correct). It keeps
    two anytime-valid procedures over the same labels, each at level ``delta``, because
    they answer different questions:

    * a :class:`BettingConfidenceSequence` for one constant auto-route precision ``p``:
      the ``precision`` estimate and its ``lower`` / ``upper`` bounds, and
      ``certified_online``;
    * a :class:`~hybridroute.monitoring._confseq.BettingDropTest` of ``H0: the precision
      is at least target at every label`` (the monitor's :attr:`detector_`), which bets
      only on *recent* labels (span ``window``), so a large drop is found within about a
      hundred labels of the change however long the stream was healthy before (a small
      one, or one after a long healthy phase close to the target, takes longer; see
      :class:`~hybridroute.monitoring._confseq.BettingDropTest`): ``breach``.

    States:

    ``insufficient``
        fewer labels than :func:`labels_to_certify` -- even a perfect stream could not
        have certified the target yet (or fewer than ``min_labels``, if larger);
    ``holding``
        enough labels, not certified and no breach detected;
    ``certified_online``
        the lower bound of the confidence sequence exceeds the target;
    ``breach``
        the drop test's capital reached ``1/delta``: the labels are incompatible with a
        precision of at least ``target`` throughout. The label count and time of the first
        detection are kept and the state stays ``breach`` (a fresh monitor, e.g. for a
        recalibrated version, starts over). A breach is reported as soon as it is
        detected, even while labels are otherwise insufficient. ``breach`` is decided by
        the drop test alone: the confidence sequence's upper bound may lie below the
        target (it assumes a constant precision and can shrink around an old value)
        without that being reported as a breach.

    **What each state guarantees.** Reading the state after every label does not inflate
    either error:

    * ``P(breach is ever reported) <= delta`` whenever, at every label, the precision of
      the auto-routed traffic given everything before it is at least ``target`` -- it may
      drift up and down in any way that stays at or above the target (with the weights
      ``w = π_min / π`` described in :class:`BettingConfidenceSequence`, the precision of
      *all* auto-routed traffic, not only the audited items);
    * ``P(certified_online is ever reported) <= delta`` on a stationary stream with
      ``p <= target`` (see :class:`BettingConfidenceSequence` for the exact conditions,
      weights included).

    Each bound is at ``delta`` on its own; no joint statement is made (the two can both
    be wrong on one stream only when ``p = target`` exactly, with probability at most
    ``2 delta`` by the union bound).

    Parameters
    ----------
    target : float in (0, 1)
        The precision the policy was certified for.
    delta : float in (0, 1), default 0.05
    min_labels : int, optional
        A floor on the labels before ``holding`` / ``certified_online`` may be reported;
        the computed minimum applies when it is larger.
    grid : int, default 1000
        Resolution of the confidence sequence.
    window : int, default 200
        Span, in labels, of the recent averages the drop test bets from: smaller finds a
        large drop sooner and bets more noisily, which slows the detection of a small drop
        (the ``delta`` bound holds for any value; the default is justified in
        :class:`~hybridroute.monitoring._confseq.BettingDropTest`).

    Attributes
    ----------
    sequence_ : BettingConfidenceSequence
        The confidence sequence behind ``precision`` and ``certified_online``.
    detector_ : BettingDropTest
        The drop test behind ``breach``.
    required_labels_ : int
        Labels before ``holding`` / ``certified_online`` may be reported.
    breach_labels_, breach_at_ : int or None, str or None
        Label count and time of the first detection.

    Examples
    --------
    >>> mon = PrecisionMonitor(target=0.9, delta=0.05)
    >>> mon.status
    'insufficient'
    >>> mon.update_many([1] * 300).status
    'certified_online'
    >>> mon.update_many([1, 1, 0, 1] * 40).status  # precision 0.75 for 160 labels
    'breach'
    """

    def __init__(
        self,
        target: float,
        delta: float = 0.05,
        *,
        min_labels: int | None = None,
        grid: int = 1000,
        window: int = 200,
    ) -> None:
        self.target = _check_target(target)
        self.delta = _check_delta(delta)
        if min_labels is not None and (
            isinstance(min_labels, bool)
            or not isinstance(min_labels, (int, np.integer))
            or min_labels < 0
        ):
            raise ValueError(f"min_labels must be a non-negative integer, got {min_labels!r}")
        self.min_labels = min_labels
        self.grid = grid
        self.window = window
        self.sequence_ = BettingConfidenceSequence(delta=self.delta, grid=grid)
        self.detector_ = BettingDropTest(self.target, self.delta, window=window)
        self.required_labels_ = max(
            labels_to_certify(self.target, self.delta, self.sequence_.grid),
            int(min_labels or 0),
        )
        self.breach_labels_: int | None = None
        self.breach_at_: str | None = None

    # -- updating --------------------------------------------------------------------

    def update(
        self, correct: float, weight: float = 1.0, *, at: datetime | str | None = None
    ) -> PrecisionMonitor:
        """Add one audited outcome; returns ``self``.

        Parameters
        ----------
        correct : float
            ``1`` if the audit found the auto-routed destination correct, else ``0``.
        weight : float, default 1.0
            ``π_min / π`` for the decision's inclusion probability ``π`` (see
            :meth:`update_many`).
        at : datetime or ISO string, optional
            When the outcome arrived; recorded if this label first detects a breach.
        """
        return self.update_many([correct], [weight], times=[at])

    def update_many(
        self,
        corrects: Iterable[float],
        weights: Iterable[float] | float | None = None,
        *,
        times: Sequence[datetime | str | None] | None = None,
    ) -> PrecisionMonitor:
        """Add audited outcomes in arrival order; returns ``self``.

        Parameters
        ----------
        corrects : iterable of 0/1 (or scores in [0, 1])
        weights : float, iterable of float in (0, 1], or None
            ``π_min / π_i`` for inclusion probability ``π_i`` (see
            :class:`BettingConfidenceSequence`); None for a constant audit rate.
        times : sequence of datetime or ISO string, optional
            When each outcome arrived; the one at which a breach is first detected is
            recorded.

        Raises
        ------
        ValueError
            On an outcome outside [0, 1] or NaN, a weight outside (0, 1], or ``times`` of
            the wrong length or type; nothing is added then.
        """
        xs = list(corrects)
        stamps: list[str | None] | None = None
        if times is not None:
            if len(times) != len(xs):
                raise ValueError(f"times has {len(times)} entries for {len(xs)} outcomes")
            stamps = [_as_time(t) for t in times]  # checked before anything is added
        x, w = _as_observations(xs, weights)  # checked once, before anything is added
        start = self.detector_.n
        self.sequence_.update_many(x, w)
        self.detector_.update_many(x, w)
        found = self.detector_.rejected_at_
        if self.breach_labels_ is None and found is not None:
            self.breach_labels_ = found
            self.breach_at_ = stamps[found - start - 1] if stamps is not None else None
        return self

    # -- reading ---------------------------------------------------------------------

    @property
    def labels(self) -> int:
        """Audited outcomes seen."""
        return self.sequence_.n

    @property
    def status(self) -> str:
        """One of :data:`MONITOR_STATES`."""
        if self.breach_labels_ is not None:
            return "breach"
        if self.labels < self.required_labels_:
            return "insufficient"
        if self.sequence_.lower > self.target:
            return "certified_online"
        return "holding"

    def to_dict(self) -> dict[str, Any]:
        """The JSON form ``hybridroute monitor --json`` prints (``None`` for no estimate)."""
        estimate = self.sequence_.estimate
        breach = (
            None
            if self.breach_labels_ is None
            else {"labels": self.breach_labels_, "at": self.breach_at_}
        )
        return {
            "status": self.status,
            "labels": self.labels,
            "precision": {
                "estimate": None if math.isnan(estimate) else estimate,
                "lower": self.sequence_.lower,
                "upper": self.sequence_.upper,
            },
            "target": self.target,
            "delta": self.delta,
            "breach": breach,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class TrafficShift:
    """How live traffic's predicted labels moved from a reference (calibration) mix.

    Attributes
    ----------
    total_variation : float
        ``0.5 * Σ |p_ref - p_live|`` over predicted labels, out-of-scope included (the
        same number :func:`hybridroute.calibration.label_mix_departure` reports).
    oos_reference, oos_live : float
        Out-of-scope share of the reference and of live traffic.
    oos_difference : float
        ``oos_live - oos_reference`` (positive: more out-of-scope traffic than calibrated
        for).
    n_live : int
        Live decisions counted.
    """

    total_variation: float
    oos_reference: float
    oos_live: float
    oos_difference: float
    n_live: int

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready form (the fields by name)."""
        return dataclasses.asdict(self)


def _shares(counts: Mapping[str, float] | Iterable[str]) -> dict[str, float]:
    if isinstance(counts, Mapping):
        raw = {str(k): float(v) for k, v in counts.items()}
    else:
        raw = {}
        for label in counts:
            raw[str(label)] = raw.get(str(label), 0.0) + 1.0
    total = sum(raw.values())
    return {k: v / total for k, v in raw.items()} if total > 0 else {}


def traffic_shift(
    reference: Mapping[str, float] | Iterable[str],
    live: Mapping[str, float] | Iterable[str],
    *,
    out_of_scope: str = "oos",
) -> TrafficShift:
    """Shift of live traffic's predicted-label mix and out-of-scope share vs a reference.

    Parameters
    ----------
    reference : mapping of label to count or share, or iterable of labels
        Usually the calibration label mix a policy records.
    live : mapping of label to count, or iterable of predicted labels
        Live decisions' predicted labels, out-of-scope abstentions as ``out_of_scope``.
    out_of_scope : str, default "oos"
        The label that stands for out-of-scope.

    Raises
    ------
    ValueError
        If either mix is empty or has a negative or non-finite count.
    """
    # an iterable is read once, so both numbers below see the same labels
    if not isinstance(reference, Mapping):
        reference = list(reference)
    if not isinstance(live, Mapping):
        live = list(live)
    departure = label_mix_departure(reference, live)
    ref = _shares(reference)
    obs = _shares(live)
    oos_ref = ref.get(out_of_scope, 0.0)
    oos_live = obs.get(out_of_scope, 0.0)
    return TrafficShift(
        total_variation=departure.total_variation,
        oos_reference=oos_ref,
        oos_live=oos_live,
        oos_difference=oos_live - oos_ref,
        n_live=departure.n_observed,
    )
