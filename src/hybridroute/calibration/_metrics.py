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
from .techniques._base import Curve as _Curve

__all__ = [
    "DEFAULT_ECE_BINS",
    "ReliabilityDiagram",
    "RiskCoverageCurve",
    "aurc",
    "aurc_from_blocks",
    "brier_score",
    "coverage_at",
    "ece_from_bin_sums",
    "excess_aurc",
    "expected_calibration_error",
    "negative_log_likelihood",
    "precision_at",
    "reliability_diagram",
    "risk_coverage_curve",
    "width_bin_sums",
]

_BINNINGS = ("width", "mass")
#: Equal-width bins of the reported ECE (every evaluation path uses this many).
DEFAULT_ECE_BINS = 15


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
        Items in each bin (every bin kept holds at least one).
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


def _check_bins(n_bins: Any) -> int:
    if int(n_bins) != n_bins or n_bins < 1:
        raise ValueError(f"n_bins must be a positive integer, got {n_bins!r}")
    return int(n_bins)


def _width_sums(s: np.ndarray, c: np.ndarray, n_bins: int) -> tuple[np.ndarray, ...]:
    idx = np.clip(np.floor(s * n_bins).astype(int), 0, n_bins - 1)
    return (
        np.bincount(idx, minlength=n_bins),
        np.bincount(idx, weights=s, minlength=n_bins),
        np.bincount(idx, weights=c.astype(float), minlength=n_bins),
    )


