"""Generic CSV / JSONL files: every bad input names file, row and column; skip mode reports."""

from __future__ import annotations

import json
import re

import pytest

from hybridroute.datasets import load_dataset
from hybridroute.exceptions import DatasetError, UserInputError


def where(row: int, column: str) -> str:
    """The location part of a DatasetError message, as a regex."""
    return rf"row {row}, column '{re.escape(column)}': "


# (content, options, row, column, message) -- CSV rows count from 1 after the header (row 0)
CSV_CASES = {
    "missing label column": ("text,category\nhi,a\nho,b\n", {}, 0, "label", "missing column"),
    "missing text column": ("utterance,label\nhi,a\nho,b\n", {}, 0, "text", "missing column"),
    "missing renamed column": (
        "text,label\nhi,a\nho,b\n",
        {"label_column": "intent"},
        0,
        "intent",
        "missing column",
    ),
    "missing split column": (
        "text,label\nhi,a\nho,b\n",
        {"split_column": "fold"},
        0,
        "fold",
        "missing column",
    ),
    "empty text": ("text,label\nhello,a\n,b\n", {}, 2, "text", "empty or whitespace only"),
    "whitespace text": (
        'text,label\nhello,a\n"  \t ",b\n',
        {},
        2,
        "text",
        "empty or whitespace only",
    ),
    "missing label": ("text,label\nhello,a\nthere,\n", {}, 2, "label", "missing label"),
    "label outside set": (
        "text,label\nhello,a\nthere,zzz\n",
        {"label_set": ["a", "b"]},
        2,
        "label",
        r"label 'zzz' is not in the declared label set \(a, b\)",
    ),
    "duplicate id": (
        "id,text,label\nx1,hello,a\nx2,hi,b\nx1,hey,b\n",
        {},
        3,
        "id",
        r"duplicate id 'x1' \(first given at row 1\)",
    ),
    "same text two labels": (
        "text,label\nReset my PIN,a\nsomething else,b\nreset  my pin,b\n",
        {},
        3,
        "label",
        r"the same text is labelled 'a' at row 1 and 'b' here",
    ),
    "too long": (
        "text,label\nhello,a\n" + "x" * 10_001 + ",b\n",
        {},
        2,
        "text",
        r"10,001 characters long \(limit 10,000\)",
    ),
    "too long custom limit": (
        "text,label\nhello,a\nabcdef,b\n",
        {"max_text_chars": 5},
        2,
        "text",
        r"6 characters long \(limit 5\)",
    ),
    "wrong fact type": (
        "text,label,attempts\nq1,a,1\nq2,b,2\nq3,a,three\nq4,b,0\n",
        {},
        3,
        "attempts",
        "expected int like the other rows of this column, got str 'three'",
    ),
    "wrong bool fact": (
        "text,label,ok\nq1,a,true\nq2,b,false\nq3,a,7\n",
        {},
        3,
        "ok",
        "expected bool",
    ),
    "wrong declared fact": (
        "text,label,amount\nq1,a,1.5\nq2,b,lots\n",
        {"fact_types": {"amount": "number"}},
        2,
        "amount",
        "expected number, got str 'lots'",
    ),
    "declared fact absent": (
        "text,label\nq1,a\nq2,b\n",
        {"fact_types": {"amount": "number"}},
        0,
        "amount",
        "not a column",
    ),
    "too few fields": (
        "text,label,attempts\nq1,a,1\nq2,b\n",
        {},
        2,
        "attempts",
        "2 fields, the header 3",
    ),
    "too many fields": ("text,label\nq1,a\nq2,b,extra\n", {}, 2, "label", "3 fields, the header 2"),
    "reserved fact name": (
        "utterance,text,label\nq1,x,a\nq2,y,b\n",
        {"text_column": "utterance"},
        0,
        "text",
        "cannot be named 'text'",
    ),
    "missing split value": (
        "text,label,split\nq1,a,train\nq2,b,\n",
        {},
        2,
        "split",
        "missing split",
    ),
}


@pytest.mark.parametrize("case", list(CSV_CASES), ids=list(CSV_CASES))
def test_csv_errors_name_file_row_and_column(write, case):
    content, options, row, column, message = CSV_CASES[case]
    path = write("bad.csv", content)
    with pytest.raises(
        DatasetError, match=re.escape(str(path)) + ", " + where(row, column) + ".*" + message
    ) as info:
        load_dataset(f"csv:{path}", **options)
    err = info.value
    assert (err.path, err.row, err.column) == (str(path), row, column)
    assert isinstance(err, UserInputError)


