"""``Policy.apply`` (one ranking) and ``Policy.apply_proba`` (a matrix) score on one path.

The grid: every calibrator (none, temperature, isotonic) times every gate (the auto
threshold alone, a margin gate certified or not, per-class thresholds, an out-of-scope
cut-off on each of its three scores, a three-way ask zone, a cost pair, evidence
thresholds, and all of them together). A full ranking must give exactly the outcome of
its row; a partial one (``rank(k=...)``) is completed as documented in ``Policy.apply``.
"""

from __future__ import annotations

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
from hybridroute.exceptions import UndeclaredValueError

from .conftest import synthetic_proba

CLASSES = ["billing", "cancel", "oos", "refund", "shipping"]
OOS = CLASSES.index("oos")
CALIBRATORS = ("none", "temperature", "isotonic")
GATES = (
    "auto",
    "margin",
    "margin_not_certified",
    "per_class",
    "oos_one_minus_confidence",
    "oos_label_probability",
    "oos_external",
    "three_way",
    "cost",
    "evidence",
    "everything",
)


@pytest.fixture(scope="module")
def data():
    p, y = synthetic_proba(5000, len(CLASSES), 3)
    rng = np.random.default_rng(3)
    return {
        "cal_proba": p[:1000],
        "cal_y": y[:1000],
        "thr_proba": p[1000:3000],
        "thr_y": y[1000:3000],
        "test_proba": p[3000:3400],
        "external": rng.random(400),
        "evidence": EvidenceThresholds().fit_records(load_evidence_labels()),
    }


def _calibrator(name, data):
    if name == "none":
        return None
    cls = TemperatureScaling if name == "temperature" else IsotonicCalibration
    return cls().fit(data["cal_proba"], data["cal_y"])


def _policy(calibrator: str, gate: str, data) -> Policy:
    cal = _calibrator(calibrator, data)
    raw = data["thr_proba"]
    q = raw / raw.sum(1, keepdims=True) if cal is None else cal.transform(raw)
    top = raw.argmax(1)
    rows = np.arange(len(q))
    conf = q[rows, top]
    rest = q.copy()
    rest[rows, top] = -np.inf
    margin = conf - rest.max(1)
    correct = top == data["thr_y"]
    labels = [CLASSES[i] for i in top]
    is_oos = data["thr_y"] == OOS
    kw: dict = {"calibrator": cal, "objective": "precision"}
    threshold = CertifiedPrecisionThreshold(0.85, 0.05).fit(conf, correct)
    everything = gate == "everything"
    if gate in ("margin", "everything"):
        kw["margin"] = MarginThreshold(0.85, 0.05).fit(margin, correct)
    if gate == "margin_not_certified":
        kw["margin"] = MarginThreshold(0.99999, 0.05).fit(margin, correct)
    if gate in ("per_class", "everything"):
        base = CertifiedPrecisionThreshold(0.85, 0.05)
        kw["per_class"] = PerClassThreshold(base, min_class_size=300).fit(conf, correct, labels)
    if gate.startswith("oos_") or everything:
        kind = "label_probability" if everything else gate[4:]
        score = {
            "one_minus_confidence": 1.0 - conf,
            "label_probability": q[:, OOS],
            "external": np.where(is_oos, 0.5, 0.0) + np.random.default_rng(0).random(len(q)) / 2,
        }[kind]
        kw["oos"] = OutOfScopeThreshold(recall=0.6, delta=0.1).fit(score, is_oos)
        kw["oos_score"] = kind
        kw["oos_label"] = "oos" if kind == "label_probability" else None
    if gate in ("three_way", "everything"):
        threshold = ThreeWayThreshold.certified(0.9, 0.6, 0.05).fit(conf, correct)
        kw["objective"] = "three-way"
    if gate == "cost":
        threshold = CostThreshold(10.0, 1.0, 3.0).fit(conf, correct)
        kw["objective"] = "cost"
    if gate in ("evidence", "everything"):
        kw["evidence"] = data["evidence"]
    return Policy.build(classes=CLASSES, threshold=threshold, **kw)


