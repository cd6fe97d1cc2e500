"""One definition per number: every evaluation path gives the same metrics on one set.

``hybridroute train``, :func:`macro_f1`, :func:`evaluate_classifier`,
:func:`evaluate_router` and :func:`evaluate_stream` (and Spark's ``evaluate_scored``, in
``tests/spark/test_spark.py``) score :mod:`.one_set`, whose answers are written down and
chosen so that the old competing definitions (macro-F1 over gold labels only vs over gold
∪ answered labels) give different numbers. The row checks of the streamed reader and of
the dataset loaders are one implementation too: the same bad row is refused with the same
words by both.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from sklearn.metrics import f1_score, precision_recall_fscore_support

from hybridroute.calibration import aurc, expected_calibration_error
from hybridroute.datasets import load_dataset
from hybridroute.evaluation import (
    LabelledStream,
    evaluate_classifier,
    evaluate_router,
    evaluate_stream,
    macro_f1,
)
from hybridroute.exceptions import DatasetError

from .one_set import (
    ABSTAIN_REASON,
    CLASSES,
    ITEMS,
    MARKER,
    ROUTER_METRIC_KEYS,
    FixedClassifier,
    FixedRouter,
    reference_macro_f1,
    router_dataset,
    router_rows,
    sklearn_macro_f1,
    texts_and_gold,
)


def _gold_only_macro_f1(gold, pred):
    marked = [MARKER if p is None else p for p in pred]
    return round(
        f1_score(gold, marked, labels=sorted(set(gold)), average="macro", zero_division=0), 6
    )


def test_the_set_tells_the_two_old_definitions_apart():
    texts, gold = texts_and_gold()
    pred = FixedClassifier().predict(texts)
    assert sklearn_macro_f1(gold, pred) != _gold_only_macro_f1(gold, pred)


@pytest.fixture(scope="module")
def classifier_paths():
    from hybridroute.cli._train import _score

    texts, gold = texts_and_gold()
    clf = FixedClassifier()
    rows = [{"text": t, "label": g} for t, g in zip(texts, gold, strict=True)]
    return {
        "train": _score(clf, texts, gold),
        "evaluate_classifier": evaluate_classifier(clf, texts, gold, n_boot=50),
        "evaluate_stream": evaluate_stream(clf, rows, n_boot=5, batch_size=5),
    }


def test_macro_f1_is_one_number_on_every_classifier_path(classifier_paths):
    texts, gold = texts_and_gold()
    pred = FixedClassifier().predict(texts)
    expected = sklearn_macro_f1(gold, pred)
    got = {
        "macro_f1()": round(macro_f1(gold, pred), 6),
        "train": classifier_paths["train"]["test_macro_f1"],
        "evaluate_classifier": classifier_paths["evaluate_classifier"]["macro_f1"],
        "evaluate_stream": classifier_paths["evaluate_stream"]["macro_f1"],
    }
    assert got == dict.fromkeys(got, expected)


def test_accuracy_is_one_number_on_every_classifier_path(classifier_paths):
    _, gold = texts_and_gold()
    expected = round(sum(a == g for _, g, a, _ in ITEMS) / len(gold), 6)
    got = {
        "train": classifier_paths["train"]["test_accuracy"],
        "evaluate_classifier": classifier_paths["evaluate_classifier"]["accuracy"],
        "evaluate_stream": classifier_paths["evaluate_stream"]["accuracy"],
    }
    assert got == dict.fromkeys(got, expected)
    assert classifier_paths["train"]["test_abstained"] == 2


def test_per_class_scores_are_one_set_of_numbers(classifier_paths):
    texts, gold = texts_and_gold()
    pred = [MARKER if p is None else p for p in FixedClassifier().predict(texts)]
    in_memory = classifier_paths["evaluate_classifier"]
    streamed = classifier_paths["evaluate_stream"]
    assert streamed["per_class"] == in_memory["per_class"]
    assert streamed["confusion"] == in_memory["confusion"]
    labels = sorted(CLASSES)
    p, r, f, support = precision_recall_fscore_support(
        gold, pred, labels=labels, average=None, zero_division=0
    )
    for i, lab in enumerate(labels):
        row = in_memory["per_class"][lab]
        assert (row["precision"], row["recall"], row["f1"], row["support"]) == (
            round(p[i], 6),
            round(r[i], 6),
            round(f[i], 6),
            support[i],
        ), lab


def test_ece_and_abstentions_are_one_number(classifier_paths):
    conf = np.array([c for *_, c in ITEMS if c is not None])
    correct = np.array([a == g for _, g, a, c in ITEMS if c is not None])
    ece = round(expected_calibration_error(conf, correct), 6)
    in_memory = classifier_paths["evaluate_classifier"]
    streamed = classifier_paths["evaluate_stream"]
    assert in_memory["ece"] == streamed["ece"] == ece
    assert in_memory["aurc"] == round(aurc(conf, correct), 6)
    for key in ("abstention_rate", "abstentions_by_reason", "n_with_confidence"):
        assert in_memory[key] == streamed[key], key
    assert in_memory["abstentions_by_reason"] == {ABSTAIN_REASON: 2}


@pytest.mark.parametrize("path", ["evaluate_classifier", "evaluate_stream"])
def test_the_intervals_say_how_many_resamples(classifier_paths, path):
    note = classifier_paths[path]["bootstrap"]
    assert note["n_boot"] == (50 if path == "evaluate_classifier" else 5)
    assert note["method"] == ("percentile" if path == "evaluate_classifier" else "poisson")


# the exact router metrics, and the confidence-based ones Spark leaves out
ROUTER_KEYS = (*ROUTER_METRIC_KEYS, "ece", "n_with_confidence")


@pytest.fixture(scope="module")
def router_paths():
    return {
        "evaluate_router": evaluate_router(FixedRouter(), router_dataset(), n_boot=50),
        "evaluate_stream": evaluate_stream(FixedRouter(), router_rows(), n_boot=5, batch_size=4),
    }


@pytest.mark.parametrize("key", ROUTER_KEYS)
def test_router_paths_agree(router_paths, key):
    assert router_paths["evaluate_stream"][key] == router_paths["evaluate_router"][key]


def test_router_macro_f1_is_the_classifier_one(router_paths):
    # the rows the classifier saw are the classifier set's
    assert router_paths["evaluate_router"]["macro_f1"] == reference_macro_f1()


def test_router_counts_are_the_written_down_ones(router_paths):
    ev = router_paths["evaluate_router"]
    # auto-routed: the 7 model-stage rows and the one whose evidence was complete
    assert ev["n_auto_routed"] == 8 and ev["n_classified"] == len(ITEMS)
    assert ev["coverage"] == round(8 / len(ITEMS), 6)
    assert ev["decisions_by_stage"] == {"fallback": 2, "model": 7, "policy": 3, "rule": 3}
    assert ev["rules"]["(default exit)"]["fires"] == 1


# ----------------------------------------------------------------------------- row checks


def _first_problem(load):
    with pytest.raises(DatasetError) as info:
        load()
    err = info.value
    return err.row, err.column, str(err).rsplit(": ", 1)[-1] if err.column else str(err)


@pytest.mark.parametrize(
    "row",
    [
        {"text": 3, "label": "a"},
        {"text": "   ", "label": "a"},
        {"text": "x" * 50, "label": "a"},
        {"text": "he\x00llo", "label": "a"},
        {"text": "hi", "label": True},
        {"text": "hi", "label": ""},
        {"text": "hi", "label": "zz"},
        {"text": "hi", "label": "a", "split": "holdout"},
        {"text": "hi", "label": "a", "split": 3},
        {"text": "hi", "label": "a", "id": 1.5},
        {"text": "hi", "label": "a", "id": "  "},
        {"text": "hi", "label": "a", "next_step": 3},
        {"text": "hi", "label": "a", "facts": [1]},
        {"text": "hi", "label": "a", "facts": {"split": "x"}},
        {"text": "hi", "label": "a", "facts": {"n": 1}, "n": 2},
        {"text": "hi", "label": "a", "facts": {"k\x00": 1}},
        {"text": "hi", "label": "a", "facts": {"k": ["ok", "b\x00d"]}},
    ],
    ids=lambda r: json.dumps(r)[:60],
)
def test_a_bad_row_is_refused_alike_by_the_loader_and_the_stream(tmp_path, row):
    good = [
        {"text": "fine one", "label": "a", "split": "train", "id": "r1"},
        {"text": "fine two", "label": "b", "split": "test", "id": "r2"},
    ]
    path = tmp_path / "rows.jsonl"
    bad = {"split": "train", "id": "r3", **row}
    path.write_text("".join(json.dumps(r) + "\n" for r in [*good, bad]), encoding="utf-8")
    kwargs = {"label_set": ["a", "b"], "max_text_chars": 40}
    loaded = _first_problem(lambda: load_dataset(f"jsonl:{path}", **kwargs))
    streamed = _first_problem(lambda: list(LabelledStream(path, **kwargs)))
    assert streamed == loaded
    assert loaded[0] == 3


def test_split_names_have_one_home():
    from hybridroute import _labelled_rows
    from hybridroute.datasets import _validate
    from hybridroute.evaluation import _stream_reader

    assert _validate.SPLIT_ORDER is _labelled_rows.SPLIT_ORDER
    assert _validate.SPLIT_ALIASES is _labelled_rows.SPLIT_ALIASES
    assert _stream_reader.SPLIT_ORDER is _labelled_rows.SPLIT_ORDER
