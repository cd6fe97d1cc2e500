"""Reading scores files: the three formats and layouts agree, and every bad row is refused
with its file, row and column."""

from __future__ import annotations

import hashlib
import json
import os
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from hybridroute.exceptions import DatasetError, UserInputError
from hybridroute.scores import MAX_SCORES_BYTES_ENV, PER_CLASS, TOP_LABEL, read_scores

CLASSES = ["billing", "shipping", "other"]
PROBA = [[0.7, 0.2, 0.1], [0.1, 0.8, 0.1], [0.25, 0.25, 0.5], [0.6, 0.3, 0.1]]
GOLD = ["billing", "shipping", "other", "shipping"]


def write_csv(path: Path, rows: list[list[str]]) -> Path:
    path.write_text("\n".join(",".join(r) for r in rows) + "\n", encoding="utf-8")
    return path


def per_class_csv(path: Path) -> Path:
    head = ["id", "label", *(f"score:{c}" for c in CLASSES)]
    body = [[f"t{i}", g, *map(repr, p)] for i, (g, p) in enumerate(zip(GOLD, PROBA, strict=True))]
    return write_csv(path, [head, *body])


def jsonl(path: Path, lines: list[object]) -> Path:
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n", encoding="utf-8")
    return path


def _flat(path: Path) -> Path:
    return jsonl(
        path,
        [
            {
                "id": f"t{i}",
                "label": g,
                **{f"score:{c}": v for c, v in zip(CLASSES, p, strict=True)},
            }
            for i, (g, p) in enumerate(zip(GOLD, PROBA, strict=True))
        ],
    )


def _object(path: Path) -> Path:
    return jsonl(
        path,
        [
            {"id": i, "label": g, "scores": dict(zip(CLASSES, p, strict=True))}
            for i, (g, p) in enumerate(zip(GOLD, PROBA, strict=True))
        ],
    )


def _array(path: Path) -> Path:
    header = {"format": "hybridroute.scores", "version": 1, "classes": CLASSES}
    rows = [{"label": g, "scores": p} for g, p in zip(GOLD, PROBA, strict=True)]
    return jsonl(path, [header, *rows])


def _parquet(path: Path) -> Path:
    import pandas as pd

    frame = pd.DataFrame(PROBA, columns=[f"score:{c}" for c in CLASSES])
    frame.insert(0, "label", GOLD)
    frame.to_parquet(path)
    return path


WRITERS = {
    "csv": (per_class_csv, "s.csv"),
    "jsonl-flat": (_flat, "s.jsonl"),
    "jsonl-object": (_object, "s.jsonl"),
    "jsonl-array-header": (_array, "s.ndjson"),
    "parquet": (_parquet, "s.parquet"),
}


@pytest.mark.parametrize("kind", sorted(WRITERS))
def test_every_format_and_layout_reads_the_same_table(tmp_path, kind):
    write, name = WRITERS[kind]
    path = write(tmp_path / name)
    table = read_scores(path)
    assert table.layout == PER_CLASS
    assert table.classes == tuple(CLASSES)
    assert table.gold == tuple(GOLD)
    np.testing.assert_array_equal(table.proba(), PROBA)
    assert table.fingerprint == hashlib.sha256(path.read_bytes()).hexdigest()
    assert len(set(table.ids)) == len(table) == 4


def test_the_model_classes_put_the_columns_in_its_order(tmp_path):
    path = per_class_csv(tmp_path / "s.csv")
    order = ["other", "billing", "shipping"]
    table = read_scores(path, classes=order)
    assert table.classes == tuple(order)
    np.testing.assert_array_equal(table.proba(), np.array(PROBA)[:, [2, 0, 1]])
    with pytest.raises(DatasetError, match=r"not the model's \(4 labels\): it lacks 'refund'"):
        read_scores(path, classes=[*CLASSES, "refund"])


def test_top_label_rows_complete_as_the_policy_completes_a_ranking(tmp_path):
    path = write_csv(
        tmp_path / "top.csv",
        [["label", "predicted", "confidence"], ["a", "a", "0.9"], ["c", "b", "0.5"]],
    )
    table = read_scores(path)
    assert table.layout == TOP_LABEL and table.classes == ("a", "b", "c")
    np.testing.assert_allclose(table.proba(), [[0.9, 0.05, 0.05], [0.25, 0.5, 0.25]])
    assert table.ranked(1) == (("b",), (0.5,))
    # the model's label set, when given, is the label set of a top-label file
    assert read_scores(path, classes=["a", "b", "c", "d"]).classes == ("a", "b", "c", "d")


def test_the_out_of_scope_label_is_the_one_gold_label_outside_the_classes(tmp_path):
    rows = [["label", "score:a", "score:b"], ["a", "0.9", "0.1"], ["oos", "0.5", "0.5"]]
    path = write_csv(tmp_path / "s.csv", rows)
    with pytest.raises(DatasetError, match=r"row 2, column 'label': 'oos' is not one of the 2"):
        read_scores(path)
    assert read_scores(path, oos_label="oos").gold == ("a", "oos")


