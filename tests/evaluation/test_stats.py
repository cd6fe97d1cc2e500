"""Statistics: F1 against scikit-learn, bootstrap intervals, McNemar, paired bootstrap."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import f1_score

from hybridroute.evaluation import bootstrap_ci, macro_f1, mcnemar, paired_bootstrap
from hybridroute.evaluation._stats import classification_summary, confusion_matrix, per_class_report

_MARKER = "\x00abstained"
_answers = st.sampled_from(["a", "b", "c", "d", None])


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("abcd"), _answers), min_size=1, max_size=60))
def test_macro_f1_is_sklearns_macro_f1_over_gold_and_answered_labels(pairs):
    """scikit-learn's default label set (gold ∪ predicted); an abstention is not a label."""
    gold = [g for g, _ in pairs]
    pred = [p for _, p in pairs]
    marked = [_MARKER if p is None else p for p in pred]
    labels = sorted(set(gold) | {p for p in pred if p is not None})
    expected = f1_score(gold, marked, labels=labels, average="macro", zero_division=0)
    assert macro_f1(gold, pred) == pytest.approx(expected)
    if None not in pred:  # no abstention: exactly sklearn's default call
        assert macro_f1(gold, pred) == pytest.approx(
            f1_score(gold, pred, average="macro", zero_division=0)
        )
    # the same number through the summary, the counts and the explicit-label paths
    assert classification_summary(gold, pred, n_boot=2)["macro_f1"] == pytest.approx(
        expected, abs=1e-6
    )
    assert macro_f1(gold, pred, labels=[*labels, "zz-unused"]) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("gold", "pred", "expected"),
    [
        # a label predicted but absent from the gold labels counts with F1 0
        (["a", "a", "b", "b"], ["a", "c", "b", "b"], (2 / 3 + 1 + 0) / 3),
        (["a", "a", "a", "b"], ["c", "c", "a", "b"], (0.5 + 1 + 0) / 3),
        # an abstention lowers its class's recall, adds no class
        (["a", "a", "b", "b"], ["a", None, "b", "b"], (2 / 3 + 1) / 2),
        (["a", "a", "b", "b"], ["a", None, "a", "b"], (0.5 + 2 / 3) / 2),
        (["a", "b"], [None, None], 0.0),
    ],
)
def test_macro_f1_averages_over_gold_and_predicted_labels(gold, pred, expected):
    assert macro_f1(gold, pred) == pytest.approx(expected)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("abc"), _answers), min_size=1, max_size=40))
def test_per_class_scores_match_sklearn(pairs):
    from sklearn.metrics import precision_recall_fscore_support

    gold = [g for g, _ in pairs]
    pred = [p for _, p in pairs]
    labels = ["a", "b", "c", "d"]
    marked = [_MARKER if p is None else p for p in pred]
    p, r, f, support = precision_recall_fscore_support(
        gold, marked, labels=labels, average=None, zero_division=0
    )
    rep = per_class_report(gold, pred, labels)
    for i, lab in enumerate(labels):
        assert rep[lab]["precision"] == pytest.approx(p[i], abs=1e-6)
        assert rep[lab]["recall"] == pytest.approx(r[i], abs=1e-6)
        assert rep[lab]["f1"] == pytest.approx(f[i], abs=1e-6)
        assert rep[lab]["support"] == support[i]


@pytest.mark.parametrize("n_boot", [50, 300, 1000])
def test_the_macro_f1_interval_uses_n_boot_resamples_and_says_so(n_boot):
    rng = np.random.default_rng(0)
    gold = [str(x) for x in rng.integers(0, 4, size=120)]
    pred = [g if rng.random() < 0.7 else str(rng.integers(0, 5)) for g in gold]
    s = classification_summary(gold, pred, n_boot=n_boot, seed=3)
    assert s["bootstrap"] == {"method": "percentile", "n_boot": n_boot, "seed": 3, "level": 0.95}
    g = np.array(gold)
    p = np.array(pred, dtype=object)
    expected = bootstrap_ci(
        lambda idx: macro_f1(list(g[idx]), list(p[idx])), len(g), n_boot=n_boot, seed=3
    )
    assert s["macro_f1_ci"] == pytest.approx(list(expected), abs=1e-6)
    # the accuracy interval is drawn from the same resamples
    correct = (g == p).astype(float)
    acc = bootstrap_ci(lambda idx: float(correct[idx].mean()), len(g), n_boot=n_boot, seed=3)
    assert s["accuracy_ci"] == list(acc)


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
