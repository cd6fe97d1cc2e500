from __future__ import annotations

import copy
import json
import math

import numpy as np
import pytest

from hybridroute.calibration import (
    CertifiedPrecisionThreshold,
    CostThreshold,
    CoverageThreshold,
    EmpiricalThreshold,
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
        provenance={"dataset": "synthetic", "dataset_fingerprint": "abc123", "split_seed": 0},
    )
    kwargs.update(over)
    # the objective's name must be the one its fit records (fit_policy's names)
    names = {"certified_precision": "precision", "cost": "cost", "three_way": "three-way"}
    kwargs.setdefault("objective", names.get(kwargs["threshold"].method))
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
    assert doc["format"] == "hybridroute.policy" and doc["format_version"] == 3
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


# --------------------------------------------------------------------------- integrity

SIGNING_KEY = "p" * 32
FP_A, FP_B = "a" * 64, "b" * 64


def _write(path, doc) -> None:
    path.write_text(json.dumps(doc, indent=2))


def _rehash(doc) -> dict:
    """Recompute the plain content hash after an edit, as anyone can."""
    from hybridroute._integrity import content_hash

    doc = {k: v for k, v in doc.items() if k not in ("content_sha256", "signature")}
    doc["content_sha256"] = content_hash(doc)
    return doc


def _uncertified(fitted) -> Policy:
    f = CertifiedPrecisionThreshold(0.9999, 0.05).fit(fitted["conf"], fitted["correct"])
    return build(fitted, threshold=f)


