"""Exact binomial bounds and the sample-size planner.

All bounds here are exact (Clopper–Pearson), from the binomial and beta distributions in
:mod:`scipy.stats`; no normal approximation is used anywhere.

The link used throughout: with ``k`` correct among ``n`` accepted items, the one-sided
Clopper–Pearson lower bound on precision at confidence ``1 - delta`` is at least
``target`` exactly when the binomial p-value ``P(Binomial(n, 1 - target) <= n - k)`` is at
most ``delta``. The threshold fitters test that p-value; the planner inverts it.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

import numpy as np

from ._base import check_fraction


def _stats() -> Any:
    """:mod:`scipy.stats`, imported when first needed (it costs most of a second, and
    reading the package -- e.g. for the command line's choices -- needs none of it)."""
    from scipy import stats

    return stats


__all__ = [
    "clopper_pearson_lower",
    "clopper_pearson_upper",
    "planned_calibration_size",
    "precision_p_value",
    "required_calibration_size",
]


def clopper_pearson_lower(successes: Any, n: Any, delta: float) -> Any:
    """One-sided exact lower confidence bound on a binomial proportion.

    Parameters
    ----------
    successes, n : int or array of int
        Successes (e.g. correct auto-routed items) among ``n`` trials.
    delta : float
        Error probability; the bound holds with probability at least ``1 - delta``.

    Returns
    -------
    float or ndarray
        The ``delta`` quantile of ``Beta(successes, n - successes + 1)``; 0 where
        ``successes == 0`` and ``nan`` where ``n == 0``.
    """
    delta = check_fraction(delta, "delta")
    k = np.asarray(successes, dtype=float)
    m = np.asarray(n, dtype=float)
    if np.any(k < 0) or np.any(k > m):
        raise ValueError("successes must lie in [0, n]")
    with np.errstate(invalid="ignore", divide="ignore"):
        out = _stats().beta.ppf(delta, np.maximum(k, 1e-300), m - k + 1)
    out = np.where(k == 0, 0.0, out)
    out = np.where(m == 0, np.nan, out)
    return float(out) if out.ndim == 0 else out


def clopper_pearson_upper(successes: Any, n: Any, delta: float) -> Any:
    """One-sided exact upper confidence bound on a binomial proportion (see the lower one).

    Parameters
    ----------
    successes, n : int or array of int
        Successes among ``n`` trials (arrays broadcast together).
    delta : float
        Error probability in (0, 1); the bound holds with probability at least
        ``1 - delta``.

    Returns
    -------
    float or ndarray
        The ``1 - delta`` quantile of ``Beta(successes + 1, n - successes)``; 1 where
        ``successes == n`` and ``nan`` where ``n == 0``. A float for scalar input.

    Raises
    ------
    ValueError
        If ``delta`` is not in (0, 1) or a ``successes`` lies outside ``[0, n]``.
    """
    delta = check_fraction(delta, "delta")
    k = np.asarray(successes, dtype=float)
    m = np.asarray(n, dtype=float)
    if np.any(k < 0) or np.any(k > m):
        raise ValueError("successes must lie in [0, n]")
    with np.errstate(invalid="ignore", divide="ignore"):
        out = _stats().beta.ppf(1 - delta, k + 1, np.maximum(m - k, 1e-300))
    out = np.where(k == m, 1.0, out)
    out = np.where(m == 0, np.nan, out)
    return float(out) if out.ndim == 0 else out


def precision_p_value(errors: Any, n: Any, target: float) -> Any:
    """p-value of "precision < target" given ``errors`` among ``n`` accepted items.

    ``P(Binomial(n, 1 - target) <= errors)``: small when so few errors would be unlikely
    were the precision below ``target``. It is at most ``delta`` exactly when the
    Clopper–Pearson lower bound at ``1 - delta`` reaches ``target``. ``n == 0`` gives 1.

    Parameters
    ----------
    errors, n : int or array of int
        Mistakes among ``n`` accepted items (arrays broadcast together).
    target : float
        The precision tested, in (0, 1).

    Returns
    -------
    float or ndarray
        The p-value, in [0, 1]; a float for scalar input.

    Raises
    ------
    ValueError
        If ``target`` is not in (0, 1).
    """
    target = check_fraction(target, "target")
    e = np.asarray(errors, dtype=float)
    m = np.asarray(n, dtype=float)
    out = np.where(m > 0, _stats().binom.cdf(e, m, 1.0 - target), 1.0)
    return float(out) if out.ndim == 0 else out


def required_calibration_size(target: float, delta: float, errors: int = 0) -> int:
    """Smallest number of accepted items that certifies precision ``target`` at ``1 - delta``.

    The exact binomial computation: the smallest ``n`` with
    ``P(Binomial(n, 1 - target) <= errors) <= delta``, i.e. whose Clopper–Pearson lower
    bound with ``errors`` mistakes among ``n`` items reaches ``target``.

    Parameters
    ----------
    target : float
        Precision to certify, in (0, 1).
    delta : float
        Allowed probability that the certificate is wrong, in (0, 1).
    errors : int, default 0
        Mistakes expected among the accepted items.

    Returns
    -------
    int
        For example 45 for ``target=0.95, delta=0.1, errors=0`` (0.95**45 ≈ 0.099).
        This counts *accepted* items; divide by the expected coverage for the size of the
        whole calibration set (see :func:`planned_calibration_size`).
    """
    target = check_fraction(target, "target")
    delta = check_fraction(delta, "delta")
    if int(errors) != errors or errors < 0:
        raise ValueError(f"errors must be a non-negative integer, got {errors!r}")
    return _required_size(float(target), float(delta), int(errors))


@lru_cache(maxsize=512)
def _required_size(target: float, delta: float, errors: int) -> int:
    """The search behind :func:`required_calibration_size` (validated inputs; memoised,
    since every certified fit asks it the same question)."""
    q = 1.0 - target

    def ok(n: int) -> bool:
        return bool(_stats().binom.cdf(errors, n, q) <= delta)

    # The p-value falls as n grows (errors fixed): double, then bisect.
    lo, hi = errors, max(errors + 1, 1)
    while not ok(hi):
        lo, hi = hi, hi * 2
        if hi > 10**12:  # pragma: no cover - only for absurd targets
            raise ValueError("no calibration size up to 1e12 certifies this target")
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid
    return hi


def planned_calibration_size(
    target: float,
    delta: float,
    expected_precision: float,
    *,
    coverage: float = 1.0,
    max_size: int = 10**7,
) -> int | None:
    """Calibration items needed to certify ``target`` when the model's precision is known.

    Finds the smallest number ``m`` of accepted items such that, with the error count
    expected at ``expected_precision`` (``floor((1 - expected_precision) * m)``), the
    Clopper–Pearson lower bound reaches ``target``; returns ``ceil(m / coverage)``, the
    size of the whole calibration set when a share ``coverage`` of it is accepted.

    Parameters
    ----------
    target, delta : float
        The precision to certify and the allowed probability that the certificate is
        wrong, each in (0, 1), as for :func:`required_calibration_size`.
    expected_precision : float
        The precision the model is expected to have on accepted items, in [0, 1].
    coverage : float, default 1.0
        Expected share of the calibration set that is accepted, in (0, 1].
    max_size : int, default 10**7
        Give up (return ``None``) once the doubling search for accepted items passes this.

    Returns
    -------
    int or None
        The whole calibration set's size. ``None`` when ``expected_precision <= target``
        (no sample size can certify a precision the model does not exceed) or when more
        than ``max_size`` accepted items would be needed.

    Raises
    ------
    ValueError
        If a fraction lies outside its range.
    """
    target = check_fraction(target, "target")
    delta = check_fraction(delta, "delta")
    expected_precision = check_fraction(
        expected_precision, "expected_precision", open_low=False, open_high=False
    )
    coverage = check_fraction(coverage, "coverage", open_high=False)
    if expected_precision <= target:
        return None
    return _planned_sizes(target, delta, [expected_precision], [coverage], max_size)[0]


def _planned_sizes(
    target: float,
    delta: float,
    precisions: Any,
    coverages: Any,
    max_size: int = 10**7,
) -> list[int | None]:
    """:func:`planned_calibration_size` for many operating points at once (inputs validated).

    For ``m`` accepted items the error count expected is ``e(m) = floor(rate * m)`` (rate =
    1 - precision), and ``m`` certifies exactly when ``m >= N[e(m)]``, where ``N[e]`` is
    :func:`required_calibration_size` with ``errors=e``: for a fixed error count the
    p-value falls as ``m`` grows. So the answer lies in the first stretch of constant ``e``
    whose last size reaches ``N[e]``, at ``max(stretch start, N[e])``. ``N`` is one table
    per (target, delta) for the first :data:`_TABLE_ERRORS` counts, computed vectorised and
    memoised. Like the scalar search before it, a size is only returned when some power of
    two up to ``max_size`` certifies (the bracket), and it is the smallest certifying size
    below it.
    """
    return _planned(target, delta, precisions, coverages, max_size, best_only=False)


def _smallest_planned_size(
    target: float, delta: float, precisions: Any, coverages: Any, max_size: int = 10**7
) -> int | None:
    """``min`` of :func:`_planned_sizes` (``None`` if none), skipping hopeless points.

    A point whose answer is not in the table has no certifying size in the table's
    stretches, so its size exceeds the end of the last one: when that lower bound already
    reaches the best size found, its exact (slow) search is skipped. The minimum is exact.
    """
    sizes = _planned(target, delta, precisions, coverages, max_size, best_only=True)
    found = [x for x in sizes if x is not None]
    return min(found) if found else None


def _planned(
    target: float,
    delta: float,
    precisions: Any,
    coverages: Any,
    max_size: int,
    *,
    best_only: bool,
) -> list[int | None]:
    q = 1.0 - target
    p = np.asarray(precisions, dtype=float)
    cov = np.asarray(coverages, dtype=float)
    out: list[int | None] = [None] * len(p)
    live = np.flatnonzero(p > target)
    if live.size == 0:
        return out
    rate = 1.0 - p[live]
    powers = 2 ** np.arange(0, max(1, int(max_size).bit_length()), dtype=np.int64)
    powers = powers[powers <= max_size]
    errors = _errors_at(rate[:, None], powers[None, :])
    certifies = _stats().binom.cdf(errors, powers[None, :], q) <= delta
    bracketed = np.flatnonzero(certifies.any(axis=1))
    if bracketed.size == 0:
        return out
    hi = powers[certifies.argmax(axis=1)]
    e_hi = _errors_at(rate, hi).astype(np.int64)
    top = min(int(e_hi[bracketed].max()) + 1, _TABLE_ERRORS)
    table = _error_minimums(target, delta, _power_of_two(top))
    deferred: list[tuple[int, int]] = []
    for j in bracketed:
        m, bound = _smallest_certifying(float(rate[j]), int(hi[j]), int(e_hi[j]), table)
        if m is not None:
            out[int(live[j])] = math.ceil(m / float(cov[live[j]]))
        else:
            deferred.append((int(j), math.ceil(bound / float(cov[live[j]]))))
    for i, lower in deferred:
        found = [x for x in out if x is not None]
        if best_only and found and lower >= min(found):
            continue  # its size is at least `lower`: it cannot be the smallest
        m = _smallest_certifying_scan(float(rate[i]), int(hi[i]), q, delta)
        out[int(live[i])] = math.ceil(m / float(cov[live[i]]))
    return out


#: Error counts looked up in the memoised table; beyond them (a precision a hair above
#: target, millions of items) the stretches are bisected one point at a time.
_TABLE_ERRORS = 4096


def _errors_at(rate: Any, m: Any) -> Any:
    return np.floor(rate * np.asarray(m, dtype=float) + 1e-9)


def _smallest_certifying(
    rate: float, hi: int, e_hi: int, table: np.ndarray
) -> tuple[int | None, int]:
    """Smallest ``m <= hi`` that certifies at ``rate`` (``hi`` does), from the table.

    Returns ``(m, 0)``, or ``(None, lower)`` when the answer lies beyond the table's error
    counts: then no size up to ``lower - 1`` (the end of the last tabled stretch) certifies.
    """
    if rate == 0.0:
        return int(table[0]), 0
    e = np.arange(min(e_hi + 1, len(table)), dtype=float)
    # last size of stretch e: the largest m with floor(rate * m + 1e-9) == e
    ends = np.ceil((e + 1 - 1e-9) / rate).astype(np.int64) - 1
    ends = np.where(_errors_at(rate, ends) > e, ends - 1, ends)  # float slack, both ways
    ends = np.where(_errors_at(rate, ends + 1) <= e, ends + 1, ends)
    ends = np.minimum(ends, hi)
    hits = np.flatnonzero(table[: len(e)] <= ends)
    if hits.size == 0:
        return None, int(ends[-1]) + 1
    first = int(hits[0])
    start = int(ends[first - 1]) + 1 if first else 1
    return max(start, int(table[first])), 0


def _power_of_two(k: int) -> int:
    return 1 << max(0, k - 1).bit_length()


@lru_cache(maxsize=64)
def _error_minimums(target: float, delta: float, size: int) -> np.ndarray:
    """``N[e]`` for ``e < size``: the smallest ``n`` with ``P(Bin(n, 1 - target) <= e) <= delta``.

    The same predicate and search as :func:`_required_size` (double, then bisect), run for
    every error count at once.
    """
    q = 1.0 - target
    e = np.arange(size, dtype=float)
    lo = np.arange(size, dtype=np.int64)  # n = e never certifies (all could be errors)
    hi = lo + 1
    ok = _stats().binom.cdf(e, hi, q) <= delta
    while not ok.all():
        if hi.max() > 10**12:  # pragma: no cover - only for absurd targets
            raise ValueError("no calibration size up to 1e12 certifies this target")
        lo = np.where(ok, lo, hi)
        hi = np.where(ok, hi, hi * 2)
        ok = ok | (_stats().binom.cdf(e, hi, q) <= delta)
    while np.any(hi - lo > 1):
        mid = (lo + hi) // 2
        good = _stats().binom.cdf(e, mid, q) <= delta
        hi = np.where(good, mid, hi)
        lo = np.where(good, lo, mid)
    hi.setflags(write=False)
    return hi


def _smallest_certifying_scan(rate: float, hi: int, q: float, delta: float) -> int:
    """Smallest ``m <= hi`` that certifies at ``rate`` (``hi`` does), without the table."""

    def ok(m: Any) -> Any:
        m = np.asarray(m)
        return _stats().binom.cdf(_errors_at(rate, m), m, q) <= delta

    e = np.arange(int(_errors_at(rate, hi)) + 1, dtype=float)
    ends = np.ceil((e + 1 - 1e-9) / rate).astype(np.int64) - 1
    ends = np.where(_errors_at(rate, ends) > e, ends - 1, ends)  # float slack, both ways
    ends = np.where(_errors_at(rate, ends + 1) <= e, ends + 1, ends)
    ends = np.minimum(ends, hi)
    first = int(np.flatnonzero(ok(ends))[0])  # ok(hi) holds, so the last end certifies
    lo, end = (int(ends[first - 1]) if first else 0), int(ends[first])
    # every size in (lo, end] has the same error count, so ok is false then true there:
    # test a short stretch whole in one call, bisect a long one down to that
    while end - lo > _WHOLE_STRETCH:
        mid = (lo + end) // 2
        if bool(ok(mid)):
            end = mid
        else:
            lo = mid
    sizes = np.arange(lo + 1, end + 1, dtype=np.int64)
    return int(sizes[np.flatnonzero(ok(sizes))[0]])


# stretches up to this long are tested whole (one vectorised call) rather than bisected
_WHOLE_STRETCH = 4096