def width_bin_sums(
    confidence: Any, correct: Any, n_bins: int = DEFAULT_ECE_BINS
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per equal-width bin over [0, 1]: the item count, the sum of the confidences and the
    number correct (a confidence of exactly 1 falls in the last bin).

    The sums of several batches add up to the sums of their union, so a streamed
    evaluation accumulates them and calls :func:`ece_from_bin_sums` at the end.
    """
    s, c = _conf_correct(confidence, correct)
    count, conf_sum, correct_sum = _width_sums(s, c, _check_bins(n_bins))
    return count, conf_sum, correct_sum


def ece_from_bin_sums(count: Any, confidence_sum: Any, correct_sum: Any) -> float:
    """ECE from per-bin sums: ``sum_b |correct_b - confidence_b| / sum_b count_b``.

    The one ECE formula: the item-weighted mean over bins of ``|accuracy - confidence|``
    (``count_b * |correct_b / count_b - confidence_b / count_b|`` summed). ``nan`` when no
    bin holds an item.
    """
    total = float(np.sum(count))
    if total == 0:
        return math.nan
    gaps = np.abs(np.asarray(correct_sum, dtype=float) - np.asarray(confidence_sum, dtype=float))
    return float(np.sum(gaps) / total)


def reliability_diagram(
    confidence: Any, correct: Any, n_bins: int = DEFAULT_ECE_BINS, binning: str = "width"
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
    n_bins = _check_bins(n_bins)
    if binning not in _BINNINGS:
        raise ValueError(f"binning must be one of {_BINNINGS}, got {binning!r}")
    lo: list[float] = []
    hi: list[float] = []
    cnt: list[int] = []
    conf: list[float] = []
    acc: list[float] = []
    if binning == "width":
        count, conf_sum, correct_sum = _width_sums(s, c, n_bins)
        for b in np.flatnonzero(count).tolist():
            lo.append(b / n_bins)
            hi.append((b + 1) / n_bins)
            cnt.append(int(count[b]))
            conf.append(float(conf_sum[b] / count[b]))
            acc.append(float(correct_sum[b] / count[b]))
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
    confidence: Any, correct: Any, n_bins: int = DEFAULT_ECE_BINS, binning: str = "width"
) -> float:
    """ECE: the item-weighted mean of ``|accuracy - confidence|`` over bins.

    ``binning="width"`` gives the usual equal-width ECE (15 bins by default);
    ``binning="mass"`` the equal-mass (adaptive) variant. Both go through
    :func:`ece_from_bin_sums`, as the streamed evaluation does.

    Parameters
    ----------
    confidence : array-like of float, shape (n_items,)
        Top-label scores, finite and expected in [0, 1] (with equal-width bins a value
        outside falls in the first or last bin).
    correct : array-like of bool or 0/1, shape (n_items,)
        Whether each item's top label was right.
    n_bins : int, default 15
        Number of bins (:data:`DEFAULT_ECE_BINS`, which every evaluation path reports);
        equal-mass binning uses at most one bin per item.
    binning : {"width", "mass"}, default "width"
        Equal-width bins over [0, 1], or bins holding (nearly) equal numbers of items.

    Returns
    -------
    float
        In [0, 1]; 0 is perfectly calibrated.

    Raises
    ------
    ValueError
        If the inputs are empty, differ in length, hold a non-finite confidence or a
        non-boolean ``correct``, or ``n_bins`` / ``binning`` is invalid.
    """
    if binning == "width":
        return ece_from_bin_sums(*width_bin_sums(confidence, correct, n_bins))
    d = reliability_diagram(confidence, correct, n_bins=n_bins, binning=binning)
    return ece_from_bin_sums(d.count, d.count * d.confidence, d.count * d.accuracy)


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
    """Mean ``-log p(true class)``; probabilities are clipped at ``eps``.

    Parameters
    ----------
    proba : array-like of float, shape (n_items, n_classes)
        Predicted probabilities, finite and non-negative, ``n_classes >= 2`` (rows are not
        renormalised).
    y : array-like of int, shape (n_items,)
        True class indices (columns of ``proba``), in ``[0, n_classes)``.
    eps : float, default 1e-12
        Floor of the true class's probability, so a zero gives ``-log(eps)`` rather than
        infinity.

    Returns
    -------
    float
        In nats; lower is better.

    Raises
    ------
    ValueError
        If ``proba`` is not a non-empty 2-d array of finite non-negative values, a class
        index is out of range, or the lengths differ.
    """
    p = as_proba(proba)
    yy = as_class_index(y, p.shape[1])
    same_length(proba=p, y=yy)
    return float(-np.mean(np.log(np.clip(p[np.arange(len(yy)), yy], eps, None))))


@dataclass(frozen=True, slots=True)
class RiskCoverageCurve:
    """Risk (error rate among accepted) and coverage at every distinct threshold.

    Ordered from the highest threshold (lowest coverage) to the lowest (full coverage).

    Parameters
    ----------
    thresholds : ndarray
        The distinct confidences, descending; an item is accepted at a threshold when its
        confidence is at or above it.
    coverage : ndarray
        Share of all items accepted at each threshold, in (0, 1]; the last is 1.
    risk : ndarray
        Error rate among the accepted items at each threshold, in [0, 1].
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
    return aurc_from_blocks(np.diff(np.r_[0, curve.accepted]), np.diff(np.r_[0, curve.errors]))


def aurc_from_blocks(count: Any, errors: Any) -> float:
    """AURC from blocks of tied confidences, most confident block first.

    The one AURC formula: each block is accepted whole, so each of its ``count`` items
    takes the risk (error rate) of everything accepted up to and including the block;
    AURC is the item-weighted mean of that risk. :func:`aurc` passes one block per
    distinct confidence (exact); the streamed evaluation one per histogram bin. ``nan``
    when no block holds an item.
    """
    count = np.asarray(count, dtype=float)
    errors = np.asarray(errors, dtype=float)
    keep = count > 0
    if not keep.any():
        return math.nan
    sizes = count[keep]
    accepted = np.cumsum(sizes)
    risk = np.cumsum(errors[keep]) / accepted
    return float(np.sum(sizes * risk) / accepted[-1])


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
    """Share correct among items at or above ``threshold`` (``nan`` when none pass).

    Parameters
    ----------
    confidence : array-like of float, shape (n_items,)
        Top-label scores, finite.
    correct : array-like of bool or 0/1, shape (n_items,)
        Whether each item's top label was right.
    threshold : float
        Items with ``confidence >= threshold`` count as accepted.

    Returns
    -------
    float
        The precision among accepted items, or ``nan`` when none is accepted.

    Raises
    ------
    ValueError
        If the inputs are empty, differ in length, hold a non-finite confidence or a
        non-boolean ``correct``.
    """
    s, c = _conf_correct(confidence, correct)
    passed = s >= threshold
    return float(c[passed].mean()) if passed.any() else math.nan