HEAD = "id,label,score:a,score:b"
BAD_CSV = {
    "nan": (f"{HEAD}\nx,a,nan,0.5\n", 1, "score:a", "is not a number: 'nan'"),
    "inf": (f"{HEAD}\nx,a,0.5,inf\n", 1, "score:b", "is not a number"),
    "underscore": (f"{HEAD}\nx,a,0.5,0_5\n", 1, "score:b", "is not a number: '0_5'"),
    "empty-cell": (f"{HEAD}\nx,a,,1\n", 1, "score:a", "is not a number: ''"),
    "above-1": (f"{HEAD}\nx,a,1.5,0\n", 1, "score:a", r"is 1.5, not a probability"),
    "negative": (f"{HEAD}\nx,a,-0.1,1.1\n", 1, "score:a", "not a probability"),
    "sum": (f"{HEAD}\nx,a,0.5,0.5\ny,b,0.4,0.4\n", 2, None, "the scores sum to 0.8, not 1"),
    "label": (f"{HEAD}\nx,a,0.5,0.5\ny,zz,0.5,0.5\n", 2, "label", "'zz' is not one of the 2"),
    "empty-label": (f"{HEAD}\nx, ,0.5,0.5\n", 1, "label", "is empty"),
    "id-twice": (f"{HEAD}\nx,a,0.5,0.5\nx,b,0.5,0.5\n", 2, "id", "id 'x' is repeated"),
    "fields": (f"{HEAD}\nx,a,0.5\n", 1, None, "the row has 3 fields, the header 4"),
    "unknown-column": ("label,Score:a,score:b\na,1,0\n", 0, "Score:a", "not a scores-file column"),
    "no-label": ("gold,score:a,score:b\na,1,0\n", 0, "gold", "not a scores-file column"),
    "no-scores": ("id,label\nx,a\n", 0, None, "give the model's scores one way"),
    "two-layouts": ("label,score:a,score:b,predicted,confidence\na,1,0,a,1\n", 0, None, "one way"),
    "half-top": ("label,predicted\na,a\n", 0, "confidence", "(one is missing)"),
    "column-twice": ("label,score:a,score:a\na,1,0\n", 0, "score:a", "given twice"),
    "nul": (f"{HEAD}\nx\x00,a,0.5,0.5\n", 1, "id", "NUL character"),
    "one-class": ("label,score:a\na,1\n", 0, None, "at least 2 classes"),
    "no-rows": (f"{HEAD}\n", None, None, "holds no rows"),
    "confidence-floor": (
        "label,predicted,confidence\na,a,0.9\nb,b,0.5\nb,a,0.5\n",
        2,
        "confidence",
        r"not above 1/2",
    ),
    "predicted-outside": (
        "label,predicted,confidence\na,a,0.9\na,b,0.9\n",
        2,
        "predicted",
        "'b' is not one of the 3",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_CSV))
def test_a_bad_csv_row_names_file_row_and_column(tmp_path, case):
    text, row, column, reason = BAD_CSV[case]
    path = tmp_path / "bad.csv"
    path.write_text(text, encoding="utf-8")
    classes = ["a", "c", "d"] if case == "predicted-outside" else None
    with pytest.raises(DatasetError, match=reason) as info:
        read_scores(path, classes=classes)
    err = info.value
    assert isinstance(err, UserInputError)  # the CLI prints one line, exit 2
    assert (err.path, err.row, err.column) == (str(path), row, column)
    assert str(err).startswith(str(path))


BAD_JSONL = {
    "nan": ('{"label": "a", "score:a": NaN, "score:b": 0.5}', 1, "NaN"),
    "duplicate-key": (
        '{"label": "a", "label": "b", "score:a": 1, "score:b": 0}',
        1,
        "duplicate key",
    ),
    "bool": ('{"label": "a", "score:a": true, "score:b": 0}', 1, "must be a number, got bool"),
    "number-label": ('{"label": 3, "score:a": 1, "score:b": 0}', 1, "must be a string, got int"),
    "not-object": ("[1, 2]", 1, "expected a JSON object"),
    "broken": ('{"label": "a",', 1, "not valid JSON"),
    "scores-keys": (
        '{"label": "a", "scores": {"a": 0.5, "b": 0.5}}\n{"label": "a", "scores": {"a": 0.5, "c": 0.5}}',
        2,
        "names other labels than the file's classes",
    ),
    "fields-differ": (
        '{"label": "a", "score:a": 1, "score:b": 0}\n{"label": "a", "score:a": 1, "score:b": 0, "id": "x"}',
        2,
        "same fields as the first row",
    ),
    "array-without-header": (
        '{"label": "a", "scores": [1, 0]}',
        1,
        "needs the classes in a header",
    ),
    "late-header": (
        '{"label": "a", "score:a": 1, "score:b": 0}\n{"format": "hybridroute.scores"}',
        2,
        "must be the first line",
    ),
    "header-format": (
        '{"format": "other"}\n{"label": "a", "score:a": 1, "score:b": 0}',
        0,
        "must be",
    ),
    "header-version": (
        '{"format": "hybridroute.scores", "version": 2}\n{"label": "a", "score:a": 1, "score:b": 0}',
        0,
        "version 2 is not one",
    ),
    "header-fingerprint": (
        '{"format": "hybridroute.scores", "model_fingerprint": "abc"}\n'
        '{"label": "a", "score:a": 1, "score:b": 0}',
        0,
        "64 lowercase hex",
    ),
    "array-length": (
        '{"format": "hybridroute.scores", "classes": ["a", "b"]}\n{"label": "a", "scores": [1]}',
        2,
        "holds 1 scores",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_JSONL))
