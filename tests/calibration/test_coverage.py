from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from hybridroute.calibration import CoverageThreshold

from .conftest import synthetic


@pytest.mark.parametrize("target", [0.5, 0.8, 0.95])
def test_quantile_threshold_reaches_the_target_coverage(target: float) -> None:
    s, c = synthetic(2001, 0)
    f = CoverageThreshold(target).fit(s, c)
    assert f.coverage_ >= target
    assert f.coverage_ - target < 1 / len(s) + 1e-12
    assert np.mean(s >= f.threshold_) == pytest.approx(f.coverage_)
    assert f.summary()["bound"] is None


@pytest.mark.parametrize("target,delta", [(0.8, 0.05), (0.9, 0.1)])
def test_guaranteed_coverage_uses_the_beta_order_statistic(target: float, delta: float) -> None:
    s, c = synthetic(1000, 1)
    f = CoverageThreshold(target, delta).fit(s, c)
    k = f.n_accepted_
    n = len(s)
    assert stats.beta.sf(target, k, n - k + 1) >= 1 - delta
    assert stats.beta.sf(target, k - 1, n - k + 2) < 1 - delta
    assert f.coverage_ > target
    assert f.summary()["bound"] is not None


def test_guaranteed_coverage_holds_on_fresh_draws() -> None:
    misses = 0
    for seed in range(200):
        s, c = synthetic(300, seed)
        f = CoverageThreshold(0.8, 0.1).fit(s, c)
        fresh, _ = synthetic(20000, 10_000 + seed)
        misses += np.mean(fresh >= f.threshold_) < 0.8
    assert misses <= 35  # 10% of 200 plus binomial slack


@pytest.mark.parametrize("coverage", [0, 1.5, "x"])
def test_bad_coverage(coverage) -> None:
    with pytest.raises(ValueError, match="coverage"):
        CoverageThreshold(coverage).fit([0.1, 0.2], [True, False])
