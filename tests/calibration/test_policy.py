from __future__ import annotations

import json
import math

import numpy as np
import pytest

from hybridroute.calibration import (
    CertifiedPrecisionThreshold,
    CostThreshold,
    EvidenceThresholds,
    IsotonicCalibration,
    MarginThreshold,
    OutOfScopeThreshold,
    PerClassThreshold,
    Policy,
    TemperatureScaling,
    ThreeWayThreshold,
    load_evidence_labels,
)
from hybridroute.classifiers import RankedLabels
from hybridroute.exceptions import ArtifactError, UndeclaredValueError

from .conftest import synthetic_proba

CLASSES = ["billing", "cancel", "refund", "shipping"]


@pytest.fixture(scope="module")
def fitted():
    p, y = synthetic_proba(4000, 4, 0)
    cal, rest = slice(0, 1000), slice(1000, 3000)
    ts = TemperatureScaling().fit(p[cal], y[cal])
    q = ts.transform(p[rest])
    conf = q.max(1)
    correct = q.argmax(1) == y[rest]
    srt = np.sort(q, 1)
    margin = srt[:, -1] - srt[:, -2]
    labels = [CLASSES[i] for i in q.argmax(1)]
    return {
        "proba": p[3000:],
        "ts": ts,
        "conf": conf,
        "correct": correct,
        "margin": margin,
        "labels": labels,
        "y": [CLASSES[i] for i in y[rest]],
    }


def build(fitted, **over) -> Policy:
    f = CertifiedPrecisionThreshold(0.9, 0.05).fit(fitted["conf"], fitted["correct"])
    kwargs = dict(
        classes=CLASSES,
        threshold=f,
        calibrator=fitted["ts"],
        calibration_labels=fitted["y"],
        objective="precision",
        provenance={"dataset": "synthetic", "dataset_fingerprint": "abc123", "split_seed": 0},
    )
    kwargs.update(over)
    return Policy.build(**kwargs)


def test_round_trip_is_exact_and_byte_identical(fitted, tmp_path) -> None:
    pol = build(
        fitted,
        margin=MarginThreshold(0.9, 0.05).fit(fitted["margin"], fitted["correct"]),
        evidence=EvidenceThresholds().fit_records(load_evidence_labels()),
    )
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    pol.save(a)
    build(
        fitted,
        margin=MarginThreshold(0.9, 0.05).fit(fitted["margin"], fitted["correct"]),
        evidence=EvidenceThresholds().fit_records(load_evidence_labels()),
    ).save(b)
    assert a.read_bytes() == b.read_bytes()
    loaded = Policy.load(a)
    assert loaded == pol
    assert loaded.to_dict() == pol.to_dict()
    assert loaded.thresholds["auto"] == pol.thresholds["auto"]  # exact float
    loaded.save(b)
    assert a.read_bytes() == b.read_bytes()
    doc = json.loads(a.read_text())
    assert doc["format"] == "hybridroute.policy" and doc["format_version"] == 1
    for key in ("dataset_fingerprint", "split_seed"):
        assert key in doc["provenance"]
    assert doc["calibration_data"]["size"] == 2000
    assert doc["guarantee"]["certified"] is True and doc["guarantee"]["bound"] >= 0.9
    assert doc["calibrator"]["temperature"] == fitted["ts"].temperature_
    assert set(doc["evidence"]["sources"]) == {"bm25", "char_tfidf"}


@pytest.mark.parametrize(
    "edit,match",
    [
        (lambda d: d["thresholds"].__setitem__("auto", 0.01), "content hash mismatch"),
        (lambda d: d.__setitem__("format_version", 99), "incompatible policy format version 99"),
        (lambda d: d.__setitem__("format", "something.else"), "not a hybridroute policy"),
        (lambda d: d.pop("content_sha256"), "no content_sha256"),
    ],
)
def test_tampered_or_incompatible_files_are_refused(fitted, tmp_path, edit, match) -> None:
    p = tmp_path / "policy.json"
    build(fitted).save(p)
    doc = json.loads(p.read_text())
    edit(doc)
    p.write_text(json.dumps(doc))
    with pytest.raises(ArtifactError, match=match) as info:
        Policy.load(p)
    assert info.value.path == str(p)
    assert str(p) in str(info.value)


def test_malformed_field_with_valid_hash_is_refused(fitted, tmp_path) -> None:
    from hybridroute.calibration._policy import _content_hash

    doc = build(fitted).to_dict()
    doc["thresholds"]["fallback"] = "answer"
    doc["content_sha256"] = _content_hash(doc)
    p = tmp_path / "p.json"
    p.write_text(json.dumps(doc))
    with pytest.raises(ArtifactError, match=r"thresholds\.fallback"):
        Policy.load(p)


@pytest.mark.parametrize(
    "content,match", [("{not json", "not a JSON policy"), ("[]", "JSON object")]
)
def test_garbage_is_refused(tmp_path, content, match) -> None:
    p = tmp_path / "p.json"
    p.write_text(content)
    with pytest.raises(ArtifactError, match=match):
        Policy.load(p)


def test_missing_file(tmp_path) -> None:
    with pytest.raises(ArtifactError, match="cannot read policy"):
        Policy.load(tmp_path / "nope.json")


def test_apply_matches_apply_proba(fitted) -> None:
    pol = build(fitted, margin=MarginThreshold(0.9, 0.05).fit(fitted["margin"], fitted["correct"]))
    p = fitted["proba"][:200]
    batch = pol.apply_proba(p)
    for row, out in zip(p, batch, strict=True):
        order = np.argsort(-row, kind="stable")
        ranked = RankedLabels(labels=tuple(CLASSES[i] for i in order), scores=tuple(row[order]))
        single = pol.apply(ranked)
        assert single.action == out.action and single.reason_code == out.reason_code
        assert single.confidence == pytest.approx(out.confidence)
    actions = {o.action for o in batch}
    assert "auto_route" in actions
    auto = [o for o in batch if o.action == "auto_route"]
    assert all(o.confidence >= pol.thresholds["auto"] for o in auto)
    assert all(o.threshold_name == "auto" and o.reason_code == "confident_intent" for o in auto)


