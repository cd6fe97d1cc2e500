"""Empirical precision: the naive baseline, no guarantee."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Self

import numpy as np

from .. import _record as rec
from .._base import check_fraction
from ._base import Curve, ThresholdFitter

if TYPE_CHECKING:
    from .._options import FitOptions

__all__ = ["EmpiricalThreshold"]


class EmpiricalThreshold(ThresholdFitter):
    """The lowest threshold whose *calibration* precision meets the target.

    This is the naive baseline, kept for experiments and benchmarks. It carries **no
    guarantee**: the calibration precision of the chosen set is an optimistic estimate
    (the threshold is picked where the sample happens to look good), and on fresh data
    the precision falls below target roughly half the time. Use
    :class:`CertifiedPrecisionThreshold` to route real traffic.

    Parameters
    ----------
    target : float, default 0.95
        Precision the auto-routed items should reach on the calibration data.
    """

    method = "empirical"
    objective = "empirical"
    objective_help = "calibration precision >= target, no guarantee"

    def __init__(self, target: float = 0.95) -> None:
        self.target = target

    @classmethod
    def for_objective(cls, options: FitOptions) -> EmpiricalThreshold:
        return cls(options.target)

    def fit(self, scores: Any, correct: Any) -> Self:
        """Fit on calibration scores and correctness flags; returns ``self``."""
        target = check_fraction(self.target, "target")
        s, c = self._validate(scores, correct)
        curve = Curve.build(s, c)
        ok = np.flatnonzero(curve.precision >= target)
        self._set_common(curve, int(ok[-1]) if ok.size else None)
        self.certified_ = False
        return self

    def _extra_summary(self) -> dict[str, Any]:
        return {"target": float(self.target), "certified": False, "guarantee": "none"}

    @classmethod
    def _read(cls, state: Any, field: str) -> Self:
        rec.ensure(
            not state["certified"], f"{field}.certified", "an empirical threshold certifies nothing"
        )
        target = state.get("target")
        rec.same((state.get("params") or {}).get("target"), target, f"{field}.params.target", field)
        counts = rec.accepted_counts(state, field)
        _, accepted, errors = counts
        rec.ensure(
            (state.get("threshold") is None) == (accepted == 0),
            f"{field}.threshold",
            "must be null exactly when nothing is accepted",
        )
        if accepted:
            rec.ensure(
                rec.is_num(target) and 1.0 - errors / accepted >= target,
                f"{field}.precision",
                f"{state.get('precision')!r} is below the target {target!r} the threshold was "
                "chosen to meet",
            )
        return cls(target)._restore(state, field, n_accepted_=accepted)
