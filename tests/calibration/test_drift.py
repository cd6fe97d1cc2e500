from __future__ import annotations

import pytest

from hybridroute.calibration import label_mix_departure


def test_same_mix_does_not_depart() -> None:
    ref = {"a": 500, "b": 300, "c": 200}
    d = label_mix_departure(ref, {"a": 480, "b": 310, "c": 210})
    assert not d.departs
    assert d.total_variation == pytest.approx(0.02)
    assert "close to" in d.message()


def test_clinc_like_oos_shift_departs() -> None:
    # out-of-scope 3% of validation, 18% of test (CLINC150)
    ref = {"oos": 100, **{f"intent{i}": 20 for i in range(150)}}
    obs = {"oos": 1000, **{f"intent{i}": 30 for i in range(150)}}
    d = label_mix_departure(ref, obs)
    assert d.total_variation == pytest.approx(1000 / 5500 - 100 / 3100)
    assert d.departs
    assert d.shifts[0][0] == "oos"
    assert "departs markedly" in d.message()


def test_large_but_noisy_difference_on_few_items_is_not_flagged() -> None:
    d = label_mix_departure({"a": 50, "b": 50}, ["a", "a", "b"])
    assert d.total_variation > 0.1
    assert not d.departs  # three items cannot show a clear departure


def test_unseen_label_gives_finite_statistic() -> None:
    d = label_mix_departure({"a": 100}, {"a": 50, "new": 50})
    assert d.departs and d.chi2 < float("inf")


@pytest.mark.parametrize(
    "ref,obs,match",
    [({}, {"a": 1}, "reference is empty"), ({"a": 1}, {"a": -1}, "non-negative")],
)
def test_bad_inputs(ref, obs, match) -> None:
    with pytest.raises(ValueError, match=match):
        label_mix_departure(ref, obs)
