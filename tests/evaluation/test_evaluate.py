"""Evaluating a classifier and a router on the support tickets, and the reports."""

from __future__ import annotations

import json

import pytest

from hybridroute.classifiers import IntentClassifier
from hybridroute.evaluation import compare, evaluate_classifier, evaluate_router, write_report
from hybridroute.exceptions import ClassifierError

from ..router.conftest import EXAMPLE, fitted_policy


@pytest.fixture(scope="module")
def parts():
    from hybridroute.calibration import CertifiedPrecisionThreshold
    from hybridroute.classifiers import LocalClassifier
    from hybridroute.datasets import load_dataset
    from hybridroute.router import HybridRouter
    from hybridroute.rules import load_rules

    ds = load_dataset("support-tickets")
    train = ds.split("train")
    clf = LocalClassifier(Cs=(10.0,)).fit(train.texts, train.y)
    policy = fitted_policy(clf, ds, CertifiedPrecisionThreshold(0.85, 0.1))
    router = HybridRouter(
        rules=load_rules(EXAMPLE), classifier=clf, policy=policy, name="support", version="1"
    )
    return ds, clf, policy, router


def test_classifier_evaluation(parts):
    ds, clf, policy, _ = parts
    test = ds.split("test")
    ev = evaluate_classifier(clf, test.texts, test.y, policy=policy, n_boot=200)
    assert ev["n"] == len(test)
    assert 0.7 < ev["accuracy"] < 1.0
    lo, hi = ev["accuracy_ci"]
    assert lo < ev["accuracy"] < hi
    assert 0 <= ev["ece"] < 0.3 and 0 < ev["aurc"] < 0.3
    assert 0 < ev["coverage"] <= 1 and ev["selective_precision"] >= ev["accuracy"]
    assert set(ev["per_class"]) >= set(clf.classes_)
    assert ev["latency"]["single_p50_ms"] > 0
    assert ev.metrics()["accuracy"] == ev["accuracy"]


def test_router_evaluation_has_rule_stats_and_next_step_accuracy(parts):
    ds, _, _, router = parts
    ev = evaluate_router(router, ds.split("test"), n_boot=200)
    assert ev["n"] == len(ds.split("test"))
    assert set(ev["decisions_by_stage"]) <= {"rule", "model", "policy", "fallback"}
    assert ev["decisions_by_stage"]["rule"] > 0
    # rules reproduce the gold next step by construction of the set
    for rule_id, st in ev["rules"].items():
        if rule_id != "(default exit)":
            assert st["match_rate"] == 1.0, rule_id
    assert 0.5 < ev["next_step_accuracy"] <= 1.0
    lo, hi = ev["next_step_accuracy_ci"]
    assert lo <= ev["next_step_accuracy"] <= hi
    assert ev["n_classified"] + ev["decisions_by_stage"]["rule"] == ev["n"]


def test_reports_are_written(parts, tmp_path):
    ds, clf, policy, router = parts
    ev = evaluate_router(router, ds.split("test"), n_boot=100)
    files = write_report(ev, tmp_path / "rep", title="support router")
    html = files["html"].read_text()
    assert html.count("data:image/png;base64,") == 4
    for name in ("confusion_matrix", "reliability", "risk_coverage", "confidence_hits_misses"):
        assert files[f"plot_{name}"].stat().st_size > 1000
    summary = json.loads(files["json"].read_text())
    assert summary["n"] == ev["n"] and "items" not in summary
    errors = files["errors"].read_text().splitlines()
    assert errors[0].startswith("text,gold,predicted,confidence,reason_code")
    assert len(errors) > 1
    assert "| next-step accuracy |" in files["markdown"].read_text()


def test_paired_comparison_of_two_classifiers(parts):
    from hybridroute.classifiers import LocalClassifier

    ds, clf, _, _ = parts
    test = ds.split("test")
    weak = LocalClassifier(Cs=(0.01,)).fit(ds.split("train").texts, ds.split("train").y)
    a = evaluate_classifier(clf, test.texts, test.y, n_boot=100)
    b = evaluate_classifier(weak, test.texts, test.y, n_boot=100)
    res = compare(a, b)
    assert res["n"] == len(test)
    assert res["paired_bootstrap"]["accuracy_difference"] == pytest.approx(
        res["accuracy_a"] - res["accuracy_b"], abs=1e-6
    )
    assert 0 <= res["mcnemar"]["p_value"] <= 1


class FlakyClassifier(IntentClassifier):
    """The fitted local classifier, raising ``errors[word]`` on a text that holds ``word``."""

    kind = "flaky"

    def __init__(self, inner, errors):
        self.inner = inner
        self.classes_ = inner.classes_
        self.errors = errors

    def predict_proba(self, texts):
        for word, exc in self.errors.items():
            if any(word in t.lower() for t in texts):
                raise exc
        return self.inner.predict_proba(texts)


FLAKY = [
    pytest.param({"refund": TypeError("bad operand")}, id="TypeError"),
    pytest.param(
        {"refund": ValueError("shape mismatch"), "order": ClassifierError("model gone")},
        id="ValueError+ClassifierError",
    ),
    pytest.param(
        {"refund": KeyError("x"), "order": TypeError("y"), "card": ValueError("z")}, id="three"
    ),
]


@pytest.mark.parametrize("errors", FLAKY)
def test_router_evaluation_counts_fallbacks_by_cause(parts, errors, tmp_path):
    from hybridroute.router import HybridRouter

    ds, clf, policy, router = parts
    test = ds.split("test")
    flaky = HybridRouter(
        rules=router.rules, classifier=FlakyClassifier(clf, errors), policy=policy, name="flaky"
    )
    ev = evaluate_router(flaky, test, n_boot=50, batch_size=1)
    # which items fall back does not depend on the evaluation: rules read facts, and each
    # classified text either holds one of the words or not
    good = evaluate_router(router, test, n_boot=50)
    expected: dict[str, int] = {}
    for row in good.rows:
        if row["stage"] == "rule":
            continue
        word = next((w for w in errors if w in row["text"].lower()), None)
        if word is not None:
            key = f"classifier_error ({type(errors[word]).__name__})"
            expected[key] = expected.get(key, 0) + 1
    assert expected and ev["fallbacks_by_cause"] == dict(sorted(expected.items()))
    assert sum(expected.values()) == ev["decisions_by_stage"]["fallback"]
    assert ev["n_classified"] == good["n_classified"]
    assert [r["cause"] for r in ev.rows if r["stage"] == "fallback"]
    assert all(r["cause"] is None for r in ev.rows if r["stage"] != "fallback")

    files = write_report(ev, tmp_path / "rep", title="flaky")
    md = files["markdown"].read_text()
    page = files["html"].read_text()
    for cause, n in expected.items():
        assert f"| {cause} | {n} |" in md
        assert f"<td>{cause}</td><td>{n}</td>" in page
    assert json.loads(files["json"].read_text())["fallbacks_by_cause"] == ev["fallbacks_by_cause"]
    header = files["errors"].read_text().splitlines()[0]
    assert header.endswith(",cause")


def test_a_router_without_fallbacks_reports_none(parts, tmp_path):
    ds, _, _, router = parts
    ev = evaluate_router(router, ds.split("test"), n_boot=50)
    assert ev["fallbacks_by_cause"] == {}
    md = write_report(ev, tmp_path / "rep")["markdown"].read_text()
    assert "## Fallbacks by cause" in md and "none in this evaluation" in md
