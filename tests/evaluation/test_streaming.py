"""Streamed, constant-memory evaluation against the in-memory one on the same rows."""

from __future__ import annotations

import csv
import gzip
import json
import tracemalloc

import pytest

from hybridroute.classifiers import RankedLabels
from hybridroute.evaluation import (
    LabelledStream,
    StreamEvaluation,
    evaluate_classifier,
    evaluate_router,
    evaluate_stream,
)
from hybridroute.exceptions import DatasetError

from ..hostile import bounded
from ..router.conftest import EXAMPLE, fitted_policy
from .one_set import ROUTER_METRIC_KEYS, RankOnly

EXACT_ROUTER_KEYS = ROUTER_METRIC_KEYS
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


class _Stub(RankOnly):
    """A classifier with no cost: the label is a hash of the text."""

    kind = "stub"

    def __init__(self) -> None:
        super().__init__([f"c{i}" for i in range(20)])

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


# --------------------------------------------------------------------------- hostile files
# Bounded reading: regular files only, a line limit, a byte limit counted after
# decompression, each JSONL line parsed strictly. Tests that could hang or grow memory on
# a regression run in a daemon thread joined with a timeout, or in a subprocess with an
# address-space limit.


def _write_lines(path, *lines):
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


GOOD_LINE = '{"text": "fine", "label": "x"}'


@pytest.mark.parametrize("name", ["rows.jsonl", "rows.csv", "rows.jsonl.gz"])
def test_a_fifo_is_refused_at_once(tmp_path, name):
    import os

    fifo = tmp_path / name
    os.mkfifo(fifo)
    with pytest.raises(DatasetError, match=r"is a FIFO .*must be a regular file"):
        bounded(lambda: list(LabelledStream(fifo)), timeout=10)


def test_a_directory_is_refused(tmp_path):
    d = tmp_path / "rows.jsonl"
    d.mkdir()
    with pytest.raises(DatasetError, match="is a directory"):
        bounded(lambda: list(LabelledStream(d)))


