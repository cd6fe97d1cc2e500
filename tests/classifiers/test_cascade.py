"""The cascade: local first, unsure items to the LLM (real litellm + instructor stack
against the stand-in; stand-in answers are not an LLM's accuracy)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from hybridroute.classifiers import (
    CascadeClassifier,
    IntentClassifier,
    LLMClassifier,
    LocalClassifier,
    RankedLabels,
    RetrySettings,
    load_classifier,
)
from hybridroute.exceptions import NotFittedError
from hybridroute.testing import LabelMapPolicy, StandInLLM

pytestmark = pytest.mark.filterwarnings("ignore:Items? .* using the `ReadOnly` qualifier")

LABELS = ["card_arrival", "refund", "top_up"]
TRAIN = {
    "where is my card": "card_arrival",
    "my card has not arrived yet": "card_arrival",
    "card still not delivered": "card_arrival",
    "give my money back": "refund",
    "I want a refund please": "refund",
    "refund the payment": "refund",
    "add money to my account": "top_up",
    "top up failed": "top_up",
    "how do I top up with a transfer": "top_up",
}
FAST = RetrySettings(timeout=2.0, backoff_initial=0.001, backoff_max=0.005)


class Scripted(IntentClassifier):
    """A local stage with fixed scores per text (to make escalation exact)."""

    kind = "scripted"

    def __init__(self, scores):
        self.scores = scores

    def fit(self, texts, labels):
        self.classes_ = np.array(sorted(set(labels)))
        return self

    def predict_proba(self, texts):
        rows = []
        for text in texts:
            label, score = self.scores[text]
            row = np.full(len(self.classes_), (1 - score) / (len(self.classes_) - 1))
            row[list(self.classes_).index(label)] = score
            rows.append(row)
        return np.array(rows)


SCRIPT = {
    "sure card": ("card_arrival", 0.95),
    "sure refund": ("refund", 0.9),
    "unsure card": ("card_arrival", 0.5),
    "unsure top up": ("top_up", 0.4),
}
LLM_TRUTH = {"unsure card": "refund", "unsure top up": "top_up"}


@pytest.fixture
def server():
    with StandInLLM(LabelMapPolicy({**TRAIN, **LLM_TRUTH}, confidence=0.8), labels=LABELS) as s:
        yield s


def llm(server, **kw):
    kw.setdefault("retry", FAST)
    return LLMClassifier("openai/gpt-4o-mini", api_base=server.api_base, **kw)


def cascade(server, *, threshold=None, policy=None, **kw):
    return CascadeClassifier(
        Scripted(SCRIPT), llm(server, **kw), threshold=threshold, policy=policy
    ).fit(list(TRAIN), list(TRAIN.values()))


def test_escalates_below_the_threshold(server):
    clf = cascade(server, threshold=0.8)
    batch = clf.classify(list(SCRIPT))
    assert batch.escalated.tolist() == [False, False, True, True]
    assert [r.top for r in batch.ranked] == ["card_arrival", "refund", "refund", "top_up"]
    assert [r.usage["stage"] for r in batch.ranked] == ["local", "local", "llm", "llm"]
    assert batch.ranked[2].usage["local_label"] == "card_arrival"
    assert batch.ranked[2].usage["local_confidence"] == pytest.approx(0.5)
    report = batch.report
    assert (report.n_items, report.n_escalated, report.share_escalated) == (4, 2, 0.5)
    assert report.requests == 2 == server.stats()["requests"]
    assert report.cost_usd > 0 and report.prompt_tokens > 0
    np.testing.assert_allclose(batch.proba.sum(axis=1), 1.0)
    np.testing.assert_allclose(batch.proba[2], [0.1, 0.8, 0.1])  # the LLM's row


def test_threshold_is_inclusive_for_kept_items(server):
    batch = cascade(server, threshold=0.9).classify(["sure refund"])
    assert batch.escalated.tolist() == [False] and batch.llm is None
    assert batch.report.requests == 0 and batch.report.share_escalated == 0


class FittedThreshold:
    threshold_ = 0.92


class FittedPerClass:
    thresholds_ = {"card_arrival": 0.99, "refund": 0.5}
    pool_threshold_ = 0.3

    def threshold_for(self, label):
        return self.thresholds_.get(label, self.pool_threshold_)


class FittedPolicy:
    """Duck-typed like hybridroute.calibration.Policy: auto-routes refunds only."""

    def apply(self, ranked):
        from types import SimpleNamespace

        return SimpleNamespace(action="auto_route" if ranked.top == "refund" else "human_review")


@pytest.mark.parametrize(
    ("policy", "escalated"),
    [
        (FittedThreshold(), [False, True, True, True]),
        (FittedPerClass(), [True, False, True, False]),
        (FittedPolicy(), [True, False, True, True]),
    ],
    ids=["threshold_", "threshold_for", "apply"],
)
def test_threshold_from_a_fitted_object(server, policy, escalated):
    batch = cascade(server, policy=policy).classify(list(SCRIPT))
    assert batch.escalated.tolist() == escalated
    assert batch.report.requests == sum(escalated)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({}, "exactly one of threshold= .* no default threshold"),
        ({"threshold": 0.5, "policy": FittedThreshold()}, "exactly one of"),
        ({"threshold": "high"}, "threshold must be a number"),
        ({"policy": object()}, "policy must be fitted"),
    ],
)
def test_no_default_threshold(server, kwargs, match):
    with pytest.raises(ValueError, match=match):
        cascade(server, **kwargs)


def test_llm_abstention_passes_through():
    with StandInLLM(labels=LABELS, faults={"server_error": 1.0}) as server:
        retry = RetrySettings(max_transport_retries=1, backoff_initial=0.001)
        clf = cascade(server, threshold=0.8, retry=retry)
        batch = clf.classify(["sure card", "unsure card"])
    kept, escalated = batch.ranked
    assert kept.top == "card_arrival" and not kept.abstained
    assert escalated.abstain_reason == "provider_error" and escalated.top is None
    assert batch.report.llm_abstentions == {"provider_error": 1}
    assert batch.report.requests == 2
    np.testing.assert_allclose(batch.proba[1], [0.5, 0.25, 0.25])  # the local row
    assert clf.predict(["unsure card"]) == [None]


def test_with_the_local_classifier_and_save_load(server, tmp_path):
    local = LocalClassifier(Cs=(10.0,))
    clf = CascadeClassifier(local, llm(server), threshold=0.99).fit(
        list(TRAIN), list(TRAIN.values())
    )
    assert list(clf.classes_) == LABELS
    texts = ["where is my card", "unsure top up"]
    ranked = clf.rank(texts)
    assert all(isinstance(r, RankedLabels) for r in ranked)
    assert clf.predict_proba(texts).shape == (2, 3)
    saved = clf.save(tmp_path / "cascade")
    loaded = load_classifier(saved)
    assert isinstance(loaded, CascadeClassifier) and loaded.threshold == 0.99
    assert isinstance(loaded.local, LocalClassifier) and isinstance(loaded.llm, LLMClassifier)
    assert loaded.predict(texts) == clf.predict(texts)


def test_saving_per_class_thresholds(server, tmp_path):
    local = LocalClassifier(Cs=(10.0,))
    clf = CascadeClassifier(local, llm(server), policy=FittedPerClass()).fit(
        list(TRAIN), list(TRAIN.values())
    )
    loaded = load_classifier(clf.save(tmp_path / "c"))
    assert loaded.policy.threshold_for("card_arrival") == 0.99
    assert loaded.policy.threshold_for("top_up") == 0.3
    never = CascadeClassifier(local, llm(server), policy=type("P", (), {"threshold_": math.inf})())
    never.fit(list(TRAIN), list(TRAIN.values()))
    assert load_classifier(never.save(tmp_path / "inf")).threshold == math.inf
    with pytest.raises(ValueError, match="saved without it"):
        CascadeClassifier(local, llm(server), policy=FittedPolicy()).fit(
            list(TRAIN), list(TRAIN.values())
        ).save(tmp_path / "p")


def test_label_sets_must_agree(server):
    with pytest.raises(ValueError, match="lacks local labels"):
        CascadeClassifier.from_fitted(
            Scripted(SCRIPT).fit(["a"], ["card_arrival"]),
            llm(server).fit(["b"], ["refund"]),
            threshold=0.5,
        )


def test_not_fitted():
    clf = CascadeClassifier(Scripted(SCRIPT), LLMClassifier("m"), threshold=0.5)
    with pytest.raises(NotFittedError):
        clf.predict(["x"])
