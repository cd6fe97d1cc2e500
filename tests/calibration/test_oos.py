from __future__ import annotations

import math

import numpy as np
import pytest

from hybridroute.calibration import OutOfScopeThreshold, required_calibration_size


def data(n_in: int, n_oos: int, seed: int):
    rng = np.random.default_rng(seed)
    s = np.r_[rng.beta(2, 5, n_in), rng.beta(5, 2, n_oos)]
    oos = np.r_[np.zeros(n_in, bool), np.ones(n_oos, bool)]
    correct = np.r_[rng.random(n_in) < 0.95, np.zeros(n_oos, bool)]
    return s, oos, correct


def test_recall_target_holds_on_fresh_data() -> None:
    misses = 0
    for seed in range(100):
        s, oos, _ = data(500, 150, seed)
        f = OutOfScopeThreshold(recall=0.9, delta=0.1).fit(s, oos)
        fresh = np.random.default_rng(10_000 + seed).beta(5, 2, 20000)
        misses += np.mean(fresh >= f.cutoff_) < 0.9
    assert misses <= 20  # 10% plus binomial slack
    assert f.certified_ and f.recall_ >= 0.9


def test_too_few_oos_items_flags_everything() -> None:
    s, oos, _ = data(200, 10, 0)
    f = OutOfScopeThreshold(recall=0.95, delta=0.05).fit(s, oos)
    assert not f.certified_
    assert f.cutoff_ == -math.inf and f.predict(s).all()
    assert f.required_size_ == required_calibration_size(0.95, 0.05)
    assert "10 out-of-scope calibration items" in f.reason_
    assert f.summary()["cutoff"] is None


def test_joint_precision_and_recall_keeps_the_stricter_cutoff() -> None:
    s, oos, correct = data(2000, 400, 1)
    r = OutOfScopeThreshold(recall=0.8, delta=0.05).fit(s, oos)
    j = OutOfScopeThreshold(recall=0.8, precision=0.97, delta=0.05).fit(s, oos, correct)
    assert j.cutoff_ <= r.cutoff_ + 1e-12 or not j.certified_
    routed = ~j.predict(s)
    if j.certified_:
        assert (correct & ~oos)[routed].mean() >= 0.97


@pytest.mark.parametrize(
    "kwargs,fit_kwargs,match",
    [
        ({"recall": None}, {}, "recall target, a precision target"),
        ({"precision": 0.9}, {}, "needs correct"),
        ({"recall": 1.0}, {}, "recall"),
    ],
)
def test_bad_arguments(kwargs, fit_kwargs, match) -> None:
    s, oos, _ = data(50, 50, 0)
    with pytest.raises(ValueError, match=match):
        OutOfScopeThreshold(**kwargs).fit(s, oos, **fit_kwargs)
