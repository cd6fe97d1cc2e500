"""Temperature scaling: one temperature for every class's log-probability, fitted by NLL."""

from __future__ import annotations

import math
from typing import Any, ClassVar, Self

import numpy as np

from ..._logits import fit_logit_scale, mean_log_loss, softmax
from .. import _record as rec
from .._base import _Estimator, as_class_index, as_proba

__all__ = ["TemperatureScaling", "apply_temperature"]

#: Probabilities are clipped here before taking logs (a zero would be an infinite logit).
_EPS = 1e-12


def _log_proba(proba: np.ndarray) -> np.ndarray:
    return np.log(np.maximum(proba, _EPS))  # (np.clip is several times slower on small arrays)


class TemperatureScaling(_Estimator):
    """Rescale a classifier's log-probabilities by one temperature ``T`` fitted by NLL.

    Calibrated probabilities are ``softmax(log(p) / T)``. ``T > 1`` softens an
    over-confident model, ``T < 1`` sharpens an under-confident one; the ranking of labels
    within an item never changes, so accuracy is unchanged. Fit it on a calibration split
    that the classifier was not trained on.

    The NLL is convex in the inverse temperature, so a bounded scalar search finds the
    global optimum; there is nothing random in the fit.

    Parameters
    ----------
    bounds : tuple of float, default (0.01, 100.0)
        Range searched for ``T``.

    Attributes
    ----------
    temperature_ : float
    n_classes_ : int
    nll_before_, nll_after_ : float
        Calibration-set NLL with ``T = 1`` and with the fitted ``T``.
    """

    method = "temperature"
    #: It rescales every class's score, so a row completed from a partial ranking would
    #: be calibrated on invented scores: a policy refuses partial rankings.
    needs_every_score: ClassVar[bool] = True

    def __init__(self, bounds: tuple[float, float] = (0.01, 100.0)) -> None:
        self.bounds = bounds

    def fit(self, proba: Any, y: Any) -> Self:
        """Fit on probabilities ``(n_items, n_classes)`` and true class indices; returns ``self``."""
        p = as_proba(proba)
        yy = as_class_index(y, p.shape[1])
        if len(yy) != len(p):
            raise ValueError(f"proba has {len(p)} rows but y has {len(yy)} entries")
        lo, hi = (float(b) for b in self.bounds)
        if not (0 < lo < hi and math.isfinite(hi)):
            raise ValueError(f"bounds must be 0 < low < high, got {self.bounds!r}")
        logits = _log_proba(p)
        # the one logit-scale fit (hybridroute._logits), shared with the embedding head
        beta, nll_after = fit_logit_scale(
            logits, yy, log_bounds=(math.log(1.0 / hi), math.log(1.0 / lo)), xatol=1e-7
        )
        self.temperature_ = 1.0 / beta
        self.n_classes_ = p.shape[1]
        self.nll_before_ = mean_log_loss(logits, yy)
        self.nll_after_ = nll_after
        return self

    def transform(self, proba: Any) -> np.ndarray:
        """Calibrated probabilities, same shape as ``proba``."""
        self._check_fitted("temperature_")
        p = as_proba(proba)
        if self.n_classes_ is not None and p.shape[1] != self.n_classes_:
            raise ValueError(
                f"proba has {p.shape[1]} columns; this calibrator was fitted on {self.n_classes_}"
            )
        return apply_temperature(p, self.temperature_)

    def calibrate_rows(self, p: np.ndarray, top: np.ndarray | None = None) -> np.ndarray:
        """Calibrated rows of a checked matrix (``top`` is not needed: every class is)."""
        return apply_temperature(p, self.temperature_)

    def to_state(self) -> dict[str, Any]:
        """The fitted state as plain JSON values (what a policy file records)."""
        self._check_fitted("temperature_")
        return {"method": self.method, "temperature": float(self.temperature_)}

    summary = to_state

    @classmethod
    def from_state(cls, state: Any, field: str = "calibrator") -> Self:
        """A fitted calibrator from its record (a positive temperature)."""
        t: Any = state.get("temperature") if isinstance(state, dict) else None
        rec.ensure(rec.is_num(t) and t > 0, f"{field}.temperature", "must be a positive number")
        out = cls()
        out.temperature_ = float(t)
        out.n_classes_ = None
        return out


def apply_temperature(proba: np.ndarray, temperature: float) -> np.ndarray:
    """``softmax(log(proba) / temperature)`` row-wise."""
    return softmax(_log_proba(np.asarray(proba, dtype=float)) / float(temperature))
