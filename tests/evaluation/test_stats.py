"""Statistics: F1 against scikit-learn, bootstrap intervals, McNemar, paired bootstrap."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import f1_score

from hybridroute.evaluation import bootstrap_ci, macro_f1, mcnemar, paired_bootstrap
from hybridroute.evaluation._stats import classification_summary, confusion_matrix, per_class_report


@settings(max_examples=50, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from("abcd"), st.sampled_from("abcd")), min_size=1, max_size=60)
)
def test_macro_f1_matches_sklearn(pairs):
    gold = [g for g, _ in pairs]
    pred = [p for _, p in pairs]
    labels = sorted(set(gold))
    expected = f1_score(gold, pred, labels=labels, average="macro", zero_division=0)
    assert macro_f1(gold, pred) == pytest.approx(expected)


def test_abstentions_count_as_wrong_and_in_support():
    gold = ["a", "a", "b", "b"]
    pred = ["a", None, "b", "a"]
    s = classification_summary(gold, pred, n_boot=100)
    assert s["accuracy"] == 0.5
    rep = per_class_report(gold, pred)
    assert rep["a"]["support"] == 2 and rep["a"]["recall"] == 0.5
    assert rep["b"]["confused_with"] == [{"label": "a", "count": 1}]
    cm, labels = confusion_matrix(gold, pred)
    assert labels == ["a", "b"] and cm.sum() == 3


def test_bootstrap_ci_is_seeded_and_covers_the_estimate():
    x = np.r_[np.ones(80), np.zeros(20)]
    a = bootstrap_ci(lambda idx: float(x[idx].mean()), len(x), seed=3)
    b = bootstrap_ci(lambda idx: float(x[idx].mean()), len(x), seed=3)
    assert a == b and a[0] < 0.8 < a[1]
    assert 0.05 < a[1] - a[0] < 0.25


def test_mcnemar_and_paired_bootstrap():
    a = [True] * 90 + [False] * 10
    b = [True] * 70 + [False] * 30
    res = mcnemar(a, b)
    assert res["only_a_correct"] == 20 and res["only_b_correct"] == 0
    assert res["p_value"] < 1e-4
    assert mcnemar(a, a)["p_value"] == 1.0
    pb = paired_bootstrap(a, b, seed=0)
    assert pb["accuracy_difference"] == pytest.approx(0.2)
    assert pb["ci"][0] > 0
    with pytest.raises(ValueError, match="different numbers"):
        mcnemar(a, b[:-1])