def test_signed_policy_and_the_signing_rules(fitted, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("HYBRIDROUTE_SIGNING_KEY", SIGNING_KEY)
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    build(fitted).save(a)
    build(fitted).save(b)
    assert a.read_bytes() == b.read_bytes()  # the HMAC is deterministic
    doc = json.loads(a.read_text())
    assert doc["signature"]["algorithm"] == "hmac-sha256" and SIGNING_KEY not in a.read_text()
    assert Policy.load(a) == build(fitted)

    monkeypatch.setenv("HYBRIDROUTE_SIGNING_KEY", "q" * 32)
    with pytest.raises(ArtifactError, match="'signature' does not verify"):
        Policy.load(a)
    monkeypatch.delenv("HYBRIDROUTE_SIGNING_KEY")
    with pytest.raises(ArtifactError, match="HYBRIDROUTE_SIGNING_KEY is not set") as info:
        Policy.load(a)
    assert info.value.path == str(a)
    unsigned = tmp_path / "unsigned.json"
    build(fitted).save(unsigned)
    assert "signature" not in json.loads(unsigned.read_text())
    monkeypatch.setenv("HYBRIDROUTE_SIGNING_KEY", SIGNING_KEY)
    with pytest.raises(ArtifactError, match="is not signed"):
        Policy.load(unsigned)


@pytest.mark.parametrize(
    "edit",
    [
        # consistent with every check below: only the signature can tell
        lambda d: d["provenance"].__setitem__("dataset", "elsewhere"),
        lambda d: d.__setitem__("model_fingerprint", FP_B),
        lambda d: d["thresholds"].__setitem__("fallback", "ask_user"),
        lambda d: d.pop("signature"),
    ],
)
def test_signed_policy_edited_with_a_recomputed_hash_is_refused(
    fitted, tmp_path, monkeypatch, edit
) -> None:
    monkeypatch.setenv("HYBRIDROUTE_SIGNING_KEY", SIGNING_KEY)
    p = tmp_path / "p.json"
    build(fitted, model_fingerprint=FP_A).save(p)
    doc = json.loads(p.read_text())
    signature = doc.get("signature")
    edit(doc)
    forged = _rehash(doc)
    if "signature" in doc:
        forged["signature"] = signature
    _write(p, forged)
    with pytest.raises(ArtifactError, match=r"does not verify|is not signed"):
        Policy.load(p)


def test_model_fingerprint_is_recorded_and_binds_once(fitted, tmp_path) -> None:
    pol = build(fitted)
    assert pol.model_fingerprint is None
    bound = pol.with_model_fingerprint(FP_A)
    assert bound.model_fingerprint == FP_A and bound.with_model_fingerprint(FP_A) is bound
    assert bound.content_sha256 != pol.content_sha256
    with pytest.raises(ValueError, match="cannot be bound to model bbbb"):
        bound.with_model_fingerprint(FP_B)
    for bad in ("abc", "A" * 64, 5, None):
        with pytest.raises(ValueError, match="64 lowercase hex"):
            pol.with_model_fingerprint(bad)
    p = tmp_path / "p.json"
    build(fitted, model_fingerprint=FP_A).save(p)
    assert Policy.load(p).model_fingerprint == FP_A
    doc = json.loads(p.read_text())
    doc["model_fingerprint"] = FP_B
    _write(p, doc)
    with pytest.raises(ArtifactError, match="content hash mismatch"):
        Policy.load(p)
    _write(p, _rehash({**doc, "model_fingerprint": "not-a-fingerprint"}))
    with pytest.raises(ArtifactError, match="'model_fingerprint'"):
        Policy.load(p)


def _set(*keys_value):
    *keys, value = keys_value

    def edit(d):
        for k in keys[:-1]:
            d = d[k]
        d[keys[-1]] = value

    return edit


def _both(a, b, value):
    def edit(d):
        _set(*a, value)(d)
        _set(*b, value)(d)

    return edit


CONTRADICTIONS = {
    # the case, and the class around it
    "auto threshold -5": (_set("thresholds", "auto", -5), "thresholds.auto"),
    "auto threshold edited": (_set("thresholds", "auto", 0.5), r"objective\.fit\.threshold"),
    "auto and fit -5": (
        _both(("thresholds", "auto"), ("objective", "fit", "threshold"), -5.0),
        "not a probability",
    ),
    "auto and fit 1.5": (
        _both(("thresholds", "auto"), ("objective", "fit", "threshold"), 1.5),
        "not a probability",
    ),
    "ask on a one-threshold policy": (_set("thresholds", "ask", 0.2), "thresholds.ask"),
    "margin without a margin fit": (_set("thresholds", "margin", 0.1), "thresholds.margin"),
    "per-class without a fit": (
        _set("thresholds", "per_class", {"refund": 0.1}),
        "thresholds.per_class",
    ),
    "bound in the guarantee": (_set("guarantee", "bound", 0.999), "guarantee.bound"),
    "bound in both": (
        _both(("guarantee", "bound"), ("objective", "fit", "bound"), 0.999),
        "Clopper-Pearson bound",
    ),
    "coverage raised": (
        _both(("expected", "coverage"), ("objective", "fit", "coverage"), 0.999),
        "objective.fit",
    ),
    "precision raised": (
        _both(("expected", "precision"), ("objective", "fit", "precision"), 0.999),
        "objective.fit",
    ),
    "target raised past the bound": (
        lambda d: [
            _set("guarantee", "target", 0.999)(d),
            _set("objective", "fit", "target", 0.999)(d),
            _set("objective", "fit", "params", "target", 0.999)(d),
        ],
        "do not certify precision 0.999",
    ),
    "delta changed": (
        lambda d: [
            _set("guarantee", "delta", 0.5)(d),
            _set("objective", "fit", "delta", 0.5)(d),
            _set("objective", "fit", "params", "delta", 0.5)(d),
        ],
        "Clopper-Pearson bound",
    ),
    "one fixed sequence instead of three": (
        _set("objective", "fit", "params", "n_starts", 1),
        "Clopper-Pearson bound",
    ),
    "params disagree with the fit": (
        _set("objective", "fit", "params", "target", 0.5),
        r"objective\.fit\.params\.target",
    ),
    "expected precision": (_set("expected", "precision", 0.9999), "'expected'"),
    "objective name": (_set("objective", "name", "empirical"), r"objective\.fit\.method"),
    "label mix share": (
        _set("calibration_data", "out_of_scope_share", 0.5),
        "out_of_scope_share",
    ),
    "label mix size": (_set("calibration_data", "size", 5), r"calibration_data\.size"),
    "unknown certifying method": (
        _set("objective", "fit", "method", "my_method"),
        "cannot be checked",
    ),
    "guarantee with an extra key": (_set("guarantee", "certified_by", "me"), "'guarantee'"),
}


@pytest.mark.parametrize("case", sorted(CONTRADICTIONS))
def test_contradictory_fields_with_a_recomputed_hash_are_refused(fitted, tmp_path, case) -> None:
    edit, match = CONTRADICTIONS[case]
    p = tmp_path / "policy.json"
    build(fitted, margin=None).save(p)
    doc = json.loads(p.read_text())
    edit(doc)
    _write(p, _rehash(doc))
    with pytest.raises(ArtifactError, match=match) as info:
        Policy.load(p)
    assert str(p) in str(info.value) and "policy field" in str(info.value)


UNCERTIFIED_CONTRADICTIONS = {
    "certified claimed": (_set("guarantee", "certified", True), "guarantee.certified"),
    "certified claimed in the fit too": (
        _both(("guarantee", "certified"), ("objective", "fit", "certified"), True),
        "a certified threshold is a number",
    ),
    "a threshold without a certificate": (
        _both(("thresholds", "auto"), ("objective", "fit", "threshold"), 0.5),
        "must be null when not certified",
    ),
    "a bound without a certificate": (
        _both(("guarantee", "bound"), ("objective", "fit", "bound"), 0.95),
        "must be null when not certified",
    ),
}


@pytest.mark.parametrize("case", sorted(UNCERTIFIED_CONTRADICTIONS))
def test_an_uncertified_policy_cannot_claim_a_certificate(fitted, tmp_path, case) -> None:
    edit, match = UNCERTIFIED_CONTRADICTIONS[case]
    p = tmp_path / "policy.json"
    _uncertified(fitted).save(p)
    doc = json.loads(p.read_text())
    edit(doc)
    _write(p, _rehash(doc))
    with pytest.raises(ArtifactError, match=match):
        Policy.load(p)


def _gates(fitted):
    rng = np.random.default_rng(0)
    is_oos = rng.random(2000) < 0.2
    oos = OutOfScopeThreshold(recall=0.5, delta=0.1).fit(
        np.where(is_oos, rng.random(2000) * 0.5 + 0.5, rng.random(2000) * 0.5), is_oos
    )
    return build(
        fitted,
        margin=MarginThreshold(0.9, 0.05).fit(fitted["margin"], fitted["correct"]),
        per_class=PerClassThreshold(CertifiedPrecisionThreshold(0.9, 0.05), min_class_size=100).fit(
            fitted["conf"], fitted["correct"], fitted["labels"]
        ),
        oos=oos,
        evidence=EvidenceThresholds().fit_records(load_evidence_labels()),
    )


GATE_CONTRADICTIONS = {
    "margin edited": (_set("thresholds", "margin", 0.01), "thresholds.margin"),
    "margin out of range": (
        _both(("thresholds", "margin"), ("fits", "margin", "threshold"), 2.0),
        "thresholds.margin",
    ),
    "per-class edited": (
        lambda d: d["thresholds"]["per_class"].__setitem__("refund", 0.01),
        "thresholds.per_class",
    ),
    "per-class fit and threshold edited": (
        lambda d: [
            d["thresholds"]["per_class"].__setitem__("refund", 0.01),
            d["fits"]["per_class"]["thresholds"].__setitem__("refund", 0.01),
        ],
        r"fits\.per_class\.thresholds\.refund",
    ),
    "per-class default edited": (
        _set("thresholds", "per_class_default", 0.01),
        "thresholds.per_class_default",
    ),
    "oos cut-off edited": (_set("thresholds", "oos", "cutoff", 0.99), "thresholds.oos.cutoff"),
    "oos cut-off and fit above 1": (
        _both(("thresholds", "oos", "cutoff"), ("thresholds", "oos", "fit", "cutoff"), 1.5),
        "not a probability",
    ),
    "oos certified without a cut-off": (
        _both(("thresholds", "oos", "cutoff"), ("thresholds", "oos", "fit", "cutoff"), None),
        r"thresholds\.oos\.fit\.certified",
    ),
    "evidence threshold edited": (
        lambda d: d["evidence"]["sources"]["bm25"].__setitem__("threshold", 0.0),
        r"evidence\.sources\.bm25\.threshold",
    ),
    "evidence fit bound edited": (
        lambda d: d["evidence"]["sources"]["bm25"]["fit"].__setitem__("bound", 0.99),
        r"evidence\.sources\.bm25\.fit\.bound",
    ),
}


@pytest.mark.parametrize("case", sorted(GATE_CONTRADICTIONS))
def test_every_gate_must_be_what_its_fit_gives(fitted, tmp_path, case) -> None:
    edit, match = GATE_CONTRADICTIONS[case]
    p = tmp_path / "policy.json"
    pol = _gates(fitted)
    assert pol.thresholds["oos"] is not None and pol.thresholds["margin"] is not None
    pol.save(p)
    doc = json.loads(p.read_text())
    edit(doc)
    _write(p, _rehash(doc))
    with pytest.raises(ArtifactError, match=match):
        Policy.load(p)


def _other_fits(fitted):
    c, k = fitted["conf"], fitted["correct"]
    return {
        "empirical": (EmpiricalThreshold(0.9).fit(c, k), "empirical"),
        "coverage": (CoverageThreshold(0.7).fit(c, k), "coverage"),
        "coverage with delta": (CoverageThreshold(0.7, 0.05).fit(c, k), "coverage"),
        "cost": (CostThreshold(10, 1, 3).fit(c, k), "cost"),
        "cost two-way": (CostThreshold(10, None, 3).fit(c, k), "cost"),
        "three-way": (ThreeWayThreshold.certified(0.95, 0.7, 0.05).fit(c, k), "three-way"),
    }


@pytest.mark.parametrize(
    "name",
    ["empirical", "coverage", "coverage with delta", "cost", "cost two-way", "three-way"],
)
def test_every_fitter_round_trips(fitted, tmp_path, name) -> None:
    fitter, objective = _other_fits(fitted)[name]
    p = tmp_path / "p.json"
    build(fitted, threshold=fitter, objective=objective).save(p)
    assert Policy.load(p) == build(fitted, threshold=fitter, objective=objective)


OTHER_CONTRADICTIONS = {
    "empirical below its target": (
        "empirical",
        lambda d: [
            _set("objective", "fit", "target", 0.9999)(d),
            _set("objective", "fit", "params", "target", 0.9999)(d),
            _set("guarantee", "target", 0.9999)(d),
        ],
        "below the target",
    ),
    "empirical claims a certificate": (
        "empirical",
        _both(("guarantee", "certified"), ("objective", "fit", "certified"), True),
        "certifies nothing",
    ),
    "coverage short of its target": (
        "coverage",
        lambda d: [
            _set("objective", "fit", "target_coverage", 0.99)(d),
            _set("objective", "fit", "params", "coverage", 0.99)(d),
        ],
        "falls short",
    ),
    "coverage with delta, bound edited": (
        "coverage with delta",
        _both(("guarantee", "bound"), ("objective", "fit", "bound"), 0.5),
        "Clopper-Pearson bound",
    ),
    "cost shares": (
        "cost",
        lambda d: d["objective"]["fit"]["shares"].__setitem__("ask_user", 0.9),
        r"objective\.fit\.shares",
    ),
    "cost ask above auto": (
        "cost",
        _both(("thresholds", "ask"), ("objective", "fit", "ask_threshold"), 0.99999),
        r"objective\.fit\.ask_threshold",
    ),
    "two-way cost gains an ask zone": (
        "cost two-way",
        _both(("thresholds", "ask"), ("objective", "fit", "ask_threshold"), 0.1),
        r"objective\.fit\.ask_threshold",
    ),
    "three-way ask edited": ("three-way", _set("thresholds", "ask", 0.01), "thresholds.ask"),
    "three-way ask and fit edited": (
        "three-way",
        _both(("thresholds", "ask"), ("objective", "fit", "ask_threshold"), 0.01),
        r"objective\.fit\.ask_threshold",
    ),
    "three-way auto sub-fit": (
        "three-way",
        lambda d: d["objective"]["fit"]["auto"].__setitem__("bound", 0.999),
        r"objective\.fit\.auto\.bound",
    ),
}


@pytest.mark.parametrize("case", sorted(OTHER_CONTRADICTIONS))
def test_every_fitter_record_is_checked(fitted, tmp_path, case) -> None:
    name, edit, match = OTHER_CONTRADICTIONS[case]
    fitter, objective = _other_fits(fitted)[name]
    p = tmp_path / "p.json"
    build(fitted, threshold=fitter, objective=objective).save(p)
    doc = json.loads(p.read_text())
    edit(doc)
    _write(p, _rehash(doc))
    with pytest.raises(ArtifactError, match=match):
        Policy.load(p)


def test_isotonic_map_must_be_probabilities_that_do_not_decrease(fitted, tmp_path) -> None:
    p, y = synthetic_proba(1000, 4, 1)
    pol = build(fitted, calibrator=IsotonicCalibration().fit(p, y))
    path = tmp_path / "p.json"
    pol.save(path)
    assert Policy.load(path) == pol
    doc = json.loads(path.read_text())
    for edit, match in (
        (lambda d: d["calibrator"]["y"].__setitem__(-1, 1.5), "calibrator.y"),
        (lambda d: d["calibrator"]["y"].__setitem__(-1, 0.0), "must not decrease"),
        (lambda d: d["calibrator"]["x"].__setitem__(0, -0.5), "calibrator.x"),
    ):
        bad = copy.deepcopy(doc)
        edit(bad)
        _write(path, _rehash(bad))
        with pytest.raises(ArtifactError, match=match):
            Policy.load(path)


def test_saving_refuses_what_loading_would_refuse(fitted, tmp_path) -> None:
    doc = build(fitted).to_dict()
    doc["thresholds"]["auto"] = 0.01
    edited = Policy(doc)  # in memory an edit is allowed (experiments edit documents) ...
    with pytest.raises(ValueError, match=r"thresholds\.auto"):
        edited.save(tmp_path / "p.json")  # ... but not written
    assert not (tmp_path / "p.json").exists()


# --------------------------------------------------------------------------- strict reading


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ('{"thresholds": {"auto": 0.9, "auto": 0.1}}', r"duplicate key 'auto'.*line 1"),
        ('{"thresholds": {"auto": NaN}}', "NaN"),
        ('{"thresholds": {"auto": Infinity}}', "Infinity"),
        ('{"thresholds": {"auto": 1e999}}', "too large"),
        ('{"n": ' + "1" * 80 + "}", "digits"),
        ("[" * 100 + "]" * 100, "nested too deeply"),
    ],
)
def test_policy_json_is_read_strictly(tmp_path, text, match) -> None:
    p = tmp_path / "p.json"
    p.write_text(text)
    with pytest.raises(ArtifactError, match=match) as info:
        Policy.load(p)
    assert info.value.path == str(p)


