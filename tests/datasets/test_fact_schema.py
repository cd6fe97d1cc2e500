"""Facts of labelled files checked against a facts schema, and mixed-kind columns without one.

A schema (a rules file's ``facts``) passed as ``fact_types`` checks everything it declares,
as a router would: type, ``enum``, ``min`` / ``max``, required facts, undeclared columns.
"""

from __future__ import annotations

import json
import re

import pytest

from hybridroute.contracts import FactSchema
from hybridroute.datasets import FactProblem, LabelledSet, load_dataset
from hybridroute.exceptions import DatasetError
from hybridroute.rules import load_rules

from ..router.conftest import EXAMPLE

DECLARED = {
    "has_permission": {"type": "bool", "default": True},
    "attempts": {"type": "int", "default": 0, "min": 0, "max": 5},
    "amount": {"type": "number", "default": 0, "min": 0},
    "action": {"type": "str", "default": "", "enum": ["", "issue_refund", "lookup_order"]},
    "fields": {"type": "list[str]", "default": [], "enum": ["email", "order_id"]},
    "code": {"type": "str", "nullable": True, "default": None},
}
SCHEMA = FactSchema.from_dict(DECLARED)
IGNORING = FactSchema.from_dict(DECLARED, extra="ignore")
REQUIRING = FactSchema.from_dict({**DECLARED, "channel": {"type": "str"}})

HEADER = "text,label,split,has_permission,attempts,amount,action,fields,code"
GOOD_CSV = [
    "where is my parcel,order_status,train,true,0,0,lookup_order,[],02134",
    'refund me,refund_request,train,false,1,12.5,issue_refund,"[""email""]",12345',
    "my parcel again,order_status,test,TRUE,,,,,",
    "refund again,refund_request,test,,5,3,,[],",
]


def where(row: int, column: str) -> str:
    return rf"row {row}, column '{re.escape(column)}': "


def _csv(write, *bad_rows: str, header: str = HEADER):
    return write("facts.csv", "\n".join([header, *GOOD_CSV, *bad_rows]) + "\n")


GOOD_JSONL = [
    {"text": "where is my parcel", "label": "order_status", "split": "train",
     "facts": {"has_permission": True, "attempts": 0, "action": "lookup_order"}},
    {"text": "refund me", "label": "refund_request", "split": "train",
     "facts": {"has_permission": False, "attempts": 1, "amount": 12.5, "fields": ["email"]}},
    {"text": "my parcel again", "label": "order_status", "split": "test", "code": "12345"},
    {"text": "refund again", "label": "refund_request", "split": "test",
     "facts": {"attempts": 5, "amount": None, "action": ""}},
]  # fmt: skip


def _jsonl(write, *bad_facts: dict):
    rows = list(GOOD_JSONL)
    for i, facts in enumerate(bad_facts):
        rows.append({"text": f"bad {i}", "label": "order_status", "split": "test", "facts": facts})
    return write("facts.jsonl", "".join(json.dumps(r) + "\n" for r in rows))


# (CSV cells of has_permission,attempts,amount,action,fields,code; column; message)
CSV_CASES = {
    "bool maybe": ("maybe,0,0,,,", "has_permission", "expected bool, got str 'maybe'"),
    "bool yes": ("yes,0,0,,,", "has_permission", "expected bool, got str 'yes'"),
    "bool number": ("1,0,0,,,", "has_permission", "expected bool, got int '1'"),
    "int two": ("true,two,0,,,", "attempts", "expected int, got str 'two'"),
    "int decimal": ("true,1.5,0,,,", "attempts", r"expected int, got number '1\.5'"),
    "int bool": ("true,false,0,,,", "attempts", "expected int, got bool 'false'"),
    "number word": ("true,0,lots,,,", "amount", "expected number, got str 'lots'"),
    "int below min": ("true,-1,0,,,", "attempts", "-1 is below the minimum 0"),
    "int above max": ("true,6,0,,,", "attempts", "6 is above the maximum 5"),
    "number below min": ("true,0,-0.5,,,", "amount", r"-0\.5 is below the minimum 0"),
    "enum case": ("true,0,0,Issue_Refund,,", "action", "'Issue_Refund' is not one of the allowed"),
    "enum spaced": ("true,0,0, issue_refund,,", "action", "' issue_refund' is not one of"),
    "enum element": (
        'true,0,0,,"[""email"",""phone""]",',
        "fields",
        "element #2: 'phone' is not one of the allowed values",
    ),
    "list of numbers": ("true,0,0,,[1],", "fields", r"expected list\[str\]"),
}


