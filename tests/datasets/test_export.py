"""``LabelledSet.export``: spreadsheet-formula escaping, exact round trips, scrubbing."""

from __future__ import annotations

import csv
import json
import os
import threading

import pytest

from hybridroute._csv import escape_formula
from hybridroute.cli import main
from hybridroute.datasets import LabelledSet, load_dataset
from hybridroute.exceptions import DatasetError

# Cells a spreadsheet would run, one per trigger, and the apostrophe-prefixed forms.
FORMULAS = [
    "=cmd|' /C calc'!A0",
    '=HYPERLINK("http://evil.example","click")',
    "+1+cmd|' /C notepad'!A0",
    "-2+3+cmd|' /C calc'!A0",
    "@SUM(1+9)*cmd|' /C calc'!A0",
    "\t=1+2",
    "\r=3+4",
    "'=already quoted",
    "''+twice",
]
TRIGGERS = ("=", "+", "-", "@", "\t", "\r")


def _rows() -> list[dict]:
    rows = []
    for i, f in enumerate(FORMULAS):
        rows.append(
            {
                "id": f"=id{i}" if i % 2 else f"r{i}",
                "text": f,
                "label": "=label" if i % 3 == 0 else "b",
                "split": "train" if i % 2 else "test",
                "facts": {
                    "action": f"-{f}",
                    "note": f,
                    "fields": [f, "plain"],
                    "amount": -5 - i,
                    "ratio": -0.5,
                },
                "next_step": "@answer" if i % 2 else "answer",
                "tags": [f],
            }
        )
    return rows


@pytest.fixture
def formula_set(write) -> LabelledSet:
    path = write("f.jsonl", "".join(json.dumps(r) + "\n" for r in _rows()))
    return load_dataset(f"jsonl:{path}")


def _cells(path) -> list[list[str]]:
    with open(path, encoding="utf-8", newline="") as fh:
        return list(csv.reader(fh))


def test_no_csv_cell_starts_like_a_formula(formula_set, tmp_path):
    out = formula_set.export(tmp_path / "f.csv")
    rows = _cells(out)
    assert rows[0] == [
        "text",
        "label",
        "split",
        "action",
        "note",
        "fields",
        "amount",
        "ratio",
        "next_step",
        "tags",
        "id",
    ]
    numbers = {rows[0].index("amount"), rows[0].index("ratio")}
    for row in rows[1:]:
        for j, cell in enumerate(row):
            if j in numbers:
                assert float(cell) < 0  # a number, which a spreadsheet reads as one
                continue
            assert not cell.startswith(TRIGGERS), (rows[0][j], cell)
    text_col = rows[0].index("text")
    assert [r[text_col] for r in rows[1:]] == [escape_formula(f) for f in FORMULAS]
    assert rows[1][text_col] == "'=cmd|' /C calc'!A0"
    assert rows[8][text_col] == "''=already quoted" and rows[9][text_col] == "'''+twice"


@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_formula_like_values_round_trip_to_the_same_fingerprint(formula_set, tmp_path, suffix):
    out = formula_set.export(tmp_path / f"f{suffix}")
    back = load_dataset(out)
    assert back.fingerprint == formula_set.fingerprint
    assert back.texts == FORMULAS
    assert back.frame.equals(formula_set.frame)
    assert back.facts(0) == formula_set.facts(0)
    assert back.facts(0)["note"] == FORMULAS[0] and back.facts(0)["amount"] == -5


@pytest.mark.parametrize("name", ["=x", "+y", "@z", "-w"])
def test_formula_like_fact_names_round_trip(write, tmp_path, name):
    rows = [
        {"text": "hi", "label": "a", "facts": {name: "=1"}},
        {"text": "ho", "label": "b", "facts": {name: "+2"}},
    ]
    ds = load_dataset(f"jsonl:{write('n.jsonl', ''.join(json.dumps(r) + chr(10) for r in rows))}")
    out = ds.export(tmp_path / "n.csv")
    assert _cells(out)[0][2] == "'" + name
    back = load_dataset(out)
    assert back.fact_columns == (name,) and back.fingerprint == ds.fingerprint


def test_a_hand_written_formula_cell_loads_as_written(write):
    # a CSV written elsewhere with a bare formula keeps it (it is data; only our escaping
    # is undone)
    path = write("h.csv", "text,label\n=1+2,a\n'=3+4,b\n")
    assert load_dataset(path).texts == ["=1+2", "=3+4"]


def test_export_refuses_a_fifo_and_leaves_no_partial_file(formula_set, tmp_path):
    fifo = tmp_path / "out.csv"
    os.mkfifo(fifo)
    box: dict = {}

    def run() -> None:
        try:
            formula_set.export(fifo)
        except DatasetError as exc:
            box["error"] = exc

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(10)
    assert not t.is_alive(), "export blocked on a FIFO"
    assert "is not a regular file" in str(box["error"])
    (tmp_path / "d.csv").mkdir()
    with pytest.raises(DatasetError, match=r"d\.csv: is a directory; export writes a regular file"):
        formula_set.export(tmp_path / "d.csv")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.csv", "f.jsonl", "out.csv"]


def test_export_replaces_an_existing_file_whole(formula_set, tmp_path):
    (tmp_path / "sub").mkdir()
    for suffix in (".jsonl", ".csv"):
        out = tmp_path / "sub" / f"o{suffix}"
        out.write_text("old content\n" * 1000)
        formula_set.export(out)
        assert load_dataset(out).fingerprint == formula_set.fingerprint
    assert sorted(p.name for p in (tmp_path / "sub").iterdir()) == ["o.csv", "o.jsonl"]