@pytest.mark.parametrize(
    ("content", "column"),
    [
        (b"text,label\nfine,a\ncaf\xe9 au lait,b\n", "text"),  # latin-1 byte
        (b"text,label,note\nfine,a,ok\nalso fine,b,\xff\xfe\n", "note"),
        (b"text,label\nfine,a\nalso fine,\x80b\n", "label"),
    ],
    ids=["in text", "in a fact column", "in label"],
)
def test_non_utf8_bytes_name_row_and_column(write, content, column):
    path = write("latin.csv", content)
    with pytest.raises(DatasetError, match=where(2, column) + ".*not valid UTF-8"):
        load_dataset(f"csv:{path}")


def _jsonl(*rows: object) -> str:
    return "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows)


GOOD = {"text": "hello", "label": "a"}
GOOD2 = {"text": "bye", "label": "b"}

JSONL_CASES = {
    "missing text": (_jsonl(GOOD, {"label": "b"}), {}, 2, "text", "no text: the field is missing"),
    "text not a string": (
        _jsonl(GOOD, {"text": 42, "label": "b"}),
        {},
        2,
        "text",
        "expected a string, got int 42",
    ),
    "empty text": (
        _jsonl(GOOD, {"text": " ", "label": "b"}),
        {},
        2,
        "text",
        "empty or whitespace only",
    ),
    "missing label": (_jsonl(GOOD, {"text": "bye"}), {}, 2, "label", "missing label"),
    "null label": (_jsonl(GOOD, {"text": "bye", "label": None}), {}, 2, "label", "missing label"),
    "label a list": (
        _jsonl(GOOD, {"text": "bye", "label": ["b"]}),
        {},
        2,
        "label",
        "expected a string label, got list",
    ),
    "label outside set": (
        _jsonl(GOOD, GOOD2),
        {"label_set": {"a"}},
        2,
        "label",
        "not in the declared label set",
    ),
    "duplicate id": (
        _jsonl({**GOOD, "id": 7}, {**GOOD2, "id": "7"}),
        {},
        2,
        "id",
        "duplicate id '7'",
    ),
    "same text two labels": (
        _jsonl(GOOD, GOOD2, {"text": "HELLO", "label": "b"}),
        {},
        3,
        "label",
        "labelled 'a' at row 1 and 'b' here",
    ),
    "too long": (
        _jsonl(GOOD, {"text": "y" * 20_000, "label": "b"}),
        {},
        2,
        "text",
        "20,000 characters long",
    ),
    "nested fact wrong type": (
        _jsonl(
            {**GOOD, "facts": {"attempts": 1}},
            {**GOOD2, "facts": {"attempts": 2}},
            {"text": "third", "label": "a", "facts": {"attempts": "3"}},
        ),
        {},
        3,
        "attempts",
        "expected int like the other rows of this column, got str '3'",
    ),
    "top-level fact wrong type": (
        _jsonl(
            {**GOOD, "vip": True},
            {**GOOD2, "vip": False},
            {"text": "c", "label": "a", "vip": "yes"},
        ),
        {},
        3,
        "vip",
        "expected bool",
    ),
    "declared list fact": (
        _jsonl({**GOOD, "facts": {"missing": ["email"]}}, {**GOOD2, "facts": {"missing": "email"}}),
        {"fact_types": {"missing": "list[str]"}},
        2,
        "missing",
        "expected list\\[str\\], got str 'email'",
    ),
    "facts not an object": (
        _jsonl(GOOD, {**GOOD2, "facts": [1, 2]}),
        {},
        2,
        "facts",
        "expected a JSON object of facts",
    ),
    "fact given twice": (
        _jsonl(GOOD, {**GOOD2, "amount": 3, "facts": {"amount": 4}}),
        {},
        2,
        "amount",
        "both at the top level and inside 'facts'",
    ),
    "tags not a list": (
        _jsonl(GOOD, {**GOOD2, "tags": "x"}),
        {},
        2,
        "tags",
        "expected a list of strings",
    ),
    "missing split": (_jsonl({**GOOD, "split": "train"}, GOOD2), {}, 2, "split", "missing split"),
}