@pytest.mark.parametrize("case", list(CSV_CASES), ids=list(CSV_CASES))
def test_csv_facts_break_the_schema(write, case):
    cells, column, message = CSV_CASES[case]
    path = _csv(write, f"bad one,order_status,test,{cells}")
    with pytest.raises(DatasetError, match=where(5, column) + message):
        load_dataset(path, fact_types=SCHEMA)


# (facts of the bad row; column; message)
JSONL_CASES = {
    "bool maybe": ({"has_permission": "maybe"}, "has_permission", "expected bool, got str 'maybe'"),
    "bool as text": ({"has_permission": "true"}, "has_permission", "expected bool, got str 'true'"),
    "bool as int": ({"has_permission": 0}, "has_permission", "expected bool, got int 0"),
    "int two": ({"attempts": "two"}, "attempts", "expected int, got str 'two'"),
    "int decimal": ({"attempts": 1.5}, "attempts", r"expected int, got number 1\.5"),
    "int written as float": ({"attempts": 2.0}, "attempts", r"expected int, got number 2\.0"),
    "int below min": ({"attempts": -3}, "attempts", "-3 is below the minimum 0"),
    "number below min": ({"amount": -1}, "amount", "-1 is below the minimum 0"),
    "enum": ({"action": "delete_everything"}, "action", "'delete_everything' is not one of"),
    "enum element": ({"fields": ["email", "pin"]}, "fields", "element #2: 'pin' is not one of"),
    "list element type": ({"fields": ["email", 3]}, "fields", r"expected list\[str\]"),
    "object for str": ({"code": {"a": 1}}, "code", "expected str, got object"),
}


@pytest.mark.parametrize("case", list(JSONL_CASES), ids=list(JSONL_CASES))
def test_jsonl_facts_break_the_schema(write, case):
    facts, column, message = JSONL_CASES[case]
    path = _jsonl(write, facts)
    with pytest.raises(DatasetError, match=where(5, column) + message):
        load_dataset(path, fact_types=SCHEMA)


def test_good_files_load_with_the_schema_and_absent_facts_are_none(write):
    csv_set = load_dataset(_csv(write), fact_types=SCHEMA)
    assert csv_set.fact_types == {k: v["type"] for k, v in DECLARED.items()}
    assert csv_set.facts(2) == {
        "has_permission": True,
        "attempts": None,  # absent: a routed row takes the default
        "amount": None,
        "action": None,
        "fields": None,
        "code": None,
    }
    # a str fact keeps every CSV cell as written: 12345 is a code, not a number
    assert [csv_set.facts(i)["code"] for i in range(4)] == ["02134", "12345", None, None]
    assert csv_set.facts(1)["fields"] == ["email"] and csv_set.facts(1)["amount"] == 12.5
    jsonl_set = load_dataset(_jsonl(write), fact_types=SCHEMA)
    assert jsonl_set.facts(2)["code"] == "12345" and jsonl_set.facts(0)["fields"] is None
    assert csv_set.check_facts(SCHEMA) == [] and jsonl_set.check_facts(SCHEMA) == []


def test_skip_mode_lists_every_bad_row(write):
    path = _csv(
        write,
        "bad one,order_status,test,maybe,0,0,,,",
        "bad two,refund_request,test,true,two,0,,,",
        "fine,refund_request,test,true,1,0,,,",
        "bad three,order_status,test,true,1,-2,,,",
    )
    ds = load_dataset(path, fact_types=SCHEMA, on_error="skip")
    assert [(s.row, s.column) for s in ds.skipped] == [
        (5, "has_permission"),
        (6, "attempts"),
        (8, "amount"),
    ]
    assert len(ds) == 5


