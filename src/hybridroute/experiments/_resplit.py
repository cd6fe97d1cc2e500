"""The numerical pieces the resplit experiments share: seeds, halves, calibrators, summaries."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..calibration import IsotonicCalibration, TemperatureScaling
from ..datasets import make_splits

__all__ = [
    "CALIBRATORS",
    "auroc",
    "calibrate",
    "divide",
    "mean_or_none",
    "pool_halves",
    "rate",
    "resplit_seed",
    "rounded",
]

#: Probability calibrators an experiment can fit, by spec name (``none``: renormalise only).
CALIBRATORS: dict[str, type[TemperatureScaling] | type[IsotonicCalibration] | None] = {
    "temperature": TemperatureScaling,
    "isotonic": IsotonicCalibration,
    "none": None,
}

#: Digits kept in table cells; the printed table, the artifacts and the MLflow metrics all
#: hold these same rounded numbers.
DIGITS = 6


def resplit_seed(seed: int, r: int) -> int:
    """The seed of resplit ``r`` under experiment seed ``seed`` (prefix-stable in ``r``).

    A keyed hash rather than a generator draw, so resplit ``r`` is the same whether 20 or
    200 resplits are run, and seeds of neighbouring experiment seeds do not overlap.
    """
    digest = hashlib.sha256(f"hybridroute-resplit/{int(seed)}/{int(r)}".encode()).digest()
    return int.from_bytes(digest[:4], "big") >> 1


def pool_halves(
    labels: Sequence[str], texts: Sequence[str], calibration_fraction: float, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """Row positions of the calibration and evaluation halves of a pool.

    Stratified by label and grouped by text (a duplicated text never lands on both sides),
    with the toolkit's keyed-hash splitter, so a resplit is the same on every machine.
    """
    plan = make_splits(
        list(labels),
        {"calibration": calibration_fraction, "evaluation": 1.0 - calibration_fraction},
        seed=seed,
        groups=list(texts),
    )
    return plan["calibration"], plan["evaluation"]


def divide(rows: np.ndarray, fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Split ``rows`` into (calibrator rows, threshold rows) as ``fit_policy`` does.

    A seeded permutation; the first ``round(fraction * n)`` rows fit the probability
    calibrator, the rest the thresholds. ``fraction == 0`` uses every row for both.
    """
    if fraction <= 0.0:
        return rows, rows
    order = np.random.default_rng(seed).permutation(len(rows))
    n_cal = round(fraction * len(rows))
    return np.sort(rows[order[:n_cal]]), np.sort(rows[order[n_cal:]])


def calibrate(
    method: str, proba: np.ndarray, y: np.ndarray, fit_rows: np.ndarray
) -> tuple[np.ndarray, dict[str, Any]]:
    """Fit calibrator ``method`` on ``fit_rows`` (in-scope rows: ``y >= 0``); calibrate all rows.

    Returns the calibrated matrix and the calibrator's summary.
    """
    cls = CALIBRATORS[method]
    if cls is None:
        return proba / proba.sum(axis=1, keepdims=True), {"method": "none"}
    rows = fit_rows[y[fit_rows] >= 0]
    est = cls().fit(proba[rows], y[rows])
    return est.transform(proba), est.summary()


def auroc(scores: np.ndarray, positive: np.ndarray) -> float | None:
    """Area under the ROC curve of ``scores`` for ``positive`` (ties count one half)."""
    from scipy.stats import rankdata

    pos = np.asarray(positive, dtype=bool)
    n1 = int(pos.sum())
    n0 = len(pos) - n1
    if n1 == 0 or n0 == 0:
        return None
    ranks = rankdata(scores)
    return float((ranks[pos].sum() - n1 * (n1 + 1) / 2.0) / (n1 * n0))


def mean_or_none(values: Sequence[float | None]) -> float | None:
    """Mean of the defined values, or ``None`` when there are none."""
    vals = [float(v) for v in values if v is not None and not math.isnan(float(v))]
    return float(np.mean(vals)) if vals else None


def rate(flags: Sequence[bool]) -> float | None:
    """Share of true flags, or ``None`` for no flags."""
    return float(np.mean(np.asarray(flags, dtype=float))) if len(flags) else None


def rounded(value: Any) -> Any:
    """A table cell: floats rounded to :data:`DIGITS`, NaN and infinities as ``None``."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        v = float(value)
        return round(v, DIGITS) if math.isfinite(v) else None
    return value
