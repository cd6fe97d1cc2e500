"""Cost threshold: the two cut-offs that minimise declared routing costs."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ._base import (
    _Estimator,
    as_flags,
    as_scores,
    check_nonnegative,
    jsonable_threshold,
    same_length,
    three_way_actions,
)
from ._precision import _Curve

__all__ = ["CostThreshold"]


class CostThreshold(_Estimator):
    """Two thresholds (auto-route / ask the user / human review) minimising expected cost.

    The declared cost model, per item, given whether the top label is right:

    ========================  =================================================
    action                    cost
    ========================  =================================================
    auto-route                ``cost_misroute`` if the top label is wrong, else 0
    ask the user to confirm   ``cost_ask_user``, plus ``cost_human_review`` if the
                              top label is wrong (the user declines and the item
                              goes to review)
    human review              ``cost_human_review``
    ========================  =================================================

    The zones are contiguous in the score (highest: auto-route), and the pair of
    cut-offs with the lowest total cost on the calibration data is chosen exactly (one
    pass over the sorted scores). With ``cost_ask_user=None`` there is no ask zone and a
    single threshold separates auto-routing from human review.

    This is an empirical optimum: no precision is certified. Ties between equally cheap
    cut-offs go to the higher threshold (less automation).

    Parameters
    ----------
    cost_misroute : float
    cost_ask_user : float or None
    cost_human_review : float

    Attributes
    ----------
    threshold_ : float
        Auto-route at or above this score (``inf``: never).
    ask_threshold_ : float
        Ask the user at or above this score and below ``threshold_``.
    expected_cost_ : float
        Mean cost per item on the calibration data.
    shares_ : dict
        Share of calibration items in each zone.
    two_way_ : bool
        True when there is no ask zone (``cost_ask_user=None``).
    """

    method = "cost"
    score_name = "confidence"

    def __init__(
        self,
        cost_misroute: float = 10.0,
        cost_ask_user: float | None = 1.0,
        cost_human_review: float = 3.0,
    ) -> None:
        self.cost_misroute = cost_misroute
        self.cost_ask_user = cost_ask_user
        self.cost_human_review = cost_human_review

    def fit(self, scores: Any, correct: Any) -> CostThreshold:
        """Fit on calibration scores and correctness flags; returns ``self``."""
        cm = check_nonnegative(self.cost_misroute, "cost_misroute")
        cr = check_nonnegative(self.cost_human_review, "cost_human_review")
        ca = (
            None
            if self.cost_ask_user is None
            else check_nonnegative(self.cost_ask_user, "cost_ask_user")
        )
        s = as_scores(scores)
        c = as_flags(correct)
        same_length(scores=s, correct=c)
        curve = _Curve.build(s, c)
        acc = np.r_[0, curve.accepted].astype(float)
        err = np.r_[0, curve.errors].astype(float)
        p_auto = cm * err  # cost of auto-routing the first g groups
        p_review = cr * acc  # cost of reviewing them
        total_review = p_review[-1]
        if ca is None:
            cost = p_auto + (total_review - p_review)
            i = j = int(np.argmin(cost))
            best = float(cost[i])
        else:
            p_ask = ca * acc + cr * err
            left = p_auto - p_ask
            run_min = np.minimum.accumulate(left)
            run_arg = _running_argmin(left)
            right = p_ask - p_review + total_review
            cost = run_min + right
            j = int(np.argmin(cost))
            i = int(run_arg[j])
            best = float(cost[j])
        self.threshold_ = math.inf if i == 0 else float(curve.thresholds[i - 1])
        self.ask_threshold_ = math.inf if j == 0 else float(curve.thresholds[j - 1])
        n = curve.n
        self.expected_cost_ = best / n
        self.shares_ = {
            "auto_route": acc[i] / n,
            "ask_user": (acc[j] - acc[i]) / n,
            "human_review": (n - acc[j]) / n,
        }
        self.coverage_ = acc[i] / n
        self.precision_ = 1.0 - err[i] / acc[i] if acc[i] else math.nan
        self.n_calibration_ = n
        self.certified_ = False
        self.two_way_ = ca is None
        return self

    def predict(self, scores: Any) -> np.ndarray:
        """Array of actions: ``auto_route``, ``ask_user`` or ``human_review``."""
        self._check_fitted("threshold_")
        s = as_scores(scores, allow_empty=True)
        return three_way_actions(s, self.threshold_, self.ask_threshold_)

    def summary(self) -> dict[str, Any]:
        """The fitted state as plain JSON values."""
        self._check_fitted("threshold_")
        return {
            "method": self.method,
            "params": self.get_params(deep=False),
            "score": self.score_name,
            "threshold": jsonable_threshold(self.threshold_),
            "ask_threshold": None if self.two_way_ else jsonable_threshold(self.ask_threshold_),
            "expected_cost": self.expected_cost_,
            "shares": dict(self.shares_),
            "calibration_size": self.n_calibration_,
            "coverage": self.coverage_,
            "precision": None if math.isnan(self.precision_) else self.precision_,
            "certified": False,
            "guarantee": "none (empirical cost minimum)",
        }


def _running_argmin(values: np.ndarray) -> np.ndarray:
    """Index of the first minimum of ``values[:g+1]`` for every ``g``."""
    out = np.empty(len(values), dtype=int)
    best = 0
    for g in range(len(values)):
        if values[g] < values[best]:
            best = g
        out[g] = best
    return out
