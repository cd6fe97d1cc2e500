from __future__ import annotations

import numpy as np
import pytest

from hybridroute.calibration import IsotonicCalibration
from hybridroute.exceptions import NotFittedError

from .conftest import synthetic_proba


def test_map_is_monotone_and_keeps_the_top_label() -> None:
    p, y = synthetic_proba(2000, 4, 3)
    iso = IsotonicCalibration().fit(p[:1000], y[:1000])
    assert np.all(np.diff(iso.y_) >= 0)
    grid = np.linspace(0, 1, 101)
    mapped = iso.calibrate_confidence(grid)
    assert np.all(np.diff(mapped) >= -1e-12)
    assert np.all((mapped >= 0) & (mapped <= 1))
    q = iso.transform(p[1000:])
    assert np.allclose(q.sum(axis=1), 1.0)
    rows = np.arange(1000)
    top = p[1000:].argmax(axis=1)
    assert np.allclose(q[rows, top], iso.calibrate_confidence(p[1000:].max(axis=1)))


def test_summary_round_trips_the_map() -> None:
    p, y = synthetic_proba(500, 3, 4)
    iso = IsotonicCalibration().fit(p, y)
    s = iso.summary()
    assert s["method"] == "isotonic" and len(s["x"]) == len(s["y"])
    conf = p.max(axis=1)
    assert np.allclose(np.interp(conf, s["x"], s["y"]), iso.calibrate_confidence(conf))


def test_not_fitted() -> None:
    with pytest.raises(NotFittedError, match="IsotonicCalibration"):
        IsotonicCalibration().calibrate_confidence([0.5])
