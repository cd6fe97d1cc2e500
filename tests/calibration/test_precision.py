from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hybridroute.calibration import (
    CertifiedPrecisionThreshold,
    EmpiricalThreshold,
    MarginThreshold,
    clopper_pearson_lower,
    required_calibration_size,
)
from hybridroute.exceptions import NotFittedError

from .conftest import synthetic


@pytest.mark.parametrize("target", [0.85, 0.9, 0.95])
@pytest.mark.parametrize("n_starts", [1, 3])
def test_certified_threshold_bound_reaches_target(target: float, n_starts: int) -> None:
    s, c = synthetic(3000, 1)
    f = CertifiedPrecisionThreshold(target, 0.05, n_starts=n_starts).fit(s, c)
    assert f.certified_
    accepted = s >= f.threshold_
    k, n = int(c[accepted].sum()), int(accepted.sum())
    assert f.bound_ == pytest.approx(clopper_pearson_lower(k, n, 0.05 / n_starts))
    assert f.bound_ >= target
    assert f.coverage_ == pytest.approx(accepted.mean())
    assert f.precision_ == pytest.approx(c[accepted].mean())
    assert f.reason_ is None and f.required_size_ is None


def test_certified_is_more_conservative_than_empirical() -> None:
    s, c = synthetic(3000, 2)
    cert = CertifiedPrecisionThreshold(0.95, 0.05).fit(s, c)
    emp = EmpiricalThreshold(0.95).fit(s, c)
    assert emp.threshold_ <= cert.threshold_
    assert emp.precision_ >= 0.95
    assert emp.summary()["guarantee"] == "none"


def test_too_little_data_is_not_certified_and_routes_nothing() -> None:
    s, c = synthetic(30, 3)
    f = CertifiedPrecisionThreshold(0.95, 0.05).fit(s, c)
    assert not f.certified_
    assert f.threshold_ == math.inf
    assert not f.predict(s).any()
    assert f.coverage_ == 0.0
    assert "30 calibration items" in f.reason_
    assert f.required_size_ == required_calibration_size(0.95, 0.05 / 3)
    summary = f.summary()
    assert summary["threshold"] is None and summary["certified"] is False


def test_not_certified_with_enough_data_estimates_the_size_needed() -> None:
    rng = np.random.default_rng(5)
    s = rng.random(400)
    c = rng.random(400) < 0.93 + 0.06 * s  # precision near the top ~0.98
    f = CertifiedPrecisionThreshold(0.97, 0.05).fit(s, c)
    if not f.certified_:
        assert f.required_size_ is None or f.required_size_ > 400
        assert "0.97" in f.reason_


def test_hopeless_target_says_more_data_will_not_help() -> None:
    rng = np.random.default_rng(6)
    s = rng.random(500)
    c = rng.random(500) < 0.5
    f = CertifiedPrecisionThreshold(0.95, 0.05).fit(s, c)
    assert not f.certified_
    assert f.required_size_ is None
    assert "more data alone will not" in f.reason_


def test_fixed_grid_uses_only_grid_values() -> None:
    s, c = synthetic(2000, 7)
    grid = np.linspace(0, 1, 21)
    f = CertifiedPrecisionThreshold(0.9, 0.05, grid=grid).fit(s, c)
    assert f.certified_
    assert np.isclose(grid, f.threshold_).any()


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(50, 800))
def test_coverage_is_monotone_in_threshold(seed: int, n: int) -> None:
    s, c = synthetic(n, seed)
    f = EmpiricalThreshold(0.5).fit(s, c)
    ts = np.sort(np.unique(s))
    cov = [np.mean(s >= t) for t in ts]
    assert all(a >= b for a, b in itertools.pairwise(cov))
    assert 0.0 <= f.coverage_ <= 1.0


@settings(max_examples=15, deadline=None, derandomize=True)
@given(seed=st.integers(0, 10_000), lo=st.floats(0.6, 0.9), step=st.floats(0.01, 0.09))
def test_higher_target_has_larger_p_values_everywhere(seed: int, lo: float, step: float) -> None:
    s, c = synthetic(600, seed)
    a = CertifiedPrecisionThreshold(lo, 0.05).fit(s, c).p_values_
    b = CertifiedPrecisionThreshold(lo + step, 0.05).fit(s, c).p_values_
    assert np.all(b >= a - 1e-12)


def test_margin_threshold_is_a_certified_threshold_on_margins() -> None:
    s, c = synthetic(2000, 8)
    m = MarginThreshold(0.9, 0.05).fit(s, c)
    assert m.certified_ and m.summary()["score"] == "margin"
    assert m.summary()["method"] == "certified_margin"


@pytest.mark.parametrize(
    "est,match",
    [
        (CertifiedPrecisionThreshold(target=1.2), "target"),
        (CertifiedPrecisionThreshold(delta=-0.1), "delta"),
        (CertifiedPrecisionThreshold(n_starts=0), "n_starts"),
        (EmpiricalThreshold(target="high"), "target"),
    ],
)
def test_invalid_parameters_raise_in_fit(est, match: str) -> None:
    s, c = synthetic(100, 0)
    with pytest.raises(ValueError, match=match):
        est.fit(s, c)


@pytest.mark.parametrize(
    "scores,correct,match",
    [
        ([0.1, 0.2], [True], "differ in length"),
        ([0.1, np.inf], [True, False], "non-finite"),
        ([], [], "empty"),
        ([[0.1]], [True], "one-dimensional"),
        ([0.1, 0.2], [2, 1], "0/1"),
    ],
)
def test_invalid_data_raise(scores, correct, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        CertifiedPrecisionThreshold().fit(scores, correct)


def test_predict_before_fit() -> None:
    with pytest.raises(NotFittedError, match="CertifiedPrecisionThreshold"):
        CertifiedPrecisionThreshold().predict([0.5])


def test_get_params_and_clone() -> None:
    f = CertifiedPrecisionThreshold(0.9, 0.1, n_starts=2)
    assert f.get_params() == {"target": 0.9, "delta": 0.1, "n_starts": 2, "grid": None}
    g = f._clone(delta=0.05)
    assert g.delta == 0.05 and g.target == 0.9 and g is not f
    assert "CertifiedPrecisionThreshold(target=0.9" in repr(f)
