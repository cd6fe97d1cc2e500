"""Shared plumbing for calibrators and threshold fitters: the estimator contract, input checks.

Every estimator here follows the scikit-learn contract: ``__init__`` stores its keyword
arguments unchanged and does nothing else; ``fit`` validates and learns; learned state
ends in ``_``. ``get_params`` reads the ``__init__`` signature, so a fitter can be cloned
with different settings (the per-class and three-way fitters do that).

The estimators speak scikit-learn's public estimator API -- ``get_params(deep=True)``,
``set_params(**params)`` with ``<component>__<parameter>`` names for nested fitters -- so
:func:`sklearn.base.clone` (and anything built on it) works on them. The API comes from
:class:`hybridroute._params.ParamsMixin` (the classifiers use it too) rather than from
:class:`sklearn.base.BaseEstimator`: importing scikit-learn costs about half a second, and
loading a policy (which the service and the router do) should not pay it.
"""

from __future__ import annotations

import copy
import math
from typing import Any

import numpy as np

from .._params import ParamsMixin
from ..exceptions import NotFittedError

__all__: list[str] = []


class _Estimator(ParamsMixin):
    """Estimator base: scikit-learn's parameter API, cloning and the fitted check."""

    #: Name written into a policy artifact for this technique.
    method: str = "base"

    def _clone(self, **overrides: Any) -> Any:
        """A new, unfitted estimator with the same arguments (some replaced).

        Nested fitters are cloned and other values deep-copied, as
        :func:`sklearn.base.clone` does, so the copy shares no mutable state with ``self``.
        """
        params = {
            k: v._clone() if isinstance(v, _Estimator) else copy.deepcopy(v)
            for k, v in self.get_params(deep=False).items()
        }
        params.update(overrides)
        return type(self)(**params)

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params(deep=False).items())
        return f"{type(self).__name__}({args})"

    def _check_fitted(self, attribute: str) -> None:
        if not hasattr(self, attribute):
            raise NotFittedError(
                f"this {type(self).__name__} is not fitted yet; call fit(...) first"
            )


# --------------------------------------------------------------------------- input checks


def as_scores(values: Any, name: str = "scores", *, allow_empty: bool = False) -> np.ndarray:
    """A 1-d float array of finite values."""
    arr = np.asarray(values, dtype=float)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    if arr.size == 0 and not allow_empty:
        raise ValueError(f"{name} is empty")
    if not np.all(np.isfinite(arr)):
        bad = int(np.flatnonzero(~np.isfinite(arr))[0])
        raise ValueError(f"{name} holds a non-finite value at position {bad}")
    return arr


def as_flags(values: Any, name: str = "correct") -> np.ndarray:
    """A 1-d boolean array; accepts booleans or 0/1 numbers."""
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    if arr.dtype == bool:
        return arr
    if arr.size and not np.all(np.isin(arr, (0, 1))):
        raise ValueError(f"{name} must hold booleans or 0/1 values")
    return arr.astype(bool)


def same_length(**arrays: np.ndarray) -> int:
    """Check that every array has the same length and return it."""
    lengths = {name: len(a) for name, a in arrays.items()}
    if len(set(lengths.values())) > 1:
        shown = ", ".join(f"{k}={v}" for k, v in lengths.items())
        raise ValueError(f"inputs differ in length: {shown}")
    return next(iter(lengths.values()))


def as_proba(values: Any, name: str = "proba") -> np.ndarray:
    """A 2-d array of probabilities (rows need not sum exactly to 1)."""
    arr = np.asarray(values, dtype=float)
    if arr.ndim != 2 or arr.shape[1] < 2:
        raise ValueError(f"{name} must have shape (n_items, n_classes >= 2), got {arr.shape}")
    if arr.shape[0] == 0:
        raise ValueError(f"{name} is empty")
    # two reductions instead of elementwise masks (NaN fails ``>= 0``; inf fails ``< inf``)
    if not (arr.min() >= 0.0 and arr.max() < np.inf):
        raise ValueError(f"{name} must hold finite, non-negative probabilities")
    return arr


def as_class_index(values: Any, n_classes: int, name: str = "y") -> np.ndarray:
    """A 1-d integer array of class indices in ``[0, n_classes)``."""
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        if np.issubdtype(arr.dtype, np.floating) and np.all(arr == np.round(arr)):
            arr = arr.astype(int)
        else:
            raise ValueError(f"{name} must hold integer class indices (columns of proba)")
    if arr.size and (arr.min() < 0 or arr.max() >= n_classes):
        raise ValueError(f"{name} holds a class index outside [0, {n_classes})")
    return arr.astype(int)


def check_fraction(
    value: Any, name: str, *, open_low: bool = True, open_high: bool = True
) -> float:
    """A float strictly (or not) inside (0, 1)."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number in (0, 1), got {value!r}") from None
    low_ok = v > 0 if open_low else v >= 0
    high_ok = v < 1 if open_high else v <= 1
    if not (math.isfinite(v) and low_ok and high_ok):
        lo = "(" if open_low else "["
        hi = ")" if open_high else "]"
        raise ValueError(f"{name} must be in {lo}0, 1{hi}, got {value!r}")
    return v


def check_nonnegative(value: Any, name: str) -> float:
    """A finite float >= 0."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a non-negative number, got {value!r}") from None
    if not math.isfinite(v) or v < 0:
        raise ValueError(f"{name} must be a non-negative number, got {value!r}")
    return v


def jsonable_threshold(value: float) -> float | None:
    """A threshold for JSON: ``None`` stands for "never passes" (+inf)."""
    v = float(value)
    if math.isinf(v) and v > 0:
        return None
    if not math.isfinite(v):
        raise ValueError(f"threshold {value!r} cannot be written to JSON")
    return v


def threshold_from_json(value: Any) -> float:
    """Inverse of :func:`jsonable_threshold`."""
    return math.inf if value is None else float(value)


# --------------------------------------------------------------------------- actions

#: What a policy does with one item. ``ask_user`` and ``human_review`` are generic
#: destinations of :mod:`hybridroute.contracts`; ``auto_route`` sends the item to its
#: label's destination and ``out_of_scope`` flags it as outside the label set.
AUTO_ROUTE = "auto_route"
ASK_USER = "ask_user"
HUMAN_REVIEW = "human_review"
OUT_OF_SCOPE = "out_of_scope"
ACTIONS = (AUTO_ROUTE, ASK_USER, HUMAN_REVIEW, OUT_OF_SCOPE)
#: What a policy does below every threshold when it has no ask-the-user zone.
FALLBACKS = (HUMAN_REVIEW, ASK_USER)


def three_way_actions(scores: np.ndarray, auto: float, ask: float) -> np.ndarray:
    """``auto_route`` at or above ``auto``, ``ask_user`` at or above ``ask``, else review."""
    out = np.full(scores.shape, HUMAN_REVIEW, dtype=object)
    out[scores >= ask] = ASK_USER
    out[scores >= auto] = AUTO_ROUTE
    return out
