"""Streamed, constant-memory evaluation against the in-memory one on the same rows."""

from __future__ import annotations

import csv
import gzip
import json
import tracemalloc

import numpy as np
import pytest

from hybridroute.classifiers import IntentClassifier, RankedLabels
from hybridroute.evaluation import (
    LabelledStream,
    StreamEvaluation,
    evaluate_classifier,
    evaluate_router,
    evaluate_stream,
)
from hybridroute.exceptions import DatasetError

from ..router.conftest import EXAMPLE, fitted_policy

EXACT_ROUTER_KEYS = (
    "n",
    "n_classified",
    "n_auto_routed",
    "accuracy",
    "macro_f1",
    "coverage",
    "selective_precision",
    "next_step_accuracy",
    "n_next_step",
    "decisions_by_stage",
    "decisions_by_destination",
    "abstention_rate",
    "abstentions_by_reason",
    "rules",
    "per_class",
    "confusion",
)
EXACT_CLASSIFIER_KEYS = (
    "n",
    "accuracy",
    "macro_f1",
    "coverage",
    "selective_precision",
    "n_auto_routed",
    "deferred_by_reason",
    "abstention_rate",
    "abstentions_by_reason",
    "per_class",
    "confusion",
)


@pytest.fixture(scope="module")
def parts(tmp_path_factory):
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
    # the same rows on disk, as JSONL and as CSV
    d = tmp_path_factory.mktemp("stream")
    rows = []
    for i, (text, label) in enumerate(zip(ds.texts, ds.y, strict=True)):
        facts = {k: v for k, v in ds.facts(i).items() if v is not None}
        ns = ds.frame["next_step"].iloc[i]
        rows.append(
            {
                "id": ds.ids[i],
                "text": text,
                "label": str(label),
                "facts": facts,
                "next_step": ns if isinstance(ns, str) else None,
            }
        )
    jsonl = d / "rows.jsonl"
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    fact_names = list(ds.fact_columns)
    csv_path = d / "rows.csv"
    with open(csv_path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["id", "text", "label", "next_step", *fact_names])
        for r in rows:
            cells = []
            for k in fact_names:
                v = r["facts"].get(k)
                cells.append(
                    "" if v is None else json.dumps(v) if isinstance(v, (list, bool)) else str(v)
                )
            w.writerow([r["id"], r["text"], r["label"], r["next_step"] or "", *cells])
    fact_types = {s.name: s.type for s in router.rules.schema.specs}
    return ds, clf, policy, router, jsonl, csv_path, fact_types


@pytest.fixture(scope="module")
def in_memory(parts):
    ds, _, _, router, *_ = parts
    return evaluate_router(router, ds, n_boot=200)


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_router_stream_equals_in_memory(parts, in_memory, fmt):
    ds, _, _, router, jsonl, csv_path, fact_types = parts
    path = jsonl if fmt == "jsonl" else csv_path
    st = evaluate_stream(router, LabelledStream(path, fact_types=fact_types), n_boot=20)
    assert isinstance(st, StreamEvaluation)
    for key in EXACT_ROUTER_KEYS:
        assert st[key] == in_memory[key], key
    assert st["ece"] == pytest.approx(in_memory["ece"], abs=1e-6)
    # the risk-coverage curve is binned: AURC within a bin's worth of the exact value
    assert st["aurc"] == pytest.approx(in_memory["aurc"], abs=2e-3)
    assert st["skipped_rows"] == 0
    assert st["streamed"] is True and st["mode"] == "router"


def test_classifier_stream_equals_in_memory(parts):
    ds, clf, policy, *_ = parts
    test = ds.split("test")
    ev = evaluate_classifier(clf, test.texts, test.y, policy=policy, n_boot=200)
    rows = ({"text": t, "label": y} for t, y in zip(test.texts, test.y, strict=True))
    st = evaluate_stream(clf, rows, policy=policy, n_boot=200, batch_size=50)
    for key in EXACT_CLASSIFIER_KEYS:
        assert st[key] == ev[key], key
    assert st["ece"] == pytest.approx(ev["ece"], abs=1e-6)
    assert st["mode"] == "classifier"


@pytest.mark.parametrize("key", ["accuracy", "macro_f1", "next_step_accuracy"])
def test_poisson_bootstrap_intervals_are_reasonable(parts, in_memory, key):
    _, _, _, router, jsonl, _, fact_types = parts
    st = evaluate_stream(router, LabelledStream(jsonl, fact_types=fact_types), n_boot=200)
    lo, hi = st[f"{key}_ci"]
    mlo, mhi = in_memory[f"{key}_ci"]
    assert lo < st[key] < hi
    # the same sampling spread as the multinomial bootstrap, within Monte Carlo noise
    assert 0.6 < (hi - lo) / (mhi - mlo) < 1.6


def test_intervals_are_seeded_and_independent_of_batch_size(parts):
    _, _, _, router, jsonl, _, fact_types = parts

    def ci(seed: int, batch: int) -> tuple[list[float], list[float]]:
        st = evaluate_stream(
            router,
            LabelledStream(jsonl, fact_types=fact_types),
            n_boot=30,
            seed=seed,
            batch_size=batch,
        )
        return st["accuracy_ci"], st["next_step_accuracy_ci"]

    assert ci(1, 1000) == ci(1, 1000)
    assert ci(1, 1000) == ci(1, 97)  # weights are drawn row after row
    assert ci(1, 1000) != ci(2, 1000)


def test_stream_evaluation_keeps_no_rows(parts):
    ds, clf, *_ = parts
    test = ds.split("test")
    st = evaluate_stream(
        clf, ({"text": t, "label": y} for t, y in zip(test.texts, test.y, strict=True))
    )
    with pytest.raises(AttributeError, match="keeps no per-item rows"):
        _ = st.rows
    assert st.metrics()["accuracy"] == st["accuracy"]
    assert "items" not in st


