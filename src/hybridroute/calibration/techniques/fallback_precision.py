"""Fallback precision (research): Wiens' fallback procedure over label-free starts.

Both round-two fitters (this one and :mod:`.label_free_start`) keep
:class:`~.certified_precision.CertifiedPrecisionThreshold`'s guarantee -- the precision of
the items the fitted threshold auto-routes is at least ``target`` with probability at least
``1 - delta`` -- and its footing: the candidates are the distinct calibration scores (or a
grid fixed in advance), tested from the highest down with the exact binomial p-value of the
errors among the calibration items above each; where the tests start is computed from the
scores alone, never from the labels. What differs is how ``delta`` is spent along the
sequence.

Standing assumption, shared with :class:`CertifiedPrecisionThreshold` (Learn-then-Test with
the candidates fixed given the scores): each candidate's p-value is valid for its null
hypothesis "the precision above this candidate is below target". The slow test group
(``tests/calibration/test_guarantees.py``) checks the resulting guarantee over resplits of
Banking77 and over draws from a known population. Only a benchmark uses them: they are
public from :mod:`hybridroute.calibration.experimental`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Self

import numpy as np

from .. import _record as rec
from .._base import check_fraction
from .._bounds import precision_p_value, required_calibration_size
from ._base import Curve, PrecisionCertifier

__all__ = ["FallbackPrecisionThreshold", "fallback_starts"]

_GUARANTEE = "precision >= target with probability >= 1 - delta (exact binomial p-values, {how})"
_LEVEL_TOL = 1e-12


def fallback_starts(
    target: float, delta: float, n: int, n_starts: int | str = 3, weights: Any = None
) -> tuple[list[float], list[int]]:
    """The weights and starting counts of :class:`FallbackPrecisionThreshold`.

    Derived from ``(target, delta, n)`` and the two settings alone (no labels): the first
    start sits at the zero-error minimum for ``(target, w_1 * delta)``, each later one at
    twice the count of the one before. ``n_starts="auto"`` takes the most equal-weight
    starts that fit in ``n`` (the largest ``k`` whose last start, ``m_k * 2**(k - 1)`` with
    ``m_k`` the zero-error minimum at ``delta / k``, is at most ``n``; at least one).

    Parameters
    ----------
    target, delta : float
        The fitter's target precision and error probability, each in (0, 1).
    n : int
        Number of calibration items (only ``"auto"`` uses it).
    n_starts : int or "auto", default 3
        Number of starts.
    weights : sequence of float or None, default None
        Relative weight of each start (normalised to sum to 1); ``None`` is equal weights.

    Returns
    -------
    (list of float, list of int)
        The normalised weights and the accepted counts where the starts sit.

    Raises
    ------
    ValueError
        If ``n_starts`` is neither a positive integer nor ``"auto"``, or ``weights`` is not
        a sequence of positive finite numbers of length ``n_starts``.
    """
    target = check_fraction(target, "target")
    delta = check_fraction(delta, "delta")
    if n_starts == "auto":
        if weights is not None:
            raise ValueError('weights cannot be given with n_starts="auto" (equal weights)')
        k = 1
        while required_calibration_size(target, delta / (k + 1)) * 2**k <= n:
            k += 1
        w = [1.0 / k] * k
    else:
        if isinstance(n_starts, bool) or not isinstance(n_starts, int) or n_starts < 1:
            raise ValueError(f'n_starts must be a positive integer or "auto", got {n_starts!r}')
        if weights is None:
            w = [1.0 / n_starts] * n_starts
        else:
            raw = [float(x) for x in weights]
            if len(raw) != n_starts or not all(math.isfinite(x) and x > 0 for x in raw):
                raise ValueError(
                    f"weights must be {n_starts} positive numbers (one per start), got {weights!r}"
                )
            total = math.fsum(raw)
            w = [x / total for x in raw]
    first = required_calibration_size(target, w[0] * delta)
    return w, [first * 2**j for j in range(len(w))]


def _run_fallback(
    pvals: np.ndarray, starts: Sequence[int], levels: Sequence[float]
) -> tuple[int | None, float]:
    """Wiens' fallback procedure along the candidates, highest first.

    Candidate ``starts[j]`` is given level ``levels[j]``, every other candidate none of its
    own; a rejected candidate passes its whole level on to the next one. Returns the lowest
    rejected candidate (``None`` when nothing is rejected) and the level it was rejected at.
    """
    alloc: dict[int, float] = {}
    for s, lv in zip(starts, levels, strict=True):
        alloc[s] = alloc.get(s, 0.0) + lv
    pos = sorted(alloc)
    best: int | None = None
    best_level = math.nan
    carry = 0.0
    for j, s in enumerate(pos):
        end = pos[j + 1] if j + 1 < len(pos) else len(pvals)
        level = carry + alloc[s]
        fails = np.flatnonzero(pvals[s:end] > level)
        stop = int(fails[0]) if fails.size else end - s
        if stop > 0:
            best, best_level = s + stop - 1, level
        # the level travels on only if the whole stretch up to the next start was rejected
        carry = level if not fails.size else 0.0
    return best, best_level


class SequenceFitter(PrecisionCertifier):
    """Shared fit of the two round-two fitters: starts, levels, the chain, the record."""

    grid: Any
    _how = ""

    def _plan(self, target: float, delta: float, n: int) -> tuple[list[float], list[int]]:
        raise NotImplementedError  # pragma: no cover

    def _fit_sequence(self, scores: Any, correct: Any) -> None:
        target, delta = self._target_delta()
        s, c = self._validate(scores, correct)
        weights, counts = self._plan(target, delta, len(s))
        curve = Curve.build(s, c) if self.grid is None else Curve.on_grid(s, c, self.grid)
        pvals = np.asarray(precision_p_value(curve.errors, curve.accepted, target), dtype=float)
        idx = [int(np.searchsorted(curve.accepted, m, side="left")) for m in counts]
        live = [(i, w * delta) for i, w in zip(idx, weights, strict=True) if i < len(pvals)]
        best, level = _run_fallback(pvals, [i for i, _ in live], [lv for _, lv in live])
        self.weights_ = weights
        self.start_counts_ = counts
        self.p_values_ = pvals
        self.level_ = math.nan if best is None else float(level)
        # nothing certified: plan at the first start's own level, from its count
        self._record_certificate(curve, best, level, target, (weights[0] * delta, counts[0]))

    def _certifiable_count(self) -> int:
        """Fewest accepted items a zero-error calibration set could certify (the first start)."""
        target, delta = self._target_delta()
        return self._plan(target, delta, 0)[1][0]

    def _extra_summary(self) -> dict[str, Any]:
        return self._certificate_summary(
            _GUARANTEE.format(how=self._how),
            level=None if math.isnan(self.level_) else self.level_,
            weights=list(self.weights_),
            start_counts=list(self.start_counts_),
        )

    @classmethod
    def _recorded_plan(
        cls, target: float, delta: float, n: int, params: Any, weights: Any, field: str
    ) -> tuple[list[float], list[int]]:
        """The weights and start counts the record's settings give."""
        return cls._from_params(params)._plan(target, delta, n)

    def fit(self, scores: Any, correct: Any) -> Self:
        """Fit on calibration scores and correctness flags; returns ``self``."""
        self._fit_sequence(scores, correct)
        return self

    @classmethod
    def _read(cls, state: Any, field: str) -> Self:
        """Starts, weights and level from the record's settings, and the certificate there.

        The starts are recomputed from ``(target, delta, calibration_size)`` and the recorded
        settings (no labels enter them); the level must be one the procedure can reach at the
        threshold's accepted count -- ``delta`` times the weights of a run of consecutive
        starts ending at the last start at or below that count -- and the counts must
        certify there.
        """
        target, delta, params = rec.target_delta(state, field)
        n, accepted, errors = rec.accepted_counts(state, field)
        weights, counts = state.get("weights"), state.get("start_counts")
        rec.ensure(
            isinstance(weights, list) and len(weights) >= 1 and all(rec.is_num(w) for w in weights),
            f"{field}.weights",
            "must be a non-empty list of numbers",
        )
        rec.ensure(
            isinstance(counts, list) and all(isinstance(c, int) for c in counts),
            f"{field}.start_counts",
            "must be a list of counts",
        )
        want_w, want_c = cls._recorded_plan(target, delta, n, params, weights, field)
        rec.ensure(
            len(weights) == len(want_w)
            and all(abs(a - b) <= _LEVEL_TOL for a, b in zip(weights, want_w, strict=True)),
            f"{field}.weights",
            f"{weights!r} are not the weights its settings give ({want_w!r})",
        )
        rec.same(counts, want_c, f"{field}.start_counts", f"{field}'s settings")
        level = state.get("level")
        if rec.claims_certificate(state, field, accepted, ("threshold", "bound", "level")):
            rec.ensure(
                accepted >= counts[0],
                f"{field}.coverage",
                f"{accepted} accepted items are fewer than the first start's {counts[0]}",
            )
            last = sum(1 for c in counts if c <= accepted) - 1
            reachable = []
            for first in range(last + 1):
                lv = 0.0
                for w in weights[first : last + 1]:
                    lv += w * delta
                reachable.append(lv)
            rec.ensure(
                rec.is_num(level)
                and any(abs(level - lv) <= _LEVEL_TOL * delta for lv in reachable),
                f"{field}.level",
                f"{level!r} is not a level the sequence reaches at {accepted} accepted items "
                f"({', '.join(f'{lv:.6g}' for lv in reachable)})",
            )
            rec.certificate(state, field, target, level, accepted, errors)
        return cls._from_params(params)._restore(
            state,
            field,
            weights_=list(weights),
            start_counts_=list(counts),
            level_=math.nan if level is None else float(level),
            n_accepted_=accepted,
        )

    @classmethod
    def _from_params(cls, params: Any) -> Self:
        names = cls._param_names()
        return cls(**{k: v for k, v in params.items() if k in names})


