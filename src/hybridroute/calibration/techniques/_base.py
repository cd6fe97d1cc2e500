"""The base of a threshold technique: fit, decide for one item, its state, its own check.

A technique is an estimator (``__init__`` stores its arguments; ``fit`` validates, learns
and returns ``self``; learned state ends in ``_``) that also

* decides for one item -- :meth:`Technique.decide` says whether a score passes its
  threshold (and :meth:`Technique.ask_zone` where a technique has an ask-the-user zone);
* writes its fitted state as plain JSON values -- :meth:`Technique.to_state` (the fit
  record a policy file holds; ``summary()`` is the same);
* reads such a record back -- :meth:`Technique.from_state` re-derives what the record
  claims from its own counts (the certificate, the bound, the threshold's place) and
  refuses a record that contradicts itself, then returns a fitted technique that decides
  as the one that wrote it;
* says how ``fit_policy`` builds it for an objective (``objective``, ``for_objective``).

:class:`ThresholdFitter` is the base of the single-threshold fitters, with the selective
statistics (:class:`Curve`) they share.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple, Self

import numpy as np

from .. import _record as rec
from .._base import (
    _Estimator,
    as_flags,
    as_scores,
    check_fraction,
    jsonable_threshold,
    same_length,
    three_way_actions,
)
from .._bounds import _smallest_planned_size, clopper_pearson_lower

if TYPE_CHECKING:
    from .._options import FitOptions

__all__ = ["Curve", "Technique", "ThresholdFitter", "Verdict"]


class Verdict(NamedTuple):
    """What a technique says about one item's score.

    Attributes
    ----------
    passed : bool
        The score is at or above the threshold (for an out-of-scope cut-off: below it,
        so the item is not flagged).
    threshold : float or None
        The threshold compared with, as a policy file writes it (``None``: +inf for a
        threshold nothing passes, -inf for a cut-off that flags everything).
    name : str or None
        Which threshold (``class:<label>``, ``ask``), or ``None`` for the part's own name.
    """

    passed: bool
    threshold: float | None
    name: str | None = None


class Technique(_Estimator):
    """Base of every threshold technique (see the module notes)."""

    #: The record a technique read back with :meth:`from_state` was read from.
    state_: dict[str, Any]
    threshold_: float

    # ``method`` (from the estimator base): the name written into a fit record and looked
    # up in the registry.
    #: The score the threshold is compared with: ``confidence``, ``margin``, ``oos_score``.
    score_name: ClassVar[str] = "confidence"
    #: The ``fit_policy`` objective whose auto-route threshold this technique may fit
    #: (``None``: not an auto-route technique).
    objective: ClassVar[str | None] = None
    #: One line for ``hybridroute calibrate --help`` (objectives built by this class).
    objective_help: ClassVar[str] = ""
    #: The objective's ``target`` when none is given.
    default_target: ClassVar[float] = 0.95
    #: Further ``fit_policy`` options the objective reads (recorded in the provenance).
    objective_options: ClassVar[tuple[str, ...]] = ()
    #: The option holding the precision routed items are held to (a margin gate's target).
    precision_option: ClassVar[str] = "target"
    #: Per-class thresholds can replace this objective's auto-route threshold.
    takes_per_class: ClassVar[bool] = True
    #: The objective needs ``oos_label`` (it fits an out-of-scope gate).
    needs_oos_label: ClassVar[bool] = False
    #: The objective whose techniques fit this objective's auto-route threshold, when
    #: another's (``None``: this one's).
    route_objective: ClassVar[str | None] = None

    # ------------------------------------------------------------------ building

    @classmethod
    def for_objective(cls, options: FitOptions) -> Technique:
        """The unfitted auto-route technique of this objective, from checked options."""
        raise ValueError(f"{cls.__name__} does not fit an objective")

    @classmethod
    def gate_for(cls, options: FitOptions) -> Technique | None:
        """The unfitted out-of-scope gate fitted before it (``None``: none)."""
        return None

    def per_class_base(self) -> ThresholdFitter:
        """The single-threshold fitter a per-class technique clones for each class."""
        raise ValueError(
            f"per_class does not work with {type(self).__name__} (objective {self.objective})"
        )

    # ------------------------------------------------------------------ deciding

    def decide(self, score: float, label: str | None = None) -> Verdict:
        """Whether one item's ``score`` (its ``label`` for per-class techniques) passes:
        is at or above ``threshold_``."""
        return Verdict(score >= self.threshold_, jsonable_threshold(self.threshold_))

    def ask_zone(self, score: float) -> Verdict | None:
        """Below the auto-route threshold: ask the user (passed) or review, or ``None``
        when the technique has no ask-the-user zone."""
        ask = self._ask_threshold()
        return None if ask is None else Verdict(score >= ask, ask, "ask")

    def _ask_threshold(self) -> float | None:
        """The ask-the-user threshold as written (``None``: no ask zone)."""
        return None

    # ------------------------------------------------------------------ state

    def to_state(self) -> dict[str, Any]:
        """The fitted state as plain JSON values (the fit record a policy holds).

        A technique read back with :meth:`from_state` writes the very record it was read
        from.
        """
        loaded = getattr(self, "state_", None)
        return copy.deepcopy(loaded) if loaded is not None else self._state()

    def summary(self) -> dict[str, Any]:
        """The fitted state as plain JSON values (the same as :meth:`to_state`)."""
        return self.to_state()

    def _state(self) -> dict[str, Any]:
        raise NotImplementedError  # pragma: no cover

    @classmethod
    def from_state(cls, state: Any, field: str = "fit") -> Self:
        """A fitted technique from its record, after checking the record's arithmetic.

        Parameters
        ----------
        state : dict
            A record :meth:`to_state` wrote (read from an untrusted file).
        field : str, default "fit"
            Where the record sits in its document; errors name fields below it.

        Returns
        -------
        Technique
            Fitted: it decides as the technique that wrote ``state`` did.

        Raises
        ------
        hybridroute.calibration._record.Contradiction
            A field that contradicts the record (a certificate its counts do not give, a
            bound that is not theirs...), naming the field.
        """
        rec.ensure(isinstance(state, dict), field, "must be a fit record (an object)")
        rec.ensure(
            isinstance(state.get("certified"), bool), f"{field}.certified", "must be true or false"
        )
        out = cls._read(state, field)
        out.state_ = copy.deepcopy(state)
        return out

    @classmethod
    def _read(cls, state: Any, field: str) -> Self:
        raise NotImplementedError  # pragma: no cover

    def _restore(self, state: Any, field: str, **fitted: Any) -> Self:
        """Set the fitted attributes a checked record holds, and ``fitted``; returns ``self``.

        Numbers come back as the fit left them: a null ``threshold`` is +inf (nothing
        passes), a null ``precision`` or ``bound`` is nan.
        """
        if "threshold" in state:
            value = state["threshold"]
            rec.ensure(
                value is None or rec.is_num(value), f"{field}.threshold", "must be a number or null"
            )
            self.threshold_ = rec.threshold_value(value)
        for attr, key in _RESTORED:
            if key in state:
                setattr(self, attr, state[key])
        for attr, key in (("precision_", "precision"), ("bound_", "bound")):
            if key in state:
                setattr(self, attr, math.nan if state[key] is None else float(state[key]))
        for attr, value in fitted.items():
            setattr(self, attr, value)
        return self


#: Fitted attribute <- the record key it is written under, for every technique.
_RESTORED = (
    ("coverage_", "coverage"),
    ("n_calibration_", "calibration_size"),
    ("certified_", "certified"),
    ("reason_", "reason"),
    ("required_size_", "required_calibration_size"),
)


@dataclass(frozen=True, slots=True)
class Curve:
    """Selective statistics at every distinct score, highest score first."""

    thresholds: np.ndarray  # distinct scores, descending
    accepted: np.ndarray  # items with score >= threshold
    errors: np.ndarray  # wrong items among them
    n: int

    @classmethod
    def build(cls, scores: np.ndarray, correct: np.ndarray) -> Curve:
        order = np.argsort(-scores, kind="stable")
        s = scores[order]
        wrong = np.cumsum(~correct[order])
        # the last position of each run of equal scores closes that threshold's set
        last = np.flatnonzero(np.r_[s[1:] != s[:-1], True])
        return cls(s[last], last + 1, wrong[last], len(s))

    @classmethod
    def on_grid(cls, scores: np.ndarray, correct: np.ndarray, grid: np.ndarray) -> Curve:
        grid = np.unique(np.asarray(grid, dtype=float))[::-1]
        s = np.sort(scores)
        wrong_sorted = np.cumsum((~correct[np.argsort(scores, kind="stable")])[::-1])[::-1]
        first = np.searchsorted(s, grid, side="left")  # items at index >= first pass
        accepted = len(s) - first
        errors = np.where(first < len(s), wrong_sorted[np.minimum(first, len(s) - 1)], 0)
        return cls(grid, accepted.astype(int), errors.astype(int), len(s))

    @property
    def precision(self) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(self.accepted > 0, 1.0 - self.errors / self.accepted, np.nan)


class ThresholdFitter(Technique):
    """Base of the single-threshold fitters: ``predict`` and the shared fitted attributes.

    Fitted attributes common to all of them: ``threshold_`` (``inf`` routes nothing),
    ``coverage_`` and ``precision_`` (on the calibration data; ``precision_`` is ``nan``
    when nothing is accepted), ``n_calibration_``.
    """

    def fit(self, scores: Any, correct: Any) -> ThresholdFitter:  # pragma: no cover
        raise NotImplementedError

    def predict(self, scores: Any) -> np.ndarray:
        """Boolean array: which items pass the threshold (are auto-routed)."""
        self._check_fitted("threshold_")
        s = as_scores(scores, allow_empty=True)
        return s >= self.threshold_

    def per_class_base(self) -> ThresholdFitter:
        return self

    def _set_common(self, curve: Curve, index: int | None) -> None:
        if index is None:
            self.threshold_ = math.inf
            self.coverage_ = 0.0
            self.precision_ = math.nan
            self.n_accepted_ = 0
        else:
            self.threshold_ = float(curve.thresholds[index])
            self.n_accepted_ = int(curve.accepted[index])
            self.coverage_ = self.n_accepted_ / curve.n
            self.precision_ = (
                1.0 - curve.errors[index] / curve.accepted[index]
                if curve.accepted[index]
                else math.nan
            )
        self.n_calibration_ = curve.n

    def _record_certificate(
        self,
        curve: Curve,
        best: int | None,
        level: float,
        target: float,
        plan: tuple[float, int],
    ) -> None:
        """The fitted state of a certifying fit whose lowest certified candidate is ``best``.

        ``level`` is the level ``best`` was certified at (its bound's); ``plan`` is the level
        and zero-error minimum the "why not" text plans with when nothing was certified.
        """
        self.reason_: str | None = None
        self.required_size_: int | None = None
        self._set_common(curve, best)
        if best is None:
            self.certified_ = False
            self.bound_ = math.nan
            self.reason_, self.required_size_ = _why_not(curve, target, *plan)
        else:
            self.certified_ = True
            self.bound_ = float(
                clopper_pearson_lower(
                    curve.accepted[best] - curve.errors[best], curve.accepted[best], level
                )
            )

    def _validate(self, scores: Any, correct: Any) -> tuple[np.ndarray, np.ndarray]:
        s = as_scores(scores)
        c = as_flags(correct)
        same_length(scores=s, correct=c)
        return s, c

    def _state(self) -> dict[str, Any]:
        self._check_fitted("threshold_")
        out: dict[str, Any] = {
            "method": self.method,
            "params": {k: v for k, v in self.get_params(deep=False).items() if _plain(v)},
            "score": self.score_name,
            "threshold": jsonable_threshold(self.threshold_),
            "calibration_size": self.n_calibration_,
            "coverage": self.coverage_,
            "precision": None if math.isnan(self.precision_) else self.precision_,
        }
        out.update(self._extra_summary())
        return out

    def _extra_summary(self) -> dict[str, Any]:
        return {}


class ThreeWayTechnique(Technique):
    """Base of the techniques with two thresholds: auto-route at or above ``threshold_``,
    ask the user at or above ``ask_threshold_``, else human review."""

    threshold_: float
    ask_threshold_: float

    def predict(self, scores: Any) -> np.ndarray:
        """Array of actions: ``auto_route``, ``ask_user`` or ``human_review``."""
        self._check_fitted("threshold_")
        s = as_scores(scores, allow_empty=True)
        return three_way_actions(s, self.threshold_, self.ask_threshold_)


class PrecisionCertifier(ThresholdFitter):
    """Base of the fitters that certify a precision target at error probability ``delta``:
    their checked options and the summary of their certificate."""

    target: float
    delta: float

    def _target_delta(self) -> tuple[float, float]:
        """``target`` and ``delta``, each checked to lie in (0, 1)."""
        return check_fraction(self.target, "target"), check_fraction(self.delta, "delta")

    def _certificate_summary(self, guarantee: str, **figures: Any) -> dict[str, Any]:
        """The certificate as the fit record holds it: target, delta, whether it certified
        and its bound, ``figures`` (the procedure's own), why not, and the ``guarantee``."""
        return {
            "target": float(self.target),
            "delta": float(self.delta),
            "certified": bool(self.certified_),
            "bound": None if math.isnan(self.bound_) else self.bound_,
            **figures,
            "reason": self.reason_,
            "required_calibration_size": self.required_size_,
            "guarantee": guarantee,
        }


def _plain(v: Any) -> bool:
    return v is None or isinstance(v, (bool, int, float, str))


#: Operating points with fewer accepted items are too noisy to plan a sample size from
#: (a perfect top-3 says nothing about the precision at useful coverage).
_MIN_PLANNING_ITEMS = 20


def _why_not(curve: Curve, target: float, level: float, n_min: int) -> tuple[str, int | None]:
    """Reason text and an estimate of the calibration size that would certify the target."""
    n = curve.n
    if n < n_min:
        return (
            f"only {n} calibration items; certifying precision {target:g} at this confidence "
            f"needs at least {n_min} auto-routed items even with zero errors",
            n_min,
        )
    prec = curve.precision
    # Estimate from operating points that beat the target on this sample: the size at which
    # their observed precision and coverage would certify it.
    candidates = np.flatnonzero((prec > target) & (curve.accepted >= _MIN_PLANNING_ITEMS))
    best_size: int | None = None
    if candidates.size:
        pick = candidates[np.unique(np.linspace(0, candidates.size - 1, 40).astype(int))]
        best_size = _smallest_planned_size(target, level, prec[pick], curve.accepted[pick] / n)
    top = float(np.nanmax(prec)) if np.any(curve.accepted > 0) else math.nan
    if best_size is None:
        return (
            f"no threshold reaches precision {target:g} on the calibration data "
            f"(best observed {top:.4f}); more data alone will not certify it",
            None,
        )
    if best_size <= n:
        # The plan spreads the errors evenly; this sample's fall where they cost the most,
        # so a size at or below the one at hand is no estimate: say so instead of a number.
        return (
            f"no threshold's Clopper-Pearson lower bound reaches {target:g} with {n} "
            "calibration items; more labelled items are needed (the observed precision is "
            "too close to the target for a size estimate)",
            None,
        )
    return (
        f"no threshold's Clopper-Pearson lower bound reaches {target:g} with {n} calibration "
        f"items; about {best_size} would be needed at the observed precision",
        best_size,
    )
