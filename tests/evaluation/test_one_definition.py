"""One definition per number: every evaluation path gives the same metrics on one set.

``hybridroute train``, :func:`macro_f1`, :func:`evaluate_classifier`,
:func:`evaluate_router` and :func:`evaluate_stream` (and Spark's ``evaluate_scored``, in
``tests/spark/test_spark.py``) score :mod:`.one_set`, whose answers are written down and
chosen so that the old competing definitions (macro-F1 over gold labels only vs over gold
∪ answered labels) give different numbers. The row checks of the streamed reader and of
the dataset loaders are one implementation too: the same bad row, or the same fact that
breaks a facts schema, is refused with the same words by both. A fallback's cause is read
by one function (:func:`hybridroute._fallback.fallback_cause`) on every path, drift
included.
"""

from __future__ import annotations

import csv
import json
from types import SimpleNamespace

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
    FALLBACKS_BY_CAUSE,
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


# the exact router metrics, and the confidence-based one Spark leaves out
ROUTER_KEYS = (*ROUTER_METRIC_KEYS, "ece")


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
    # one fallback with the cause the router records, one counted under its reason code
    assert ev["fallbacks_by_cause"] == FALLBACKS_BY_CAUSE
    assert ev["n_with_confidence"] == sum(c is not None for *_, c in ITEMS) == 10


def test_the_cause_of_a_fallback_is_read_in_one_place():
    from hybridroute import _fallback
    from hybridroute.evaluation import _evaluate, _stream_metrics
    from hybridroute.records import _drift
    from hybridroute.spark import _evaluate as spark_evaluate

    for module in (_evaluate, _stream_metrics, _drift, spark_evaluate):
        assert module.fallback_cause is _fallback.fallback_cause, module.__name__
    assert not hasattr(_evaluate, "_fallback_cause")  # the copy it had


@pytest.mark.parametrize(
    ("record", "cause"),
    [
        (
            {"stage": "fallback", "reason_code": "r", "detail": {"cause": "r (KeyError)"}},
            "r (KeyError)",
        ),
        ({"stage": "fallback", "reason_code": "r", "detail": {}}, "r"),
        ({"stage": "fallback", "reason_code": "r", "detail": {"cause": ""}}, "r"),
        ({"stage": "fallback", "reason_code": "r", "detail": None}, "r"),
        ({"stage": "fallback", "reason_code": "r"}, "r"),
        ({"stage": "model", "reason_code": "confident", "detail": {"cause": "x"}}, None),
        ({"stage": "policy", "reason_code": "low_confidence", "detail": {}}, None),
    ],
)
def test_a_cause_reads_the_same_from_a_record_a_decision_and_a_drift_frame(record, cause):
    import pandas as pd

    from hybridroute._fallback import fallback_cause
    from hybridroute.records import drift_report

    decision = SimpleNamespace(
        detail=record.get("detail"), **{k: record[k] for k in ("stage", "reason_code")}
    )
    assert fallback_cause(record) == fallback_cause(decision) == cause
    frame = pd.DataFrame(
        {
            "router_version": ["1"],
            "selected_destination": ["human_review"],
            "stage": [record["stage"]],
            "reason_code": [record["reason_code"]],
            "confidence": [None],
            "snapshot_hash": ["h"],
            "record": [record],
        }
    )
    assert drift_report(frame)["fallbacks_by_cause"] == ({cause: 1} if cause else {})


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


def test_split_names_and_the_row_checks_have_one_home():
    from hybridroute import _labelled_rows
    from hybridroute.datasets import _io, _labelled, _registry, _validate
    from hybridroute.evaluation import _stream_reader

    assert _labelled.SPLIT_ORDER is _labelled_rows.SPLIT_ORDER
    assert _stream_reader.SPLIT_ORDER is _labelled_rows.SPLIT_ORDER
    assert _registry.DEFAULT_MAX_TEXT_CHARS is _labelled_rows.DEFAULT_MAX_TEXT_CHARS
    # imported from their home, not re-exported by the validator
    for name in ("SPLIT_ORDER", "SPLIT_ALIASES", "CORE_COLUMNS", "FACTS_KEY", "normalise_split"):
        assert not hasattr(_validate, name), name
    # one fact-value check (loaders, check_facts, the stream) and one bad-bytes test
    assert _validate.check_fact_value is _labelled_rows.check_fact_value
    assert _labelled.check_fact_value is _labelled_rows.check_fact_value
    assert _stream_reader.check_fact_value is _labelled_rows.check_fact_value
    assert _io.has_bad_bytes is _labelled_rows.has_bad_bytes


