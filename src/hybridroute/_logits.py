"""Softmax, mean log-loss and the fitted logit scale: one implementation for every part.

A leaf module (numpy; scipy only inside :func:`fit_logit_scale`), so the classifiers,
which may not import the calibration package, and the calibration package itself share
these formulas instead of keeping copies. Fitting one multiplier ``s`` of the logits by
log-loss *is* temperature scaling (``s = 1 / T``); the embedding classifier fits it on
its fused logits, :class:`~hybridroute.calibration.TemperatureScaling` on a classifier's
log-probabilities (a softmax is unchanged by a per-row constant, so the two agree).
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["fit_logit_scale", "mean_log_loss", "softmax"]


def softmax(z: np.ndarray) -> np.ndarray:
    """Row-wise softmax of a 2-d array of logits (a new array; ``z`` is left as it is)."""
    out = z - z.max(axis=1, keepdims=True)
    np.exp(out, out=out)
    out /= out.sum(axis=1, keepdims=True)
    return out


def mean_log_loss(z: np.ndarray, y: np.ndarray, scale: float = 1.0) -> float:
    """Mean negative log-likelihood of class indices ``y`` under ``softmax(scale * z)``."""
    s = scale * z
    s = s - s.max(axis=1, keepdims=True)
    log_norm = np.log(np.exp(s).sum(axis=1))
    return float(np.mean(log_norm - s[np.arange(len(y)), y]))


def fit_logit_scale(
    z: np.ndarray, y: np.ndarray, *, log_bounds: tuple[float, float], xatol: float
) -> tuple[float, float]:
    """The scale ``s`` minimising :func:`mean_log_loss` of ``softmax(s * z)``, and that loss.

    The loss is convex in ``s``; a bounded scalar search over ``log s`` in ``log_bounds``
    (to the tolerance ``xatol`` in ``log s``) finds its minimum. Nothing is random.
    """
    from scipy.optimize import minimize_scalar

    result = minimize_scalar(
        lambda log_s: mean_log_loss(z, y, math.exp(log_s)),
        bounds=log_bounds,
        method="bounded",
        options={"xatol": xatol},
    )
    scale = math.exp(float(result.x))
    return scale, mean_log_loss(z, y, scale)
