"""End to end on the support-tickets test split: route, log, replay, drift."""

from __future__ import annotations

import numpy as np
import pytest

from hybridroute.calibration import CertifiedPrecisionThreshold, Policy
from hybridroute.records import DecisionLog, drift_report, replay
from hybridroute.router import HybridRouter

from ..router.conftest import EXAMPLE, fitted_policy


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    from hybridroute.classifiers import LocalClassifier
    from hybridroute.datasets import load_dataset
    from hybridroute.rules import load_rules

    ds = load_dataset("support-tickets")
    train = ds.split("train")
    clf = LocalClassifier(Cs=(10.0,)).fit(train.texts, train.y)
    policy = fitted_policy(clf, ds, CertifiedPrecisionThreshold(0.85, 0.1))
    rules = load_rules(EXAMPLE)
    router = HybridRouter(rules=rules, classifier=clf, policy=policy, name="support", version="1")
    test = ds.split("test")
    items = [
        {"facts": {k: v for k, v in test.facts(i).items() if v is not None}, "text": test.texts[i]}
        for i in range(len(test))
    ]
    path = tmp_path_factory.mktemp("log") / "decisions.sqlite"
    decisions = router.route_many(items)
    with DecisionLog(path, batch_size=100) as log:
        log.extend(decisions, item_ids=test.ids)
    return router, clf, policy, rules, path, decisions


def test_replay_with_the_same_router_has_zero_mismatches(setup):
    router, *_, path, decisions = setup
    with DecisionLog(path) as log:
        report = replay(log.records(), router)
        rescored = replay(log.records(), router, rescore=True)
    assert report["n"] == len(decisions) > 200
    assert report["mismatches"] == 0 and report["mismatch_rate"] == 0.0
    assert rescored["mismatches"] == 0


def test_replay_with_another_threshold_reports_exactly_the_changed_decisions(setup):
    router, clf, policy, rules, path, decisions = setup
    doc = policy.to_dict()
    old = doc["thresholds"]["auto"]
    assert old is not None
    doc["thresholds"]["auto"] = min(0.99, old + 0.15)
    doc.pop("content_sha256")
    stricter = Policy(doc)  # a re-fitted policy, as if written anew
    v2 = HybridRouter(rules=rules, classifier=clf, policy=stricter, name="support", version="2")
    with DecisionLog(path) as log:
        report = replay(log.records(), v2)
    expected = [
        d
        for d in decisions
        if d.stage == "model"
        and d.confidence is not None
        and d.confidence < doc["thresholds"]["auto"]
    ]
    assert report["mismatches"] == len(expected) > 0
    assert report["by_stage"].get("rule", {"mismatches": 0})["mismatches"] == 0
    assert all(
        e["old"]["stage"] == "model" and e["new"]["stage"] == "policy" for e in report["examples"]
    )
    changed_hashes = {e["snapshot_hash"] for e in report["examples"]}
    assert changed_hashes <= {d.snapshot_hash for d in expected}


def test_drift_between_versions_of_the_log(setup, tmp_path):
    router, clf, policy, rules, path, decisions = setup
    frame_ok = None
    with DecisionLog(path) as log:
        frame_ok = log.to_frame()
    assert drift_report(frame_ok)["replay_mismatch"]["within_version_conflicts"] == 0
    assert np.isclose(sum(drift_report(frame_ok)["windows"]["1"]["destinations"].values()), 1.0)
