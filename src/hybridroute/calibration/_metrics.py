"""Calibration and selective-classification metrics.

Conventions: ``confidence`` is the top-label score of each item and ``correct`` whether
the top label was right; multiclass metrics take ``proba`` ``(n_items, n_classes)`` and
true class indices ``y``. "Risk" is the error rate among accepted items.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ._base import as_class_index, as_flags, as_proba, as_scores, same_length
from ._precision import _Curve

__all__ = [
    "ReliabilityDiagram",
    "RiskCoverageCurve",
    "aurc",
    "brier_score",
    "coverage_at",
    "excess_aurc",
    "expected_calibration_error",
    "negative_log_likelihood",
    "precision_at",
    "reliability_diagram",
    "risk_coverage_curve",
]

_BINNINGS = ("width", "mass")


def _conf_correct(confidence: Any, correct: Any) -> tuple[np.ndarray, np.ndarray]:
    s = as_scores(confidence, "confidence")
    c = as_flags(correct)
    same_length(confidence=s, correct=c)
    return s, c


@dataclass(frozen=True, slots=True)
class ReliabilityDiagram:
    """Per-bin data of a reliability diagram (empty bins are left out).

    Attributes
    ----------
    lower, upper : ndarray
        Bin edges (for equal-mass bins, the smallest and largest confidence in the bin).
    count : ndarray
    confidence : ndarray
        Mean confidence in each bin.
    accuracy : ndarray
        Share correct in each bin.
    binning : str
        ``width`` or ``mass``.
    """

    lower: np.ndarray
    upper: np.ndarray
    count: np.ndarray
    confidence: np.ndarray
    accuracy: np.ndarray
    binning: str

    @property
    def gap(self) -> np.ndarray:
        """Accuracy minus confidence per bin (negative: over-confident)."""
        return self.accuracy - self.confidence

    def to_dict(self) -> dict[str, Any]:
        """Plain lists, for JSON and plotting."""
        return {
            "binning": self.binning,
            "lower": self.lower.tolist(),
            "upper": self.upper.tolist(),
            "count": self.count.tolist(),
            "confidence": self.confidence.tolist(),
            "accuracy": self.accuracy.tolist(),
        }


def reliability_diagram(
    confidence: Any, correct: Any, n_bins: int = 15, binning: str = "width"
) -> ReliabilityDiagram:
    """Bin items by confidence and compare mean confidence with accuracy per bin.

    Parameters
    ----------
    confidence, correct : array-like
    n_bins : int, default 15
    binning : {"width", "mass"}
        ``width``: equal-width bins over [0, 1] (a confidence of exactly 1 falls in the
        last bin). ``mass``: bins holding (nearly) equal numbers of items, by sorted
        confidence.
    """
    s, c = _conf_correct(confidence, correct)
    if int(n_bins) != n_bins or n_bins < 1:
        raise ValueError(f"n_bins must be a positive integer, got {n_bins!r}")
    if binning not in _BINNINGS:
        raise ValueError(f"binning must be one of {_BINNINGS}, got {binning!r}")
    n_bins = int(n_bins)
    lo, hi, cnt, conf, acc = [], [], [], [], []
    if binning == "width":
        idx = np.clip(np.floor(s * n_bins).astype(int), 0, n_bins - 1)
        for b in range(n_bins):
            m = idx == b
            if m.any():
                lo.append(b / n_bins)
                hi.append((b + 1) / n_bins)
                cnt.append(int(m.sum()))
                conf.append(float(s[m].mean()))
                acc.append(float(c[m].mean()))
    else:
        order = np.argsort(s, kind="stable")
        for part in np.array_split(order, min(n_bins, len(s))):
            lo.append(float(s[part].min()))
            hi.append(float(s[part].max()))
            cnt.append(len(part))
            conf.append(float(s[part].mean()))
            acc.append(float(c[part].mean()))
    return ReliabilityDiagram(
        np.array(lo), np.array(hi), np.array(cnt), np.array(conf), np.array(acc), binning
    )


def expected_calibration_error(
    confidence: Any, correct: Any, n_bins: int = 15, binning: str = "width"
) -> float:
    """ECE: the item-weighted mean of ``|accuracy - confidence|`` over bins.

    ``binning="width"`` gives the usual equal-width ECE (15 bins by default);
    ``binning="mass"`` the equal-mass (adaptive) variant.
    """
    d = reliability_diagram(confidence, correct, n_bins=n_bins, binning=binning)
    return float(np.sum(d.count * np.abs(d.accuracy - d.confidence)) / np.sum(d.count))


def brier_score(proba: Any, y: Any) -> float:
    """Brier score.

    With ``proba`` of shape ``(n, k)`` and class indices ``y``: the mean over items of the
    squared distance between the probability row and the one-hot truth (0 best, 2 worst).
    With a 1-d ``proba`` (a top-label confidence) and boolean ``y`` (correct): the mean of
    ``(confidence - correct)**2``.
    """
    arr = np.asarray(proba, dtype=float)
    if arr.ndim == 1:
        s, c = _conf_correct(arr, y)
        return float(np.mean((s - c) ** 2))
    p = as_proba(arr)
    yy = as_class_index(y, p.shape[1])
    same_length(proba=p, y=yy)
    onehot = np.zeros_like(p)
    onehot[np.arange(len(yy)), yy] = 1.0
    return float(np.mean(np.sum((p - onehot) ** 2, axis=1)))


def negative_log_likelihood(proba: Any, y: Any, eps: float = 1e-12) -> float:
    """Mean ``-log p(true class)``; probabilities are clipped at ``eps``."""
    p = as_proba(proba)
    yy = as_class_index(y, p.shape[1])
    same_length(proba=p, y=yy)
    return float(-np.mean(np.log(np.clip(p[np.arange(len(yy)), yy], eps, None))))


@dataclass(frozen=True, slots=True)
class RiskCoverageCurve:
    """Risk (error rate among accepted) and coverage at every distinct threshold.

    Ordered from the highest threshold (lowest coverage) to the lowest (full coverage).
    """

    thresholds: np.ndarray
    coverage: np.ndarray
    risk: np.ndarray

    def to_dict(self) -> dict[str, Any]:
        return {
            "thresholds": self.thresholds.tolist(),
            "coverage": self.coverage.tolist(),
            "risk": self.risk.tolist(),
        }


def risk_coverage_curve(confidence: Any, correct: Any) -> RiskCoverageCurve:
    """The risk–coverage curve of accepting items at or above each distinct confidence."""
    s, c = _conf_correct(confidence, correct)
    curve = _Curve.build(s, c)
    return RiskCoverageCurve(
        curve.thresholds.copy(), curve.accepted / curve.n, curve.errors / curve.accepted
    )


def aurc(confidence: Any, correct: Any) -> float:
    """Area under the risk–coverage curve (lower is better).

    The mean, over ``k = 1..n``, of the error rate among the ``k`` most confident items;
    tied confidences are accepted together, so each position of a tie takes the risk of
    the whole tied set (the result does not depend on the order of ties).
    """
    s, c = _conf_correct(confidence, correct)
    curve = _Curve.build(s, c)
    risk = curve.errors / curve.accepted
    sizes = np.diff(np.r_[0, curve.accepted])
    return float(np.sum(sizes * risk) / curve.n)


def excess_aurc(confidence: Any, correct: Any) -> float:
    """AURC minus the AURC of a perfect ranking with the same errors (0 is ideal)."""
    s, c = _conf_correct(confidence, correct)
    n = len(s)
    e = int(np.sum(~c))
    k = np.arange(1, n + 1)
    optimal = float(np.mean(np.maximum(0, k - (n - e)) / k))
    return aurc(s, c) - optimal


def coverage_at(confidence: Any, threshold: float) -> float:
    """Share of items at or above ``threshold``."""
    s = as_scores(confidence, "confidence")
    return float(np.mean(s >= threshold))


def precision_at(confidence: Any, correct: Any, threshold: float) -> float:
    """Share correct among items at or above ``threshold`` (``nan`` when none pass)."""
    s, c = _conf_correct(confidence, correct)
    passed = s >= threshold
    return float(c[passed].mean()) if passed.any() else math.nan
