"""Multinomial logistic regression along a grid of ``C`` values, warm-started.

The one place the local and the embedding classifier fit their linear heads: each block
is fitted once per ``C`` (ascending, each fit starting from the previous solution), and
the fitted weights are kept as plain arrays so that scoring is one matrix product.
scikit-learn is imported only when something is fitted.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable
from typing import Any

import numpy as np

__all__ = ["fit_logistic_path", "positive_grid", "warn_unconverged"]


def positive_grid(values: Any, name: str) -> list[float]:
    """``values`` as a sorted list of distinct positive finite numbers (a search grid)."""
    try:
        grid = sorted({float(v) for v in values})
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a sequence of numbers, got {values!r}") from None
    if not grid or any(not math.isfinite(v) or v <= 0 for v in grid):
        raise ValueError(f"{name} must hold one or more positive numbers, got {values!r}")
    return grid


def fit_logistic_path(
    x: Any, y: np.ndarray, cs: Iterable[float], n_classes: int, *, max_iter: int, tol: float
) -> list[tuple[np.ndarray, np.ndarray, int]]:
    """Fit one model per ``C`` (in the order given), each warm-started from the previous.

    Returns, per ``C``, feature-major weights ``(n_features, n_classes)``, intercepts
    ``(n_classes,)`` and the solver's iteration count. A two-class problem is returned
    in the same shape (the first class's weights zero), so that a softmax of the scores
    gives the logistic regression's probabilities.
    """
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression
    from threadpoolctl import threadpool_limits

    model = LogisticRegression(C=1.0, max_iter=int(max_iter), tol=float(tol), warm_start=True)
    out = []
    for c in cs:
        model.set_params(C=float(c))
        # One BLAS thread: the solver's heavy steps (sparse products, L-BFGS updates)
        # are single-threaded anyway; extra BLAS threads only doubled the CPU time
        # here, and thread counts change the last bits of the weights, which would
        # make saved models differ between machines.
        with warnings.catch_warnings(), threadpool_limits(limits=1):
            # Recorded as n_iter instead; the caller warns once if its final model is short.
            warnings.simplefilter("ignore", ConvergenceWarning)
            model.fit(x, y)
        coef = np.asarray(model.coef_, dtype=np.float64)
        intercept = np.asarray(model.intercept_, dtype=np.float64)
        if n_classes == 2:
            # Binary logistic regression has one weight vector for the second class;
            # scoring [0, w] through a softmax gives the same sigmoid.
            coef = np.vstack([np.zeros_like(coef[0]), coef[0]])
            intercept = np.array([0.0, intercept[0]])
        n_iter = int(np.max(model.n_iter_))
        out.append((np.ascontiguousarray(coef.T), intercept.copy(), n_iter))
    return out


def warn_unconverged(n_iter: int, max_iter: int, tol: float, what: str) -> None:
    """A ``ConvergenceWarning`` when a final model stopped at ``max_iter``."""
    if n_iter < int(max_iter):
        return
    from sklearn.exceptions import ConvergenceWarning

    warnings.warn(
        f"{what} stopped at max_iter={max_iter} before reaching tol={tol}; raise max_iter "
        "for a fully converged model",
        ConvergenceWarning,
        stacklevel=3,
    )
