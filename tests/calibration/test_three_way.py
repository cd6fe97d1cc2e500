from __future__ import annotations

import numpy as np
import pytest

from hybridroute.calibration import (
    CertifiedPrecisionThreshold,
    EmpiricalThreshold,
    ThreeWayThreshold,
)

from .conftest import synthetic


def test_certified_three_way_splits_delta_and_orders_thresholds() -> None:
    s, c = synthetic(3000, 0)
    tw = ThreeWayThreshold.certified(0.95, 0.8, delta=0.05).fit(s, c)
    assert tw.auto_.delta == pytest.approx(0.025) and tw.ask_.delta == pytest.approx(0.025)
    assert tw.ask_threshold_ <= tw.threshold_
    actions = tw.predict(s)
    assert np.mean(actions == "auto_route") == pytest.approx(tw.shares_["auto_route"])
    assert tw.summary()["ask"]["target"] == 0.8


def test_ask_above_auto_is_clipped() -> None:
    s, c = synthetic(2000, 1)
    tw = ThreeWayThreshold(EmpiricalThreshold(0.8), EmpiricalThreshold(0.95)).fit(s, c)
    assert tw.ask_threshold_ == tw.threshold_
    assert tw.shares_["ask_user"] == 0.0


def test_components_are_cloned_not_mutated() -> None:
    auto = CertifiedPrecisionThreshold(0.9)
    ThreeWayThreshold(auto, EmpiricalThreshold(0.7)).fit(*synthetic(500, 2))
    assert not hasattr(auto, "threshold_")


def test_components_must_be_fitters() -> None:
    with pytest.raises(ValueError, match="auto must be a threshold fitter"):
        ThreeWayThreshold("0.9", EmpiricalThreshold(0.7)).fit([0.5], [True])
