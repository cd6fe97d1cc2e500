"""Precision thresholds: the empirical baseline, the certified one, and the margin variant.

All three are fitted on ``(scores, correct)`` from a calibration split: ``scores`` is what
the threshold is compared with (the calibrated top-label confidence, or the top-1/top-2
margin), ``correct`` whether the top label was right. An item is auto-routed when its
score is at least ``threshold_``; ``threshold_ = inf`` routes nothing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ._base import (
    _Estimator,
    as_flags,
    as_scores,
    check_fraction,
    jsonable_threshold,
    same_length,
)
from ._bounds import (
    _smallest_planned_size,
    clopper_pearson_lower,
    precision_p_value,
    required_calibration_size,
)

__all__ = [
    "CertifiedPrecisionThreshold",
    "EmpiricalThreshold",
    "MarginThreshold",
    "ThresholdFitter",
]


@dataclass(frozen=True, slots=True)
class _Curve:
    """Selective statistics at every distinct score, highest score first."""

    thresholds: np.ndarray  # distinct scores, descending
    accepted: np.ndarray  # items with score >= threshold
    errors: np.ndarray  # wrong items among them
    n: int

    @classmethod
    def build(cls, scores: np.ndarray, correct: np.ndarray) -> _Curve:
        order = np.argsort(-scores, kind="stable")
        s = scores[order]
        wrong = np.cumsum(~correct[order])
        # the last position of each run of equal scores closes that threshold's set
        last = np.flatnonzero(np.r_[s[1:] != s[:-1], True])
        return cls(s[last], last + 1, wrong[last], len(s))

    @classmethod
    def on_grid(cls, scores: np.ndarray, correct: np.ndarray, grid: np.ndarray) -> _Curve:
        grid = np.unique(np.asarray(grid, dtype=float))[::-1]
        s = np.sort(scores)
        wrong_sorted = np.cumsum((~correct[np.argsort(scores, kind="stable")])[::-1])[::-1]
        first = np.searchsorted(s, grid, side="left")  # items at index >= first pass
        accepted = len(s) - first
        errors = np.where(first < len(s), wrong_sorted[np.minimum(first, len(s) - 1)], 0)
        return cls(grid, accepted.astype(int), errors.astype(int), len(s))

    @property
    def precision(self) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(self.accepted > 0, 1.0 - self.errors / self.accepted, np.nan)


class ThresholdFitter(_Estimator):
    """Base of the single-threshold fitters: ``predict`` and the shared fitted attributes.

    Fitted attributes common to all of them: ``threshold_`` (``inf`` routes nothing),
    ``coverage_`` and ``precision_`` (on the calibration data; ``precision_`` is ``nan``
    when nothing is accepted), ``n_calibration_``.
    """

    #: The score the threshold is compared with: ``confidence`` or ``margin``.
    score_name: str = "confidence"

    def fit(self, scores: Any, correct: Any) -> ThresholdFitter:  # pragma: no cover
        raise NotImplementedError

    def predict(self, scores: Any) -> np.ndarray:
        """Boolean array: which items pass the threshold (are auto-routed)."""
        self._check_fitted("threshold_")
        s = as_scores(scores, allow_empty=True)
        return s >= self.threshold_

    def _set_common(self, curve: _Curve, index: int | None) -> None:
        if index is None:
            self.threshold_ = math.inf
            self.coverage_ = 0.0
            self.precision_ = math.nan
            self.n_accepted_ = 0
        else:
            self.threshold_ = float(curve.thresholds[index])
            self.n_accepted_ = int(curve.accepted[index])
            self.coverage_ = self.n_accepted_ / curve.n
            self.precision_ = (
                1.0 - curve.errors[index] / curve.accepted[index]
                if curve.accepted[index]
                else math.nan
            )
        self.n_calibration_ = curve.n

    def _record_certificate(
        self,
        curve: _Curve,
        best: int | None,
        level: float,
        target: float,
        plan: tuple[float, int],
    ) -> None:
        """The fitted state of a certifying fit whose lowest certified candidate is ``best``.

        ``level`` is the level ``best`` was certified at (its bound's); ``plan`` is the level
        and zero-error minimum the "why not" text plans with when nothing was certified.
        """
        self.reason_: str | None = None
        self.required_size_: int | None = None
        self._set_common(curve, best)
        if best is None:
            self.certified_ = False
            self.bound_ = math.nan
            self.reason_, self.required_size_ = _why_not(curve, target, *plan)
        else:
            self.certified_ = True
            self.bound_ = float(
                clopper_pearson_lower(
                    curve.accepted[best] - curve.errors[best], curve.accepted[best], level
                )
            )

    def _validate(self, scores: Any, correct: Any) -> tuple[np.ndarray, np.ndarray]:
        s = as_scores(scores)
        c = as_flags(correct)
        same_length(scores=s, correct=c)
        return s, c

    def summary(self) -> dict[str, Any]:
        """The fitted state as plain JSON values (what a policy artifact records)."""
        self._check_fitted("threshold_")
        out: dict[str, Any] = {
            "method": self.method,
            "params": {k: v for k, v in self.get_params(deep=False).items() if _plain(v)},
            "score": self.score_name,
            "threshold": jsonable_threshold(self.threshold_),
            "calibration_size": self.n_calibration_,
            "coverage": self.coverage_,
            "precision": None if math.isnan(self.precision_) else self.precision_,
        }
        out.update(self._extra_summary())
        return out

    def _extra_summary(self) -> dict[str, Any]:
        return {}


def _plain(v: Any) -> bool:
    return v is None or isinstance(v, (bool, int, float, str))


class EmpiricalThreshold(ThresholdFitter):
    """The lowest threshold whose *calibration* precision meets the target.

    This is the naive baseline, kept for experiments and benchmarks. It carries **no
    guarantee**: the calibration precision of the chosen set is an optimistic estimate
    (the threshold is picked where the sample happens to look good), and on fresh data
    the precision falls below target roughly half the time. Use
    :class:`CertifiedPrecisionThreshold` to route real traffic.

    Parameters
    ----------
    target : float, default 0.95
        Precision the auto-routed items should reach on the calibration data.
    """

    method = "empirical"

    def __init__(self, target: float = 0.95) -> None:
        self.target = target

    def fit(self, scores: Any, correct: Any) -> EmpiricalThreshold:
        """Fit on calibration scores and correctness flags; returns ``self``."""
        target = check_fraction(self.target, "target")
        s, c = self._validate(scores, correct)
        curve = _Curve.build(s, c)
        ok = np.flatnonzero(curve.precision >= target)
        self._set_common(curve, int(ok[-1]) if ok.size else None)
        self.certified_ = False
        return self

    def _extra_summary(self) -> dict[str, Any]:
        return {"target": float(self.target), "certified": False, "guarantee": "none"}


class CertifiedPrecisionThreshold(ThresholdFitter):
    """Threshold whose auto-routed precision is at least ``target`` with probability ``1 - delta``.

    The guarantee: over the draw of an exchangeable calibration set, the precision of
    the items the fitted threshold auto-routes -- on fresh traffic from the same
    distribution -- is below ``target`` with probability at most ``delta``.

    How (Learn-then-Test with fixed-sequence testing): each candidate threshold ``t``
    carries the null hypothesis "precision above ``t`` is below ``target``", tested with
    the exact binomial p-value of the errors among the calibration items above ``t``
    (equivalently, its one-sided Clopper–Pearson lower bound). Candidates are tested from
    the highest score downwards and testing stops at the first one not rejected; the
    lowest rejected candidate is the threshold. A fixed sequence spends the whole
    ``delta`` on one path, so no multiplicity correction is needed along it.

    The sequence starts at the first candidate that accepts enough items that a
    zero-error sample could be certified at all
    (:func:`required_calibration_size`); higher candidates can never be rejected and would
    only end the sequence. With ``n_starts > 1`` several sequences start at
    geometrically spaced accepted counts and each runs at ``delta / n_starts``
    (Bonferroni), so one unlucky high-confidence mistake near the top does not end the
    search; the lowest threshold rejected by any sequence is kept.

    The starting counts scale with ``delta`` (a smaller ``delta`` needs more items before
    anything can be certified), so thresholds fitted at two values of ``delta`` come from
    different sequences. Near the top of the score range, where a few confident mistakes
    can end a sequence, a smaller ``delta`` therefore now and then gives a *lower*
    threshold: on Banking77 and CLINC150 at target 0.98 this happened for 10–23% of
    calibration halves somewhere on a ladder from 0.05 to 0.001 (never at 0.90 or 0.95). Each
    threshold keeps its own guarantee; compare coverages at one ``delta``, not across them.

    When no candidate is rejected the target cannot be certified with this data:
    ``certified_`` is ``False``, ``reason_`` says why, ``required_size_`` estimates how
    many calibration items would be needed, and ``threshold_`` is ``inf`` (nothing is
    auto-routed rather than pretending).

    Parameters
    ----------
    target : float, default 0.95
        Precision to certify for the auto-routed items.
    delta : float, default 0.05
        Allowed probability that the certificate is wrong.
    n_starts : int, default 3
        Number of fixed sequences (Bonferroni split of ``delta``).
    grid : array-like or None, default None
        Candidate thresholds fixed in advance. ``None`` uses the distinct calibration
        scores (finest resolution).

    Attributes
    ----------
    threshold_ : float
    certified_ : bool
    bound_ : float or nan
        Clopper–Pearson lower bound on the precision at ``threshold_`` (at level
        ``delta / n_starts``).
    reason_ : str or None
    required_size_ : int or None
        Calibration size estimated to certify the target when ``certified_`` is False
        (``None`` when certified, or when the data give no hope at any size).
    p_values_ : ndarray
        The p-value of every candidate (for inspection).
    """

    method = "certified_precision"

    def __init__(
        self,
        target: float = 0.95,
        delta: float = 0.05,
        n_starts: int = 3,
        grid: Any = None,
    ) -> None:
        self.target = target
        self.delta = delta
        self.n_starts = n_starts
        self.grid = grid

    def fit(self, scores: Any, correct: Any) -> CertifiedPrecisionThreshold:
        """Fit on calibration scores and correctness flags; returns ``self``."""
        target = check_fraction(self.target, "target")
        delta = check_fraction(self.delta, "delta")
        k = self._n_starts()
        s, c = self._validate(scores, correct)
        curve = _Curve.build(s, c) if self.grid is None else _Curve.on_grid(s, c, self.grid)
        level = delta / k
        pvals = np.asarray(precision_p_value(curve.errors, curve.accepted, target), dtype=float)
        n_min = required_calibration_size(target, level)
        starts = _start_positions(curve.accepted, n_min, k)
        best: int | None = None
        for start in starts:
            i = start
            last = None
            while i < len(pvals) and pvals[i] <= level:
                last = i
                i += 1
            if last is not None and (best is None or last > best):
                best = last
        self.p_values_ = pvals
        self.level_ = level
        self._record_certificate(curve, best, level, target, (level, n_min))
        return self

    def _n_starts(self) -> int:
        if int(self.n_starts) != self.n_starts or self.n_starts < 1:
            raise ValueError(f"n_starts must be a positive integer, got {self.n_starts!r}")
        return int(self.n_starts)

    def _certifiable_count(self) -> int:
        """Fewest accepted items a zero-error calibration set could certify (the first start)."""
        target = check_fraction(self.target, "target")
        delta = check_fraction(self.delta, "delta")
        return required_calibration_size(target, delta / self._n_starts())

    def _extra_summary(self) -> dict[str, Any]:
        return {
            "target": float(self.target),
            "delta": float(self.delta),
            "certified": bool(self.certified_),
            "bound": None if math.isnan(self.bound_) else self.bound_,
            "reason": self.reason_,
            "required_calibration_size": self.required_size_,
            "guarantee": "precision >= target with probability >= 1 - delta "
            "(Clopper-Pearson, fixed-sequence testing)",
        }


def _start_positions(accepted: np.ndarray, n_min: int, k: int) -> list[int]:
    """Candidate indices where the ``k`` sequences begin (accepted counts n_min * 2**j)."""
    out: list[int] = []
    for j in range(k):
        want = n_min * (2**j)
        idx = int(np.searchsorted(accepted, want, side="left"))
        if idx < len(accepted) and idx not in out:
            out.append(idx)
    return out


#: Operating points with fewer accepted items are too noisy to plan a sample size from
#: (a perfect top-3 says nothing about the precision at useful coverage).
_MIN_PLANNING_ITEMS = 20


def _why_not(curve: _Curve, target: float, level: float, n_min: int) -> tuple[str, int | None]:
    """Reason text and an estimate of the calibration size that would certify the target."""
    n = curve.n
    if n < n_min:
        return (
            f"only {n} calibration items; certifying precision {target:g} at this confidence "
            f"needs at least {n_min} auto-routed items even with zero errors",
            n_min,
        )
    prec = curve.precision
    # Estimate from operating points that beat the target on this sample: the size at which
    # their observed precision and coverage would certify it.
    candidates = np.flatnonzero((prec > target) & (curve.accepted >= _MIN_PLANNING_ITEMS))
    best_size: int | None = None
    if candidates.size:
        pick = candidates[np.unique(np.linspace(0, candidates.size - 1, 40).astype(int))]
        best_size = _smallest_planned_size(target, level, prec[pick], curve.accepted[pick] / n)
    top = float(np.nanmax(prec)) if np.any(curve.accepted > 0) else math.nan
    if best_size is None:
        return (
            f"no threshold reaches precision {target:g} on the calibration data "
            f"(best observed {top:.4f}); more data alone will not certify it",
            None,
        )
    return (
        f"no threshold's Clopper-Pearson lower bound reaches {target:g} with {n} calibration "
        f"items; about {best_size} would be needed at the observed precision",
        best_size,
    )


class MarginThreshold(CertifiedPrecisionThreshold):
    """Certified-precision threshold on the top-1 minus top-2 score margin.

    Same procedure and guarantee as :class:`CertifiedPrecisionThreshold`, fitted on
    ``(margins, correct)``: items whose two best labels are close are held back even
    when the best one's confidence is high. In a policy it is an extra gate on top of
    the confidence threshold; an item passing confidence but failing the margin is sent
    to the user to choose between the two best labels (``low_margin``).
    """

    method = "certified_margin"
    score_name = "margin"
