from __future__ import annotations

import numpy as np
import pytest

from hybridroute.calibration import TemperatureScaling, expected_calibration_error
from hybridroute.exceptions import NotFittedError

from .conftest import synthetic_proba


def test_softens_an_overconfident_model_and_keeps_the_ranking() -> None:
    p, y = synthetic_proba(3000, 5, 0)
    ts = TemperatureScaling().fit(p[:1500], y[:1500])
    # the model's logits are twice the truth's: T close to 2
    assert ts.temperature_ == pytest.approx(2.0, rel=0.15)
    q = ts.transform(p[1500:])
    assert np.array_equal(q.argmax(axis=1), p[1500:].argmax(axis=1))
    assert np.allclose(q.sum(axis=1), 1.0)
    before = expected_calibration_error(p[1500:].max(1), p[1500:].argmax(1) == y[1500:])
    after = expected_calibration_error(q.max(1), q.argmax(1) == y[1500:])
    assert after < before
    assert ts.nll_after_ <= ts.nll_before_


def test_fit_is_deterministic() -> None:
    p, y = synthetic_proba(500, 4, 1)
    a = TemperatureScaling().fit(p, y).temperature_
    b = TemperatureScaling().fit(p, y).temperature_
    assert a == b


def test_init_only_stores_arguments() -> None:
    ts = TemperatureScaling(bounds=(0.1, 10.0))
    assert ts.get_params() == {"bounds": (0.1, 10.0)}
    assert not hasattr(ts, "temperature_")


@pytest.mark.parametrize(
    "proba,y,match",
    [
        (np.ones((3, 1)), [0, 0, 0], "n_classes"),
        (np.full((2, 3), 1 / 3), [0, 3], "class index"),
        (np.full((2, 3), 1 / 3), [0], "rows"),
        (np.array([[0.5, np.nan], [0.5, 0.5]]), [0, 1], "finite"),
        (np.full((2, 2), 0.5), [0.5, 1], "integer"),
    ],
)
def test_rejects_bad_input(proba, y, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        TemperatureScaling().fit(proba, y)


def test_transform_before_fit_raises() -> None:
    with pytest.raises(NotFittedError, match="not fitted"):
        TemperatureScaling().transform(np.full((2, 2), 0.5))


def test_transform_checks_the_column_count() -> None:
    p, y = synthetic_proba(200, 3, 2)
    ts = TemperatureScaling().fit(p, y)
    with pytest.raises(ValueError, match="columns"):
        ts.transform(np.full((2, 4), 0.25))
