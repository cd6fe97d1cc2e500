"""The router and ``Policy.apply`` (what evaluation and the cascade call) decide alike.

Partial rankings included: an LLM names fewer labels than the label set holds, and the
router completes its row the way ``Policy.apply`` does (the labels not ranked share the
mass the ranking left), so an evaluation reports the decisions the router makes.
"""

from __future__ import annotations

import numpy as np
import pytest

from hybridroute.calibration import (
    EmpiricalThreshold,
    IsotonicCalibration,
    MarginThreshold,
    OutOfScopeThreshold,
    Policy,
)
from hybridroute.classifiers import IntentClassifier, RankedLabels
from hybridroute.router import HybridRouter

INTENTS = ["order_status", "out_of_scope", "refund_request", "shipping_change"]

#: text -> the labels and scores a partial ranker gives (k = 1, 2 or 3 of 4 labels)
RANKINGS = {
    "a": (("order_status",), (0.97,)),
    "b": (("refund_request",), (0.7,)),
    "c": (("shipping_change", "order_status"), (0.9, 0.06)),
    "d": (("shipping_change", "refund_request"), (0.55, 0.4)),
    "e": (("order_status", "shipping_change", "refund_request"), (0.8, 0.1, 0.05)),
    "f": (("out_of_scope", "order_status"), (0.6, 0.3)),
    "g": (("refund_request", "out_of_scope"), (0.85, 0.1)),
    "h": (("order_status", "refund_request"), (0.99, 0.005)),
    "i": (("shipping_change", "refund_request"), (0.3, 0.28)),
    # the completed row gives the unranked labels more mass than the named one
    "j": (("refund_request",), (0.2,)),
    "k": (("shipping_change", "order_status"), (0.25, 0.05)),
}


class PartialRanker(IntentClassifier):
    """A stand-in that names only some labels, as an LLM does."""

    kind = "partial"

    def __init__(self) -> None:
        self.classes_ = np.asarray(INTENTS)

    def predict_proba(self, texts):
        raise AssertionError("the router ranks; it does not ask for probabilities")

    def rank(self, texts, k=2):
        return [RankedLabels(labels=RANKINGS[t][0], scores=RANKINGS[t][1]) for t in texts]


def _policy(calibrator: str, gate: str) -> Policy:
    rng = np.random.default_rng(11)
    conf = rng.uniform(0.25, 1.0, 3000)
    correct = rng.random(3000) < conf
    kw: dict = {"objective": "empirical"}
    if calibrator == "isotonic":
        logits = rng.normal(size=(3000, len(INTENTS))) * 3
        proba = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
        right = rng.random(3000) < proba.max(1)
        y = np.where(right, proba.argmax(1), rng.integers(0, len(INTENTS), 3000))
        kw["calibrator"] = IsotonicCalibration().fit(proba, y)
    if gate == "margin":
        kw["margin"] = MarginThreshold(0.8, 0.2).fit(conf * 0.9, correct)
    if gate == "oos":
        is_oos = rng.random(3000) < 0.3
        scores = np.where(is_oos, rng.uniform(0.2, 1, 3000), rng.uniform(0, 0.3, 3000))
        kw["oos"] = OutOfScopeThreshold(recall=0.7, delta=0.2).fit(scores, is_oos)
        kw["oos_score"] = "label_probability"
        kw["oos_label"] = "out_of_scope"
    return Policy.build(classes=INTENTS, threshold=EmpiricalThreshold(0.8).fit(conf, correct), **kw)


@pytest.mark.parametrize("gate", ["auto", "margin", "oos"])
@pytest.mark.parametrize("calibrator", ["none", "isotonic"])
def test_a_partial_ranking_is_routed_as_policy_apply_scores_it(rules, calibrator, gate) -> None:
    policy = _policy(calibrator, gate)
    router = HybridRouter(
        rules=rules,
        classifier=PartialRanker(),
        policy=policy,
        name="t",
        version="1",
        oos_label="out_of_scope",
    )
    reasons = set()
    for text, (labels, scores) in RANKINGS.items():
        decision = router.route({}, text)
        outcome = policy.apply(RankedLabels(labels=labels, scores=scores))
        assert decision.stage in ("model", "policy"), decision
        got = (decision.label, decision.confidence, decision.margin)
        assert got == (outcome.label, outcome.confidence, outcome.margin)
        assert decision.detail.get("oos_score") == outcome.oos_score
        if outcome.label != "out_of_scope":  # (the router sends that label to its exit)
            assert decision.reason_code == outcome.reason_code
        reasons.add(outcome.reason_code)
    assert len(reasons) >= 2  # not vacuous


@pytest.mark.parametrize("text", ["j", "k"])
@pytest.mark.parametrize("calibrator", ["none", "isotonic"])
def test_the_router_judges_the_label_the_classifier_named(rules, calibrator, text) -> None:
    """Completing a partial ranking must not hand the decision to a label never named."""
    router = HybridRouter(
        rules=rules,
        classifier=PartialRanker(),
        policy=_policy(calibrator, "auto"),
        oos_label="out_of_scope",
    )
    d = router.route({}, text)
    assert d.label == RANKINGS[text][0][0]
    assert d.margin is not None and d.margin < 0  # the runner-up got more mass
