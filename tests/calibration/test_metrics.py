from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hybridroute.calibration import (
    aurc,
    brier_score,
    coverage_at,
    excess_aurc,
    expected_calibration_error,
    negative_log_likelihood,
    precision_at,
    reliability_diagram,
    risk_coverage_curve,
)

from .conftest import synthetic


def test_ece_by_hand() -> None:
    conf = np.array([0.05, 0.15, 0.95, 0.95])
    correct = np.array([False, True, True, False])
    # bins of width 0.1: [0,.1): conf .05 acc 0; [.1,.2): .15 vs 1; [.9,1]: .95 vs .5
    expected = (0.05 + 0.85 + 2 * 0.45) / 4
    assert expected_calibration_error(conf, correct, n_bins=10) == pytest.approx(expected)


def test_ece_of_calibrated_data_is_small_for_both_binnings() -> None:
    s, c = synthetic(20000, 0)
    assert expected_calibration_error(s, c) < 0.02
    assert expected_calibration_error(s, c, binning="mass") < 0.02
    assert expected_calibration_error(s, ~c) > 0.3


def test_confidence_of_one_falls_in_the_last_bin() -> None:
    d = reliability_diagram([1.0, 0.99], [True, True], n_bins=15)
    assert len(d.count) == 1 and d.upper[0] == 1.0


@pytest.mark.parametrize("binning", ["width", "mass"])
def test_reliability_diagram_counts_add_up(binning: str) -> None:
    s, c = synthetic(1000, 1)
    d = reliability_diagram(s, c, n_bins=10, binning=binning)
    assert d.count.sum() == 1000
    assert np.all(d.lower <= d.confidence + 1e-12) and np.all(d.confidence <= d.upper + 1e-12)
    assert set(d.to_dict()) == {"binning", "lower", "upper", "count", "confidence", "accuracy"}
    if binning == "mass":
        assert d.count.max() - d.count.min() <= 1


def test_brier_and_nll() -> None:
    p = np.array([[1.0, 0.0], [0.5, 0.5]])
    y = np.array([0, 1])
    assert brier_score(p, y) == pytest.approx((0 + 0.5) / 2)
    assert negative_log_likelihood(p, y) == pytest.approx(-math.log(0.5) / 2)
    assert brier_score(np.array([0.9, 0.2]), np.array([True, False])) == pytest.approx(
        (0.01 + 0.04) / 2
    )


def test_risk_coverage_curve_and_aurc_by_hand() -> None:
    conf = np.array([0.9, 0.8, 0.7, 0.6])
    correct = np.array([True, False, True, True])
    curve = risk_coverage_curve(conf, correct)
    assert np.allclose(curve.coverage, [0.25, 0.5, 0.75, 1.0])
    assert np.allclose(curve.risk, [0, 0.5, 1 / 3, 0.25])
    assert aurc(conf, correct) == pytest.approx((0 + 0.5 + 1 / 3 + 0.25) / 4)
    optimal = (0 + 0 + 0 + 0.25) / 4
    assert excess_aurc(conf, correct) == pytest.approx(aurc(conf, correct) - optimal)


def test_ties_do_not_depend_on_order() -> None:
    conf = np.array([0.5, 0.5, 0.5, 0.9])
    a = aurc(conf, np.array([True, False, True, True]))
    b = aurc(conf, np.array([False, True, True, True]))
    assert a == pytest.approx(b)


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(5, 300))
def test_excess_aurc_is_non_negative(seed: int, n: int) -> None:
    s, c = synthetic(n, seed)
    assert excess_aurc(s, c) >= -1e-12
    perfect = np.where(c, 1.0, 0.0) + s * 1e-3
    assert excess_aurc(perfect, c) == pytest.approx(0.0, abs=1e-12)


def test_coverage_and_precision_at_threshold() -> None:
    conf = np.array([0.9, 0.8, 0.7, 0.6])
    correct = np.array([True, False, True, True])
    assert coverage_at(conf, 0.75) == 0.5
    assert precision_at(conf, correct, 0.75) == 0.5
    assert math.isnan(precision_at(conf, correct, 0.95))


@pytest.mark.parametrize(
    "kwargs,match",
    [({"n_bins": 0}, "n_bins"), ({"binning": "quantile"}, "binning")],
)
def test_bad_binning(kwargs, match) -> None:
    with pytest.raises(ValueError, match=match):
        expected_calibration_error([0.5], [True], **kwargs)
