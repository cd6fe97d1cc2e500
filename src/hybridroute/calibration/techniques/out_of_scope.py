"""Out of scope: a cut-off that flags items outside the label set."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Self

import numpy as np

from .. import _record as rec
from .._base import as_flags, as_scores, check_fraction, same_length
from .._bounds import required_calibration_size
from ._base import Technique, Verdict
from .certified_precision import CertifiedPrecisionThreshold

if TYPE_CHECKING:
    from .._options import FitOptions

__all__ = ["OutOfScopeThreshold"]


class OutOfScopeThreshold(Technique):
    """Cut-off on an out-of-scope score (higher = more likely outside the label set).

    Items scoring at or above ``cutoff_`` are flagged out of scope and never auto-routed.
    Fitted on ``(oos_scores, is_oos)`` from a calibration split that contains labelled
    out-of-scope items, for one or both of:

    * ``recall``: the share of out-of-scope traffic flagged is at least ``recall`` with
      probability ``1 - delta``. Exact for continuous scores: with ``m`` out-of-scope
      calibration items, the ``k``-th lowest of their scores leaves a share
      ``Beta(k, m - k + 1)`` of out-of-scope traffic below it, so the largest ``k`` with
      ``P(Beta(k, m - k + 1) <= 1 - recall) >= 1 - delta`` is used.
    * ``precision`` (jointly with routing): the items *not* flagged have precision (in
      scope and top label right, so an out-of-scope item counts as a misroute) at least
      ``precision`` with probability ``1 - delta``, certified as in
      :class:`CertifiedPrecisionThreshold` on the negated score. Needs ``correct``.

    With both, ``delta`` is split in two (Bonferroni) and the stricter cut-off is kept.
    When a target cannot be certified ``certified_`` is False, ``reason_`` says why and
    the cut-off flags everything (``cutoff_ = -inf``), so nothing is routed on trust.

    As a ``fit_policy`` objective (``oos``): out-of-scope recall at least ``target`` and
    precision ``precision_target`` certified on the items the gate lets through, each at
    ``delta / 2``.

    Parameters
    ----------
    recall : float or None, default 0.95
    precision : float or None, default None
    delta : float, default 0.05

    Attributes
    ----------
    cutoff_ : float
    certified_ : bool
    reason_ : str or None
    required_size_ : int or None
        Out-of-scope calibration items needed for the recall target, when short.
    recall_ : float
        Share of calibration out-of-scope items flagged.
    flagged_in_scope_ : float
        Share of calibration in-scope items flagged (the price of the recall target).
    """

    method = "out_of_scope"
    score_name = "oos_score"
    objective = "oos"
    objective_help = "out-of-scope recall >= target plus certified --precision-target on the rest"
    objective_options = ("precision_target",)
    precision_option = "precision_target"
    needs_oos_label = True
    route_objective = "precision"

    def __init__(
        self, recall: float | None = 0.95, precision: float | None = None, delta: float = 0.05
    ) -> None:
        self.recall = recall
        self.precision = precision
        self.delta = delta

    @classmethod
    def for_objective(cls, options: FitOptions) -> CertifiedPrecisionThreshold:
        """The auto-route threshold behind the gate: certified ``precision_target``."""
        return CertifiedPrecisionThreshold(options.precision_target, options.delta / 2)

    @classmethod
    def gate_for(cls, options: FitOptions) -> OutOfScopeThreshold:
        """The gate: out-of-scope recall ``target`` at ``delta / 2``."""
        return cls(recall=options.target, delta=options.delta / 2)

    def fit(self, oos_scores: Any, is_oos: Any, correct: Any = None) -> Self:
        """Fit the cut-off on a calibration split that holds labelled out-of-scope items.

        Parameters
        ----------
        oos_scores : array-like of float, shape (n_items,)
            Each item's out-of-scope score (higher = more likely outside the label set);
            finite.
        is_oos : array-like of bool or 0/1, shape (n_items,)
            Whether each item really is out of scope. With no out-of-scope item the
            recall target cannot be certified (``certified_`` False, everything flagged).
        correct : array-like of bool or 0/1, shape (n_items,), optional
            Whether each item's top label was right; needed for a ``precision`` target,
            ignored otherwise.

        Returns
        -------
        OutOfScopeThreshold
            ``self``, fitted. An uncertified target is not an error: see ``certified_``.

        Raises
        ------
        ValueError
            If neither target is set, a target or ``delta`` is outside (0, 1), the arrays
            are empty, differ in length or hold bad values, or a precision target comes
            without ``correct``.
        """
        from scipy import stats

        if self.recall is None and self.precision is None:
            raise ValueError("give a recall target, a precision target, or both")
        delta = check_fraction(self.delta, "delta")
        parts = (self.recall is not None) + (self.precision is not None)
        level = delta / parts
        s = as_scores(oos_scores, "oos_scores")
        oos = as_flags(is_oos, "is_oos")
        same_length(oos_scores=s, is_oos=oos)
        cutoffs = []
        reasons = []
        self.required_size_ = None
        if self.recall is not None:
            r = check_fraction(self.recall, "recall")
            x = np.sort(s[oos])
            m = len(x)
            ks = np.arange(1, m + 1)
            ok = np.flatnonzero(stats.beta.cdf(1.0 - r, ks, m - ks + 1) >= 1.0 - level)
            if ok.size:
                cutoffs.append(float(x[int(ok[-1])]))
            else:
                need = required_calibration_size(r, level)
                self.required_size_ = need
                reasons.append(
                    f"{m} out-of-scope calibration items cannot certify recall {r:g}; "
                    f"at least {need} are needed"
                )
                cutoffs.append(-math.inf)
        if self.precision is not None:
            if correct is None:
                raise ValueError("a precision target needs correct= (top label right)")
            c = as_flags(correct)
            same_length(oos_scores=s, correct=c)
            f = CertifiedPrecisionThreshold(self.precision, level).fit(-s, c & ~oos)
            self.precision_fit_ = f
            if f.certified_:
                # routed when -score >= t, i.e. score <= -t: flag strictly above -t
                cutoffs.append(float(np.nextafter(-f.threshold_, math.inf)))
            else:
                reasons.append(f.reason_ or "precision target not certified")
                cutoffs.append(-math.inf)
        self.cutoff_ = min(cutoffs)
        self.certified_ = not reasons
        self.reason_ = "; ".join(reasons) if reasons else None
        flagged = s >= self.cutoff_
        self.recall_ = float(flagged[oos].mean()) if oos.any() else math.nan
        self.flagged_in_scope_ = float(flagged[~oos].mean()) if (~oos).any() else math.nan
        self.n_calibration_ = len(s)
        self.n_out_of_scope_ = int(oos.sum())
        return self

    def predict(self, oos_scores: Any) -> np.ndarray:
        """Boolean array: which items are flagged out of scope."""
        self._check_fitted("cutoff_")
        return as_scores(oos_scores, "oos_scores", allow_empty=True) >= self.cutoff_

    def decide(self, score: float, label: str | None = None) -> Verdict:
        """Whether one item's out-of-scope score stays below the cut-off (not flagged)."""
        return Verdict(not score >= self.cutoff_, self._cutoff())

    def _cutoff(self) -> float | None:
        return None if math.isinf(self.cutoff_) else self.cutoff_

    def _state(self) -> dict[str, Any]:
        """The fitted state as plain JSON values (``cutoff: null`` flags everything)."""
        self._check_fitted("cutoff_")
        return {
            "method": self.method,
            "score": self.score_name,
            "cutoff": self._cutoff(),
            "recall_target": None if self.recall is None else float(self.recall),
            "precision_target": None if self.precision is None else float(self.precision),
            "delta": float(self.delta),
            "certified": self.certified_,
            "reason": self.reason_,
            "required_calibration_size": self.required_size_,
            "recall": None if math.isnan(self.recall_) else self.recall_,
            "flagged_in_scope": None
            if math.isnan(self.flagged_in_scope_)
            else self.flagged_in_scope_,
            "calibration_size": self.n_calibration_,
            "out_of_scope_items": self.n_out_of_scope_,
        }

    @classmethod
    def _read(cls, state: Any, field: str) -> Self:
        cutoff = state.get("cutoff")
        rec.ensure(
            cutoff is None or rec.is_num(cutoff), f"{field}.cutoff", "must be a number or null"
        )
        rec.same(
            state["certified"],
            cutoff is not None,
            f"{field}.certified",
            f"{field}.cutoff (null: not certified)",
        )
        delta = state.get("delta")
        rec.ensure(
            rec.is_num(delta) and 0.0 < delta < 1.0, f"{field}.delta", f"{delta!r} is not in (0, 1)"
        )
        recall, precision = state.get("recall_target"), state.get("precision_target")
        rec.ensure(
            recall is not None or precision is not None,
            f"{field}.recall_target",
            "a cut-off fits a recall target, a precision target or both",
        )
        level = delta / ((recall is not None) + (precision is not None))
        m = rec.count(state.get("out_of_scope_items"), f"{field}.out_of_scope_items")
        if recall is not None and state["certified"]:
            rec.ensure(
                rec.is_num(recall) and 0.0 < recall < 1.0, f"{field}.recall_target", "not in (0, 1)"
            )
            # the most lenient order statistic (the lowest score) certifies recall r with m
            # items only if r ** m <= level
            rec.ensure(
                m >= 1 and recall**m <= level,
                f"{field}.certified",
                f"true, but {m} out-of-scope items cannot certify recall {recall:g} at level "
                f"{level:g}",
            )
        nan = {k: state.get(k) for k in ("recall", "flagged_in_scope")}
        return cls(recall, precision, delta)._restore(
            state,
            field,
            cutoff_=-math.inf if cutoff is None else float(cutoff),
            recall_=math.nan if nan["recall"] is None else nan["recall"],
            flagged_in_scope_=math.nan
            if nan["flagged_in_scope"] is None
            else nan["flagged_in_scope"],
            n_out_of_scope_=m,
        )
