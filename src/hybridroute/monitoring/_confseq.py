"""A betting confidence sequence for the mean of [0, 1]-bounded observations.

The construction is the hedged capital process of Waudby-Smith & Ramdas (2024),
"Estimating means of bounded random variables by betting", JRSS-B 86(1), with a
predictable plug-in of the growth-rate-optimal bet (aGRAPA, their section 5.3), bets
truncated to ``[0, c/m]`` and ``[0, c/(1 - m)]``, evaluated on a grid of candidate means and
kept as the running intersection. Importance weights extend it to audit samples drawn
with varying inclusion probabilities (see :class:`BettingConfidenceSequence`).

:class:`BettingDropTest` is the one-sided companion the monitor's ``breach`` state uses: a
test supermartingale against "the mean is at least ``level`` at every step" whose bets are
estimated from recent observations only, so it stays valid under any drift that respects
the level and reacts to a drop without paying for a long healthy past (as long as the
recent mean stayed above the level in it).

:func:`repeated_clopper_pearson` is the naive baseline both replace: a fixed-sample exact
interval recomputed after every label, whose chance of *ever* excluding the truth grows
with the number of looks.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np

from ..calibration import clopper_pearson_lower, clopper_pearson_upper
from ..calibration._base import check_fraction

__all__ = ["BettingConfidenceSequence", "BettingDropTest", "repeated_clopper_pearson"]

# Steps processed per vectorised block: a (block x grid) matrix of float64 stays small.
_BLOCK = 512
# A floor on the bet's denominator (a stream of observations all exactly at the level).
_TINY = 1e-12


def _check_delta(delta: Any) -> float:
    return check_fraction(delta, "delta")


def _as_observations(xs: Any, weights: Any) -> tuple[np.ndarray, np.ndarray]:
    """Validated 1-d float arrays ``(x, w)``; ``x`` in [0, 1], ``w`` in (0, 1]."""
    try:
        x = np.asarray(xs, dtype=float)
    except (TypeError, ValueError):
        raise ValueError("observations must be numbers in [0, 1]") from None
    if x.ndim == 0:
        x = x.reshape(1)
    if x.ndim != 1:
        raise ValueError(f"observations must be one-dimensional, got shape {x.shape}")
    bad = ~(np.isfinite(x) & (x >= 0.0) & (x <= 1.0))
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(f"observation {i} must be a finite number in [0, 1], got {float(x[i])!r}")
    if weights is None:
        return x, np.ones_like(x)
    if not isinstance(weights, (int, float, np.ndarray, list, tuple)):
        weights = list(weights)  # a generator or other one-pass iterable
    try:
        w = np.asarray(weights, dtype=float)
    except (TypeError, ValueError):
        raise ValueError("weights must be numbers in (0, 1]") from None
    if w.ndim == 0:
        w = np.full_like(x, float(w))
    if w.shape != x.shape:
        raise ValueError(f"weights have shape {w.shape}, observations {x.shape}")
    bad = ~(np.isfinite(w) & (w > 0.0) & (w <= 1.0))
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(
            f"weight {i} must be in (0, 1] (a floor on inclusion probabilities divided "
            f"by this item's inclusion probability), got {float(w[i])!r}"
        )
    return x, w


class BettingConfidenceSequence:
    r"""Anytime-valid confidence sequence for a mean in [0, 1], by betting.

    For each candidate mean ``m`` on a grid, two gamblers bet against ``H0: mean = m``.
    After observations ``x_1..x_t`` with weights ``w_1..w_t`` their capitals are

    .. math::

        K^+_t(m) = \prod_{i \le t} \bigl(1 + \lambda^+_i(m)\, w_i (x_i - m)\bigr), \qquad
        K^-_t(m) = \prod_{i \le t} \bigl(1 - \lambda^-_i(m)\, w_i (x_i - m)\bigr),

    with bets ``λ⁺_i(m) ∈ [0, c/m]`` and ``λ⁻_i(m) ∈ [0, c/(1 - m)]`` computed from
    ``x_1..x_{i-1}`` only (predictable). ``m`` is rejected at time ``t`` when
    ``max(θ K⁺_t(m), (1 - θ) K⁻_t(m)) >= 1/δ``; the confidence sequence ``CS_t`` is the set
    of grid points never rejected up to ``t`` (the running intersection), reported as the
    interval from the rejected grid point just below the lowest retained one to the
    rejected grid point just above the highest (so the grid's resolution never makes the
    interval narrower than the exact set).

    The bet is the aGRAPA plug-in of the growth-rate-optimal bet
    ``E[w(x - m)] / E[w²(x - m)²]``, estimated from the past with one pseudo-observation
    of mean 1/2 and variance 1/4, then truncated; any predictable choice keeps validity,
    this one only affects width.

    **Why it is valid.** Fix the true mean ``m = p``. Each factor is nonnegative:
    ``w (x - m) ∈ [-m, 1 - m]`` because ``x, w ∈ [0, 1]``, so ``1 + λ⁺ w (x - m) >= 1 - c > 0``
    and ``1 - λ⁻ w (x - m) >= 1 - c > 0``. Given the past, the bets are fixed numbers and
    ``E[w_i (x_i - p) | past] = 0`` (see *Guarantee*), so each factor has conditional mean 1:
    ``K⁺(p)`` and ``K⁻(p)`` are nonnegative martingales from 1, and so is their mixture
    ``θ K⁺ + (1 - θ) K⁻ >= max(θ K⁺, (1 - θ) K⁻)``. Ville's inequality gives
    ``P(∃ t: mixture_t >= 1/δ) <= δ``: the truth is ever rejected with probability at most
    ``δ``. (One-sided, the same argument needs less: ``K⁺(m)`` is a nonnegative
    supermartingale whenever every conditional mean is ``<= m``, and ``K⁻(m)`` whenever
    every one is ``>= m``, drifting or not.)

    **Guarantee.** ``P(∃ t: p ∉ CS_t) <= δ`` when each observation has conditional mean
    ``p`` given the earlier ones -- i.i.d. observations, e.g. audits of a stationary stream
    whose outcomes do not depend on the past, fed in an order that does not depend on
    their values. For precision monitoring: the audited auto-routed decisions of one router
    version, ``x_i = 1`` when the audit found decision ``i`` correct. With a *constant*
    audit rate, audited items are a uniform sample of auto-routed traffic, so unit weights
    are right and ``p`` is the auto-route precision. When inclusion probabilities ``π_i``
    vary (by period or by item), pass ``w_i = π_min / π_i`` with ``π_min`` a floor on every
    inclusion probability *fixed in advance* (e.g. the smallest audit rate the
    configuration allows), not the smallest one seen so far. Then, counting every
    auto-routed decision ``j`` with audit indicator ``A_j ~ Bernoulli(π_j)`` drawn
    independently of its correctness given the decision (a keyed hash of its id), and
    averaging over the decision's features, ``E[A_j (π_min/π_j)(x_j - p)] = π_min (p - p)
    = 0``,
    and an unaudited decision contributes the factor 1: the capital over audited items
    alone is the same martingale, and ``p`` is again the precision of *all* auto-routed
    traffic. The bound is exact (Ville) for a mean on the grid; a mean between two grid
    points is excluded only when both neighbours are rejected, which at the default
    resolution changes nothing measurable (the slow test checks ``p = 0.92``, off the
    grid). Under drift (a mean that changes over time) nothing above is promised: the
    sequence is for one constant mean, it can shrink around an old value and the running
    intersection can empty. If it would empty (probability at most ``δ`` on a stationary
    stream), the set restarts from the grid points the current capital does not reject
    (or the one it rejects least) and :attr:`restarts_` counts it: a restart is itself
    evidence that the mean moved. To detect that a drifting mean fell below a level, use
    :class:`BettingDropTest`, which is valid under drift and, while the recent mean stays
    above the level, does not slow down with the length of the stream.

    Parameters
    ----------
    delta : float, default 0.05
        Error probability in (0, 1), spent once over the whole (infinite) sequence.
    grid : int, default 1000
        Number of candidate means, evenly spaced strictly inside (0, 1); the reported
        bounds have this resolution.
    theta : float, default 0.5
        Share of the hedge given to the upward gambler ``K⁺`` (who rejects means that are
        too low and so raises the lower bound).
    max_bet : float, default 0.5
        The truncation ``c`` in (0, 1): bets stay within ``[0, c/m]`` / ``[0, c/(1-m)]``, so
        one observation never costs a gambler more than the share ``c`` of the capital.

    Attributes
    ----------
    grid_ : ndarray of shape (grid,)
        The candidate means.
    retained_ : ndarray of bool
        Grid points in the current set.
    log_capital_up_, log_capital_down_ : ndarray
        ``log K⁺_t(m)`` and ``log K⁻_t(m)`` on the grid.
    n_ : int
        Observations seen.
    restarts_ : int
        Times the running intersection would have emptied.

    Examples
    --------
    >>> cs = BettingConfidenceSequence(delta=0.05).update_many([1, 1, 1, 1, 0] * 40)
    >>> cs.n, cs.estimate, cs.lower < 0.8 < cs.upper
    (200, 0.8, True)
    """

    def __init__(
        self,
        delta: float = 0.05,
        grid: int = 1000,
        *,
        theta: float = 0.5,
        max_bet: float = 0.5,
    ) -> None:
        # Not an estimator (nothing is fitted): arguments are validated here so a bad
        # level fails where it is written, not at the first label.
        self.delta = _check_delta(delta)
        if isinstance(grid, bool) or not isinstance(grid, (int, np.integer)) or grid < 3:
            raise ValueError(f"grid must be an integer >= 3, got {grid!r}")
        self.grid = int(grid)
        self.theta = check_fraction(theta, "theta")
        self.max_bet = check_fraction(max_bet, "max_bet")
        g = self.grid
        self.grid_ = np.arange(1, g + 1, dtype=float) / (g + 1)
        self.retained_ = np.ones(g, dtype=bool)
        self.log_capital_up_ = np.zeros(g)
        self.log_capital_down_ = np.zeros(g)
        self.n_ = 0
        self.restarts_ = 0
        # sums over the past that the bets need: w, w x, w^2, w^2 x, w^2 x^2
        self._sums = np.zeros(5)
        self._log_threshold = math.log(1.0 / self.delta)
        self._cap_up = self.max_bet / self.grid_
        self._cap_down = self.max_bet / (1.0 - self.grid_)

    # -- reading ---------------------------------------------------------------------

    @property
    def n(self) -> int:
        """Number of observations seen."""
        return self.n_

    @property
    def estimate(self) -> float:
        """Weighted mean ``Σ w x / Σ w`` (``nan`` before the first observation).

        With unit weights the sample mean; with ``w = π_min / π`` the Hájek estimate of the
        mean of the whole stream. Usually, not necessarily, inside the interval.
        """
        total = self._sums[0]
        return float(self._sums[1] / total) if total > 0 else math.nan

    @property
    def lower(self) -> float:
        """Lower end of the current confidence interval (0 before any observation)."""
        return float(self._bounds(self.retained_[None, :])[0][0])

    @property
    def upper(self) -> float:
        """Upper end of the current confidence interval (1 before any observation)."""
        return float(self._bounds(self.retained_[None, :])[1][0])

    # -- updating --------------------------------------------------------------------

    def update(self, x: float, weight: float = 1.0) -> BettingConfidenceSequence:
        """Add one observation; returns ``self``.

        Parameters
        ----------
        x : float
            The observation, in [0, 1] (``1`` = an audited decision found correct).
        weight : float, default 1.0
            In (0, 1]: ``π_min / π`` for an item audited with inclusion probability ``π``.

        Raises
        ------
        ValueError
            If ``x`` is outside [0, 1] or NaN, or ``weight`` is outside (0, 1].
        """
        xs, ws = _as_observations([x], [weight])
        self._advance(xs, ws)
        return self

    def update_many(
        self, xs: Iterable[float], weights: Iterable[float] | float | None = None
    ) -> BettingConfidenceSequence:
        """Add observations in order (vectorised over the grid); returns ``self``.

        Parameters
        ----------
        xs : iterable of float in [0, 1]
        weights : float, iterable of float in (0, 1], or None
            One weight for all, one per observation, or unit weights.

        Raises
        ------
        ValueError
            If an observation lies outside [0, 1] or is NaN, or a weight outside (0, 1];
            nothing is added then.
        """
        self.trace(xs, weights)
        return self

    def trace(
        self, xs: Iterable[float], weights: Iterable[float] | float | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Like :meth:`update_many`, and return the bounds after each observation.

        Parameters
        ----------
        xs : iterable of float in [0, 1]
        weights : float, iterable of float in (0, 1], or None

        Returns
        -------
        lower, upper : ndarray of shape (len(xs),)
            The interval after the first, second, ... new observation.
        """
        x, w = _as_observations(list(xs) if not isinstance(xs, np.ndarray) else xs, weights)
        return self._advance(x, w)

    # -- internals -------------------------------------------------------------------

    def _bounds(self, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Interval ends for each row of a (steps x grid) boolean mask of kept points."""
        g = self.grid
        padded = np.concatenate(([0.0], self.grid_, [1.0]))
        first = np.argmax(mask, axis=1)  # index of the lowest kept point
        last = g - 1 - np.argmax(mask[:, ::-1], axis=1)
        # the rejected neighbours (padded index = grid index + 1, so neighbour = index)
        return padded[first], padded[last + 2]

    def _advance(self, x: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        lowers: list[np.ndarray] = []
        uppers: list[np.ndarray] = []
        for start in range(0, len(x), _BLOCK):
            lo, hi = self._advance_block(x[start : start + _BLOCK], w[start : start + _BLOCK])
            lowers.append(lo)
            uppers.append(hi)
        if not lowers:
            return np.zeros(0), np.zeros(0)
        return np.concatenate(lowers), np.concatenate(uppers)

    def _advance_block(self, x: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        m = self.grid_[None, :]
        w2 = w * w
        steps = np.stack([w, w * x, w2, w2 * x, w2 * x * x], axis=1)
        # sums over strictly earlier observations: the bets are predictable
        past = self._sums[None, :] + np.cumsum(steps, axis=0) - steps
        s_w, s_wx, s_w2, s_w2x, s_w2x2 = (past[:, k : k + 1] for k in range(5))
        numer = (0.5 - m) + s_wx - m * s_w
        denom = 0.25 + (0.5 - m) ** 2 + np.maximum(s_w2x2 - 2.0 * m * s_w2x + m * m * s_w2, 0.0)
        bet = numer / denom
        bet_up = np.clip(bet, 0.0, self._cap_up[None, :])
        bet_down = np.clip(-bet, 0.0, self._cap_down[None, :])
        gain = w[:, None] * (x[:, None] - m)
        log_up = self.log_capital_up_[None, :] + np.cumsum(np.log1p(bet_up * gain), axis=0)
        log_down = self.log_capital_down_[None, :] + np.cumsum(np.log1p(-bet_down * gain), axis=0)
        hedged = np.maximum(math.log(self.theta) + log_up, math.log1p(-self.theta) + log_down)
        rejected = hedged >= self._log_threshold
        kept = self.retained_[None, :] & ~np.logical_or.accumulate(rejected, axis=0)
        empty = ~kept.any(axis=1)
        if empty.any():
            kept = self._restart(kept, rejected, hedged, int(np.argmax(empty)))
        self.retained_ = kept[-1].copy()
        self.log_capital_up_ = log_up[-1].copy()
        self.log_capital_down_ = log_down[-1].copy()
        self._sums = past[-1] + steps[-1]
        self.n_ += len(x)
        return self._bounds(kept)

    def _restart(
        self, kept: np.ndarray, rejected: np.ndarray, hedged: np.ndarray, first: int
    ) -> np.ndarray:
        """Rows from ``first`` on, step by step, restarting whenever the set empties."""
        current = kept[first - 1] if first > 0 else self.retained_
        for t in range(first, len(kept)):
            current = current & ~rejected[t]
            if not current.any():
                self.restarts_ += 1
                current = ~rejected[t]
                if not current.any():
                    current = hedged[t] == hedged[t].min()
            kept[t] = current
        return kept


def repeated_clopper_pearson(
    xs: Iterable[float], delta: float = 0.05
) -> tuple[np.ndarray, np.ndarray]:
    """The naive baseline: a two-sided Clopper–Pearson interval recomputed after every label.

    Each interval alone covers the mean with probability at least ``1 - delta`` (each side
    ``delta / 2``), but looking after every label and acting on the first exclusion is
    not covered: the chance that *some* interval excludes the truth grows with the number
    of looks (to 1, slowly, by the law of the iterated logarithm). It is here so a
    benchmark can show by how much; do not monitor with it.

    Parameters
    ----------
    xs : iterable of 0/1
        Binary outcomes in order (``1`` = correct).
    delta : float, default 0.05

    Returns
    -------
    lower, upper : ndarray of shape (len(xs),)
        The interval after each label.
    """
    delta = _check_delta(delta)
    x = np.asarray(list(xs) if not isinstance(xs, np.ndarray) else xs, dtype=float)
    if x.ndim != 1 or not np.all((x == 0.0) | (x == 1.0)):
        raise ValueError("repeated_clopper_pearson takes a one-dimensional sequence of 0/1")
    k = np.cumsum(x)
    n = np.arange(1, len(x) + 1)
    lower = np.asarray(clopper_pearson_lower(k, n, delta / 2), dtype=float).reshape(-1)
    upper = np.asarray(clopper_pearson_upper(k, n, delta / 2), dtype=float).reshape(-1)
    return lower, upper


class BettingDropTest:
    r"""Anytime-valid one-sided test that a mean has fallen below ``level``, betting on recent data.

    A gambler bets against ``H0: E[x_i | x_1..x_{i-1}] >= level for every i`` -- the
    conditional mean may drift in any way, as long as it never goes below ``level``. After
    observations ``x_1..x_t`` with weights ``w_1..w_t`` the capital is

    .. math::

        K_t = \prod_{i \le t} \bigl(1 + \lambda_i\, w_i\, (\mathrm{level} - x_i)\bigr),

    and the test rejects (:attr:`rejected`) the first time ``K_t >= 1/δ``; it then stays
    rejected. The bet ``λ_i`` is computed from ``x_1..x_{i-1}`` only (predictable) and from
    *recent* observations only: with exponentially weighted averages (span ``window``, i.e.
    smoothing ``α = 2 / (window + 1)``) ``m_1`` of ``w (level - x)`` and ``m_2`` of
    ``w² (level - x)²``,

    .. math::

        \lambda_i = \mathrm{clip}\bigl(m_1 / m_2,\; 0,\; c / (1 - \mathrm{level})\bigr),

    the aGRAPA plug-in of the growth-rate-optimal bet ``E[g] / E[g²]`` for ``g = w (level -
    x)``, which is ``(level - μ̂) / (σ̂² + (level - μ̂)²)`` for unit weights and recent mean
    ``μ̂`` and variance ``σ̂²``. It is zero while the recent mean is at or above ``level``
    (``m_1 <= 0``), so the capital does not decay while the recent mean stays above
    ``level`` and a later drop is detected in a number of observations that depends on the
    size of the drop and on ``window``, not on how long the stream was healthy before.
    When the healthy mean is close to ``level`` the recent mean dips below it now and then,
    the test bets and loses a little, and a long healthy phase does slow detection down
    (for precision 0.96 against a level of 0.95, a drop to 0.92 is found in a median of
    about 500 labels after 200 healthy ones and about 770 after 4,000, at the default
    window; ``python benchmarks/bench_monitor.py --window-study``). (``m_1`` starts at 0
    and ``m_2`` at ``level (1 - level)``, the variance of a Bernoulli stream at ``level``.)

    **Why it is valid.** Each factor is positive: ``w (level - x) ∈ [-(1 - level), level]``
    because ``x, w ∈ [0, 1]``, so with ``0 <= λ <= c/(1 - level)`` the factor is at least
    ``1 - c > 0``. Given the past, ``λ_i >= 0`` is a fixed number and, under ``H0``,
    ``E[w_i (level - x_i) | past] <= 0`` (see *Guarantee*), so each factor has conditional
    mean at most 1: ``K`` is a nonnegative supermartingale from 1 under *every* member of
    ``H0``, drifting or not, and Ville's inequality gives ``P(∃ t: K_t >= 1/δ) <= δ``. How
    ``λ`` is chosen from the past changes only the power (how fast a real drop is found),
    never this bound.

    **Guarantee.** ``P(the test ever rejects) <= δ`` whenever every observation's mean,
    given the earlier ones, is at least ``level``. For precision monitoring, ``x_i = 1``
    when the audit found auto-routed decision ``i`` correct; with a constant audit rate use
    unit weights. When inclusion probabilities ``π_j`` vary, pass ``w = π_min / π_j`` with
    ``π_min`` a floor fixed in advance, exactly as for :class:`BettingConfidenceSequence`:
    counting every auto-routed decision ``j`` with audit indicator ``A_j ~ Bernoulli(π_j)``
    drawn independently of its correctness (a keyed hash of its id),
    ``E[A_j (π_min / π_j)(level - x_j) | past] = π_min (level - p_j) <= 0`` when the
    decision's precision ``p_j >= level``, and an unaudited decision contributes the factor
    1. The bound is then on the precision of *all* auto-routed traffic at each moment.

    Parameters
    ----------
    level : float in (0, 1)
        The mean the null hypothesis says every observation has at least.
    delta : float in (0, 1), default 0.05
        The chance of ever rejecting a true ``H0``, spent once over the whole stream.
    window : int >= 1, default 200
        Span of the exponentially weighted averages the bet is estimated from: smaller
        reacts faster to a large drop and estimates the bet more noisily, which slows the
        detection of a small drop (and, after a long healthy phase near ``level``, of any
        drop). 200 is the span whose median delay is closest to the best span's in the
        worst case over synthetic drops to 1 to 20 points below 0.95 and 0.90, after 200
        or 4,000 healthy labels (at most 1.9x the best, against 4.5x for 100, which finds
        drops to 6 points or more below the level up to about a quarter sooner after a
        short healthy phase): ``python benchmarks/bench_monitor.py --window-study``. The
        ``delta`` bound holds for any value.
    max_bet : float in (0, 1), default 0.5
        The truncation ``c``: one observation never costs more than the share ``c`` of the
        capital.

    Attributes
    ----------
    log_capital_ : float
        ``log K_t``.
    max_log_capital_ : float
        The largest ``log K`` reached so far.
    n_ : int
        Observations seen.
    rejected_at_ : int or None
        The observation count at which ``K`` first reached ``1/δ``.

    Examples
    --------
    >>> test = BettingDropTest(level=0.9, delta=0.05)
    >>> test.update_many([1] * 1000).rejected
    False
    >>> test.update_many([1, 0, 1, 1] * 50).rejected_at_ is not None
    True
    """

    def __init__(
        self,
        level: float,
        delta: float = 0.05,
        *,
        window: int = 200,
        max_bet: float = 0.5,
    ) -> None:
        self.level = check_fraction(level, "level")
        self.delta = _check_delta(delta)
        if isinstance(window, bool) or not isinstance(window, (int, np.integer)) or window < 1:
            raise ValueError(f"window must be an integer >= 1, got {window!r}")
        self.window = int(window)
        self.max_bet = check_fraction(max_bet, "max_bet")
        self.log_capital_ = 0.0
        self.max_log_capital_ = 0.0
        self.n_ = 0
        self.rejected_at_: int | None = None
        self._alpha = 2.0 / (self.window + 1.0)
        self._m1 = 0.0
        self._m2 = self.level * (1.0 - self.level)
        self._cap = self.max_bet / (1.0 - self.level)
        self._log_threshold = math.log(1.0 / self.delta)

    @property
    def n(self) -> int:
        """Number of observations seen."""
        return self.n_

    @property
    def rejected(self) -> bool:
        """Whether the capital has ever reached ``1/δ`` (sticky)."""
        return self.rejected_at_ is not None

    @property
    def bet(self) -> float:
        """The bet ``λ`` the next observation will be staked at."""
        return float(min(max(self._m1 / max(self._m2, _TINY), 0.0), self._cap))

    def update(self, x: float, weight: float = 1.0) -> BettingDropTest:
        """Stake the current bet on one observation ``x`` in [0, 1] of weight ``weight``.

        Returns ``self``; refuses (``ValueError``) what :meth:`update_many` refuses.
        """
        return self.update_many([x], [weight])

    def update_many(
        self, xs: Iterable[float], weights: Iterable[float] | float | None = None
    ) -> BettingDropTest:
        """Stake the bets on observations in arrival order; returns ``self``.

        Parameters
        ----------
        xs : iterable of float in [0, 1]
            The observations (``1`` = an audited decision found correct).
        weights : float, iterable of float in (0, 1], or None
            ``π_min / π`` per observation, one for all, or None for unit weights.

        Raises
        ------
        ValueError
            On an observation outside [0, 1] or NaN, or a weight outside (0, 1]; the test
            is left as it was.
        """
        self.trace(xs, weights)
        return self

    def trace(
        self, xs: Iterable[float], weights: Iterable[float] | float | None = None
    ) -> np.ndarray:
        """Like :meth:`update_many`, and return ``log K`` after each new observation.

        Parameters
        ----------
        xs : iterable of float in [0, 1]
        weights : float, iterable of float in (0, 1], or None

        Returns
        -------
        ndarray of shape (len(xs),)
        """
        from scipy.signal import lfilter  # only here: keeps the package import light

        x, w = _as_observations(list(xs) if not isinstance(xs, np.ndarray) else xs, weights)
        if x.size == 0:
            return np.zeros(0)
        a = self._alpha
        gain = w * (self.level - x)
        # exponentially weighted averages after each observation: y_t = (1-a) y_{t-1} + a v_t
        m1, _ = lfilter([a], [1.0, a - 1.0], gain, zi=[(1.0 - a) * self._m1])
        m2, _ = lfilter([a], [1.0, a - 1.0], gain * gain, zi=[(1.0 - a) * self._m2])
        # the bet for observation i uses the averages after i - 1 (predictable)
        m1_past = np.concatenate(([self._m1], m1[:-1]))
        m2_past = np.concatenate(([self._m2], m2[:-1]))
        bet = np.clip(m1_past / np.maximum(m2_past, _TINY), 0.0, self._cap)
        log_k = self.log_capital_ + np.cumsum(np.log1p(bet * gain))
        if self.rejected_at_ is None:
            hit = np.flatnonzero(log_k >= self._log_threshold)
            if hit.size:
                self.rejected_at_ = self.n_ + int(hit[0]) + 1
        self._m1, self._m2 = float(m1[-1]), float(m2[-1])
        self.log_capital_ = float(log_k[-1])
        self.max_log_capital_ = max(self.max_log_capital_, float(log_k.max()))
        self.n_ += len(x)
        return log_k
