"""hybridroute._textrows: the one way labelled sets and scores files split text into rows."""

from __future__ import annotations

import csv

import pytest

from hybridroute._textrows import MAX_FIELD_CHARS, csv_rows, jsonl_lines
from hybridroute.exceptions import DatasetError


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a,b\n1,2\n3,4\n", [(0, ["a", "b"]), (1, ["1", "2"]), (2, ["3", "4"])]),
        # a blank line is no row, and is not counted
        ("a,b\n\n1,2\n  \n3,4\n", [(0, ["a", "b"]), (1, ["1", "2"]), (2, ["3", "4"])]),
        # header names stripped; formula escaping undone in names and cells
        (" a , '=b\n'=SUM(A1),x\n", [(0, ["a", "=b"]), (1, ["=SUM(A1)", "x"])]),
        # a one-column file: an empty line is no row, a line of spaces is one blank cell
        ("a\nx\n\n  \ny\n", [(0, ["a"]), (1, ["x"]), (2, ["  "]), (3, ["y"])]),
        # rows are yielded as written, whatever their number of fields
        ("a,b\n1\n1,2,3\n", [(0, ["a", "b"]), (1, ["1"]), (2, ["1", "2", "3"])]),
    ],
    ids=["plain", "blank-lines", "escaped", "one-column", "ragged"],
)
def test_csv_rows(text, expected):
    assert list(csv_rows(text, "f.csv")) == expected


def test_csv_rows_refuses_an_empty_file():
    with pytest.raises(DatasetError, match=r"f\.csv: the file is empty"):
        list(csv_rows("", "f.csv"))


@pytest.mark.parametrize(
    ("text", "row", "match"),
    [
        ("a,b\n1,2\n" + "x" * (MAX_FIELD_CHARS + 1) + ",y\n", 2, "a field is longer than"),
        ('a,b\n"1"x,2\n', 1, "unreadable CSV row"),
    ],
    ids=["field-over-the-limit", "stray-quote"],
)
def test_csv_rows_names_an_unreadable_row(text, row, match):
    with pytest.raises(DatasetError, match=rf"f\.csv, row {row}: .*{match}"):
        list(csv_rows(text, "f.csv", strict=True))


def test_the_field_limit_is_raised_only_while_a_row_is_read():
    before = csv.field_size_limit()
    rows = csv_rows("a,b\n" + "x" * 200_000 + ",y\n1,2\n", "f.csv")
    assert next(rows) == (0, ["a", "b"])
    assert csv.field_size_limit() == before  # a caller that stops early leaves it as it was
    assert next(rows)[1][0] == "x" * 200_000
    assert csv.field_size_limit() == before


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"a": 1}\n{"a": 2}\n', [(1, '{"a": 1}'), (2, '{"a": 2}')]),
        ('{"a": 1}\r\n\r\n  \n{"a": 2}', [(1, '{"a": 1}'), (4, '{"a": 2}')]),
        # split on "\n" only: U+2028 inside a JSON string is no line break
        ('{"a": "x\u2028y"}\n', [(1, '{"a": "x\u2028y"}')]),
        ("", []),
    ],
    ids=["plain", "blank-and-crlf", "u2028", "empty"],
)
def test_jsonl_lines(text, expected):
    assert list(jsonl_lines(text)) == expected
