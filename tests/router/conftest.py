"""Shared fixtures: a small local classifier and a certified policy on the support tickets."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from hybridroute.calibration import CertifiedPrecisionThreshold, EmpiricalThreshold, Policy
from hybridroute.classifiers import IntentClassifier, LocalClassifier, RankedLabels
from hybridroute.datasets import load_dataset
from hybridroute.router import HybridRouter
from hybridroute.rules import load_rules

EXAMPLE = (
    Path(__file__).resolve().parents[2] / "src" / "hybridroute" / "examples" / "support_rules.yaml"
)


@pytest.fixture(scope="session")
def support():
    return load_dataset("support-tickets")


@pytest.fixture(scope="session")
def rules():
    return load_rules(EXAMPLE)


@pytest.fixture(scope="session")
def local_clf(support):
    train = support.split("train")
    return LocalClassifier(Cs=(10.0,)).fit(train.texts, train.y)


def fitted_policy(clf, support, fitter) -> Policy:
    cal = support.split("calibration")
    proba = clf.predict_proba(cal.texts)
    top = proba.argmax(axis=1)
    conf = proba[np.arange(len(top)), top]
    correct = np.asarray(clf.classes_)[top] == np.asarray(cal.y)
    fitter.fit(conf, correct)
    return Policy.build(
        classes=list(clf.classes_),
        threshold=fitter,
        calibration_labels=cal.y,
        out_of_scope_label="out_of_scope",
        objective=fitter.method,
    )


@pytest.fixture(scope="session")
def policy(local_clf, support):
    return fitted_policy(local_clf, support, CertifiedPrecisionThreshold(0.85, 0.1))


@pytest.fixture(scope="session")
def router(rules, local_clf, policy):
    return HybridRouter(
        rules=rules, classifier=local_clf, policy=policy, name="support", version="1"
    )


class FixedClassifier(IntentClassifier):
    """A test double: scores looked up by text; raises or abstains on request."""

    kind = "fixed"

    def __init__(
        self,
        classes: Sequence[str],
        table: dict[str, dict[str, float]] | None = None,
        fail: bool = False,
        abstain: str | None = None,
    ) -> None:
        self.classes_ = np.asarray(sorted(classes))
        self.table = table or {}
        self.fail = fail
        self.abstain = abstain
        self.calls = 0

    def predict_proba(self, texts):
        out = np.full((len(texts), len(self.classes_)), 1.0 / len(self.classes_))
        for i, t in enumerate(texts):
            for lab, s in self.table.get(t, {}).items():
                out[i, list(self.classes_).index(lab)] = s
            out[i] /= out[i].sum()
        return out

    def rank(self, texts, k=2):
        self.calls += 1
        if self.fail:
            raise RuntimeError("model server exploded")
        if self.abstain:
            return [RankedLabels(labels=(), scores=(), abstain_reason=self.abstain) for _ in texts]
        return super().rank(texts, k)


@pytest.fixture()
def empirical_policy_factory():
    def make(classes, target=0.9, seed=0):
        rng = np.random.default_rng(seed)
        scores = rng.uniform(0, 1, 2000)
        correct = rng.uniform(0, 1, 2000) < scores
        fitter = EmpiricalThreshold(target).fit(scores, correct)
        return Policy.build(classes=list(classes), threshold=fitter, objective="empirical")

    return make