@pytest.fixture(scope="module")
def policies(data):
    return {(c, g): _policy(c, g, data) for c in CALIBRATORS for g in GATES}


def _ranking(row: np.ndarray, k: int | None = None) -> RankedLabels:
    order = np.argsort(-row, kind="stable")[:k]
    return RankedLabels(labels=tuple(CLASSES[i] for i in order), scores=tuple(row[order]))


def _external(policy: Policy, data, i: int) -> float | None:
    oos = policy.thresholds["oos"]
    return float(data["external"][i]) if oos and oos["score"] == "external" else None


@pytest.mark.parametrize("gate", GATES)
@pytest.mark.parametrize("calibrator", CALIBRATORS)
def test_a_full_ranking_gives_exactly_its_rows_outcome(policies, data, calibrator, gate) -> None:
    policy = policies[calibrator, gate]
    proba = data["test_proba"]
    ext = data["external"] if _external(policy, data, 0) is not None else None
    batch = policy.apply_proba(proba, ext)
    for i, row in enumerate(proba):
        single = policy.apply(_ranking(row), oos_score=_external(policy, data, i))
        assert single == batch[i], (i, single, batch[i])
        # a one-row matrix takes the single-item branch of the same scoring
        assert policy.apply_proba(row[None, :], None if ext is None else [ext[i]])[0] == batch[i]
    # not vacuous: each cell decides more than one way
    assert len({o.action for o in batch}) >= 2


@pytest.mark.parametrize("scale", [0.7, 1.6])
@pytest.mark.parametrize("gate", ["auto", "margin", "oos_label_probability", "everything"])
@pytest.mark.parametrize("calibrator", CALIBRATORS)
def test_scores_that_do_not_sum_to_one_score_alike(policies, data, calibrator, gate, scale):
    """Rows are normalised on both paths (a classifier's scores need not sum to 1)."""
    policy = policies[calibrator, gate]
    proba = data["test_proba"][:200] * scale
    batch = policy.apply_proba(proba)
    assert [policy.apply(_ranking(row)) for row in proba] == batch
    unscaled = policy.apply_proba(data["test_proba"][:200])
    assert [o.action for o in batch] == [o.action for o in unscaled]


