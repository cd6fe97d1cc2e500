"""Coverage threshold: auto-route a chosen share of traffic."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy import stats

from ._base import check_fraction
from ._bounds import clopper_pearson_lower
from ._precision import ThresholdFitter, _Curve

__all__ = ["CoverageThreshold"]


class CoverageThreshold(ThresholdFitter):
    """The threshold that auto-routes a target share of traffic.

    With ``delta=None`` the threshold is the empirical quantile: the calibration items
    with the highest scores are accepted until ``coverage`` of them is reached. With a
    ``delta`` the coverage itself is guaranteed: the fraction of fresh traffic auto-routed
    is at least ``coverage`` with probability ``1 - delta`` (continuous scores; the
    ``k``-th highest of ``n`` scores passes a share distributed as ``Beta(k, n - k + 1)``,
    so the smallest ``k`` with ``P(Beta(k, n-k+1) >= coverage) >= 1 - delta`` is used).

    No precision is promised. When ``delta`` is given, ``bound_`` reports the
    Clopper–Pearson lower bound on the calibration precision at the chosen threshold for
    information (``nan`` otherwise).

    Parameters
    ----------
    coverage : float, default 0.8
        Share of traffic to auto-route.
    delta : float or None, default None
        Probability allowed for the coverage to fall short; ``None`` for the plain quantile.
    """

    method = "coverage"

    def __init__(self, coverage: float = 0.8, delta: float | None = None) -> None:
        self.coverage = coverage
        self.delta = delta

    def fit(self, scores: Any, correct: Any) -> CoverageThreshold:
        """Fit on calibration scores and correctness flags; returns ``self``."""
        cov = check_fraction(self.coverage, "coverage", open_high=False)
        s, c = self._validate(scores, correct)
        n = len(s)
        if self.delta is None:
            k = max(1, math.ceil(cov * n - 1e-9))
        else:
            delta = check_fraction(self.delta, "delta")
            ks = np.arange(1, n + 1)
            ok = np.flatnonzero(stats.beta.sf(cov, ks, n - ks + 1) >= 1 - delta)
            k = int(ok[0]) + 1 if ok.size else n
        curve = _Curve.build(s, c)
        # the candidate whose accepted set first reaches k items
        index = int(np.searchsorted(curve.accepted, k, side="left"))
        index = min(index, len(curve.accepted) - 1)
        self._set_common(curve, index)
        self.certified_ = False
        # Reported for information only, at the coverage guarantee's own level.
        self.bound_ = (
            math.nan
            if self.delta is None
            else float(
                clopper_pearson_lower(
                    curve.accepted[index] - curve.errors[index],
                    curve.accepted[index],
                    float(self.delta),
                )
            )
        )
        return self

    def _extra_summary(self) -> dict[str, Any]:
        return {
            "target_coverage": float(self.coverage),
            "delta": None if self.delta is None else float(self.delta),
            "certified": False,
            "bound": None if math.isnan(self.bound_) else self.bound_,
            "guarantee": "none on precision"
            + ("" if self.delta is None else "; coverage >= target with probability >= 1 - delta"),
        }