def test_a_bad_jsonl_line_names_file_and_line(tmp_path, case):
    text, row, reason = BAD_JSONL[case]
    path = tmp_path / "bad.jsonl"
    path.write_text(text + "\n", encoding="utf-8")
    with pytest.raises(DatasetError) as info:
        read_scores(path)
    assert info.value.path == str(path) and info.value.row == row
    if reason is not None:
        assert reason in str(info.value)


def test_bytes_that_are_not_utf8_are_refused_with_their_line(tmp_path):
    path = tmp_path / "s.csv"
    path.write_bytes(b"label,score:a,score:b\na,1,0\n\xff,0,1\n")
    with pytest.raises(DatasetError, match=r"not UTF-8 text \(line 3"):
        read_scores(path)


def test_the_byte_limit_is_enforced(tmp_path, monkeypatch):
    path = per_class_csv(tmp_path / "s.csv")
    monkeypatch.setenv(MAX_SCORES_BYTES_ENV, "100")
    with pytest.raises(DatasetError, match="larger than the limit of 100 bytes"):
        read_scores(path)
    monkeypatch.setenv(MAX_SCORES_BYTES_ENV, "lots")
    with pytest.raises(DatasetError, match=MAX_SCORES_BYTES_ENV):
        read_scores(path)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "s.csv"
    os.mkfifo(fifo)
    errors: list[BaseException] = []

    def read() -> None:
        try:
            read_scores(fifo)
        except BaseException as exc:  # collected for the assertion below
            errors.append(exc)

    worker = threading.Thread(target=read, daemon=True)
    worker.start()
    worker.join(timeout=10)
    assert not worker.is_alive(), "reading a FIFO blocked"
    assert isinstance(errors[0], DatasetError) and "FIFO" in str(errors[0])


@pytest.mark.parametrize("name", ["s.txt", "s", "s.json"])
def test_an_unknown_suffix_is_refused(tmp_path, name):
    path = tmp_path / name
    path.write_text("label\n")
    with pytest.raises(DatasetError, match=r"end it in \.csv, \.jsonl or \.parquet"):
        read_scores(path)


def test_parquet_without_pyarrow_is_refused_clearly(tmp_path, monkeypatch):
    path = _parquet(tmp_path / "s.parquet")
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    with pytest.raises(DatasetError, match="needs pyarrow, which is not installed"):
        read_scores(path)


def test_parquet_columns_of_other_types_and_oversized_data_are_refused(tmp_path, monkeypatch):
    import pyarrow as pa
    import pyarrow.parquet as pq

    nested = tmp_path / "nested.parquet"
    pq.write_table(pa.table({"label": ["a"], "scores": [[0.5, 0.5]]}), nested)
    with pytest.raises(DatasetError, match=r"column 'scores': has Parquet type list"):
        read_scores(nested)
    big = tmp_path / "big.parquet"
    n = 20_000
    columns = {"label": ["a"] * n, "score:a": [1.0] * n, "score:b": [0.0] * n}
    # stored plainly but compressed: a small file whose data expands far past it
    pq.write_table(pa.table(columns), big, use_dictionary=False, compression="gzip")
    monkeypatch.setenv(MAX_SCORES_BYTES_ENV, str(big.stat().st_size + 10))
    with pytest.raises(DatasetError, match="Parquet data expands to"):
        read_scores(big)


def test_parquet_nulls_and_nan_are_refused_with_their_row(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "s.parquet"
    pq.write_table(
        pa.table(
            {
                "label": ["a", "b", "a"],
                "score:a": [1.0, float("nan"), 0.5],
                "score:b": [0.0, 0.5, None],
            }
        ),
        path,
    )
    with pytest.raises(DatasetError, match=r"row 2, column 'score:a': must be a finite number"):
        read_scores(path)


def test_a_parquet_header_declares_the_model(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    header = {"format": "hybridroute.scores", "classes": ["b", "a"], "model_fingerprint": "ab" * 32}
    table = pa.table({"label": ["a"], "score:a": [0.9], "score:b": [0.1]}).replace_schema_metadata(
        {"hybridroute.scores": json.dumps(header)}
    )
    pq.write_table(table, tmp_path / "s.parquet")
    read = read_scores(tmp_path / "s.parquet")
    assert read.classes == ("b", "a") and read.model_fingerprint == "ab" * 32
    np.testing.assert_allclose(read.proba(), [[0.1, 0.9]])