def test_temperature_policy_needs_every_score(fitted) -> None:
    pol = build(fitted)
    with pytest.raises(ValueError, match="k=4"):
        pol.apply(RankedLabels(labels=("refund", "cancel"), scores=(0.9, 0.05)))


def test_unknown_label_is_an_error(fitted) -> None:
    pol = build(fitted, calibrator=None)
    with pytest.raises(UndeclaredValueError, match="label 'weather'"):
        pol.apply(RankedLabels(labels=("weather", "cancel"), scores=(0.9, 0.05)))


def test_abstention_goes_to_human_review_with_its_reason(fitted) -> None:
    out = build(fitted).apply(RankedLabels(labels=(), scores=(), abstain_reason="invalid_label"))
    assert out.action == "human_review" and out.reason_code == "invalid_label"


def test_not_certified_policy_routes_nothing(fitted) -> None:
    f = CertifiedPrecisionThreshold(0.9999, 0.05).fit(fitted["conf"], fitted["correct"])
    pol = build(fitted, threshold=f)
    assert not pol.certified and pol.thresholds["auto"] is None
    outs = pol.apply_proba(fitted["proba"][:100])
    assert {o.action for o in outs} == {"human_review"}
    assert {o.reason_code for o in outs} == {"not_certified"}
    assert pol.guarantee["reason"] and pol.guarantee["required_calibration_size"]


def test_three_way_policy(fitted) -> None:
    tw = ThreeWayThreshold.certified(0.95, 0.7, 0.05).fit(fitted["conf"], fitted["correct"])
    outs = build(fitted, threshold=tw).apply_proba(fitted["proba"])
    by = {}
    for o in outs:
        by.setdefault(o.action, []).append(o)
    assert set(by) == {"auto_route", "ask_user", "human_review"}
    assert all(o.threshold_name == "ask" for o in by["ask_user"] + by["human_review"])
    assert {o.reason_code for o in by["human_review"]} == {"needs_review"}


def test_cost_policy_and_fallback(fitted) -> None:
    cost = CostThreshold(10, None, 2).fit(fitted["conf"], fitted["correct"])
    outs = build(fitted, threshold=cost, fallback="ask_user").apply_proba(fitted["proba"][:300])
    assert {o.action for o in outs} <= {"auto_route", "ask_user"}


def test_per_class_thresholds(fitted) -> None:
    pc = PerClassThreshold(CertifiedPrecisionThreshold(0.9, 0.05), min_class_size=100).fit(
        fitted["conf"], fitted["correct"], fitted["labels"]
    )
    f = CertifiedPrecisionThreshold(0.9, 0.05).fit(fitted["conf"], fitted["correct"])
    pol = build(fitted, threshold=f, per_class=pc)
    outs = pol.apply_proba(fitted["proba"][:300])
    for o in outs:
        if o.action == "auto_route":
            assert o.threshold_name == f"class:{o.label}"
            assert o.confidence >= pc.threshold_for(o.label)


def test_out_of_scope_gate(fitted) -> None:
    rng = np.random.default_rng(0)
    oos_scores = rng.random(2000)
    is_oos = rng.random(2000) < 0.2
    oos = OutOfScopeThreshold(recall=0.5, delta=0.1).fit(
        np.where(is_oos, oos_scores * 0.5 + 0.5, oos_scores * 0.5), is_oos
    )
    pol = build(fitted, oos=oos, oos_score="external")
    out = pol.apply_proba(fitted["proba"][:2], oos_scores=[0.99, 0.0])
    assert out[0].action == "out_of_scope" and out[0].reason_code == "out_of_scope"
    assert out[1].action != "out_of_scope"
    with pytest.raises(ValueError, match="oos_score"):
        pol.apply_proba(fitted["proba"][:1])
    default = build(fitted, oos=oos)  # one minus confidence
    assert default.thresholds["oos"]["score"] == "one_minus_confidence"


def test_isotonic_policy_applies_to_top_two(fitted) -> None:
    p, y = synthetic_proba(1000, 4, 1)
    iso = IsotonicCalibration().fit(p, y)
    pol = build(fitted, calibrator=iso)
    out = pol.apply(RankedLabels(labels=("refund", "cancel"), scores=(0.8, 0.1)))
    assert out.label == "refund"
    assert out.confidence == pytest.approx(float(iso.calibrate_confidence([0.8])[0]))


def test_label_mix_check(fitted) -> None:
    pol = build(fitted)
    same = pol.check_label_mix(fitted["y"])
    assert not same.departs
    skewed = pol.check_label_mix({"refund": 900, "billing": 50, "cancel": 25, "shipping": 25})
    assert skewed.departs


def test_evidence_check_through_policy(fitted) -> None:
    rows = load_evidence_labels()
    pol = build(fitted, evidence=EvidenceThresholds().fit_records(rows))
    t = pol.evidence_thresholds
    res = pol.check_evidence(
        ["a"], [{"id": "x", "source": "bm25", "score": t["bm25"], "point": "a"}]
    )
    assert res.evidence_complete and res.evidence_ids == ("x",)
    with pytest.raises(ValueError, match="no evidence thresholds"):
        build(fitted).check_evidence(["a"], [])


def test_non_finite_values_cannot_enter(fitted) -> None:
    with pytest.raises(ValueError, match="non-finite"):
        build(fitted, provenance={"x": math.nan})
