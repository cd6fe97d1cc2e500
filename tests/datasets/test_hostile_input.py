"""Hostile labelled files: what issue 15 found, as whole classes (readers, NUL, splits).

Every reader of a labelled file is bounded: a FIFO or a device is refused before a byte is
read, a byte limit is enforced while reading, and each JSONL line is parsed strictly.
Tests that could hang or eat memory on a regression run in a daemon thread joined with a
timeout, or in a subprocess with a timeout and an address-space limit.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from hybridroute._labelled_rows import SPLIT_ALIASES, SPLIT_ORDER
from hybridroute.cli import main
from hybridroute.datasets import LabelledSet, _public, load_dataset
from hybridroute.datasets._io import MAX_FILE_BYTES, MAX_FILE_BYTES_ENV, file_byte_limit
from hybridroute.exceptions import DatasetError

from ..hostile import bounded, run_limited

GOOD_ROW = {"id": "g1", "text": "where is my parcel", "label": "a", "split": "train"}
OTHER_ROW = {"id": "g2", "text": "refund please", "label": "b", "split": "test"}


def jsonl(*objs: Any) -> str:
    return "".join((o if isinstance(o, str) else json.dumps(o)) + "\n" for o in objs)


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


# --------------------------------------------------------------------------- readers


@pytest.mark.parametrize("kind", ["csv", "jsonl"])
def test_a_fifo_is_refused_at_once(tmp_path, kind):
    fifo = tmp_path / f"rows.{kind}"
    os.mkfifo(fifo)
    with pytest.raises(DatasetError, match=r"rows\.\w+: is a FIFO .*must be a regular file"):
        bounded(lambda: load_dataset(f"{kind}:{fifo}"), timeout=10)


def test_a_directory_is_refused():
    with pytest.raises(DatasetError, match="is a directory"):
        bounded(lambda: load_dataset("jsonl:/"), timeout=10)


def test_devices_neither_hang_nor_grow_memory():
    # In a subprocess with an address-space limit and a timeout: a regression (reading
    # /dev/zero to the end) fails here instead of taking the test run down with it.
    proc = run_limited(
        "from hybridroute.datasets import load_dataset\n"
        "from hybridroute.exceptions import DatasetError\n"
        "for ref in ('jsonl:/dev/zero', 'csv:/dev/zero', 'csv:/dev/urandom'):\n"
        "    try:\n"
        "        load_dataset(ref)\n"
        "    except DatasetError as exc:\n"
        "        print('refused:', exc)\n",
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.count("refused: /dev/zero: is a character device") == 2
    assert "refused: /dev/urandom: is a character device" in proc.stdout


def test_the_byte_limit_is_enforced_and_can_be_set(write, monkeypatch):
    path = write("big.jsonl", jsonl(GOOD_ROW, OTHER_ROW) * 50)
    size = path.stat().st_size
    assert file_byte_limit() == MAX_FILE_BYTES == 1 << 30
    monkeypatch.setenv(MAX_FILE_BYTES_ENV, str(size - 1))
    with pytest.raises(
        DatasetError,
        match=rf"big\.jsonl: dataset file is larger than the limit of {size - 1:,} bytes "
        rf"\(set {MAX_FILE_BYTES_ENV} to raise it\)",
    ):
        load_dataset(f"jsonl:{path}")
    csv_path = write("big.csv", "text,label\n" + "hello,a\nbye,b\n" * 100)
    monkeypatch.setenv(MAX_FILE_BYTES_ENV, str(csv_path.stat().st_size - 1))
    with pytest.raises(DatasetError, match="larger than the limit"):
        load_dataset(f"csv:{csv_path}")
    monkeypatch.setenv(MAX_FILE_BYTES_ENV, str(size))
    assert len(load_dataset(f"jsonl:{path}", on_error="skip")) == 2  # the others repeat ids
    monkeypatch.delenv(MAX_FILE_BYTES_ENV)
    assert len(load_dataset(f"csv:{csv_path}")) == 200


@pytest.mark.parametrize("value", ["lots", "-5", "0", "1.5", "1e9x"])
def test_a_bad_byte_limit_setting_is_an_error(write, monkeypatch, value):
    path = write("ok.jsonl", jsonl(GOOD_ROW, OTHER_ROW))
    monkeypatch.setenv(MAX_FILE_BYTES_ENV, value)
    with pytest.raises(DatasetError, match=f"{MAX_FILE_BYTES_ENV} must be a positive whole"):
        load_dataset(f"jsonl:{path}")


@pytest.mark.parametrize(
    ("line", "match"),
    [
        # duplicate keys: the last one used to win
        (
            '{"text": "hi there", "label": "a", "facts": {"vip": true}, "facts": {"vip": false}}',
            "duplicate key 'facts'",
        ),
        ('{"text": "hi there", "text": "other", "label": "a"}', "duplicate key 'text'"),
        ('{"text": "hi", "label": "a", "label": "b"}', "duplicate key 'label'"),
        (
            '{"text": "hi", "label": "a", "facts": {"has_permission": false, "has_permission": true}}',
            "duplicate key 'has_permission'",
        ),
        ('{"text": "hi", "label": "a", "split": "test", "split": "train"}', "duplicate key"),
        # nesting
        ('{"text": "hi", "label": "a", "facts": {"x": ' + nested(1000) + "}}", "nested too deeply"),
        ('{"text": "hi", "label": "a", "deep": ' + nested(65) + "}", "nested too deeply"),
        ('{"text": "hi", "label": "a", "tags": ' + nested(5000) + "}", "nested too deeply"),
        # huge integers
        ('{"text": "hi", "label": "a", "attempts": ' + "9" * 5000 + "}", "5000 digits"),
        ('{"text": "hi", "label": "a", "facts": {"n": -' + "1" * 65 + "}}", "65 digits"),
        ('{"text": "hi", "label": ' + "7" * 300 + "}", "300 digits"),
        # non-finite numbers
        ('{"text": "hi", "label": "a", "amount": NaN}', "NaN"),
        ('{"text": "hi", "label": "a", "amount": Infinity}', "Infinity"),
        ('{"text": "hi", "label": "a", "facts": {"amount": -Infinity}}', "-Infinity"),
        ('{"text": "hi", "label": "a", "amount": 1e400}', "too large for a float"),
        # a lone surrogate escape
        ('{"text": "hi \\ud800 there", "label": "a"}', "lone surrogate"),
    ],
)
def test_hostile_jsonl_lines_are_row_errors(write, line, match):
    path = write("h.jsonl", jsonl(GOOD_ROW, OTHER_ROW) + line + "\n")
    with pytest.raises(DatasetError, match=rf"h\.jsonl, row 3: .*{match}"):
        bounded(lambda: load_dataset(f"jsonl:{path}"))
    # the row-error design holds: with on_error="skip" the row is listed and left out
    ds = bounded(lambda: load_dataset(f"jsonl:{path}", on_error="skip"))
    assert len(ds) == 2 and [s.row for s in ds.skipped] == [3]
    assert ds.skipped[0].column is None


def test_undecodable_bytes_are_still_named_by_row_and_column(write):
    path = write(
        "b.jsonl",
        jsonl(GOOD_ROW, OTHER_ROW).encode()
        + b'{"id": "c", "text": "caf\xe9", "label": "a", "split": "train"}\n',
    )
    with pytest.raises(
        DatasetError, match=r"row 3, column 'text': the text holds bytes that are not valid UTF-8"
    ):
        load_dataset(f"jsonl:{path}")


@pytest.mark.parametrize(
    ("cell", "match"),
    [
        ('"{""a"": 1, ""a"": 2}"', "duplicate key 'a'"),
        ('"[{""k"": true, ""k"": false}]"', "duplicate key 'k'"),
        (nested(1000), "nested too deeply"),
        ('"{""x"": ' + nested(70) + '}"', "nested too deeply"),
        ("9" * 5000, "5,000 digits"),
        ("-" + "1" * 65, "65 digits"),
        ("1e400", "too large for a float"),
        ("-9" * 1 + "9" * 400 + ".5", "too large for a float"),
        ('"[1, NaN]"', "NaN"),
        ('"{""x"": Infinity}"', "Infinity"),
    ],
)
def test_hostile_csv_fact_cells_are_row_errors(write, cell, match):
    # the other rows leave the fact empty, so no type mismatch can be what refuses the cell
    path = write("h.csv", f"text,label,extra\nhello,a,\nbye,b,\nagain,a,{cell}\n")
    with pytest.raises(DatasetError, match=rf"h\.csv, row 3, column 'extra': .*{match}"):
        bounded(lambda: load_dataset(f"csv:{path}"))


@pytest.mark.parametrize(
    "cell",
    [
        "[not json",  # text that merely starts with a bracket
        "{also not}",
        "0" + "1" * 80,  # a code with a leading zero stays text
        "nan",  # a word, not a number
    ],
)
def test_csv_cells_that_are_not_json_or_numbers_stay_text(write, cell):
    path = write("t.csv", f"text,label,extra\nhello,a,x\nbye,b,y\nagain,a,{cell}\n")
    ds = load_dataset(f"csv:{path}")
    assert ds.facts(2) == {"extra": cell} and ds.fact_types == {"extra": "str"}


def test_a_declared_text_fact_keeps_bracketed_cells_as_written(write):
    cell = nested(1000)
    path = write("t.csv", f"text,label,code\nhello,a,x\nbye,b,{cell}\n")
    ds = bounded(lambda: load_dataset(f"csv:{path}", fact_types={"code": "str"}))
    assert ds.facts(1) == {"code": cell}


@pytest.mark.parametrize(
    "cell",
    ['"{""a"": 1, ""a"": 2}"', nested(500), '"[1, NaN]"'],
)
def test_hostile_csv_annotation_cells_are_row_errors(write, cell):
    path = write("a.csv", f"text,label,evidence\nhello,a,\nbye,b,{cell}\n")
    with pytest.raises(DatasetError, match=r"a\.csv, row 2, column 'evidence'"):
        bounded(lambda: load_dataset(f"csv:{path}"))


# --------------------------------------------------------------------------- public sets


def _clinc_dir(tmp_path: Path, text: str) -> Path:
    (tmp_path / "clinc150").mkdir(parents=True)
    (tmp_path / "clinc150" / "data_full.json").write_text(text, encoding="utf-8")
    return tmp_path


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ('{"train": [["hi", "a"]], "train": [["bye", "b"]]}', "duplicate key 'train' .*line 1"),
        ('{\n"train": [["hi", "a"]],\n"val": [],\n"val": []}', "duplicate key 'val' .*line 4"),
        ('{"train": ' + nested(1000) + "}", "nested too deeply"),
        ('{"train": [["hi", ' + "1" * 5000 + "]]}", "5000 digits"),
        ('{"train": [["hi", NaN]]}', "NaN"),
    ],
)
def test_clinc_data_file_is_parsed_strictly(tmp_path, text, match):
    ddir = _clinc_dir(tmp_path, text)
    with pytest.raises(DatasetError, match=rf"data_full\.json: .*{match}"):
        bounded(lambda: load_dataset("clinc150", data_dir=ddir, download=False))


def test_clinc_data_file_fifo_and_limit(tmp_path, monkeypatch):
    (tmp_path / "clinc150").mkdir()
    fifo = tmp_path / "clinc150" / "data_full.json"
    os.mkfifo(fifo)
    # passed over (never opened): not a file of the data directory
    with pytest.raises(DatasetError, match=r"data_full\.json \(not a regular file\)"):
        bounded(lambda: _public.load_clinc150(data_dir=tmp_path, download=False), timeout=10)
    # and refused if it is reached anyway (a file replaced by a FIFO after the check)
    monkeypatch.setattr(_public, "locate", lambda *a, **k: (fifo, str(fifo)))
    with pytest.raises(DatasetError, match=r"data_full\.json: is a FIFO"):
        bounded(lambda: _public.load_clinc150(data_dir=tmp_path, download=False), timeout=10)
    monkeypatch.undo()
    ok = tmp_path / "ok"
    _clinc_dir(ok, json.dumps({"train": [["hello", "a"]] * 100}))
    monkeypatch.setenv(MAX_FILE_BYTES_ENV, "1000")
    with pytest.raises(DatasetError, match="larger than the limit of 1,000 bytes"):
        load_dataset("clinc150", data_dir=ok, download=False)


def test_banking77_csv_fifo_is_refused(tmp_path):
    (tmp_path / "banking77").mkdir()
    os.mkfifo(tmp_path / "banking77" / "train.csv")
    (tmp_path / "banking77" / "test.csv").write_text("text,category\nhi,a\n")
    with pytest.raises(DatasetError, match="is not available and downloads are off"):
        bounded(lambda: _public.load_banking77(data_dir=tmp_path, download=False), timeout=10)
    with pytest.raises(DatasetError, match=r"train\.csv: is a FIFO"):
        bounded(lambda: _public.read_csv(tmp_path / "banking77" / "train.csv"), timeout=10)


def test_a_cached_file_that_is_not_regular_is_not_trusted(tmp_path, monkeypatch):
    # A FIFO in the cache: it is passed over (never read), and with downloads off the
    # error says where it looked.
    cache = tmp_path / "cache"
    monkeypatch.setenv("HYBRIDROUTE_CACHE_DIR", str(cache))
    target = cache / "datasets" / "clinc150" / "data_full.json"
    target.parent.mkdir(parents=True)
    os.mkfifo(target)
    assert bounded(lambda: _public._sha256_file(target), timeout=10) is None
    with pytest.raises(DatasetError, match="not available"):
        bounded(lambda: load_dataset("clinc150", data_dir=tmp_path / "none", download=False))


def test_an_oversized_cached_file_is_not_hashed_whole(tmp_path, monkeypatch):
    big = tmp_path / "big.json"
    big.write_bytes(b"x" * 2048)
    monkeypatch.setattr(_public, "MAX_DOWNLOAD_BYTES", 1024)
    assert _public._sha256_file(big) is None


# --------------------------------------------------------------------------- NUL


@pytest.mark.parametrize(
    ("row", "column", "match"),
    [
        ({"text": "delete my\x00 data", "label": "a"}, "text", "the text holds a NUL character"),
        ({"text": "\x00", "label": "a"}, "text", "NUL character at character 0"),
        ({"text": "hi", "label": "a\x00"}, "label", "the label holds a NUL"),
        ({"text": "hi", "label": "\x00b"}, "label", "the label holds a NUL"),
        ({"id": "x\x00", "text": "hi", "label": "a"}, "id", "the id holds a NUL"),
        ({"text": "hi", "label": "a", "split": "train\x00"}, "split", "the split holds a NUL"),
        (
            {"text": "hi", "label": "a", "facts": {"action": "delete_account_data\x00"}},
            "action",
            "the value holds a NUL",
        ),
        ({"text": "hi", "label": "a", "action": "x\x00"}, "action", "the value holds a NUL"),
        (
            {"text": "hi", "label": "a", "facts": {"fields": ["email", "e\x00"]}},
            "fields",
            "the value holds a NUL",
        ),
        ({"text": "hi", "label": "a", "facts": {"m": {"k": "\x00"}}}, "m", "the value holds"),
        ({"text": "hi", "label": "a", "facts": {"m": {"k\x00": 1}}}, "m", r"\(a key\) holds"),
        ({"text": "hi", "label": "a", "facts": {"f\x00": 1}}, "f\\x00", "fact name holds"),
        ({"text": "hi", "label": "a", "next_step": "answer\x00"}, "next_step", "NUL"),
        ({"text": "hi", "label": "a", "tags": ["t\x00"]}, "tags", "NUL"),
    ],
)
def test_nul_is_refused_in_jsonl(write, row, column, match):
    path = write("n.jsonl", jsonl(GOOD_ROW, OTHER_ROW, {"id": "n", "split": "train", **row}))
    at = rf"n\.jsonl, row 3, column '{re.escape(column)}': "
    with pytest.raises(DatasetError, match=at + f".*{match}"):
        load_dataset(f"jsonl:{path}")


@pytest.mark.parametrize(
    ("line", "column"),
    [
        ("he\x00llo,a,1,x", "text"),
        ("hello,a\x00,1,x", "label"),
        ("hello,a,1\x00,x", "attempts"),
        ("hello,a,1,x\x00", "action"),
        ('"hello\x00 there",a,1,x', "text"),
    ],
)
def test_nul_is_refused_in_csv(write, line, column):
    path = write("n.csv", f"text,label,attempts,action\nfine,b,0,y\n{line}\nok,a,2,z\n")
    with pytest.raises(DatasetError, match=rf"n\.csv, row 2, column '{column}': .*NUL"):
        load_dataset(f"csv:{path}")
    ds = load_dataset(f"csv:{path}", on_error="skip")
    assert ds.skipped[0].row == 2 and "NUL" in ds.skipped[0].reason


def test_nul_in_a_csv_header_is_refused(write):
    path = write("h.csv", "text,label,act\x00ion\nhi,a,x\nho,b,y\n")
    with pytest.raises(DatasetError, match=r"row 0, column 'act\\x00ion': the header holds a NUL"):
        load_dataset(f"csv:{path}")


@pytest.mark.parametrize(
    ("column", "value", "match"),
    [
        ("text", "hi\x00", "NUL"),
        ("label", "b\x00", "NUL"),
        ("action", "go\x00", "NUL"),
        ("text", "bad \ud800 text", "lone surrogate"),
    ],
)
def test_nul_and_lone_surrogates_are_refused_in_frames(column, value, match):
    cols: dict[str, list[str]] = {
        "text": ["hello", "bye"],
        "label": ["a", "b"],
        "action": ["x", "y"],
    }
    cols[column][1] = value
    df = pd.DataFrame({k: pd.Series(v, dtype=object) for k, v in cols.items()})
    with pytest.raises(DatasetError, match=rf"frame, row 2, column '{column}': .*{match}"):
        LabelledSet.from_frame(df)


# --------------------------------------------------------------------------- splits


@pytest.mark.parametrize("name", ["bogus", "holdout", "training", "Test2", "tests", "eval"])
@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_unknown_split_names_are_refused(write, name, fmt):
    rows = [GOOD_ROW, OTHER_ROW, {"id": "x", "text": "again", "label": "a", "split": name}]
    if fmt == "csv":
        body = "id,text,label,split\n" + "".join(
            f"{r['id']},{r['text']},{r['label']},{r['split']}\n" for r in rows
        )
    else:
        body = jsonl(*rows)
    path = write(f"s.{fmt}", body)
    with pytest.raises(
        DatasetError,
        match=rf"s\.{fmt}, row 3, column 'split': unknown split '{name}'; the known splits "
        r"are train, validation, calibration, test \(or val, valid, dev, calib\)",
    ):
        load_dataset(f"{fmt}:{path}")


def test_unknown_split_rows_are_listed_when_skipping(write):
    rows = [GOOD_ROW, OTHER_ROW] + [
        {"id": f"x{i}", "text": f"t{i}", "label": "a", "split": s}
        for i, s in enumerate(["bogus", "train", "nope"])
    ]
    ds = load_dataset(f"jsonl:{write('s.jsonl', jsonl(*rows))}", on_error="skip")
    assert [(s.row, s.column) for s in ds.skipped] == [(3, "split"), (5, "split")]
    assert ds.splits == {"train": 2, "test": 1}


@pytest.mark.parametrize(
    ("given", "canonical"),
    [(s, s) for s in SPLIT_ORDER]
    + [(a, c) for a, c in SPLIT_ALIASES.items()]
    + [(" Train ", "train"), ("VAL", "validation"), ("Calib", "calibration")],
)
def test_known_splits_and_aliases_still_load(write, given, canonical):
    rows = [GOOD_ROW, OTHER_ROW, {"id": "x", "text": "again", "label": "a", "split": given}]
    ds = load_dataset(f"jsonl:{write('k.jsonl', jsonl(*rows))}")
    assert ds.frame["split"].tolist()[2] == canonical


@pytest.mark.parametrize("name", ["bogus", "val", "holdout"])
def test_with_splits_takes_only_known_names(write, name):
    path = write("u.csv", "text,label\nhi,a\nho,b\nhu,a\nhe,b\n")
    ds = load_dataset(f"csv:{path}", auto_split=False)
    with pytest.raises(ValueError, match=f"unknown split '{name}' in fractions; the known"):
        ds.with_splits({"train": 0.5, name: 0.5}, seed=0)


def test_validate_reports_a_bogus_split_in_one_line(capsys, write):
    path = write("v.csv", "text,label,split\nhi,a,train\nho,b,bogus\n")
    assert main(["datasets", "validate", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "v.csv, row 2, column 'split': unknown split 'bogus'" in err


@pytest.mark.parametrize(
    ("content", "match"),
    [
        ("text,label\nhi,a\nh\x00o,b\n", "row 2, column 'text': the text holds a NUL"),
        ('{"text": "hi", "label": "a", "facts": {"x": 1}, "facts": {"x": 2}}\n', "duplicate key"),
        ('{"text": "hi", "label": "a", "x": ' + nested(1000) + "}\n", "nested too deeply"),
    ],
)
def test_validate_errors_are_one_line_exit_2(capsys, write, content, match):
    path = write("v.csv" if content.startswith("text") else "v.jsonl", content)
    assert main(["datasets", "validate", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("error: ") and match in err


def test_validate_a_fifo_in_a_subprocess(tmp_path):
    fifo = tmp_path / "rows.jsonl"
    os.mkfifo(fifo)
    proc = subprocess.run(
        [sys.executable, "-m", "hybridroute", "datasets", "validate", str(fifo)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"error: {fifo}: is a FIFO (named pipe); a dataset file must be a regular file"
    ]