@pytest.mark.parametrize("text", ["a\rb", "line one\r\nline two", "ends with\r", "\n\nlead"])
def test_texts_with_line_breaks_round_trip_through_csv(write, tmp_path, text):
    rows = [{"text": text, "label": "a"}, {"text": "other", "label": "b"}]
    ds = load_dataset(f"jsonl:{write('r.jsonl', ''.join(json.dumps(r) + chr(10) for r in rows))}")
    back = load_dataset(ds.export(tmp_path / "r.csv"))
    assert back.texts == [text, "other"] and back.fingerprint == ds.fingerprint


# --------------------------------------------------------------------------- scrubbing

KEY = "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0K1l2"
ENV_SECRET = "hunter2-very-secret-value"


@pytest.fixture
def secret_set(write, monkeypatch) -> LabelledSet:
    monkeypatch.setenv("SUPPORT_API_TOKEN", ENV_SECRET)
    rows = [
        {
            "text": f"my key is {KEY} please help",
            "label": "a",
            "facts": {"note": "ok", "api_key": "x1", "n": 1},
        },
        {
            "text": f"password {ENV_SECRET} leaked",
            "label": "b",
            "facts": {"note": f"see {KEY}", "api_key": "x2", "n": 2},
        },
        {
            "text": "nothing to see",
            "label": "a",
            "facts": {"note": "fine", "api_key": None, "n": 3},
        },
        {
            "text": "bearer here",
            "label": "b",
            "facts": {"note": "", "api_key": "x3", "n": 4},
            "evidence": [ENV_SECRET],
        },
    ]
    path = write("s.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    return load_dataset(f"jsonl:{path}")


@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_scrubbed_export_holds_no_secret(secret_set, tmp_path, suffix):
    out = secret_set.export(tmp_path / f"s{suffix}", scrub=True)
    body = out.read_text(encoding="utf-8")
    assert KEY not in body and ENV_SECRET not in body
    assert "x1" not in body and "x2" not in body  # values of a credential-named fact
    assert "[REDACTED]" in body
    back = load_dataset(out)
    assert back.texts[0] == "my key is [REDACTED] please help"
    assert back.texts[2] == "nothing to see"
    assert back.facts(0)["api_key"] == "[REDACTED]" and back.facts(2)["api_key"] is None
    assert back.facts(1)["note"] == "see [REDACTED]" and back.facts(1)["n"] == 2
    # the fingerprint changes, and is the scrubbed set's
    scrubbed = secret_set.scrubbed()
    assert back.fingerprint == scrubbed.fingerprint != secret_set.fingerprint
    assert scrubbed.provenance["steps"][-1] == {"op": "scrub", "cells": 7}
    assert secret_set.texts[0].endswith("please help") and KEY in secret_set.texts[0]


def test_unscrubbed_export_is_exact(secret_set, tmp_path):
    out = secret_set.export(tmp_path / "s.csv")
    assert KEY in out.read_text(encoding="utf-8")
    assert load_dataset(out).fingerprint == secret_set.fingerprint


def test_scrubbing_a_clean_set_changes_nothing(formula_set):
    clean = formula_set.scrubbed()
    assert clean.fingerprint == formula_set.fingerprint
    assert clean.provenance["steps"][-1] == {"op": "scrub", "cells": 0}


def test_a_whole_replaced_numeric_fact_becomes_text(write, monkeypatch):
    rows = [
        {"text": "a", "label": "a", "facts": {"token": 5}},
        {"text": "b", "label": "b", "facts": {"token": 7}},
    ]
    ds = load_dataset(f"jsonl:{write('t.jsonl', ''.join(json.dumps(r) + chr(10) for r in rows))}")
    assert ds.fact_types == {"token": "int"}
    scrubbed = ds.scrubbed()
    assert scrubbed.fact_types == {"token": "str"}
    assert scrubbed.facts(0) == {"token": "[REDACTED]"}


def test_cli_export_scrub(capsys, secret_set, tmp_path):
    src = tmp_path / "src.jsonl"
    secret_set.export(src)
    out = tmp_path / "clean.csv"
    assert main(["datasets", "export", f"jsonl:{src}", "--out", str(out), "--scrub"]) == 0
    line = capsys.readouterr().out.strip()
    scrubbed = secret_set.scrubbed()
    assert line == (
        f"wrote 4 rows of src to {out} (fingerprint {scrubbed.fingerprint}; scrubbed 7 "
        f"cell(s), fingerprint was {secret_set.fingerprint})"
    )
    assert KEY not in out.read_text(encoding="utf-8")
    assert load_dataset(out).fingerprint == scrubbed.fingerprint


def test_cli_export_of_formulas_round_trips(capsys, formula_set, tmp_path):
    src = tmp_path / "src.jsonl"
    formula_set.export(src)
    out = tmp_path / "out.csv"
    assert main(["datasets", "export", f"jsonl:{src}", "-o", str(out)]) == 0
    assert f"(fingerprint {formula_set.fingerprint})" in capsys.readouterr().out
    assert main(["datasets", "validate", str(out)]) == 0
    assert formula_set.fingerprint in capsys.readouterr().out


def test_cli_export_to_a_fifo_is_one_line_exit_2(capsys, formula_set, tmp_path):
    src = tmp_path / "src.jsonl"
    formula_set.export(src)
    fifo = tmp_path / "out.csv"
    os.mkfifo(fifo)
    box: dict = {}
    t = threading.Thread(
        target=lambda: box.setdefault(
            "rc", main(["datasets", "export", str(src), "-o", str(fifo)])
        ),
        daemon=True,
    )
    t.start()
    t.join(20)
    assert not t.is_alive(), "export blocked on a FIFO"
    assert box["rc"] == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "is not a regular file" in err