class _Stub(IntentClassifier):
    """A classifier with no cost: the label is a hash of the text."""

    kind = "stub"

    def __init__(self) -> None:
        self.classes_ = np.array([f"c{i}" for i in range(20)])

    def fit(self, texts, labels):  # pragma: no cover - never fitted
        return self

    def predict_proba(self, texts):  # pragma: no cover - rank is used
        raise NotImplementedError

    def rank(self, texts, k=2):
        out = []
        for t in texts:
            h = sum(map(ord, t))
            out.append(RankedLabels(labels=(f"c{h % 20}",), scores=((h % 97) / 97,)))
        return out


def _rows(n: int):
    for i in range(n):
        yield {"text": f"ticket number {i}", "label": f"c{i % 20}"}


def _peak(n: int) -> int:
    tracemalloc.start()
    try:
        evaluate_stream(_Stub(), _rows(n), n_boot=50, batch_size=500)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_memory_stays_flat_as_the_stream_grows():
    small, large = _peak(5_000), _peak(50_000)
    assert large < 1.3 * small, (small, large)


def test_gzip_and_split_filter(tmp_path, parts):
    *_, jsonl, _, fact_types = parts
    gz = tmp_path / "rows.jsonl.gz"
    with gzip.open(gz, "wt", encoding="utf-8") as fh:
        for i, line in enumerate(jsonl.read_text(encoding="utf-8").splitlines()):
            rec = json.loads(line)
            rec["split"] = "test" if i % 2 else "train"
            fh.write(json.dumps(rec) + "\n")
    rows = list(LabelledStream(gz, fact_types=fact_types, split="test"))
    assert len(rows) == sum(1 for _ in jsonl.open()) // 2
    assert {r["split"] for r in rows} == {"test"}


@pytest.mark.parametrize(
    ("line", "match"),
    [
        ("{not json", r"row 2: not valid JSON"),
        ('{"label": "x"}', r"row 2, column 'text': no text"),
        ('{"text": "   ", "label": "x"}', r"row 2, column 'text': the text is empty"),
        ('{"text": "hi", "label": true}', r"row 2, column 'label': expected a string label"),
        ('{"text": "hi", "label": "x", "next_step": 3}', r"column 'next_step'"),
        ('{"text": "hi", "label": "x", "facts": {"amount": "lots"}}', r"column 'amount'"),
        ('{"text": "hi", "label": "x", "facts": [1]}', r"column 'facts'"),
        ("[1, 2]", r"row 2: expected a JSON object"),
    ],
)
def test_bad_rows_are_located(tmp_path, line, match):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"text": "fine", "label": "x"}\n' + line + "\n", encoding="utf-8")
    with pytest.raises(DatasetError, match=match):
        list(LabelledStream(path, fact_types={"amount": "number"}))


def test_bad_rows_can_be_skipped_and_are_counted(tmp_path, parts):
    ds, clf, *_ = parts
    path = tmp_path / "mixed.jsonl"
    good = [{"text": t, "label": str(y)} for t, y in zip(ds.texts[:30], ds.y[:30], strict=True)]
    lines = [json.dumps(r) for r in good] + ["{oops", '{"text": "", "label": "x"}']
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    stream = LabelledStream(path, on_error="skip")
    st = evaluate_stream(clf, stream)
    assert st["n"] == 30 and st["skipped_rows"] == 2
    assert [s.row for s in stream.skipped] == [31, 32]


@pytest.mark.parametrize(
    ("name", "content", "match"),
    [
        ("rows.txt", "x", "cannot tell the format"),
        ("rows.csv", "id,label\n1,a\n", "missing column"),
        ("missing.jsonl", None, "file not found"),
    ],
)
def test_file_level_errors(tmp_path, name, content, match):
    path = tmp_path / name
    if content is not None:
        path.write_text(content, encoding="utf-8")
    with pytest.raises(DatasetError, match=match):
        list(LabelledStream(path))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"batch_size": 0}, "batch_size"),
        ({"n_boot": 0}, "n_boot"),
        ({"level": 1.5}, "level"),
    ],
)
def test_bad_arguments(parts, kwargs, match):
    clf = parts[1]
    with pytest.raises(ValueError, match=match):
        evaluate_stream(clf, [], **kwargs)


def test_router_with_policy_argument_is_refused(parts):
    router, policy = parts[3], parts[2]
    with pytest.raises(ValueError, match="carries its own policy"):
        evaluate_stream(router, [], policy=policy)


def test_a_label_seen_only_in_rule_rows_gets_a_per_class_row(parts, tmp_path):
    ds, _, _, router, _, _, fact_types = parts
    rows = [
        {"text": t, "label": str(y), "facts": {}}
        for t, y in zip(ds.texts[:40], ds.y[:40], strict=True)
    ]
    # no permission: the rule layer decides, the classifier never sees the row
    rows.append(
        {"text": "anything", "label": "rule_only_label", "facts": {"has_permission": False}}
    )

    class _Set:  # the slice of LabelledSet that evaluate_router reads
        texts = [r["text"] for r in rows]
        y = [r["label"] for r in rows]
        frame = __import__("pandas").DataFrame({"text": texts})

        def facts(self, i):
            return rows[i]["facts"]

    ev = evaluate_router(router, _Set(), n_boot=20)
    st = evaluate_stream(router, rows, n_boot=20)
    assert "rule_only_label" in st["per_class"]
    assert st["per_class"] == ev["per_class"] and st["confusion"] == ev["confusion"]