# ----------------------------------------------------------------------------- facts schema

FACTS_SCHEMA = {
    "has_permission": {"type": "bool", "default": True},
    "attempts": {"type": "int", "default": 0, "min": 0, "max": 3},
    "amount": {"type": "number", "default": 0, "min": 0},
    "action": {"type": "str", "nullable": True, "default": None, "enum": ["refund", "lookup"]},
    "fields": {"type": "list[str]", "default": [], "enum": ["email", "order_id"]},
    "channel": {"type": "str"},  # required: no default
}
GOOD_FACTS = [
    {"has_permission": True, "attempts": 0, "amount": 0, "action": "refund", "channel": "web"},
    {"attempts": 3, "amount": 12.5, "fields": ["email"], "channel": "app"},
]


def _schema():
    from hybridroute.contracts import FactSchema

    return FactSchema.from_dict(FACTS_SCHEMA)


def _cell(value):
    """A CSV cell as a person writes it: empty for none, JSON for lists and booleans."""
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value)


def _write(tmp_path, kind, facts_rows):
    rows = [
        {"text": f"text {i}", "label": "ab"[i % 2], "split": "test", **f}
        for i, f in enumerate(facts_rows)
    ]
    path = tmp_path / f"rows.{kind}"
    if kind == "jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        return path
    columns = ["text", "label", "split", *FACTS_SCHEMA]
    with path.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(columns)
        writer.writerows([_cell(r.get(c)) for c in columns] for r in rows)
    return path


@pytest.mark.parametrize("kind", ["jsonl", "csv"])
@pytest.mark.parametrize(
    ("bad", "column"),
    [
        ({"attempts": 9}, "attempts"),  # max
        ({"attempts": -1}, "attempts"),  # min
        ({"amount": -0.5}, "amount"),  # min of a number
        ({"action": "delete"}, "action"),  # enum
        ({"fields": ["email", "phone"]}, "fields"),  # enum of a list's elements
        ({"has_permission": "maybe"}, "has_permission"),  # type
        ({"attempts": "two"}, "attempts"),  # type
        ({"channel": None}, "channel"),  # a required fact left empty
    ],
    ids=lambda v: json.dumps(v) if isinstance(v, dict) else v,
)
def test_a_fact_breaking_the_schema_is_refused_alike_by_the_loader_and_the_stream(
    tmp_path, kind, bad, column
):
    schema = _schema()
    path = _write(tmp_path, kind, [*GOOD_FACTS, {**GOOD_FACTS[0], **bad}])
    loaded = _first_problem(lambda: load_dataset(f"{kind}:{path}", fact_types=schema))
    streamed = _first_problem(lambda: list(LabelledStream(path, fact_types=schema)))
    assert streamed == loaded
    assert loaded[:2] == (3, column)


@pytest.mark.parametrize("kind", ["jsonl", "csv"])
def test_good_facts_stream_as_they_load(tmp_path, kind):
    schema = _schema()
    path = _write(tmp_path, kind, GOOD_FACTS)
    loaded = load_dataset(f"{kind}:{path}", fact_types=schema)
    streamed = list(LabelledStream(path, fact_types=schema))
    for i, row in enumerate(streamed):
        expected = {k: v for k, v in loaded.facts(i).items() if v is not None}
        assert {k: v for k, v in row["facts"].items() if v is not None} == expected


def test_a_csv_header_without_a_required_fact_is_refused_alike(tmp_path):
    path = tmp_path / "rows.csv"
    path.write_text("text,label,attempts\nhello,a,1\nbye,b,2\n", encoding="utf-8")
    schema = _schema()
    loaded = _first_problem(lambda: load_dataset(f"csv:{path}", fact_types=schema))
    streamed = _first_problem(lambda: list(LabelledStream(path, fact_types=schema)))
    assert streamed == loaded
    assert loaded[:2] == (0, "channel")


def test_a_stream_skips_the_rows_whose_facts_break_the_schema(tmp_path):
    path = _write(tmp_path, "jsonl", [*GOOD_FACTS, {**GOOD_FACTS[0], "attempts": 7}, GOOD_FACTS[1]])
    stream = LabelledStream(path, fact_types=_schema(), on_error="skip")
    assert len(list(stream)) == 3
    assert [(s.row, s.column) for s in stream.skipped] == [(3, "attempts")]
    assert "7 is above the maximum 3" in stream.skipped[0].reason
