"""Three-way: auto-route / ask the user / human review from two fitted thresholds."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Self

import numpy as np

from .. import _record as rec
from .._base import as_scores, check_fraction, jsonable_threshold
from ._base import ThreeWayTechnique, ThresholdFitter
from .certified_precision import CertifiedPrecisionThreshold

if TYPE_CHECKING:
    from .._options import FitOptions

__all__ = ["ThreeWayThreshold"]


class ThreeWayThreshold(ThreeWayTechnique):
    """Two fitted thresholds splitting traffic into auto-route, ask the user, human review.

    ``auto`` fits the upper threshold (items at or above it are auto-routed); ``ask`` fits
    the lower one (items between the two are sent to the user to confirm the suggested
    label; items below go to human review). Both are fitted on the same calibration
    ``(scores, correct)``; if ``ask`` lands above ``auto`` it is lowered to ``auto`` (the
    ask zone is then empty).

    Each component keeps its own guarantee. For both to hold *together* with probability
    ``1 - delta``, give each ``delta / 2`` -- :meth:`certified` does that.

    Parameters
    ----------
    auto : ThresholdFitter
        Fitter of the auto-route threshold (e.g. a certified 0.95 precision).
    ask : ThresholdFitter
        Fitter of the ask-the-user threshold (e.g. a certified 0.80 precision: when we
        ask "did you mean X?", X should usually be right).

    Attributes
    ----------
    auto_, ask_ : fitted copies of the components
    threshold_, ask_threshold_ : float
    shares_ : dict
        Share of calibration items in each zone.
    """

    method = "three_way"
    objective = "three-way"
    objective_help = "auto-route at target, ask the user at --ask-target, else human review"
    objective_options = ("ask_target",)

    def __init__(self, auto: ThresholdFitter, ask: ThresholdFitter) -> None:
        self.auto = auto
        self.ask = ask

    @classmethod
    def certified(
        cls, auto_target: float, ask_target: float, delta: float = 0.05, n_starts: int = 3
    ) -> ThreeWayThreshold:
        """Both thresholds certified, each at ``delta / 2`` so both hold jointly.

        Parameters
        ----------
        auto_target : float
            Precision certified for the auto-routed items, in (0, 1).
        ask_target : float
            Precision certified for the items at or above the ask threshold (the label
            suggested to the user should usually be right), in (0, 1); usually below
            ``auto_target``.
        delta : float, default 0.05
            Probability, in (0, 1), that either certificate is wrong; each
            :class:`CertifiedPrecisionThreshold` gets ``delta / 2``.
        n_starts : int, default 3
            Fixed sequences of each component (its ``delta / 2`` is split among them).

        Returns
        -------
        ThreeWayThreshold
            Unfitted; the targets and ``n_starts`` are checked when it is fitted.

        Raises
        ------
        ValueError
            If ``delta`` is not in (0, 1).
        """
        delta = check_fraction(delta, "delta")
        return cls(
            auto=CertifiedPrecisionThreshold(auto_target, delta / 2, n_starts=n_starts),
            ask=CertifiedPrecisionThreshold(ask_target, delta / 2, n_starts=n_starts),
        )

    @classmethod
    def for_objective(cls, options: FitOptions) -> ThreeWayThreshold:
        return cls.certified(options.target, options.ask_target, options.delta)

    def per_class_base(self) -> ThresholdFitter:
        return self.auto

    def fit(self, scores: Any, correct: Any) -> Self:
        """Fit both components; returns ``self``."""
        for name in ("auto", "ask"):
            if not isinstance(getattr(self, name), ThresholdFitter):
                raise ValueError(f"{name} must be a threshold fitter, got {getattr(self, name)!r}")
        self.auto_ = self.auto._clone().fit(scores, correct)
        self.ask_ = self.ask._clone().fit(scores, correct)
        self.threshold_ = float(self.auto_.threshold_)
        self.ask_threshold_ = float(min(self.ask_.threshold_, self.threshold_))
        s = as_scores(scores)
        n = len(s)
        auto = float(np.mean(s >= self.threshold_))
        ask = float(np.mean(s >= self.ask_threshold_)) - auto
        self.shares_ = {"auto_route": auto, "ask_user": ask, "human_review": 1.0 - auto - ask}
        self.coverage_ = auto
        self.n_calibration_ = n
        self.certified_ = bool(getattr(self.auto_, "certified_", False))
        return self

    def _ask_threshold(self) -> float | None:
        return jsonable_threshold(self.ask_threshold_)

    def _state(self) -> dict[str, Any]:
        self._check_fitted("threshold_")
        auto = self.auto_.to_state()
        return {
            "method": self.method,
            "score": self.score_name,
            "threshold": jsonable_threshold(self.threshold_),
            "ask_threshold": jsonable_threshold(self.ask_threshold_),
            "auto": auto,
            "ask": self.ask_.to_state(),
            "shares": dict(self.shares_),
            "calibration_size": self.n_calibration_,
            "coverage": self.coverage_,
            "precision": auto.get("precision"),
            "certified": self.certified_,
            "bound": auto.get("bound"),
        }

    @classmethod
    def _read(cls, state: Any, field: str) -> Self:
        from . import read_technique

        parts = {k: read_technique(state.get(k), f"{field}.{k}") for k in ("auto", "ask")}
        auto, ask = state["auto"], state["ask"]
        rec.same(
            state.get("threshold"), auto.get("threshold"), f"{field}.threshold", f"{field}.auto"
        )
        low = min(
            rec.threshold_value(ask.get("threshold")), rec.threshold_value(auto.get("threshold"))
        )
        rec.same(
            rec.threshold_value(state.get("ask_threshold")),
            low,
            f"{field}.ask_threshold",
            f"the lower of {field}.ask and {field}.auto",
        )
        for key in ("certified", "bound", "precision"):
            rec.same(state.get(key), auto.get(key), f"{field}.{key}", f"{field}.auto")
        rec.ensure(
            rec.is_num(state.get("coverage"))
            and abs(state["coverage"] - auto.get("coverage", math.nan)) <= rec.RATIO_TOL,
            f"{field}.coverage",
            f"{state.get('coverage')!r} is not what {field}.auto records",
        )
        rec.count(state.get("calibration_size"), f"{field}.calibration_size")
        return cls(parts["auto"]._clone(), parts["ask"]._clone())._restore(  # type: ignore[arg-type]
            state,
            field,
            auto_=parts["auto"],
            ask_=parts["ask"],
            ask_threshold_=low,
            shares_=dict(state.get("shares") or {}),
        )
