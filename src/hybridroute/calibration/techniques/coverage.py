"""Coverage: auto-route a chosen share of traffic."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Self

import numpy as np

from .. import _record as rec
from .._base import check_fraction
from .._bounds import clopper_pearson_lower
from ._base import Curve, ThresholdFitter

if TYPE_CHECKING:
    from .._options import FitOptions

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
    objective = "coverage"
    objective_help = "auto-route a target share (guaranteed at 1-delta)"
    default_target = 0.8

    def __init__(self, coverage: float = 0.8, delta: float | None = None) -> None:
        self.coverage = coverage
        self.delta = delta

    @classmethod
    def for_objective(cls, options: FitOptions) -> CoverageThreshold:
        return cls(options.target, options.delta)

    def fit(self, scores: Any, correct: Any) -> Self:
        """Fit on calibration scores and correctness flags; returns ``self``."""
        cov = check_fraction(self.coverage, "coverage", open_high=False)
        s, c = self._validate(scores, correct)
        n = len(s)
        if self.delta is None:
            k = _quantile_count(cov, n)
        else:
            k = _guaranteed_count(cov, check_fraction(self.delta, "delta"), n)
        curve = Curve.build(s, c)
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

    @classmethod
    def _read(cls, state: Any, field: str) -> Self:
        """The accepted count meets the quantile (or its guarantee)."""
        rec.ensure(
            not state["certified"],
            f"{field}.certified",
            "a coverage threshold certifies no precision",
        )
        params = state.get("params") or {}
        cov, delta = state.get("target_coverage"), state.get("delta")
        rec.ensure(
            rec.is_num(cov) and 0.0 < cov <= 1.0,
            f"{field}.target_coverage",
            f"{cov!r} is not in (0, 1]",
        )
        rec.same(params.get("coverage"), cov, f"{field}.params.coverage", field)
        rec.same(params.get("delta"), delta, f"{field}.params.delta", field)
        counts = rec.accepted_counts(state, field)
        n, accepted, errors = counts
        rec.ensure(state.get("threshold") is not None, f"{field}.threshold", "must be a number")
        if delta is None:
            need = _quantile_count(cov, n)
            rec.ensure(state.get("bound") is None, f"{field}.bound", "must be null without delta")
        else:
            rec.ensure(
                rec.is_num(delta) and 0.0 < delta < 1.0,
                f"{field}.delta",
                f"{delta!r} is not in (0, 1)",
            )
            need = _guaranteed_count(cov, delta, n)
            expected = float(clopper_pearson_lower(accepted - errors, accepted, delta))
            bound = state.get("bound")
            rec.ensure(
                rec.is_num(bound) and abs(bound - expected) <= rec.BOUND_TOL,
                f"{field}.bound",
                f"{bound!r} is not the Clopper-Pearson bound of its counts ({expected!r})",
            )
        rec.ensure(
            accepted >= need,
            f"{field}.coverage",
            f"{accepted} accepted of {n} falls short of the {need} the coverage target "
            f"{cov:g} needs",
        )
        return cls(cov, delta)._restore(state, field, n_accepted_=accepted)


def _quantile_count(cov: float, n: int) -> int:
    """Items the plain quantile accepts: ``ceil(coverage * n)``, at least one."""
    return max(1, math.ceil(cov * n - 1e-9))


def _guaranteed_count(cov: float, delta: float, n: int) -> int:
    """The smallest ``k`` with ``P(Beta(k, n - k + 1) >= coverage) >= 1 - delta`` (else n)."""
    from scipy import stats

    ks = np.arange(1, n + 1)
    ok = np.flatnonzero(stats.beta.sf(cov, ks, n - ks + 1) >= 1 - delta)
    return int(ok[0]) + 1 if ok.size else n