@pytest.mark.parametrize("case", list(JSONL_CASES), ids=list(JSONL_CASES))
def test_jsonl_errors_name_file_row_and_column(write, case):
    content, options, row, column, message = JSONL_CASES[case]
    path = write("bad.jsonl", content)
    with pytest.raises(
        DatasetError, match=re.escape(str(path)) + ", " + where(row, column) + ".*" + message
    ) as info:
        load_dataset(f"jsonl:{path}", **options)
    assert (info.value.row, info.value.column) == (row, column)


def test_jsonl_non_utf8_bytes_name_row_and_column(write):
    good = json.dumps(GOOD).encode()
    bad = b'{"text": "caf\xe9", "label": "b"}'
    path = write("latin.jsonl", good + b"\n" + bad + b"\n")
    with pytest.raises(DatasetError, match=where(2, "text") + ".*not valid UTF-8"):
        load_dataset(f"jsonl:{path}")


def test_jsonl_row_numbers_are_line_numbers(write):
    path = write("gaps.jsonl", _jsonl(GOOD) + "\n\n" + _jsonl({"text": "", "label": "b"}))
    with pytest.raises(DatasetError, match=where(4, "text")):
        load_dataset(f"jsonl:{path}")


@pytest.mark.parametrize(
    ("content", "row", "message"),
    [
        ('{"text": "a", "label": "b"\n', 1, "not valid JSON"),
        ("[1, 2]\n", 1, "expected a JSON object, got list"),
    ],
)
def test_jsonl_unreadable_lines(write, content, row, message):
    path = write("x.jsonl", content)
    with pytest.raises(DatasetError, match=rf"row {row}: {message}"):
        load_dataset(f"jsonl:{path}")


# ------------------------------------------------------------------------- whole-file problems


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("empty.csv", "", "the file is empty"),
        ("blank.csv", "\n \n", "the file is empty"),
        ("empty.jsonl", "", "the file is empty"),
        ("header.csv", "text,label\n", "the file has a header but no data rows"),
        (
            "one.csv",
            "text,label\nhello,a\nhi,a\n",
            "every one of the 2 rows has the label 'a'; a labelled set needs at least two classes",
        ),
        ("one.jsonl", _jsonl(GOOD, {"text": "x", "label": "a"}), "at least two classes"),
    ],
)
def test_whole_file_problems_have_their_own_messages(write, name, content, message):
    path = write(name, content)
    with pytest.raises(DatasetError, match=re.escape(message)) as info:
        load_dataset(str(path))
    assert info.value.path == str(path)
    assert info.value.row is None


def test_one_class_error_names_the_label_column(write):
    path = write("one.csv", "text,intent\nhello,a\nhi,a\n")
    with pytest.raises(DatasetError, match=r"column 'intent': every one") as info:
        load_dataset(f"csv:{path}", label_column="intent")
    assert info.value.column == "intent"


def test_missing_file(tmp_path):
    with pytest.raises(DatasetError, match="file not found"):
        load_dataset(f"csv:{tmp_path / 'nope.csv'}")


# ------------------------------------------------------------------------- skip mode

BAD_MIX = (
    "id,text,label,attempts\n"
    "1,good one,a,1\n"
    "2,,b,1\n"  # empty text
    "3,good two,b,2\n"
    "4,good three,,0\n"  # missing label
    "5,good four,a,many\n"  # wrong fact type
    "3,good five,b,1\n"  # duplicate id
    "7,GOOD ONE,b,1\n"  # same text, other label
    "8,good six,b\n"  # too few fields
    "9,good seven,a,3\n"
)


def test_skip_mode_reports_exactly_which_rows_and_why(write):
    path = write("mix.csv", BAD_MIX)
    ds = load_dataset(f"csv:{path}", on_error="skip")
    assert ds.ids == ["1", "3", "9"]
    assert [(s.row, s.column) for s in ds.skipped] == [
        (2, "text"),
        (4, "label"),
        (5, "attempts"),
        (6, "id"),
        (7, "label"),
        (8, "attempts"),
    ]
    reasons = [s.reason for s in ds.skipped]
    assert "empty or whitespace only" in reasons[0]
    assert reasons[1].startswith("missing label")
    assert "got str 'many'" in reasons[2]
    assert "duplicate id '3' (first given at row 3)" in reasons[3]
    assert "labelled 'a' at row 1 and 'b' here" in reasons[4]
    assert reasons[5] == "the row has 3 fields, the header 4: no value for this column"
    row, column, reason = ds.skipped[0]  # unpacks as (row, column, reason)
    assert (row, column) == (2, "text") and reason
    assert ds.fact_types["attempts"] == "int"