class FallbackPrecisionThreshold(SequenceFitter):
    """Several starts whose levels pass along the sequence (Wiens' fallback procedure).

    ``delta`` is split among ``n_starts`` starting points with ``weights`` (equal by
    default), placed at accepted counts computed from the scores alone: the first at the
    zero-error minimum for ``(target, w_1 * delta)``, each later one at twice the count of
    the one before (:func:`fallback_starts`). Candidates are tested from the highest down.
    A start is tested at its own level; every other candidate has none of its own. A
    certified candidate passes its whole level on to the next one, so a chain that runs
    into the next start continues at the *sum* of the two levels, and one that fails (a
    few confident mistakes near the top) loses only what it had gathered: the next start
    still holds its own level. The lowest certified candidate is the threshold.

    With equal weights and three starts, the starts are those of
    ``CertifiedPrecisionThreshold(target, delta)`` and every candidate it certifies is
    certified here too (each of its chains runs at ``delta / 3``; here the chain through
    the same candidates holds at least that), so the coverage at the same data and
    ``delta`` is never lower.

    Why the guarantee holds (Wiens 2003; the graphical form of Bretz et al. 2009): number
    the candidates in test order and let ``a_i`` be the level of candidate ``i`` (``w_j *
    delta`` at a start, 0 elsewhere). Candidate ``i`` is tested at ``a_r + ... + a_i``,
    where ``r..i-1`` were all certified. Suppose some wrong candidate (precision below
    target) is certified and let ``i`` be the first one. Every candidate in ``r..i-1`` was
    certified before it, so all are right: ``r..i`` lies in ``B_i``, the block made of
    ``i`` and the run of right candidates just before it. The blocks of different wrong
    candidates are disjoint and fixed by the (unknown) truth, so the chance of any wrong
    certificate is at most ``sum_i P(p_i <= sum_{B_i} a) <= sum_i sum_{B_i} a <= delta``.

    Parameters
    ----------
    target : float, default 0.95
        Precision to certify for the auto-routed items, in (0, 1).
    delta : float, default 0.05
        Allowed probability that the certificate is wrong, in (0, 1).
    n_starts : int or "auto", default 3
        Number of starts; ``"auto"`` takes as many equal-weight starts as fit in the
        calibration set (see :func:`fallback_starts`).
    weights : sequence of float or None, default None
        Relative weight of each start (normalised); ``None`` is equal weights. Fix them in
        advance: weights chosen after looking at the calibration labels void the guarantee.
    grid : array-like or None, default None
        Candidate thresholds fixed in advance; ``None`` uses the distinct calibration scores.

    Attributes
    ----------
    threshold_ : float
        The lowest certified candidate (``inf``: nothing is auto-routed).
    certified_ : bool
    bound_ : float or nan
        Clopper–Pearson lower bound on the precision at ``threshold_``, at ``level_``.
    level_ : float or nan
        The level the threshold was certified at: ``delta`` times the weights of the starts
        its chain ran through (at most ``delta``).
    weights_ : list of float
        The normalised weights.
    start_counts_ : list of int
        Accepted counts where the starts sit (a start beyond the data is not used).
    reason_, required_size_ : str or None, int or None
        Why not, and the calibration size estimated to certify (at the first start's
        level), when ``certified_`` is False.
    p_values_ : ndarray
        Every candidate's p-value.
    """

    method = "fallback_precision"
    objective = "precision"
    objective_help = ""
    _how = "Wiens fallback over label-free starts"

    def __init__(
        self,
        target: float = 0.95,
        delta: float = 0.05,
        n_starts: int | str = 3,
        weights: Sequence[float] | None = None,
        grid: Any = None,
    ) -> None:
        self.target = target
        self.delta = delta
        self.n_starts = n_starts
        self.weights = weights
        self.grid = grid

    def _plan(self, target: float, delta: float, n: int) -> tuple[list[float], list[int]]:
        return fallback_starts(target, delta, n, self.n_starts, self.weights)

    @classmethod
    def _recorded_plan(
        cls, target: float, delta: float, n: int, params: Any, weights: Any, field: str
    ) -> tuple[list[float], list[int]]:
        n_starts = params.get("n_starts")
        rec.ensure(
            n_starts == "auto"
            or (isinstance(n_starts, int) and not isinstance(n_starts, bool) and n_starts >= 1),
            f"{field}.params.n_starts",
            f"{n_starts!r} is neither a positive integer nor 'auto'",
        )
        # weights=None is recorded in params (equal weights); custom weights are not plain
        # values, so the record's own list stands for them, checked to be a split of delta
        custom = None if "weights" in params and params["weights"] is None else weights
        if custom is not None:
            rec.ensure(
                all(w > 0 for w in weights) and abs(math.fsum(weights) - 1.0) <= _LEVEL_TOL,
                f"{field}.weights",
                f"{weights!r} are not positive shares of delta summing to 1",
            )
        try:
            return fallback_starts(target, delta, n, n_starts, custom)
        except ValueError as exc:
            raise rec.Contradiction(f"{field}.weights", str(exc)) from None
