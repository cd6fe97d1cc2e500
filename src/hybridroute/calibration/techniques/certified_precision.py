"""Certified precision: the threshold whose auto-routed precision holds with probability 1 - delta."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Self

import numpy as np

from .. import _record as rec
from .._bounds import precision_p_value, required_calibration_size
from ._base import Curve, PrecisionCertifier

if TYPE_CHECKING:
    from .._options import FitOptions

__all__ = ["CertifiedPrecisionThreshold"]


class CertifiedPrecisionThreshold(PrecisionCertifier):
    """Threshold whose auto-routed precision is at least ``target`` with probability ``1 - delta``.

    The guarantee: over the draw of an exchangeable calibration set, the precision of
    the items the fitted threshold auto-routes -- on fresh traffic from the same
    distribution -- is below ``target`` with probability at most ``delta``.

    How (Learn-then-Test with fixed-sequence testing): each candidate threshold ``t``
    carries the null hypothesis "precision above ``t`` is below ``target``", tested with
    the exact binomial p-value of the errors among the calibration items above ``t``
    (equivalently, its one-sided Clopper–Pearson lower bound). Candidates are tested from
    the highest score downwards and testing stops at the first one not rejected; the
    lowest rejected candidate is the threshold. A fixed sequence spends the whole
    ``delta`` on one path, so no multiplicity correction is needed along it.

    The sequence starts at the first candidate that accepts enough items that a
    zero-error sample could be certified at all
    (:func:`required_calibration_size`); higher candidates can never be rejected and would
    only end the sequence. With ``n_starts > 1`` several sequences start at
    geometrically spaced accepted counts and each runs at ``delta / n_starts``
    (Bonferroni), so one unlucky high-confidence mistake near the top does not end the
    search; the lowest threshold rejected by any sequence is kept.

    The starting counts scale with ``delta`` (a smaller ``delta`` needs more items before
    anything can be certified), so thresholds fitted at two values of ``delta`` come from
    different sequences. Near the top of the score range, where a few confident mistakes
    can end a sequence, a smaller ``delta`` therefore now and then gives a *lower*
    threshold: on Banking77 and CLINC150 at target 0.98 this happened for 10–23% of
    calibration halves somewhere on a ladder from 0.05 to 0.001 (never at 0.90 or 0.95). Each
    threshold keeps its own guarantee; compare coverages at one ``delta``, not across them.

    When no candidate is rejected the target cannot be certified with this data:
    ``certified_`` is ``False``, ``reason_`` says why, ``required_size_`` estimates how
    many calibration items would be needed, and ``threshold_`` is ``inf`` (nothing is
    auto-routed rather than pretending).

    Parameters
    ----------
    target : float, default 0.95
        Precision to certify for the auto-routed items.
    delta : float, default 0.05
        Allowed probability that the certificate is wrong.
    n_starts : int, default 3
        Number of fixed sequences (Bonferroni split of ``delta``).
    grid : array-like or None, default None
        Candidate thresholds fixed in advance. ``None`` uses the distinct calibration
        scores (finest resolution).

    Attributes
    ----------
    threshold_ : float
    certified_ : bool
    bound_ : float or nan
        Clopper–Pearson lower bound on the precision at ``threshold_`` (at level
        ``delta / n_starts``).
    reason_ : str or None
    required_size_ : int or None
        Calibration size estimated to certify the target when ``certified_`` is False
        (``None`` when certified, or when the data give no hope at any size).
    p_values_ : ndarray
        The p-value of every candidate (for inspection; not kept in a policy file).
    """

    method = "certified_precision"
    objective: ClassVar[str | None] = "precision"
    objective_help = "certified precision >= target with probability 1-delta"

    def __init__(
        self,
        target: float = 0.95,
        delta: float = 0.05,
        n_starts: int = 3,
        grid: Any = None,
    ) -> None:
        self.target = target
        self.delta = delta
        self.n_starts = n_starts
        self.grid = grid

    @classmethod
    def for_objective(cls, options: FitOptions) -> CertifiedPrecisionThreshold:
        return cls(options.target, options.delta)

    def fit(self, scores: Any, correct: Any) -> Self:
        """Fit on calibration scores and correctness flags; returns ``self``."""
        target, delta = self._target_delta()
        k = self._n_starts()
        s, c = self._validate(scores, correct)
        curve = Curve.build(s, c) if self.grid is None else Curve.on_grid(s, c, self.grid)
        level = delta / k
        pvals = np.asarray(precision_p_value(curve.errors, curve.accepted, target), dtype=float)
        n_min = required_calibration_size(target, level)
        starts = _start_positions(curve.accepted, n_min, k)
        best: int | None = None
        for start in starts:
            i = start
            last = None
            while i < len(pvals) and pvals[i] <= level:
                last = i
                i += 1
            if last is not None and (best is None or last > best):
                best = last
        self.p_values_ = pvals
        self.level_ = level
        self._record_certificate(curve, best, level, target, (level, n_min))
        return self

    def _n_starts(self) -> int:
        if int(self.n_starts) != self.n_starts or self.n_starts < 1:
            raise ValueError(f"n_starts must be a positive integer, got {self.n_starts!r}")
        return int(self.n_starts)

    def _certifiable_count(self) -> int:
        """Fewest accepted items a zero-error calibration set could certify (the first start)."""
        target, delta = self._target_delta()
        return required_calibration_size(target, delta / self._n_starts())

    def _extra_summary(self) -> dict[str, Any]:
        return self._certificate_summary(
            "precision >= target with probability >= 1 - delta "
            "(Clopper-Pearson, fixed-sequence testing)"
        )

    @classmethod
    def _read(cls, state: Any, field: str) -> Self:
        """The bound and the certificate from the record's counts."""
        target, delta, params = rec.target_delta(state, field)
        n_starts = params.get("n_starts")
        rec.ensure(
            isinstance(n_starts, int) and not isinstance(n_starts, bool) and n_starts >= 1,
            f"{field}.params.n_starts",
            f"{n_starts!r} is not a positive integer",
        )
        level = delta / n_starts
        counts = rec.accepted_counts(state, field)
        _, accepted, errors = counts
        if rec.claims_certificate(state, field, accepted, ("threshold", "bound")):
            rec.ensure(
                accepted > 0, f"{field}.coverage", "a certified threshold accepts some items"
            )
            rec.certificate(state, field, target, level, accepted, errors)
        return cls(target, delta, n_starts)._restore(
            state, field, level_=level, n_accepted_=accepted
        )


def _start_positions(accepted: np.ndarray, n_min: int, k: int) -> list[int]:
    """Candidate indices where the ``k`` sequences begin (accepted counts n_min * 2**j)."""
    out: list[int] = []
    for j in range(k):
        want = n_min * (2**j)
        idx = int(np.searchsorted(accepted, want, side="left"))
        if idx < len(accepted) and idx not in out:
            out.append(idx)
    return out
