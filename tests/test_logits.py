"""The shared softmax / log-loss / logit-scale formulas (``hybridroute._logits``)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from hybridroute._logits import fit_logit_scale, mean_log_loss, softmax


def _logits(seed: int, n: int = 200, k: int = 5) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    z = rng.normal(scale=3.0, size=(n, k))
    y = np.array([rng.choice(k, p=softmax(row[None, :])[0]) for row in z])
    return z, y


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_softmax_rows_and_shift(seed):
    z, _ = _logits(seed)
    before = z.copy()
    p = softmax(z)
    np.testing.assert_array_equal(z, before)  # the input is left as it is
    np.testing.assert_allclose(p.sum(axis=1), 1.0)
    np.testing.assert_allclose(softmax(z + 1000.0), p, rtol=1e-12)  # no overflow


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_mean_log_loss_is_scikit_learns(seed):
    from sklearn.metrics import log_loss

    z, y = _logits(seed)
    for scale in (0.5, 1.0, 2.0):
        expected = log_loss(y, softmax(scale * z), labels=range(z.shape[1]))
        assert mean_log_loss(z, y, scale) == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize(("seed", "true_scale"), [(0, 0.5), (1, 1.0), (2, 3.0)])
def test_the_fitted_scale_minimises_the_loss(seed, true_scale):
    z, y = _logits(seed, n=2000)
    scale, loss = fit_logit_scale(z / true_scale, y, log_bounds=(-6.0, 4.0), xatol=1e-6)
    assert scale == pytest.approx(true_scale, rel=0.15)
    assert loss == mean_log_loss(z / true_scale, y, scale)
    for other in (scale * 0.9, scale * 1.1):
        assert mean_log_loss(z / true_scale, y, other) > loss


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_temperature_scaling_is_the_same_fit(seed):
    """The calibration package's temperature is ``1 / s`` of the same search over log p."""
    from hybridroute.calibration import TemperatureScaling

    z, y = _logits(seed)
    proba = softmax(z)
    ts = TemperatureScaling().fit(proba, y)
    lo, hi = ts.bounds
    scale, loss = fit_logit_scale(
        np.log(np.maximum(proba, 1e-12)),
        y,
        log_bounds=(math.log(1.0 / hi), math.log(1.0 / lo)),
        xatol=1e-7,
    )
    assert ts.temperature_ == pytest.approx(1.0 / scale, rel=1e-12)
    assert ts.nll_after_ == pytest.approx(loss, rel=1e-12)