@pytest.mark.parametrize("gate", [g for g in GATES if g != "oos_label_probability"])
@pytest.mark.parametrize("calibrator", ["none", "isotonic"])
@pytest.mark.parametrize("k", [2, 3, 4])
def test_top_k_with_k_at_least_two_decides_as_the_full_ranking(
    policies, data, calibrator, gate, k
) -> None:
    """Without a calibrator or with an isotonic one, the best two scores decide."""
    policy = policies[calibrator, gate]
    for i, row in enumerate(data["test_proba"][:150]):
        ext = _external(policy, data, i)
        full = policy.apply(_ranking(row), oos_score=ext)
        part = policy.apply(_ranking(row, k), oos_score=ext)
        assert (part.action, part.reason_code, part.label, part.threshold_name) == (
            full.action,
            full.reason_code,
            full.label,
            full.threshold_name,
        )
        assert part.confidence == pytest.approx(full.confidence, rel=1e-12)
        assert part.margin == pytest.approx(full.margin, rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("calibrator", ["none", "isotonic"])
def test_a_single_ranked_label_leaves_the_runner_up_the_shared_mass(
    policies, data, calibrator
) -> None:
    policy = policies[calibrator, "margin"]
    n = len(CLASSES)
    for row in data["test_proba"][:50]:
        ranked = _ranking(row, 1)
        out = policy.apply(ranked)
        s0 = ranked.scores[0]
        want = (
            s0
            if calibrator == "none"
            else float(policy.calibrate(np.array([[s0] + [(1 - s0) / (n - 1)] * (n - 1)]))[0, 0])
        )
        assert out.label == ranked.labels[0]
        assert out.confidence == pytest.approx(want, rel=1e-12)
        # the calibrated mass left over, shared by the n - 1 labels not ranked
        assert out.margin == pytest.approx(want - (1 - want) / (n - 1), rel=1e-9)


@pytest.mark.parametrize("calibrator", ["none", "isotonic"])
def test_an_unranked_out_of_scope_label_scores_its_share(policies, data, calibrator) -> None:
    policy = policies[calibrator, "oos_label_probability"]
    n = len(CLASSES)
    seen = 0
    for row in data["test_proba"]:
        ranked = _ranking(row, 2)
        if "oos" in ranked.labels:
            continue
        seen += 1
        out = policy.apply(ranked)
        s = ranked.scores
        share = (1 - sum(s)) / (n - 2)
        if calibrator == "isotonic":
            share *= (1 - out.confidence) / (1 - s[0])
        assert out.oos_score == pytest.approx(share, rel=1e-9)
        # the same as the completed row through apply_proba
        completed = np.full(n, (1 - sum(s)) / (n - 2))
        for lab, v in zip(ranked.labels, s, strict=True):
            completed[CLASSES.index(lab)] = v
        assert out == policy.apply_proba(completed[None, :])[0]
    assert seen > 50


def test_a_temperature_policy_refuses_a_partial_ranking(policies, data) -> None:
    policy = policies["temperature", "auto"]
    for k in (1, 2, len(CLASSES) - 1):
        with pytest.raises(ValueError, match=f"rank with k={len(CLASSES)} \\(got {k} labels\\)"):
            policy.apply(_ranking(data["test_proba"][0], k))


@pytest.mark.parametrize("calibrator", CALIBRATORS)
def test_the_label_is_the_rankings_first_even_on_a_tie(policies, calibrator) -> None:
    policy = policies[calibrator, "margin"]
    ranked = RankedLabels(
        labels=("refund", "billing", "cancel", "oos", "shipping"),
        scores=(0.4, 0.4, 0.1, 0.05, 0.05),
    )
    out = policy.apply(ranked)
    assert out.label == "refund"
    # apply_proba names the first column of a tie; the scores are the same
    (by_row,) = policy.apply_proba(np.array([[0.4, 0.1, 0.05, 0.4, 0.05]]))
    assert by_row.label == "billing"
    assert (by_row.confidence, by_row.margin) == (out.confidence, out.margin)
    if calibrator != "isotonic":  # (isotonic recalibrates the top score alone)
        assert out.margin == 0.0


@pytest.mark.parametrize(
    "labels,scores,error,match",
    [
        (("refund", "refund"), (0.5, 0.3), ValueError, "'refund' is ranked twice"),
        (("refund", "cancel"), (0.5,), ValueError, "differ in length"),
        (("refund", "cancel"), (0.9, -0.1), ValueError, "ranked scores must hold finite"),
        (("refund", "cancel"), (float("nan"), 0.1), ValueError, "ranked scores must hold finite"),
        (("refund", "cancel"), (float("inf"), 0.1), ValueError, "ranked scores must hold finite"),
        (tuple(CLASSES), (0.0,) * 5, ValueError, "all zero"),
        (("refund", "weather"), (0.5, 0.3), UndeclaredValueError, "label 'weather'"),
    ],
)
@pytest.mark.parametrize("calibrator", ["none", "isotonic"])
def test_a_malformed_ranking_is_refused(policies, calibrator, labels, scores, error, match):
    with pytest.raises(error, match=match):
        policies[calibrator, "auto"].apply(RankedLabels(labels=labels, scores=scores))


@pytest.mark.parametrize("calibrator", CALIBRATORS)
def test_an_abstention_is_human_review_on_every_path(policies, calibrator) -> None:
    out = policies[calibrator, "everything"].apply(
        RankedLabels(labels=(), scores=(), abstain_reason="timeout")
    )
    assert (out.action, out.reason_code, out.label) == ("human_review", "timeout", None)
