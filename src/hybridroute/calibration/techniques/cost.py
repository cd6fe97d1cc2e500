"""Cost: the two cut-offs that minimise declared routing costs."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Self

import numpy as np

from .. import _record as rec
from .._base import (
    as_flags,
    as_scores,
    check_nonnegative,
    jsonable_threshold,
    same_length,
)
from ._base import Curve, ThreeWayTechnique

if TYPE_CHECKING:
    from .._options import FitOptions

__all__ = ["CostThreshold"]

ZONES = ("auto_route", "ask_user", "human_review")


class CostThreshold(ThreeWayTechnique):
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
    objective = "cost"
    objective_help = "minimise declared costs (--cost-*)"
    objective_options = ("cost_misroute", "cost_ask_user", "cost_human_review")
    takes_per_class = False

    def __init__(
        self,
        cost_misroute: float = 10.0,
        cost_ask_user: float | None = 1.0,
        cost_human_review: float = 3.0,
    ) -> None:
        self.cost_misroute = cost_misroute
        self.cost_ask_user = cost_ask_user
        self.cost_human_review = cost_human_review

    @classmethod
    def for_objective(cls, options: FitOptions) -> CostThreshold:
        return cls(options.cost_misroute, options.cost_ask_user, options.cost_human_review)

    def fit(self, scores: Any, correct: Any) -> Self:
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
        curve = Curve.build(s, c)
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

    def _ask_threshold(self) -> float | None:
        return None if self.two_way_ else jsonable_threshold(self.ask_threshold_)

    def _state(self) -> dict[str, Any]:
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

    @classmethod
    def _read(cls, state: Any, field: str) -> Self:
        rec.ensure(
            not state["certified"], f"{field}.certified", "a cost threshold certifies nothing"
        )
        rec.accepted_counts(state, field)
        shares = state.get("shares")
        rec.ensure(
            isinstance(shares, dict)
            and set(shares) == set(ZONES)
            and all(rec.is_num(v) and 0 <= v <= 1 for v in shares.values())
            and abs(sum(shares.values()) - 1.0) <= 1e-9,
            f"{field}.shares",
            "must be the three zone shares, summing to 1",
        )
        rec.same(
            state.get("coverage"), shares["auto_route"], f"{field}.coverage", f"{field}.shares"
        )
        params = state.get("params")
        rec.ensure(
            isinstance(params, dict)
            and all(
                rec.is_num(params.get(k)) or (k == "cost_ask_user" and params.get(k) is None)
                for k in cls.objective_options
            ),
            f"{field}.params",
            "must hold the three costs",
        )
        for key in ("threshold", "ask_threshold"):
            value = state.get(key)
            rec.ensure(
                value is None or rec.is_num(value), f"{field}.{key}", "must be a number or null"
            )
        threshold = rec.threshold_value(state.get("threshold"))
        ask = rec.threshold_value(state.get("ask_threshold"))
        if params["cost_ask_user"] is None:
            rec.ensure(
                state.get("ask_threshold") is None,
                f"{field}.ask_threshold",
                "must be null without an ask-the-user cost",
            )
        else:
            rec.ensure(
                ask <= threshold,
                f"{field}.ask_threshold",
                "must not be above the auto-route threshold",
            )
        return cls(*(params[k] for k in cls.objective_options))._restore(
            state,
            field,
            ask_threshold_=ask,
            two_way_=params["cost_ask_user"] is None,
            expected_cost_=state.get("expected_cost"),
            shares_=dict(shares),
        )


def _running_argmin(values: np.ndarray) -> np.ndarray:
    """Index of the first minimum of ``values[:g+1]`` for every ``g``."""
    out = np.empty(len(values), dtype=int)
    best = 0
    for g in range(len(values)):
        if values[g] < values[best]:
            best = g
        out[g] = best
    return out