def test_duplicate_key_names_its_line(fitted, tmp_path) -> None:
    p = tmp_path / "p.json"
    build(fitted).save(p)
    lines = p.read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if '"auto":' in line)
    lines.insert(at + 1, lines[at].rstrip(",") + ",")
    p.write_text("\n".join(lines))
    with pytest.raises(ArtifactError, match=rf"duplicate key 'auto'.*line {at + 2}"):
        Policy.load(p)


def test_policy_over_its_byte_limit_or_not_a_file_is_refused(fitted, tmp_path, monkeypatch) -> None:
    import os
    import threading

    from hybridroute.calibration import _policy

    p = tmp_path / "p.json"
    build(fitted).save(p)
    monkeypatch.setattr(_policy, "POLICY_MAX_BYTES", 100)
    with pytest.raises(ArtifactError, match="larger than the limit of 100 bytes"):
        Policy.load(p)
    p.write_bytes(b'{"format": "\xff"}')
    with pytest.raises(ArtifactError, match="not UTF-8"):
        Policy.load(p)
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    box: dict = {}

    def target():
        try:
            Policy.load(fifo)
        except BaseException as exc:
            box["error"] = exc

    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(10)
    assert not t.is_alive(), "Policy.load blocked on a FIFO"
    assert isinstance(box.get("error"), ArtifactError) and "FIFO" in str(box["error"])


def test_a_margin_gate_that_could_not_be_certified_lets_nothing_through():
    """An uncertified margin gate is recorded as a null threshold; it must close like an
    uncertified confidence threshold, not switch itself off."""
    from hybridroute.calibration import EmpiricalThreshold, MarginThreshold

    rng = np.random.default_rng(0)
    conf = rng.uniform(0.5, 1.0, 400)
    auto = EmpiricalThreshold(0.7).fit(conf, rng.uniform(size=400) < conf)
    margin = MarginThreshold(0.999, 0.05).fit(rng.uniform(0, 1, 20), rng.uniform(size=20) < 0.5)
    assert margin.threshold_ == math.inf  # nothing certifiable on 20 coin flips
    policy = Policy.build(classes=["a", "b"], threshold=auto, margin=margin)
    assert policy.thresholds["margin"] is None
    (out,) = policy.apply_proba(np.array([[0.995, 0.005]]))
    assert (out.action, out.reason_code, out.threshold_name) == ("ask_user", "low_margin", "margin")
    # the same policy without a margin gate routes that item
    (plain,) = Policy.build(classes=["a", "b"], threshold=auto).apply_proba(
        np.array([[0.995, 0.005]])
    )
    assert plain.action == "auto_route"
