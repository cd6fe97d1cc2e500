"""The precision monitor's states, its JSON form, and the traffic-shift summary."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from hybridroute.monitoring import (
    MONITOR_STATES,
    BettingConfidenceSequence,
    PrecisionMonitor,
    TrafficShift,
    labels_to_certify,
    traffic_shift,
)


def bernoulli(p: float, n: int, seed: int) -> np.ndarray:
    return (np.random.default_rng(seed).random(n) < p).astype(float)


@pytest.mark.parametrize(("target", "delta"), [(0.5, 0.05), (0.9, 0.05), (0.9, 0.01), (0.95, 0.1)])
def test_labels_to_certify_is_the_first_label_a_perfect_stream_clears(target, delta):
    n = labels_to_certify(target, delta)
    lower, _ = BettingConfidenceSequence(delta=delta).trace(np.ones(n))
    assert lower[-1] > target
    assert n == 1 or lower[-2] <= target


def test_labels_to_certify_grows_with_the_target_and_the_confidence():
    assert labels_to_certify(0.8) < labels_to_certify(0.9) < labels_to_certify(0.95)
    assert labels_to_certify(0.9, 0.1) < labels_to_certify(0.9, 0.05) < labels_to_certify(0.9, 0.01)


@pytest.mark.parametrize("target", [0.9995, 0.99999])
def test_labels_to_certify_refuses_an_unresolvable_target(target):
    with pytest.raises(ValueError, match="too close to 1 for a grid of 1000 points"):
        labels_to_certify(target)


@pytest.mark.parametrize("target", [0.9, 0.95])
def test_a_perfect_stream_is_insufficient_until_the_computed_minimum(target):
    mon = PrecisionMonitor(target, 0.05)
    need = labels_to_certify(target, 0.05)
    assert mon.required_labels_ == need
    mon.update_many(np.ones(need - 1))
    assert mon.status == "insufficient"
    mon.update(1.0)
    assert mon.status == "certified_online"


def test_min_labels_can_only_raise_the_floor():
    need = labels_to_certify(0.9, 0.05)
    assert PrecisionMonitor(0.9, min_labels=need + 500).required_labels_ == need + 500
    assert PrecisionMonitor(0.9, min_labels=3).required_labels_ == need
    mon = PrecisionMonitor(0.9, min_labels=need + 500).update_many(np.ones(need + 10))
    assert mon.status == "insufficient"


@pytest.mark.parametrize("seed", [0, 1])
def test_a_stream_near_the_target_holds(seed):
    mon = PrecisionMonitor(0.9).update_many(bernoulli(0.9, 600, seed))
    assert mon.status == "holding"
    assert mon.sequence_.lower <= 0.9 <= mon.sequence_.upper


@pytest.mark.parametrize("seed", [2, 3])
def test_a_clearly_better_stream_is_certified(seed):
    mon = PrecisionMonitor(0.9).update_many(bernoulli(0.97, 1500, seed))
    assert mon.status == "certified_online"
    assert mon.to_dict()["breach"] is None


@pytest.mark.parametrize("seed", [4, 5, 6])
def test_a_drop_from_095_to_07_is_detected_after_the_change_and_sticks(seed):
    change = 600
    x = np.concatenate([bernoulli(0.95, change, seed), bernoulli(0.7, 2400, seed + 100)])
    start = datetime(2026, 1, 1, tzinfo=UTC)
    times = [start + timedelta(minutes=i) for i in range(len(x))]
    mon = PrecisionMonitor(0.9, 0.05)
    states = []
    for chunk in range(0, len(x), 100):  # read the state as an operator would, often
        mon.update_many(x[chunk : chunk + 100], times=times[chunk : chunk + 100])
        states.append(mon.status)
    assert mon.status == "breach"
    first = states.index("breach")
    assert all(s == "breach" for s in states[first:])  # stays in breach
    assert "breach" not in states[: change // 100]
    labels = mon.breach_labels_
    assert labels is not None and change < labels <= len(x)
    # the recorded label count is the first at which the upper bound fell below target
    _, upper = BettingConfidenceSequence(delta=0.05).trace(x)
    assert labels == int(np.argmax(upper < 0.9)) + 1
    report = mon.to_dict()
    assert report["breach"] == {"labels": labels, "at": times[labels - 1].isoformat()}
    assert report["precision"]["upper"] < 0.9


def test_breach_stays_even_if_good_labels_follow():
    mon = PrecisionMonitor(0.9).update_many(np.zeros(60))
    assert mon.status == "breach"
    detected = mon.breach_labels_
    mon.update_many(np.ones(5000))
    assert mon.status == "breach" and mon.breach_labels_ == detected


def test_a_breach_is_reported_even_before_labels_suffice_to_certify():
    mon = PrecisionMonitor(0.99)  # certifying 0.99 takes hundreds of labels
    mon.update_many(np.zeros(30), times=["t"] * 30)
    assert mon.labels < mon.required_labels_
    assert mon.status == "breach"
    assert mon.to_dict()["breach"]["at"] == "t"


def test_without_times_the_breach_time_is_none():
    mon = PrecisionMonitor(0.9).update_many(np.zeros(60))
    assert mon.to_dict()["breach"] == {"labels": mon.breach_labels_, "at": None}


def test_one_at_a_time_with_times_records_the_detecting_label():
    mon = PrecisionMonitor(0.9)
    for i in range(100):
        mon.update(0.0, at=f"2026-01-01T00:{i:02d}:00Z" if i < 60 else "late")
        if mon.status == "breach":
            break
    assert mon.to_dict()["breach"] == {
        "labels": mon.labels,
        "at": f"2026-01-01T00:{mon.labels - 1:02d}:00Z",
    }


def test_to_dict_shape_and_json():
    mon = PrecisionMonitor(0.9, 0.05)
    empty = mon.to_dict()
    assert empty == {
        "status": "insufficient",
        "labels": 0,
        "precision": {"estimate": None, "lower": 0.0, "upper": 1.0},
        "target": 0.9,
        "delta": 0.05,
        "breach": None,
    }
    mon.update_many(bernoulli(0.93, 400, 8), 0.5)
    out = json.loads(json.dumps(mon.to_dict()))
    assert set(out) == {"status", "labels", "precision", "target", "delta", "breach"}
    assert out["status"] in MONITOR_STATES
    p = out["precision"]
    assert p["lower"] <= p["estimate"] <= p["upper"]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"target": 1.0}, r"target must be in \(0, 1\)"),
        ({"target": 0.0}, r"target must be in \(0, 1\)"),
        ({"target": "high"}, r"target must be a number"),
        ({"target": 0.9, "delta": 0.0}, r"delta must be in \(0, 1\)"),
        ({"target": 0.9, "delta": 1.2}, r"delta must be in \(0, 1\)"),
        ({"target": 0.9, "min_labels": -1}, "min_labels must be a non-negative integer"),
        ({"target": 0.9, "min_labels": 2.5}, "min_labels must be a non-negative integer"),
    ],
)
def test_bad_settings_are_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        PrecisionMonitor(**kwargs)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda m: m.update(2.0), r"observation 0 must be a finite number"),
        (lambda m: m.update(1.0, weight=0.0), r"weight 0 must be in \(0, 1\]"),
        (lambda m: m.update_many([1, 0], times=["t"]), "times has 1 entries for 2 outcomes"),
        (lambda m: m.update(1.0, at=12), "a detection time must be a datetime"),
    ],
)
def test_bad_updates_are_refused(call, match):
    mon = PrecisionMonitor(0.9)
    with pytest.raises(ValueError, match=match):
        call(mon)


def test_traffic_shift_total_variation_and_oos_share():
    ref = {"card": 50, "loan": 45, "oos": 5}
    live = ["card"] * 30 + ["loan"] * 50 + ["oos"] * 20
    shift = traffic_shift(ref, live)
    assert isinstance(shift, TrafficShift)
    assert shift.total_variation == pytest.approx(0.2)
    assert (shift.oos_reference, shift.oos_live) == (0.05, 0.2)
    assert shift.oos_difference == pytest.approx(0.15)
    assert shift.n_live == 100
    assert json.loads(json.dumps(shift.to_dict()))["oos_live"] == 0.2


@pytest.mark.parametrize(
    ("ref", "live", "tv"),
    [
        ({"a": 1, "b": 1}, {"a": 10, "b": 10}, 0.0),
        ({"a": 1}, {"b": 3}, 1.0),
        ({"a": 0.5, "b": 0.5}, iter(["a", "a", "a", "b"]), 0.25),  # a generator, read once
    ],
)
def test_traffic_shift_cases(ref, live, tv):
    shift = traffic_shift(ref, live)
    assert shift.total_variation == pytest.approx(tv)
    assert shift.oos_live == 0.0 and shift.oos_difference == 0.0


def test_traffic_shift_names_the_out_of_scope_label():
    shift = traffic_shift(["x", "none"], ["none", "none"], out_of_scope="none")
    assert (shift.oos_reference, shift.oos_live) == (0.5, 1.0)


@pytest.mark.parametrize(
    ("ref", "live", "match"), [({}, ["a"], "reference is empty"), ({"a": 1}, {"a": -1}, "observed")]
)
def test_traffic_shift_refuses_bad_mixes(ref, live, match):
    with pytest.raises(ValueError, match=match):
        traffic_shift(ref, live)
