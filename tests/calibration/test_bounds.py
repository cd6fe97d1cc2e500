from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from hybridroute.calibration import (
    clopper_pearson_lower,
    clopper_pearson_upper,
    planned_calibration_size,
    precision_p_value,
    required_calibration_size,
)


def brute_force_size(target: float, delta: float, errors: int) -> int:
    n = errors + 1
    while stats.binom.cdf(errors, n, 1 - target) > delta:
        n += 1
    return n


def test_planner_example_from_the_issue() -> None:
    assert required_calibration_size(0.95, 0.1) == 45
    assert 0.95**45 <= 0.1 < 0.95**44


@pytest.mark.parametrize("target", [0.8, 0.9, 0.95, 0.98])
@pytest.mark.parametrize("delta", [0.01, 0.05, 0.1])
@pytest.mark.parametrize("errors", [0, 1, 3, 10])
def test_planner_matches_exact_binomial(target: float, delta: float, errors: int) -> None:
    assert required_calibration_size(target, delta, errors) == brute_force_size(
        target, delta, errors
    )


@pytest.mark.parametrize("target,delta", [(0.95, 0.05), (0.9, 0.1), (0.99, 0.01)])
def test_planner_zero_errors_closed_form(target: float, delta: float) -> None:
    assert required_calibration_size(target, delta) == math.ceil(math.log(delta) / math.log(target))


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(1, 400),
    frac=st.floats(0, 1),
    delta=st.floats(0.001, 0.4),
)
def test_clopper_pearson_matches_beta_quantiles(n: int, frac: float, delta: float) -> None:
    k = round(frac * n)
    lo = clopper_pearson_lower(k, n, delta)
    hi = clopper_pearson_upper(k, n, delta)
    exp_lo = 0.0 if k == 0 else stats.beta.ppf(delta, k, n - k + 1)
    exp_hi = 1.0 if k == n else stats.beta.ppf(1 - delta, k + 1, n - k)
    assert lo == pytest.approx(exp_lo, abs=1e-12)
    assert hi == pytest.approx(exp_hi, abs=1e-12)
    assert lo <= k / n <= hi


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(1, 300),
    frac=st.floats(0, 1),
    target=st.floats(0.5, 0.99),
    delta=st.floats(0.01, 0.3),
)
def test_p_value_and_bound_agree(n: int, frac: float, target: float, delta: float) -> None:
    k = round(frac * n)
    p = precision_p_value(n - k, n, target)
    lo = clopper_pearson_lower(k, n, delta)
    # p <= delta  <=>  lower bound >= target (away from the exact boundary)
    if abs(p - delta) > 1e-9 and abs(lo - target) > 1e-9:
        assert (p <= delta) == (lo >= target)


def test_bounds_vectorised_and_empty() -> None:
    lo = clopper_pearson_lower(np.array([0, 5, 10]), np.array([10, 10, 10]), 0.05)
    assert lo.shape == (3,) and lo[0] == 0.0
    assert math.isnan(clopper_pearson_lower(0, 0, 0.05))
    assert precision_p_value(0, 0, 0.9) == 1.0


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"target": 1.0, "delta": 0.1}, "target"),
        ({"target": 0.9, "delta": 0.0}, "delta"),
        ({"target": 0.9, "delta": 0.1, "errors": -1}, "errors"),
        ({"target": 0.9, "delta": 0.1, "errors": 1.5}, "errors"),
    ],
)
def test_planner_rejects_bad_arguments(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        required_calibration_size(**kwargs)


def test_clopper_pearson_rejects_impossible_counts() -> None:
    with pytest.raises(ValueError, match="successes"):
        clopper_pearson_lower(11, 10, 0.05)


@pytest.mark.parametrize("expected", [0.96, 0.97, 0.99])
def test_planned_size_certifies_at_expected_precision(expected: float) -> None:
    size = planned_calibration_size(0.95, 0.05, expected, coverage=0.5)
    assert size is not None
    accepted = size // 2
    errors = math.floor((1 - expected) * accepted + 1e-9)
    assert clopper_pearson_lower(accepted - errors, accepted, 0.05) >= 0.95 - 1e-3


def test_planned_size_none_when_model_is_not_better_than_target() -> None:
    assert planned_calibration_size(0.95, 0.05, 0.95) is None
    assert planned_calibration_size(0.95, 0.05, 0.9) is None


def test_planned_size_with_perfect_model_is_the_zero_error_size() -> None:
    assert planned_calibration_size(0.95, 0.1, 1.0) == 45


@pytest.mark.parametrize(
    ("target", "delta", "expected"),
    [(0.9, 0.05, 0.93), (0.95, 0.01, 0.97), (0.95, 0.0017, 0.956), (0.98, 0.05, 0.99)],
)
def test_planned_size_is_the_smallest_certifying_size(
    target: float, delta: float, expected: float
) -> None:
    """Against a brute-force scan of every size up to the answer (saw-tooth included)."""
    size = planned_calibration_size(target, delta, expected)
    assert size is not None
    m = np.arange(1, size + 1)
    errors = np.floor((1 - expected) * m + 1e-9)
    certifies = stats.binom.cdf(errors, m, 1 - target) <= delta
    assert certifies[-1]
    assert not certifies[:-1].any()
