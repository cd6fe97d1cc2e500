"""Isotonic calibration of the top label's confidence."""

from __future__ import annotations

import itertools
from typing import Any, ClassVar, Self

import numpy as np

from .. import _record as rec
from .._base import _Estimator, as_class_index, as_proba, as_scores

__all__ = ["IsotonicCalibration", "apply_isotonic", "isotonic_transform"]


class IsotonicCalibration(_Estimator):
    """Map the top-label confidence through a monotone step function fitted on correctness.

    Top-label calibration: only the best label's confidence is recalibrated (a
    non-decreasing map fitted by isotonic regression of "top label correct" on the raw
    top-label score). The best label itself never changes. The fitted map is kept as
    interpolation knots (``x_``, ``y_``), so applying it needs numpy alone and a policy
    artifact can hold it exactly.

    Attributes
    ----------
    x_, y_ : ndarray
        Knots of the piecewise-linear non-decreasing map; inputs outside ``[x_[0], x_[-1]]``
        are clipped.
    n_classes_ : int
    """

    method = "isotonic"
    needs_every_score: ClassVar[bool] = False

    def __init__(self) -> None:
        pass

    def fit(self, proba: Any, y: Any) -> Self:
        """Fit on probabilities ``(n_items, n_classes)`` and true class indices; returns ``self``."""
        from sklearn.isotonic import IsotonicRegression

        p = as_proba(proba)
        yy = as_class_index(y, p.shape[1])
        if len(yy) != len(p):
            raise ValueError(f"proba has {len(p)} rows but y has {len(yy)} entries")
        conf = p.max(axis=1)
        correct = (p.argmax(axis=1) == yy).astype(float)
        iso = IsotonicRegression(y_min=0.0, y_max=1.0, increasing=True, out_of_bounds="clip")
        iso.fit(conf, correct)
        self.x_ = np.asarray(iso.X_thresholds_, dtype=float)
        self.y_ = np.asarray(iso.y_thresholds_, dtype=float)
        self.n_classes_ = p.shape[1]
        return self

    def calibrate_confidence(self, confidence: Any) -> np.ndarray:
        """Calibrated top-label confidence for raw top-label scores."""
        self._check_fitted("x_")
        return apply_isotonic(
            as_scores(confidence, "confidence", allow_empty=True), self.x_, self.y_
        )

    def transform(self, proba: Any) -> np.ndarray:
        """Probabilities with the top label's score recalibrated, the rest rescaled to sum to 1.

        The other labels keep their relative sizes. The column order and the best label's
        index are unchanged (use the raw argmax for the label; the calibrated top score may
        fall below a rescaled runner-up when the map pulls it far down).
        """
        self._check_fitted("x_")
        p = as_proba(proba)
        return isotonic_transform(p, self.x_, self.y_)

    def calibrate_rows(self, p: np.ndarray, top: np.ndarray | None = None) -> np.ndarray:
        """Calibrated rows of a checked matrix, each row's ``top`` column recalibrated."""
        return isotonic_transform(p, self.x_, self.y_, top)

    def to_state(self) -> dict[str, Any]:
        """The fitted state as plain JSON values (what a policy file records)."""
        self._check_fitted("x_")
        return {"method": self.method, "x": self.x_.tolist(), "y": self.y_.tolist()}

    summary = to_state

    @classmethod
    def from_state(cls, state: Any, field: str = "calibrator") -> Self:
        """A fitted calibrator from its knots: probabilities, both non-decreasing."""
        x, y = state.get("x"), state.get("y")
        rec.ensure(
            isinstance(x, list) and isinstance(y, list) and len(x) == len(y) >= 1,
            f"{field}.x/y",
            "must be lists of equal, non-zero length",
        )
        rec.ensure(all(rec.is_num(v) for v in x + y), f"{field}.x/y", "must hold numbers")
        for axis, knots in (("x", x), ("y", y)):
            rec.ensure(
                all(a <= b for a, b in itertools.pairwise(knots)),
                f"{field}.{axis}",
                "must not decrease" + (" (an isotonic map)" if axis == "y" else ""),
            )
            for v in knots:
                rec.probability(v, f"{field}.{axis}")
        out = cls()
        out.x_, out.y_ = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
        out.n_classes_ = None
        return out


def apply_isotonic(conf: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The fitted map (``np.interp`` clips outside the knots, as the fit did)."""
    return np.interp(conf, x, y)


def isotonic_transform(
    p: np.ndarray, x: np.ndarray, y: np.ndarray, top: np.ndarray | None = None
) -> np.ndarray:
    """Replace each row's top score by its calibrated value and rescale the others.

    ``top`` names each row's top column (default: its argmax); a policy passes the
    classifier's best label, which a tie or a partial ranking can put elsewhere.
    """
    p = p / p.sum(axis=1, keepdims=True)
    if top is None:
        top = p.argmax(axis=1)
    rows = np.arange(len(p))
    c = p[rows, top]
    c_new = apply_isotonic(c, x, y)
    rest = 1.0 - c
    scale = np.where(rest > 0, (1.0 - c_new) / np.where(rest > 0, rest, 1.0), 0.0)
    out = p * scale[:, None]
    out[rows, top] = c_new
    return out
