"""Policies holding a round-two certificate: they round-trip, and a tampered record is refused."""

from __future__ import annotations

import json

import numpy as np
import pytest

from hybridroute.calibration import (
    PerClassThreshold,
    Policy,
    ThreeWayThreshold,
    fit_policy,
)
from hybridroute.calibration.experimental import (
    FallbackPrecisionThreshold,
    LabelFreeStartThreshold,
)
from hybridroute.exceptions import ArtifactError

from .conftest import synthetic_proba
from .test_policy import _rehash, _set, _write

CLASSES = ["billing", "cancel", "refund", "shipping"]

FITTERS = {
    "label-free": lambda: LabelFreeStartThreshold(0.9, 0.05),
    "fallback": lambda: FallbackPrecisionThreshold(0.9, 0.05),
    "fallback weighted": lambda: FallbackPrecisionThreshold(0.9, 0.05, weights=(2, 1, 1)),
    "fallback auto": lambda: FallbackPrecisionThreshold(0.9, 0.05, n_starts="auto"),
}


@pytest.fixture(scope="module")
def scored():
    p, y = synthetic_proba(3000, 4, 11)
    conf = p.max(1)
    correct = p.argmax(1) == y
    return {
        "conf": conf,
        "correct": correct,
        "labels": [CLASSES[i] for i in p.argmax(1)],
        "y": [CLASSES[i] for i in y],
    }


def _policy(scored, fitter) -> Policy:
    fitter.fit(scored["conf"], scored["correct"])
    return Policy.build(
        classes=CLASSES, threshold=fitter, calibration_labels=scored["y"], objective="precision"
    )


def _saved(scored, tmp_path, name):
    p = tmp_path / "policy.json"
    pol = _policy(scored, FITTERS[name]())
    assert pol.certified
    pol.save(p)
    return p, json.loads(p.read_text())


@pytest.mark.parametrize("name", sorted(FITTERS))
def test_a_round_two_policy_round_trips(scored, tmp_path, name) -> None:
    p, doc = _saved(scored, tmp_path, name)
    loaded = Policy.load(p)
    assert loaded == _policy(scored, FITTERS[name]())
    assert doc["objective"]["fit"]["method"] == FITTERS[name]().method
    assert doc["guarantee"]["bound"] >= 0.9


def _fit(*keys_value):
    *keys, value = keys_value
    return _set("objective", "fit", *keys, value)


def _fit_and_guarantee(key, value):
    def edit(d):
        _set("objective", "fit", key, value)(d)
        _set("guarantee", key, value)(d)

    return edit


def _level_changed(d):
    # claim another level than the one the chain reached (the whole of delta, or half)
    fit = d["objective"]["fit"]
    fit["level"] = 0.05 if abs(fit["level"] - 0.05) > 1e-9 else 0.025


def _first_weight(d):
    d["objective"]["fit"]["weights"] = [0.9, 0.05, 0.05][: len(d["objective"]["fit"]["weights"])]


def _later_starts(d):
    d["objective"]["fit"]["start_counts"] = [c + 1 for c in d["objective"]["fit"]["start_counts"]]


def _coverage_up(d):
    # fifty more items routed, no more mistakes: a consistent-looking record of a lower bound
    fit = d["objective"]["fit"]
    n = fit["calibration_size"]
    accepted = round(fit["coverage"] * n)
    errors = round((1 - fit["precision"]) * accepted)
    fit["coverage"] = (accepted + 50) / n
    fit["precision"] = 1 - errors / (accepted + 50)
    d["expected"] = {"coverage": fit["coverage"], "precision": fit["precision"]}


def _precision_down(d):
    fit = d["objective"]["fit"]
    accepted = round(fit["coverage"] * fit["calibration_size"])
    fit["precision"] = 1 - (round((1 - fit["precision"]) * accepted) + 25) / accepted
    d["expected"]["precision"] = fit["precision"]


def _target_up(d):
    for v in (d["objective"]["fit"], d["objective"]["fit"]["params"], d["guarantee"]):
        v["target"] = 0.999


def _delta_down(d):
    for v in (d["objective"]["fit"], d["objective"]["fit"]["params"], d["guarantee"]):
        v["delta"] = 0.0001


def _uncertify_keeping_the_threshold(d):
    d["objective"]["fit"]["certified"] = False
    d["guarantee"]["certified"] = False


#: (edit, the field named in the refusal), for every fitter of FITTERS.
TAMPERING = {
    "level edited": (_level_changed, r"objective\.fit\.(level|bound|certified)"),
    "level of another scale": (_fit("level", 0.0123), r"objective\.fit\.level"),
    "level missing": (_fit("level", None), r"objective\.fit\.level"),
    "bound edited": (_fit_and_guarantee("bound", 0.9999), "Clopper-Pearson bound"),
    "start counts edited": (_later_starts, r"objective\.fit\.start_counts"),
    "weights edited": (_first_weight, r"objective\.fit\.(weights|start_counts)"),
    "weights not a list": (_fit("weights", "equal"), r"objective\.fit\.weights"),
    "coverage raised": (_coverage_up, r"objective\.fit\.(level|bound)"),
    "precision lowered": (_precision_down, r"objective\.fit\.(certified|bound)"),
    "target raised": (_target_up, r"objective\.fit\.(certified|start_counts|weights)"),
    "delta lowered": (_delta_down, r"objective\.fit\.(level|start_counts|weights)"),
    "uncertified but routes": (_uncertify_keeping_the_threshold, r"objective\.fit\.coverage"),
    "unknown method": (_fit("method", "my_sequence"), "cannot be checked"),
    "objective of another method": (
        _set("objective", "name", "coverage"),
        r"objective\.fit\.method",
    ),
}