@pytest.mark.parametrize(("kind", "row"), [("csv", 0), ("jsonl", 2)])
def test_undeclared_fact_columns_are_noted_when_forbidden(write, kind, row):
    # a column the schema does not declare is no fact a rule reads: the rows can still be
    # routed (an evaluation routes the declared facts only), so it is a note, not an error
    if kind == "csv":
        header = HEADER + ",tier,note"
        body = [line + ",gold,hi" for line in GOOD_CSV]
        path = write("x.csv", "\n".join([header, *body]) + "\n")
    else:
        rows = [dict(r) for r in GOOD_JSONL]
        rows[1] = {**rows[1], "tier": "gold"}
        rows[2] = {**rows[2], "note": "hi"}
        path = write("x.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    ds = load_dataset(path, fact_types=SCHEMA)
    (note,) = ds.notes
    assert note.startswith(
        f"{path}, row {row}, column 'tier': not a declared fact, nor are 'note' (declared: "
        "has_permission, attempts, amount, action, fields, code); the facts schema forbids"
    )
    assert ds.fact_types["tier"] == "str" and ds.fact_types["note"] == "str"
    assert load_dataset(path, fact_types=IGNORING).notes == ()
    assert ds.check_facts(SCHEMA) == [] and ds.check_facts(IGNORING) == []


@pytest.mark.parametrize("kind", ["csv", "jsonl"])
def test_required_facts_must_be_columns_and_present(write, kind):
    path = _csv(write) if kind == "csv" else _jsonl(write)
    with pytest.raises(
        DatasetError, match=r"column 'channel': a required fact \(the facts schema gives it no"
    ):
        load_dataset(path, fact_types=REQUIRING)
    if kind == "csv":
        lines = [HEADER + ",channel"] + [line + ",email" for line in GOOD_CSV[:-1]]
        lines.append(GOOD_CSV[-1] + ",")
        path = write("r.csv", "\n".join(lines) + "\n")
    else:
        rows = [{**r, "channel": "email"} for r in GOOD_JSONL[:-1]] + [GOOD_JSONL[-1]]
        path = write("r.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(DatasetError, match=where(4, "channel") + "a required fact is missing"):
        load_dataset(path, fact_types=REQUIRING)


def test_a_plain_type_mapping_keeps_its_old_meaning(write):
    # {fact: type} checks types only: declared facts must be columns, no bounds
    path = _csv(write, "bad one,order_status,test,true,-7,0,anything,,")
    ds = load_dataset(path, fact_types={"attempts": "int", "action": "str"})
    assert ds.facts(4)["attempts"] == -7 and ds.facts(4)["action"] == "anything"
    with pytest.raises(DatasetError, match="not a column"):
        load_dataset(path, fact_types={"attempts": "int", "nope": "bool"})


# ------------------------------------------------------------------------- check_facts


def test_check_facts_names_row_id_and_column(write):
    path = _jsonl(write, {"attempts": 9}, {"action": "nope", "attempts": -1}, {"amount": -2})
    ds = load_dataset(path)  # no schema: the inferred types are fine
    assert ds.fact_types["attempts"] == "int" and ds.fact_types["action"] == "str"
    assert ds.check_facts(SCHEMA) == [
        FactProblem(5, "5", "attempts", "9 is above the maximum 5"),
        FactProblem(6, "6", "attempts", "-1 is below the minimum 0"),  # its first bad fact
        FactProblem(7, "7", "amount", "-2 is below the minimum 0"),
    ]
    # rows are positions in the set checked (ids stay the rows' own)
    in_test = ds.split("test").check_facts(SCHEMA)
    assert [(p.row, p.id) for p in in_test] == [(3, "5"), (4, "6"), (5, "7")]


def test_check_facts_on_a_frame_and_column_problems_first():
    import pandas as pd

    frame = pd.DataFrame(
        {
            "text": ["a1", "b1", "a2"],
            "label": ["a", "b", "a"],
            "id": ["x", "y", "z"],
            "attempts": [0, 7, 1],
            "tier": ["gold", "gold", "silver"],
        }
    )
    ds = LabelledSet.from_frame(frame)
    problems = ds.check_facts(REQUIRING)
    assert [(p.row, p.id, p.column) for p in problems] == [
        (None, None, "channel"),  # a required fact that is no column: first
        (2, "y", "attempts"),  # 'tier' is no declared fact, so nothing to check
    ]
    assert problems[0].reason.startswith(
        "a required fact (the facts schema gives it no default) is not a fact column "
        "(fact columns: attempts, tier)"
    )
    with pytest.raises(TypeError, match="expected a FactSchema"):
        ds.check_facts({"attempts": "int"})  # type: ignore[arg-type]


def test_support_tickets_pass_the_example_rules_and_fail_a_stricter_schema():
    ds = load_dataset("support-tickets")
    schema = load_rules(EXAMPLE).schema
    assert ds.check_facts(schema) == []
    stricter = FactSchema.from_dict(
        {**schema.to_dict(), "attempts": {"type": "int", "default": 0, "min": 0, "max": 0}}
    )
    problems = ds.check_facts(stricter)
    assert problems and all(p.column == "attempts" for p in problems)
    first = problems[0]
    assert ds.ids[first.row - 1] == first.id
    assert ds.facts(first.row - 1)["attempts"] >= 1


# ------------------------------------------------------------------------- load_checked


def test_load_checked_reads_a_file_with_the_schema(write):
    from hybridroute.datasets._registry import load_checked

    good = _csv(write, "zip one,order_status,test,true,0,0,,,02134")
    assert load_checked(f"csv:{good}", SCHEMA).facts(4)["code"] == "02134"  # read as str
    bad = _csv(write, "zip one,order_status,test,true,0,0,,,02134", "x,order_status,test,,9,,,,")
    with pytest.raises(DatasetError, match=where(6, "attempts") + "9 is above the maximum 5"):
        load_checked(f"csv:{bad}", SCHEMA)
    path = _jsonl(write, {"attempts": 9}, {"amount": -1})
    skipped = load_checked(f"jsonl:{path}", SCHEMA, on_error="skip").skipped
    assert [(s.row, s.column) for s in skipped] == [(5, "attempts"), (6, "amount")]


def test_load_checked_checks_a_named_set_after_loading():
    from hybridroute.datasets._registry import load_checked

    schema = load_rules(EXAMPLE).schema
    assert len(load_checked("support-tickets", schema)) == len(load_dataset("support-tickets"))
    stricter = FactSchema.from_dict(
        {**schema.to_dict(), "attempts": {"type": "int", "default": 0, "min": 0, "max": 0}}
    )
    with pytest.raises(DatasetError) as info:
        load_checked("support-tickets", stricter)
    err = info.value
    assert (err.path, err.column) == ("support-tickets", "attempts") and err.row >= 1
    assert "(row id 'st-" in str(err) and "rows break the facts schema in all" in str(err)
    with pytest.raises(TypeError, match="does not take"):
        load_checked("support-tickets", schema, label_column="x")


def test_load_checked_has_one_home():
    from hybridroute.cli import _datasets, _evaluate, _spark
    from hybridroute.datasets import _registry

    assert not hasattr(_datasets, "load_checked")  # moved: the CLI wraps the datasets one
    for module in (_evaluate, _spark):
        assert "load_checked" not in vars(module)
    assert _registry.load_checked.__module__ == "hybridroute.datasets._registry"


# ------------------------------------------------------------------------- no schema


MIXED_TEXT = {
    # a text column (words are most of it) that also spells booleans or numbers: noted
    "bool among words": (["yes", "true", "no", "maybe"], 2, "str 'yes' at row 1", "bool 'true'"),
    "words first bool": (["true", "maybe", "no"], 2, "bool 'true' at row 1", "str 'maybe' here"),
    "int among words": (["gold", "silver", "3"], 3, "str 'gold' at row 1", "int '3' here"),
    "tie": (["2", "two"], 2, "int '2' at row 1", "str 'two' here"),
    "list among words": (["a", "[1]", "b"], 2, "str 'a' at row 1", "list '[1]' here"),
}


@pytest.mark.parametrize("case", list(MIXED_TEXT), ids=list(MIXED_TEXT))
def test_csv_text_column_mixing_kinds_is_noted(write, case):
    cells, row, first, odd = MIXED_TEXT[case]
    labels = ["a", "b"] * len(cells)
    body = "".join(f"text {i},{labels[i]},{c}\n" for i, c in enumerate(cells))
    path = write("m.csv", "text,label,tier\n" + body)
    ds = load_dataset(path, auto_split=False)  # the only note: the column's
    assert ds.fact_types == {"tier": "str"}
    assert [ds.facts(i)["tier"] for i in range(len(cells))] == cells  # kept as written
    (note,) = ds.notes
    assert note.startswith(f"{path}, row {row}, column 'tier': the column mixes kinds")
    assert first in note and odd in note and "read as text" in note


@pytest.mark.parametrize(
    ("cells", "row", "message"),
    [
        (["true", "false", "maybe", "true"], 3, "expected bool like the other rows"),
        (["1", "2", "two", "3"], 3, "expected int like the other rows"),
        (["1", "2.5", "lots"], 3, "expected number like the other rows"),
        (["true", "3", "4"], 1, "expected int like the other rows of this column, got bool 'true'"),
    ],
)
def test_csv_typed_column_with_an_odd_cell_is_an_error(write, cells, row, message):
    body = "".join(f"text {i},{'ab'[i % 2]},{c}\n" for i, c in enumerate(cells))
    path = write("t.csv", "text,label,n\n" + body)
    with pytest.raises(DatasetError, match=where(row, "n") + message):
        load_dataset(path)


@pytest.mark.parametrize(
    "cells",
    [["02134", "10001", "90210"], ["0042", "1234"], ["007", "", "123"]],
)
def test_fixed_width_digit_codes_are_text_without_a_note(write, cells):
    body = "".join(f"text {i},{'ab'[i % 2]},{c}\n" for i, c in enumerate(cells))
    ds = load_dataset(write("z.csv", "text,label,zip\n" + body), auto_split=False)
    assert ds.fact_types == {"zip": "str"} and ds.notes == ()
    assert [ds.facts(i)["zip"] for i in range(len(cells))] == [c or None for c in cells]


def test_digits_of_several_widths_are_not_codes(write):
    body = "text 0,a,0\ntext 1,b,1\ntext 2,a,03\n"
    with pytest.raises(DatasetError, match=where(3, "n") + "expected int like the other rows"):
        load_dataset(write("w.csv", "text,label,n\n" + body))


@pytest.mark.parametrize(
    ("values", "row", "message"),
    [
        (
            [True, False, "maybe"],
            3,
            "expected bool like the other rows of this column, got str 'maybe'",
        ),
        ([1, 2, "two"], 3, "expected int like the other rows of this column, got str 'two'"),
        (["gold", "silver", 3], 3, "expected str like the other rows of this column, got int 3"),
        (
            [1, "two"],
            2,
            "expected int like the other rows of this column, got str 'two'",
        ),  # first kind wins
    ],
)
def test_jsonl_column_mixing_kinds_is_an_error(write, values, row, message):
    rows = [{"text": f"t{i}", "label": "ab"[i % 2], "n": v} for i, v in enumerate(values)]
    path = write("j.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(DatasetError, match=where(row, "n") + message):
        load_dataset(path)


def test_skip_mode_leaving_one_class_names_the_skipped_rows(write):
    body = "q1,a,true\nq2,b,maybe\nq3,a,false\n"
    path = write("one.csv", "text,label,ok\n" + body)
    with pytest.raises(
        DatasetError,
        match=r"every one of the 2 rows left after skipping 1 bad row\(s\) \(first: row 2, "
        r"column 'ok': expected bool, got str 'maybe'\) has the label 'a'",
    ):
        load_dataset(
            path, fact_types=FactSchema.from_dict({"ok": {"type": "bool"}}), on_error="skip"
        )