def test_raise_mode_reports_the_first_bad_row(write):
    path = write("mix.csv", BAD_MIX)
    with pytest.raises(DatasetError, match=where(2, "text")):
        load_dataset(f"csv:{path}")


def test_skip_mode_with_every_row_bad_is_an_error(write):
    path = write("allbad.csv", "text,label\n,a\n ,b\n")
    with pytest.raises(
        DatasetError, match=r"no valid rows: all 2 rows were skipped \(first: row 1, column 'text'"
    ):
        load_dataset(f"csv:{path}", on_error="skip")


def test_skip_mode_still_refuses_a_missing_column(write):
    path = write("nolabel.csv", "text\nhello\n")
    with pytest.raises(DatasetError, match="missing column"):
        load_dataset(f"csv:{path}", on_error="skip")


# ------------------------------------------------------------------------- reading values


def test_csv_fact_types_are_inferred_per_column(write):
    path = write(
        "facts.csv",
        "text,label,ok,attempts,amount,fields,zip,kind,note\n"
        'q1,a,true,1,10,"[""email""]",02134,timeout,\n'
        "q2,b,false,0,12.5,[],10001,,hello\n"
        "q3,a,TRUE,2,,[],00501,12,\n",
    )
    ds = load_dataset(path)
    assert ds.fact_columns == ("ok", "attempts", "amount", "fields", "zip", "kind", "note")
    assert ds.fact_types == {
        "ok": "bool",
        "attempts": "int",
        "amount": "number",
        "fields": "list",
        "zip": "str",  # leading zeros: text, not numbers
        "kind": "str",
        "note": "str",
    }
    assert ds.facts(0) == {
        "ok": True,
        "attempts": 1,
        "amount": 10,
        "fields": ["email"],
        "zip": "02134",
        "kind": "timeout",
        "note": None,
    }
    assert ds.facts(2)["kind"] == "12"  # a text column keeps cells as written
    assert ds.facts(1)["amount"] == 12.5 and ds.facts(2)["amount"] is None


def test_jsonl_nested_and_top_level_facts_merge(write):
    path = write(
        "f.jsonl",
        _jsonl(
            {"text": "a1", "label": "a", "channel": "email", "facts": {"amount": 5, "ok": True}},
            {"text": "b1", "label": "b", "facts": {"amount": 7.5, "channel": " "}},
        ),
    )
    ds = load_dataset(f"jsonl:{path}")
    assert ds.fact_columns == ("amount", "ok", "channel")
    assert list(ds.iter_facts()) == [
        {"amount": 5, "ok": True, "channel": "email"},
        {"amount": 7.5, "ok": None, "channel": None},
    ]
    assert ds.fact_types == {"amount": "number", "ok": "bool", "channel": "str"}


def test_column_names_can_be_overridden(write):
    path = write(
        "o.csv", "utterance,intent,fold,uid\nhi there,greet,val,u1\nbye now,leave,train,u2\n"
    )
    ds = load_dataset(
        f"csv:{path}",
        text_column="utterance",
        label_column="intent",
        split_column="fold",
        id_column="uid",
    )
    assert list(ds.frame.columns) == ["id", "text", "label", "split"]
    assert ds.ids == ["u1", "u2"] and ds.y == ["greet", "leave"]
    assert ds.splits == {"train": 1, "validation": 1}  # "val" read as "validation"


def test_unknown_reference_and_bad_options(write):
    with pytest.raises(
        DatasetError,
        match="unknown dataset 'nope'; use one of banking77, clinc150, support-tickets",
    ):
        load_dataset("nope")
    path = write("ok.csv", "text,label\nhi,a\nho,b\n")
    with pytest.raises(TypeError, match=r"does not take oos"):
        load_dataset(f"csv:{path}", oos="drop")
    with pytest.raises(ValueError, match="on_error must be 'raise' or 'skip'"):
        load_dataset(f"csv:{path}", on_error="ignore")
    with pytest.raises(TypeError, match="not one string"):
        load_dataset(f"csv:{path}", label_set="a")
    with pytest.raises(DatasetError, match="cannot tell the format"):
        load_dataset(path.with_suffix(".txt"))  # a path object: the suffix decides
    assert load_dataset(path).name == "ok"


def test_bom_and_crlf_are_fine(write):
    path = write("w.csv", b"\xef\xbb\xbftext,label\r\nhi,a\r\nho,b\r\n")
    ds = load_dataset(f"csv:{path}")
    assert ds.texts == ["hi", "ho"] and ds.labels == ("a", "b")