@pytest.mark.parametrize("case", sorted(TAMPERING))
def test_a_tampered_record_is_refused(scored, tmp_path, case) -> None:
    edit, match = TAMPERING[case]
    for name in sorted(FITTERS):
        p, doc = _saved(scored, tmp_path, name)
        edit(doc)
        _write(p, _rehash(doc))
        with pytest.raises(ArtifactError, match=match) as info:
            Policy.load(p)
        assert str(p) in str(info.value), name


@pytest.mark.parametrize(
    ("name", "edit", "match"),
    [
        # settings the record's starts must follow
        ("fallback", _fit("params", "n_starts", 2), r"objective\.fit\.weights"),
        ("fallback", _fit("params", "n_starts", "auto"), r"objective\.fit\.(weights|start)"),
        ("fallback", _fit("params", "n_starts", 0), r"objective\.fit\.params\.n_starts"),
        ("fallback auto", _fit("params", "n_starts", 3), r"objective\.fit\.(weights|start)"),
        ("fallback auto", _fit("calibration_size", 10), r"objective\.fit\.coverage"),
        # custom weights are not in params; the record's own must still split delta
        ("fallback weighted", _fit("weights", [0.5, 0.5, 0.5]), r"objective\.fit\.weights"),
        ("fallback weighted", _fit("weights", [1.0, 0.0, 0.0]), r"objective\.fit\.weights"),
        ("label-free", _fit("weights", [0.5, 0.5]), r"objective\.fit\.weights"),
        ("label-free", _fit("start_counts", [1]), r"objective\.fit\.start_counts"),
    ],
)
def test_settings_and_starts_must_agree(scored, tmp_path, name, edit, match) -> None:
    p, doc = _saved(scored, tmp_path, name)
    edit(doc)
    _write(p, _rehash(doc))
    with pytest.raises(ArtifactError, match=match):
        Policy.load(p)


@pytest.mark.parametrize("cls", [LabelFreeStartThreshold, FallbackPrecisionThreshold])
def test_an_uncertified_round_two_policy_loads_and_cannot_claim_a_level(
    scored, tmp_path, cls
) -> None:
    fitter = cls(0.9999, 0.05)
    pol = _policy(scored, fitter)
    assert not pol.certified
    p = tmp_path / "p.json"
    pol.save(p)
    assert Policy.load(p) == pol
    doc = json.loads(p.read_text())
    doc["objective"]["fit"]["level"] = 0.05
    _write(p, _rehash(doc))
    with pytest.raises(ArtifactError, match=r"objective\.fit\.level"):
        Policy.load(p)


def test_per_class_and_three_way_records_with_round_two_fitters_are_checked(
    scored, tmp_path
) -> None:
    c, k, lab = scored["conf"], scored["correct"], scored["labels"]
    per_class = PerClassThreshold(FallbackPrecisionThreshold(0.9, 0.05)).fit(c, k, lab)
    three = ThreeWayThreshold(
        auto=FallbackPrecisionThreshold(0.95, 0.025), ask=LabelFreeStartThreshold(0.8, 0.025)
    ).fit(c, k)
    pol = Policy.build(classes=CLASSES, threshold=three, per_class=per_class, objective="three-way")
    p = tmp_path / "p.json"
    pol.save(p)
    assert Policy.load(p) == pol
    doc = json.loads(p.read_text())
    group = next(iter(doc["fits"]["per_class"]["groups"].values()))
    group["level"] = 0.05 if group["level"] != 0.05 else 0.01
    _write(p, _rehash(doc))
    with pytest.raises(ArtifactError, match=r"fits\.per_class\.groups\..*\.level"):
        Policy.load(p)
    pol.save(p)
    doc = json.loads(p.read_text())
    doc["objective"]["fit"]["ask"]["start_counts"] = [5]
    _write(p, _rehash(doc))
    with pytest.raises(ArtifactError, match=r"objective\.fit\.ask\.start_counts"):
        Policy.load(p)


def test_per_class_sizes_a_class_from_the_first_start() -> None:
    from hybridroute.calibration import required_calibration_size

    s = np.linspace(0.5, 1.0, 900)
    k = np.ones(900, dtype=bool)
    labels = ["a"] * 600 + ["b"] * 300
    f = PerClassThreshold(FallbackPrecisionThreshold(0.95, 0.05, n_starts="auto")).fit(s, k, labels)
    assert f.min_class_size_ == 2 * required_calibration_size(0.95, 0.05)
    g = PerClassThreshold(FallbackPrecisionThreshold(0.95, 0.05, weights=(2, 1, 1))).fit(
        s, k, labels
    )
    assert g.min_class_size_ == 2 * required_calibration_size(0.95, 0.025)


def test_fit_policy_records_a_round_two_certificate_that_loads(tmp_path) -> None:
    p, y = synthetic_proba(2000, 4, 3)
    gold = [CLASSES[i] for i in y]
    pol = fit_policy(p, gold, CLASSES, target=0.9, delta=0.05)
    path = tmp_path / "p.json"
    pol.save(path)
    assert Policy.load(path) == pol