def test_devices_neither_hang_nor_grow_memory(tmp_path):
    import os
    import subprocess
    import sys

    # LabelledStream picks the format from the name: link names to the devices
    links = []
    for dev, name in (
        ("/dev/zero", "z.jsonl"),
        ("/dev/zero", "z.csv"),
        ("/dev/urandom", "u.jsonl.gz"),
    ):
        os.symlink(dev, tmp_path / name)
        links.append(str(tmp_path / name))
    code = (
        "import resource\n"
        "resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))\n"
        "from hybridroute.evaluation import LabelledStream\n"
        "from hybridroute.exceptions import DatasetError\n"
        f"for p in {links!r}:\n"
        "    try:\n"
        "        list(LabelledStream(p))\n"
        "    except DatasetError as exc:\n"
        "        print('refused:', exc)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.count("is a character device; a labelled file must be a regular file") == 3


def test_a_gzip_bomb_stops_at_the_byte_limit(tmp_path):
    gz = tmp_path / "bomb.jsonl.gz"
    with gzip.open(gz, "wb", compresslevel=9) as fh:
        block = (b" " * 1023 + b"\n") * 1024
        for _ in range(64):  # 64 MiB of blank lines, ~64 KB compressed
            fh.write(block)
    assert gz.stat().st_size < 1 << 20
    with pytest.raises(
        DatasetError,
        match=r"larger than the limit of 8,388,608 bytes \(decompressed, set "
        r"HYBRIDROUTE_MAX_STREAM_BYTES or max_bytes= to raise it\)",
    ):
        bounded(lambda: list(LabelledStream(gz, max_bytes=8 << 20)))


def test_the_byte_limit_comes_from_the_environment(tmp_path, monkeypatch):
    from hybridroute.evaluation._stream_reader import MAX_STREAM_BYTES, stream_byte_limit

    path = _write_lines(tmp_path / "r.jsonl", *[GOOD_LINE] * 100)
    assert stream_byte_limit() == MAX_STREAM_BYTES == 64 << 30
    monkeypatch.setenv("HYBRIDROUTE_MAX_STREAM_BYTES", "500")
    with pytest.raises(DatasetError, match="larger than the limit of 500 bytes"):
        list(LabelledStream(path))
    assert len(list(LabelledStream(path, max_bytes=1 << 20))) == 100
    for bad in ("lots", "0", "-3"):
        monkeypatch.setenv("HYBRIDROUTE_MAX_STREAM_BYTES", bad)
        with pytest.raises(DatasetError, match="must be a positive whole number"):
            LabelledStream(path)
    with pytest.raises(ValueError, match="max_bytes must be a positive integer"):
        LabelledStream(path, max_bytes=0)


def test_an_overlong_line_is_a_row_error_read_in_bounded_memory(tmp_path):
    from hybridroute.evaluation._stream_reader import MAX_LINE_BYTES

    path = tmp_path / "long.jsonl"
    with open(path, "wb") as fh:
        fh.write(GOOD_LINE.encode() + b"\n")
        fh.write(b'{"text": "' + b"a" * (20 * MAX_LINE_BYTES) + b'", "label": "x"}\n')
        fh.write(GOOD_LINE.encode() + b"\n")
    with pytest.raises(
        DatasetError, match=r"long\.jsonl, row 2: the line is longer than 1,000,000"
    ):
        bounded(lambda: list(LabelledStream(path)))
    stream = LabelledStream(path, on_error="skip")
    tracemalloc.start()
    try:
        rows = bounded(lambda: list(stream))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(rows) == 2 and [s.row for s in stream.skipped] == [2]
    assert peak < 8 * MAX_LINE_BYTES, peak  # the 20 MB line was never held whole


def test_an_overlong_csv_line_names_the_line(tmp_path):
    path = tmp_path / "long.csv"
    path.write_text("text,label\nfine,x\n" + "a" * 1_000_001 + ",x\n", encoding="utf-8")
    with pytest.raises(DatasetError, match=r"long\.csv: line 3 is longer than 1,000,000 bytes"):
        bounded(lambda: list(LabelledStream(path, on_error="skip")))


def test_an_unclosed_csv_quote_cannot_gather_the_file(tmp_path):
    path = tmp_path / "q.csv"
    path.write_text('text,label\n"never closed,x\n' + "more text,x\n" * 20_000, encoding="utf-8")
    with pytest.raises(DatasetError, match=r"q\.csv, row 1: unreadable CSV row \(field larger"):
        bounded(lambda: list(LabelledStream(path)))


@pytest.mark.parametrize(
    ("line", "match"),
    [
        (
            '{"text": "hi", "label": "x", "facts": {"a": 1}, "facts": {"a": 2}}',
            "duplicate key 'facts'",
        ),
        ('{"text": "hi", "text": "ho", "label": "x"}', "duplicate key 'text'"),
        (
            '{"text": "hi", "label": "x", "facts": {"has_permission": false, "has_permission": true}}',
            "duplicate key 'has_permission'",
        ),
        (
            '{"text": "hi", "label": "x", "facts": {"d": ' + "[" * 1000 + "]" * 1000 + "}}",
            "nested too deeply",
        ),
        ('{"text": "hi", "label": "x", "d": ' + "[" * 65 + "]" * 65 + "}", "nested too deeply"),
        ('{"text": "hi", "label": "x", "facts": {"n": ' + "9" * 5000 + "}}", "5000 digits"),
        ('{"text": "hi", "label": ' + "1" * 70 + "}", "70 digits"),
        ('{"text": "hi", "label": "x", "facts": {"amount": NaN}}', "NaN"),
        ('{"text": "hi", "label": "x", "facts": {"amount": -Infinity}}', "Infinity"),
        ('{"text": "hi", "label": "x", "facts": {"amount": 1e999}}', "too large for a float"),
        ('{"text": "bad \\udc80 escape", "label": "x"}', "lone surrogate"),
    ],
)
def test_hostile_json_lines_are_row_errors(tmp_path, line, match):
    path = _write_lines(tmp_path / "h.jsonl", GOOD_LINE, line, GOOD_LINE)
    with pytest.raises(DatasetError, match=rf"h\.jsonl, row 2: .*{match}"):
        bounded(lambda: list(LabelledStream(path)))
    stream = LabelledStream(path, on_error="skip")
    assert len(bounded(lambda: list(stream))) == 2 and stream.n_skipped == 1


@pytest.mark.parametrize(
    ("cell", "match"),
    [
        ('"{""a"": 1, ""a"": 2}"', "duplicate key 'a'"),
        ("[" * 1000 + "]" * 1000, "nested too deeply"),
        ("9" * 5000, "5,000 digits"),
        ("1e400", "too large for a float"),
        ('"[1, NaN]"', "NaN"),
    ],
)
def test_hostile_csv_cells_are_row_errors(tmp_path, cell, match):
    path = tmp_path / "h.csv"
    path.write_text(f"text,label,extra\nfine,x,1\nagain,x,{cell}\n", encoding="utf-8")
    with pytest.raises(DatasetError, match=rf"h\.csv, row 2, column 'extra': .*{match}"):
        bounded(lambda: list(LabelledStream(path)))


def test_a_declared_text_fact_is_not_parsed(tmp_path):
    deep = "[" * 1000 + "]" * 1000
    path = tmp_path / "t.csv"
    path.write_text(f"text,label,code\nfine,x,{deep}\n", encoding="utf-8")
    rows = bounded(lambda: list(LabelledStream(path, fact_types={"code": "str"})))
    assert rows[0]["facts"] == {"code": deep}


@pytest.mark.parametrize(
    ("line", "column"),
    [
        ('{"text": "delete my\\u0000 data", "label": "x"}', "text"),
        ('{"text": "hi", "label": "x\\u0000"}', "label"),
        (
            '{"text": "hi", "label": "x", "facts": {"action": "delete_account_data\\u0000"}}',
            "action",
        ),
        ('{"text": "hi", "label": "x", "action": "\\u0000"}', "action"),
        ('{"text": "hi", "label": "x", "facts": {"fields": ["a", "b\\u0000"]}}', "fields"),
        ('{"text": "hi", "label": "x", "split": "test\\u0000"}', "split"),
        ('{"id": "a\\u0000", "text": "hi", "label": "x"}', "id"),
        ('{"text": "hi", "label": "x", "next_step": "answer\\u0000"}', "next_step"),
    ],
)
def test_nul_is_refused_in_json_rows(tmp_path, line, column):
    path = _write_lines(tmp_path / "n.jsonl", GOOD_LINE, line)
    with pytest.raises(DatasetError, match=rf"row 2, column '{column}': .*NUL character"):
        list(LabelledStream(path))


@pytest.mark.parametrize(
    ("row", "column"),
    [("he\x00llo,x,1", "text"), ("hello,x\x00,1", "label"), ("hello,x,1\x00", "attempts")],
)
def test_nul_is_refused_in_csv_rows(tmp_path, row, column):
    path = tmp_path / "n.csv"
    path.write_text(f"text,label,attempts\nfine,x,0\n{row}\n", encoding="utf-8")
    with pytest.raises(DatasetError, match=rf"row 2, column '{column}': .*NUL character"):
        list(LabelledStream(path))


@pytest.mark.parametrize("split", ["bogus", "holdout", "training", "Test2"])
def test_unknown_splits_are_refused(tmp_path, split):
    path = _write_lines(
        tmp_path / "s.jsonl", GOOD_LINE, json.dumps({"text": "hi", "label": "x", "split": split})
    )
    with pytest.raises(
        DatasetError, match=rf"row 2, column 'split': unknown split '{split}'; the known splits"
    ):
        list(LabelledStream(path))
    with pytest.raises(ValueError, match=f"unknown split '{split}'"):
        LabelledStream(path, split=split)


def test_split_aliases_are_read_as_the_loaders_read_them(tmp_path):
    lines = [
        json.dumps({"text": f"t{i}", "label": "x", "split": s})
        for i, s in enumerate(["val", "Dev", "validation", "train", "calib"])
    ]
    path = _write_lines(tmp_path / "a.jsonl", *lines)
    assert [r["split"] for r in LabelledStream(path)] == [
        "validation",
        "validation",
        "validation",
        "train",
        "calibration",
    ]
    assert len(list(LabelledStream(path, split="val"))) == 3


def test_row_numbers_are_line_numbers_as_in_the_loaders(tmp_path):
    path = tmp_path / "b.jsonl"
    path.write_text(GOOD_LINE + "\n\n\n" + '{"label": "x"}\n', encoding="utf-8")
    with pytest.raises(DatasetError, match=r"b\.jsonl, row 4, column 'text'"):
        list(LabelledStream(path))


def test_undecodable_json_lines_are_row_errors(tmp_path):
    path = tmp_path / "u.jsonl"
    path.write_bytes(
        GOOD_LINE.encode() + b'\n{"text": "caf\xe9", "label": "x"}\n' + GOOD_LINE.encode() + b"\n"
    )
    with pytest.raises(DatasetError, match=r"u\.jsonl, row 2: not valid UTF-8"):
        list(LabelledStream(path))
    stream = LabelledStream(path, on_error="skip")
    assert len(list(stream)) == 2 and stream.n_skipped == 1


@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_an_exported_set_with_formulas_streams_as_it_loads(tmp_path, suffix):
    from hybridroute.datasets import load_dataset

    texts = ["=cmd|' /C calc'!A0", "+1+1", "-2", "@SUM(A1)", "\t=x", "'=quoted", "plain"]
    rows = [
        {"text": t, "label": "=a" if i % 2 else "b", "facts": {"note": t, "n": -i}}
        for i, t in enumerate(texts)
    ]
    src = _write_lines(tmp_path / "src.jsonl", *[json.dumps(r) for r in rows])
    ds = load_dataset(f"jsonl:{src}")
    out = ds.export(tmp_path / f"out{suffix}")
    streamed = list(LabelledStream(out, fact_types={"note": "str", "n": "int"}))
    assert [r["text"] for r in streamed] == texts
    assert [r["label"] for r in streamed] == ds.y
    assert [r["facts"] for r in streamed] == [ds.facts(i) for i in range(len(ds))]


def test_reading_a_file_stays_constant_memory(tmp_path):
    def peak(n):
        path = tmp_path / f"r{n}.jsonl"
        with open(path, "w", encoding="utf-8") as fh:
            for i in range(n):
                fh.write(
                    json.dumps({"text": f"ticket {i}", "label": f"c{i % 5}", "facts": {"n": i}})
                    + "\n"
                )
        tracemalloc.start()
        try:
            count = sum(1 for _ in LabelledStream(path))
            return count, tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    (n1, small), (n2, large) = peak(2_000), peak(20_000)
    assert (n1, n2) == (2_000, 20_000)
    assert large < 1.5 * small + 200_000, (small, large)
