from __future__ import annotations

import itertools

import numpy as np
import pytest

from hybridroute.calibration import CostThreshold

from .conftest import synthetic


def brute_force(s, c, cm, ca, cr):
    cands = np.r_[np.inf, np.unique(s)]
    best = None
    for hi, lo in itertools.product(cands, cands):
        if ca is None and lo != hi:
            continue
        if lo > hi:
            continue
        auto = s >= hi
        ask = (s >= lo) & ~auto
        rev = ~(auto | ask)
        cost = (
            cm * np.sum(auto & ~c)
            + (0 if ca is None else ca * ask.sum() + cr * np.sum(ask & ~c))
            + cr * rev.sum()
        )
        if best is None or cost < best - 1e-9:
            best = cost
    return best / len(s)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("costs", [(10, 1, 3), (5, None, 2), (1, 0.5, 5), (20, 2, 2)])
def test_matches_brute_force_minimum(seed: int, costs) -> None:
    s, c = synthetic(40, seed)
    s = np.round(s, 2)  # ties included
    f = CostThreshold(*costs).fit(s, c)
    assert f.expected_cost_ == pytest.approx(brute_force(s, c, *costs))
    assert f.ask_threshold_ <= f.threshold_
    assert sum(f.shares_.values()) == pytest.approx(1.0)


def test_predict_gives_three_zones() -> None:
    s, c = synthetic(2000, 3)
    f = CostThreshold(10, 1, 3).fit(s, c)
    actions = f.predict(s)
    assert set(actions) <= {"auto_route", "ask_user", "human_review"}
    assert np.mean(actions == "auto_route") == pytest.approx(f.shares_["auto_route"])


def test_expensive_misroutes_mean_less_automation() -> None:
    s, c = synthetic(2000, 4)
    cheap = CostThreshold(2, None, 1).fit(s, c)
    dear = CostThreshold(50, None, 1).fit(s, c)
    assert dear.threshold_ >= cheap.threshold_


@pytest.mark.parametrize("field", ["cost_misroute", "cost_ask_user", "cost_human_review"])
def test_negative_costs_rejected(field: str) -> None:
    kwargs = {field: -1}
    with pytest.raises(ValueError, match=field):
        CostThreshold(**kwargs).fit([0.2, 0.9], [False, True])
