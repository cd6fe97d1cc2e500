from __future__ import annotations

import math

import numpy as np
import pytest

from hybridroute.calibration import (
    CertifiedPrecisionThreshold,
    EmpiricalThreshold,
    PerClassThreshold,
    required_calibration_size,
)

from .conftest import synthetic


def data():
    s1, c1 = synthetic(1500, 0, skew=6)
    s2, c2 = synthetic(1500, 1, skew=2)
    s3, c3 = synthetic(40, 2)
    s4, c4 = synthetic(30, 3)
    labels = ["a"] * 1500 + ["b"] * 1500 + ["small1"] * 40 + ["small2"] * 30
    return np.r_[s1, s2, s3, s4], np.r_[c1, c2, c3, c4], labels


def test_big_classes_get_their_own_small_ones_are_pooled() -> None:
    s, c, labels = data()
    f = PerClassThreshold(CertifiedPrecisionThreshold(0.9, 0.05), min_class_size=100).fit(
        s, c, labels
    )
    assert f.pooled_classes_ == ("small1", "small2")
    assert f.thresholds_["small1"] == f.thresholds_["small2"] == f.pool_threshold_
    assert set(f.groups_) == {"a", "b", "__pooled__"}
    assert f.threshold_for("never_seen") == f.pool_threshold_
    passed = f.predict(s, labels)
    assert passed.mean() == pytest.approx(f.coverage_)


def test_default_min_size_derives_from_the_base() -> None:
    s, c, labels = data()
    base = CertifiedPrecisionThreshold(0.9, 0.06, n_starts=3)
    f = PerClassThreshold(base).fit(s, c, labels)
    assert f.min_class_size_ == 2 * required_calibration_size(0.9, 0.02)


def test_simultaneous_splits_delta_over_groups() -> None:
    s, c, labels = data()
    f = PerClassThreshold(
        CertifiedPrecisionThreshold(0.9, 0.06), min_class_size=100, simultaneous=True
    ).fit(s, c, labels)
    assert all(g.delta == pytest.approx(0.02) for g in f.fitted_groups_.values())


def test_uncertified_pool_routes_nothing_for_small_classes() -> None:
    s, c, labels = data()
    f = PerClassThreshold(CertifiedPrecisionThreshold(0.99, 0.05), min_class_size=100).fit(
        s, c, labels
    )
    assert math.isinf(f.pool_threshold_)


def test_non_certifying_base_needs_min_class_size() -> None:
    s, c, labels = data()
    with pytest.raises(ValueError, match="min_class_size must be given"):
        PerClassThreshold(EmpiricalThreshold(0.9)).fit(s, c, labels)


def test_length_mismatch() -> None:
    with pytest.raises(ValueError, match="differ in length"):
        PerClassThreshold(EmpiricalThreshold(), min_class_size=1).fit([0.5, 0.6], [1, 0], ["a"])
