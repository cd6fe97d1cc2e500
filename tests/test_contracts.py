"""The decision contract: Decision values, vocabularies, the facts schema, snapshot hashes."""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hybridroute._canonical import hash_canonical
from hybridroute._csv import json_kind, parse_csv_cell
from hybridroute.contracts import (
    GENERIC_DESTINATIONS,
    MAX_REQUEST_ID_CHARS,
    Decision,
    FactSchema,
    FactSpec,
    ReasonCode,
    RouteRequest,
    Vocabulary,
    canonical_json,
    snapshot_hash,
)
from hybridroute.exceptions import FactsError, InputError, UndeclaredValueError, UserInputError


def make(**kw):
    base = dict(
        router="r",
        router_version="1",
        input_snapshot={"facts": {"a": 1, "tags": ["x", "y"]}, "text": "hello"},
        allowed_destinations=("answer", "ask_user"),
        selected_destination="answer",
        reason_code="evidence_complete",
        stage="rule",
    )
    base.update(kw)
    return Decision(**base)


def test_generic_destinations_are_the_six_next_steps():
    assert set(GENERIC_DESTINATIONS) == {
        "answer",
        "ask_user",
        "retry_tool",
        "fail",
        "reject",
        "human_review",
    }


def test_decision_is_frozen_keyword_only_and_slotted():
    d = make()
    with pytest.raises(dataclasses.FrozenInstanceError):
        d.selected_destination = "fail"  # type: ignore[misc]
    with pytest.raises(TypeError):
        Decision("r", "1")  # type: ignore[misc]
    assert not hasattr(d, "__dict__")
    with pytest.raises(TypeError):
        d.input_snapshot["facts"]["a"] = 2  # type: ignore[index]


def test_decision_round_trips_exactly():
    d = make(
        label="x",
        confidence=0.75,
        threshold=0.5,
        margin=0.25,
        evidence_ids=("e1",),
        detail={"pattern": ["a", "b"], "n": 3},
    )
    data = d.to_dict()
    again = Decision.from_dict(json.loads(json.dumps(data)))
    assert again == d
    assert again.to_dict() == data
    assert list(data)[:4] == ["record_version", "router", "router_version", "stage"]
    for key in (
        "input_snapshot",
        "allowed_destinations",
        "selected_destination",
        "reason_code",
        "evidence_ids",
    ):
        assert key in data


def test_snapshot_hash_is_of_the_snapshot_alone():
    a = make(router_version="1")
    b = make(router_version="2", router="other")
    assert a.snapshot_hash == b.snapshot_hash == snapshot_hash(a.input_snapshot)
    assert make(input_snapshot={"facts": {"a": 2}}).snapshot_hash != a.snapshot_hash


def test_snapshot_hash_is_canonical():
    assert snapshot_hash({"b": 1, "a": [1.0, "é"]}) == snapshot_hash({"a": [1, "é"], "b": 1.0})
    assert canonical_json({"b": 1, "a": (2.5, None, True)}) == '{"a":[2.5,null,true],"b":1}'


def test_snapshot_hash_same_in_another_process():
    snap = {"facts": {"amount": 12.5, "who": "Zoë", "list": ["a"]}, "text": "x"}
    code = f"from hybridroute.contracts import snapshot_hash;print(snapshot_hash({snap!r}))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == snapshot_hash(snap)


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"stage": "magic"}, "undeclared stage 'magic'"),
        ({"selected_destination": "refund"}, "undeclared destination 'refund'"),
        ({"reason_code": ""}, "undeclared reason code"),
    ],
)
def test_decision_rejects_undeclared_values(kw, match):
    with pytest.raises(UndeclaredValueError, match=match):
        make(**kw)


def test_snapshot_must_hold_json_only():
    with pytest.raises(ValueError, match="non-finite"):
        make(input_snapshot={"x": float("nan")})
    with pytest.raises(ValueError, match="cannot go into an input snapshot"):
        make(input_snapshot={"x": object()})


@pytest.mark.parametrize(
    ("mutate", "match"),
    [
        (lambda d: d.update(extra=1), "unknown keys"),
        (lambda d: d.pop("router"), "lacks"),
        (lambda d: d.update(record_version=99), "version 99 is not supported"),
        (lambda d: d.update(snapshot_hash="0" * 64), "does not match"),
        (lambda d: d.update(stage="oracle"), "undeclared stage"),
    ],
)
def test_from_dict_is_strict(mutate, match):
    data = make().to_dict()
    mutate(data)
    with pytest.raises(ValueError, match=match):
        Decision.from_dict(data)


def test_vocabulary_checks_destinations_and_reason_codes():
    vocab = Vocabulary(intents=("refund_request",), reason_codes=("vip_customer",))
    assert vocab.check_destination("refund_request") == "refund_request"
    assert vocab.check_destination("reject") == "reject"
    assert vocab.check_reason_code("vip_customer") == "vip_customer"
    assert vocab.check_reason_code(ReasonCode.PERMISSION_DENIED.value)
    with pytest.raises(UndeclaredValueError, match="undeclared destination 'refunds'"):
        vocab.check_destination("refunds")
    with pytest.raises(UndeclaredValueError, match="undeclared reason code 'because'"):
        vocab.check_reason_code("because")
    d = make(allowed_destinations=("refunds",), selected_destination="refunds")
    with pytest.raises(UndeclaredValueError, match="refunds"):
        Decision.from_dict(d.to_dict(), vocabulary=vocab)
    with pytest.raises(UndeclaredValueError, match="destination"):
        Vocabulary(intents=("Not A Name",))


SCHEMA = FactSchema(
    (
        FactSpec(name="ok", type="bool", default=True),
        FactSpec(name="n", type="int"),
        FactSpec(name="amount", type="number", default=0),
        FactSpec(name="kind", type="str", nullable=True, default=None),
        FactSpec(name="fields", type="list[str]", default=[]),
        FactSpec(name="meta", type="object", default={}),
    )
)


def test_schema_fills_defaults_in_declared_order():
    out = SCHEMA.validate({"n": 3, "amount": 2.0})
    assert list(out) == ["ok", "n", "amount", "kind", "fields", "meta"]
    assert out == {"ok": True, "n": 3, "amount": 2, "kind": None, "fields": (), "meta": {}}
    assert type(out["amount"]) is int  # integral floats are canonicalised


@pytest.mark.parametrize(
    ("facts", "match"),
    [
        ({}, "fact 'n': required fact is missing"),
        ({"n": True}, "fact 'n': expected int, got bool"),
        ({"n": 1, "ok": 1}, "fact 'ok': expected bool, got int"),
        ({"n": 1, "amount": "12"}, "fact 'amount': expected number"),
        ({"n": 1, "amount": float("inf")}, "fact 'amount': expected number"),
        ({"n": 1, "fields": ["a", 2]}, r"fact 'fields': expected list\[str\]"),
        ({"n": 1, "kind": 5}, "fact 'kind': expected str or null"),
        ({"n": 1, "other": 5}, "fact 'other': not declared"),
        ([1, 2], "facts must be a JSON object"),
    ],
)
def test_schema_errors_name_the_field(facts, match):
    with pytest.raises(FactsError, match=match):
        SCHEMA.validate(facts)


def test_schema_ignore_extra():
    schema = FactSchema(SCHEMA.specs, extra="ignore")
    assert "other" not in schema.validate({"n": 1, "other": 2})


@pytest.mark.parametrize(
    ("data", "match"),
    [
        ({"x": {"type": "float"}}, "unknown type 'float'"),
        ({"x": {"default": 1}}, "no 'type'"),
        ({"x": {"type": "int", "default": "a"}}, "default 'a' is not a valid int"),
        ({"x": {"type": "int", "colour": 1}}, "unknown keys"),
        ({"x": "int"}, "must be a mapping"),
    ],
)
def test_schema_from_dict_errors(data, match):
    with pytest.raises(FactsError, match=match):
        FactSchema.from_dict(data)


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**40), 2**40)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4)
    ),
    max_leaves=12,
)


@given(st.dictionaries(st.text(max_size=6), json_values, max_size=5))
def test_round_trip_and_hash_hold_for_any_json_snapshot(snapshot):
    d = make(input_snapshot=snapshot)
    again = Decision.from_dict(json.loads(json.dumps(d.to_dict())))
    assert again.snapshot_hash == d.snapshot_hash
    assert again.to_dict() == d.to_dict()


#: characters a fact string may hold (NUL and lone surrogates are refused, see below)
TEXT = st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00")


@given(
    st.fixed_dictionaries(
        {"n": st.integers(-100, 100)},
        optional={
            "amount": st.floats(-1e6, 1e6, allow_nan=False) | st.integers(-1000, 1000),
            "kind": st.none() | st.text(TEXT, max_size=5),
            "fields": st.lists(st.text(TEXT, max_size=4), max_size=3),
            "meta": st.dictionaries(
                st.text(TEXT, max_size=3),
                st.integers() | st.floats(allow_nan=False, allow_infinity=False),
                max_size=3,
            ),
        },
    )
)
def test_fast_hash_equals_general_hash_for_validated_facts(facts):
    valid = SCHEMA.validate(facts)
    assert hash_canonical({"facts": valid}) == snapshot_hash({"facts": valid})
    assert SCHEMA.canonical_json(valid) == canonical_json(valid)


@pytest.mark.parametrize(
    ("cell", "kind", "value"),
    [
        ("", "null", None),
        ("   ", "null", None),
        ("TRUE", "bool", True),
        (" false ", "bool", False),
        ("02134", "str", "02134"),  # a code keeps its leading zero
        ("-7", "int", -7),
        ("0", "int", 0),
        ("1.5e3", "number", 1500.0),
        (".5", "number", 0.5),
        ('["a", "b"]', "list", ["a", "b"]),
        ('{"k": 1}', "object", {"k": 1}),
        ("{not json", "str", "{not json"),
        (" two words ", "str", " two words "),
    ],
)
def test_parse_csv_cell(cell, kind, value):
    assert parse_csv_cell(cell) == (kind, value)
    assert kind == "str" or json_kind(value) == kind


# ------------------------------------------------------------ allowed values and bounds (issue 15)

CONSTRAINED = FactSchema.from_dict(
    {
        "action": {
            "type": "str",
            "default": "",
            "enum": ["", "issue_refund", "delete_account_data"],
        },
        "kind": {"type": "str", "nullable": True, "default": None, "enum": ["retryable", "fatal"]},
        "level": {"type": "int", "default": 1, "enum": [1, 2, 3]},
        "attempts": {"type": "int", "default": 0, "min": 0, "max": 5},
        "amount": {"type": "number", "default": 0, "min": 0, "max": 1e6},
        "tags": {"type": "list[str]", "default": [], "enum": ["a", "b"]},
        "scores": {"type": "list[number]", "default": [], "min": 0, "max": 1},
        "note": {"type": "str", "default": ""},
        "names": {"type": "list[str]", "default": []},
        "meta": {"type": "object", "default": {}},
    }
)


@pytest.mark.parametrize(
    ("facts", "match"),
    [
        # every spelling of a declared value that is not the value itself
        ({"action": "DELETE_ACCOUNT_DATA"}, "'DELETE_ACCOUNT_DATA' is not one of the allowed"),
        ({"action": " delete_account_data"}, "' delete_account_data' is not one of"),
        ({"action": "delete_account_data "}, "is not one of"),
        ({"action": "delete-account-data"}, "'delete-account-data' is not one of"),
        ({"action": "delete_account_data\u200b"}, "is not one of"),
        ({"action": "ｄｅｌｅｔｅ_account_data"}, "is not one of"),
        ({"action": "Delete_Account_Data"}, "is not one of"),
        ({"kind": "Retryable"}, "fact 'kind': 'Retryable' is not one of the allowed values"),
        ({"level": 4}, "fact 'level': 4 is not one of the allowed values \\(1, 2, 3\\)"),
        ({"level": 0}, "fact 'level': 0 is not one of"),
        ({"tags": ["a", "c"]}, "fact 'tags': element #2: 'c' is not one of the allowed"),
        ({"tags": ["A"]}, "fact 'tags': element #1: 'A' is not one of"),
        ({"attempts": -1}, "fact 'attempts': -1 is below the minimum 0"),
        ({"attempts": 6}, "fact 'attempts': 6 is above the maximum 5"),
        ({"amount": -100000}, "fact 'amount': -100000 is below the minimum 0"),
        ({"amount": -0.5}, "fact 'amount': -0.5 is below the minimum 0"),
        ({"amount": 1e6 + 1}, "is above the maximum 1000000"),
        ({"scores": [0.5, 1.5]}, "fact 'scores': element #2: 1.5 is above the maximum 1"),
        ({"scores": [-1]}, "fact 'scores': element #1: -1 is below the minimum 0"),
    ],
)
def test_undeclared_values_and_out_of_bounds_are_refused(facts, match):
    with pytest.raises(FactsError, match=match) as info:
        CONSTRAINED.validate(facts)
    assert info.value.field == next(iter(facts))


def test_refusal_lists_the_allowed_values():
    with pytest.raises(FactsError) as info:
        CONSTRAINED.validate({"action": "DELETE_ACCOUNT_DATA"})
    assert "('', 'issue_refund', 'delete_account_data')" in str(info.value)
    many = FactSpec(name="x", type="int", enum=list(range(50)))
    with pytest.raises(FactsError, match=r"19, \.\.\. \(50 in all\)"):
        many.check(99)


@pytest.mark.parametrize(
    ("facts", "expected"),
    [
        ({"action": "delete_account_data"}, {"action": "delete_account_data"}),
        ({"kind": None}, {"kind": None}),  # null is not subject to enum
        ({"level": 3, "attempts": 5, "amount": 1e6}, {"level": 3, "attempts": 5, "amount": 10**6}),
        ({"attempts": 0, "amount": 0.0}, {"attempts": 0, "amount": 0}),
        ({"tags": ("b", "a", "b")}, {"tags": ("b", "a", "b")}),
        ({"scores": [0, 0.25, 1.0]}, {"scores": (0, 0.25, 1)}),
    ],
)
def test_declared_values_and_bounds_are_inclusive(facts, expected):
    out = CONSTRAINED.validate(facts)
    for k, v in expected.items():
        assert out[k] == v


class _Str(str):
    pass


class _Int(int):
    pass


class _Float(float):
    pass


@pytest.mark.parametrize(
    ("name", "good", "bad"),
    [
        ("action", _Str("issue_refund"), _Str("ISSUE_REFUND")),
        ("action", "issue_refund", "issue_réfund"),  # non-ASCII takes the general path
        ("attempts", _Int(3), _Int(9)),
        ("level", _Int(2), _Int(5)),
        ("amount", _Float(2.5), _Float(-1.0)),
        ("scores", (_Float(0.5),), (_Float(2.0),)),
        ("tags", [_Str("a")], [_Str("z")]),
        ("tags", ("a", "b"), ("a", "é")),
    ],
)
def test_general_path_applies_the_same_checks(name, good, bad):
    """Values off the fast paths (subclasses, non-ASCII text) meet the same checks."""
    spec = CONSTRAINED[name]
    out = spec.check(good)
    assert out == (tuple(good) if isinstance(good, list) else good)
    with pytest.raises(FactsError, match=f"fact '{name}': "):
        spec.check(bad)


@pytest.mark.parametrize(
    ("facts", "match"),
    [
        (
            {"note": "a\x00b"},
            re.escape("fact 'note': 'a\\x00b' holds a NUL character at character 1"),
        ),
        ({"note": "\x00"}, "holds a NUL character"),
        ({"note": "caf\u00e9\x00"}, "holds a NUL character at character 4"),
        ({"note": "\ud800"}, "is not valid Unicode \\(a lone surrogate"),
        ({"note": "ok \udfff"}, "lone surrogate at character 3"),
        ({"action": "issue_refund\x00"}, "fact 'action': .* holds a NUL character"),
        ({"kind": "retryable\x00"}, "fact 'kind': .* holds a NUL character"),
        ({"names": ["ok", "b\x00d"]}, "fact 'names': element #2: .* holds a NUL"),
        ({"names": ["\ud83d"]}, "fact 'names': element #1: .* lone surrogate"),
        ({"tags": ["a\x00"]}, "fact 'tags': element #1: .* holds a NUL"),
        ({"meta": {"k": "v\x00"}}, "fact 'meta': a string in it holds a NUL"),
        ({"meta": {"k\x00": 1}}, "fact 'meta': a string in it holds a NUL"),
        ({"meta": {"deep": [{"x": "\udc80"}]}}, "fact 'meta': a string in it is not valid Unicode"),
    ],
)
def test_strings_with_nul_or_lone_surrogates_are_refused(facts, match):
    with pytest.raises(FactsError, match=match):
        CONSTRAINED.validate(facts)


def test_lone_surrogate_from_a_json_escape_is_refused_by_the_schema():
    facts = json.loads('{"note": "\\ud800"}')  # what a lax JSON reader lets through
    with pytest.raises(FactsError, match="lone surrogate"):
        CONSTRAINED.validate(facts)


@pytest.mark.parametrize(
    ("decl", "match"),
    [
        ({"type": "bool", "enum": [True]}, "'enum' is for str, int, list\\[str\\] facts, not bool"),
        ({"type": "number", "enum": [1.5]}, "'enum' is for .* not number"),
        ({"type": "object", "enum": ["a"]}, "not object"),
        ({"type": "list[number]", "enum": [1]}, r"not list\[number\]"),
        ({"type": "str", "enum": "a"}, "'enum' must be a list of allowed values"),
        ({"type": "str", "enum": {"a": 1}}, "'enum' must be a list"),
        ({"type": "str", "enum": []}, "at least one allowed value"),
        ({"type": "str", "enum": ["a", 1]}, "must be strings; value #2 is 1"),
        ({"type": "str", "enum": [None]}, "must be strings; value #1 is None"),
        ({"type": "list[str]", "enum": [["a"]]}, "must be strings"),
        ({"type": "int", "enum": ["1"]}, "must be whole numbers; value #1 is '1'"),
        ({"type": "int", "enum": [True]}, "must be whole numbers; value #1 is True"),
        ({"type": "int", "enum": [1.0]}, "must be whole numbers"),
        ({"type": "str", "enum": ["a", "a"]}, "'enum' lists 'a' twice"),
        ({"type": "int", "enum": [1, 2, 1]}, "'enum' lists 1 twice"),
        ({"type": "str", "enum": ["a\x00"]}, "'enum' value #1 holds a NUL"),
        ({"type": "str", "min": 0}, "'min' is for int, number, list\\[number\\] facts, not str"),
        ({"type": "bool", "max": 1}, "'max' is for .* not bool"),
        ({"type": "list[str]", "min": 0}, r"not list\[str\]"),
        ({"type": "object", "max": 0}, "not object"),
        ({"type": "number", "min": "0"}, "'min' must be a finite number, got '0'"),
        ({"type": "number", "min": True}, "'min' must be a finite number, got True"),
        ({"type": "number", "max": float("nan")}, "'max' must be a finite number, got nan"),
        ({"type": "number", "max": float("inf")}, "'max' must be a finite number, got inf"),
        ({"type": "int", "min": 0.5}, "'min' of an int fact must be a whole number"),
        ({"type": "number", "min": 5, "max": 1}, "'min' \\(5\\) is greater than 'max' \\(1\\)"),
        ({"type": "str", "enum": ["a"], "default": "b"}, "default 'b' is not one of the allowed"),
        ({"type": "str", "enum": ["a"], "default": ""}, "default '' is not one of"),
        ({"type": "int", "min": 1, "default": 0}, "default 0 is below the minimum 1"),
        ({"type": "number", "max": 1, "default": 2.5}, "default 2.5 is above the maximum 1"),
        ({"type": "list[str]", "enum": ["a"], "default": ["b"]}, "default element #1: 'b'"),
        ({"type": "str", "default": "x\x00"}, re.escape("default 'x\\x00' holds a NUL")),
        ({"type": "str", "nullable": "yes"}, "'nullable' must be true or false"),
        ({"type": "str", "description": 5}, "'description' must be a string"),
        ({"type": "str", "maximum": 5}, r"unknown keys \['maximum'\]"),
    ],
)
def test_bad_declarations_are_refused(decl, match):
    with pytest.raises(FactsError, match=match) as info:
        FactSchema.from_dict({"x": decl})
    assert info.value.field == "x"


def test_null_default_of_a_nullable_enum_fact_is_fine():
    spec = FactSpec(name="k", type="str", nullable=True, default=None, enum=["a"])
    assert spec.check(None) is None and spec.check("a") == "a"


def test_declarations_round_trip_and_old_schemas_are_unchanged():
    again = FactSchema.from_dict(CONSTRAINED.to_dict())
    assert again == CONSTRAINED
    assert again.to_dict() == CONSTRAINED.to_dict()
    assert CONSTRAINED.to_dict()["amount"] == {
        "type": "number",
        "default": 0,
        "min": 0,
        "max": 10**6,
    }
    assert CONSTRAINED.to_dict()["action"]["enum"] == ["", "issue_refund", "delete_account_data"]
    # a schema without the new keys writes exactly what it wrote before
    assert SCHEMA.to_dict() == {
        "ok": {"type": "bool", "default": True},
        "n": {"type": "int"},
        "amount": {"type": "number", "default": 0},
        "kind": {"type": "str", "nullable": True, "default": None},
        "fields": {"type": "list[str]", "default": []},
        "meta": {"type": "object", "default": {}},
    }
    valid = SCHEMA.validate({"n": 3, "fields": ["a"]})
    assert SCHEMA.canonical_json(valid) == (
        '{"amount":0,"fields":["a"],"kind":null,"meta":{},"n":3,"ok":true}'
    )


@given(
    st.fixed_dictionaries(
        {},
        optional={
            "action": st.sampled_from(["", "issue_refund", "delete_account_data"]),
            "level": st.sampled_from([1, 2, 3]),
            "attempts": st.integers(0, 5),
            "amount": st.floats(0, 1e6) | st.integers(0, 10**6),
            "tags": st.lists(st.sampled_from(["a", "b"]), max_size=3),
            "scores": st.lists(st.floats(0, 1), max_size=3),
            "note": st.text(TEXT, max_size=6),
        },
    )
)
def test_constrained_facts_hash_as_before(facts):
    valid = CONSTRAINED.validate(facts)
    assert CONSTRAINED.canonical_json(valid) == canonical_json(valid)


@pytest.mark.parametrize(
    ("cell", "match"),
    [
        ("9" * 65, "integer with 65 digits"),
        ("-" + "1" * 100, "integer with 100 digits"),
        ("1e400", "too large for a float"),
        ("-2.5E999", "too large for a float"),
        ('{"a": 1, "a": 2}', "duplicate key 'a'"),
        ("[" * 100 + "]" * 100, "nested too deeply"),
        ('{"x": NaN}', "NaN"),
    ],
)
def test_parse_csv_cell_refuses_cells_it_would_read_unsafely(cell, match):
    with pytest.raises(InputError, match=match):
        parse_csv_cell(cell)


@pytest.mark.parametrize("cell", ["[not json", "{also: not json}", "[1, 2"])
def test_parse_csv_cell_keeps_text_that_is_not_json(cell):
    assert parse_csv_cell(cell) == ("str", cell)


# --------------------------------------------------------------------------- RouteRequest


def test_a_route_request_is_a_frozen_keyword_only_slotted_value():
    req = RouteRequest(text="where is my parcel", facts={"amount": 20}, request_id="t-1")
    with pytest.raises(dataclasses.FrozenInstanceError):
        req.text = "other"  # type: ignore[misc]
    with pytest.raises(TypeError):
        RouteRequest("where is my parcel")  # type: ignore[misc]  # keyword-only
    assert not hasattr(req, "__dict__")  # slotted
    assert req == RouteRequest(text="where is my parcel", facts={"amount": 20}, request_id="t-1")
    assert RouteRequest() == RouteRequest(facts=None) == RouteRequest(facts={})  # type: ignore[arg-type]
    assert dict(RouteRequest().facts) == {} and RouteRequest().text is None


@pytest.mark.parametrize("field", ["facts", "evidence"])
def test_a_route_request_keeps_a_read_only_copy_of_its_mappings(field):
    given = {"amount": 20} if field == "facts" else {"required_points": ["p"], "items": []}
    req = RouteRequest(**{field: given})
    given["late"] = 1  # the caller's dict changes afterwards: the request does not
    held = getattr(req, field)
    assert "late" not in held
    with pytest.raises(TypeError):
        held["late"] = 1


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"facts": [1, 2]}, FactsError, "facts must be a JSON object, got list"),
        ({"facts": "amount=3"}, FactsError, "facts must be a JSON object, got str"),
        ({"text": 42}, InputError, "text must be a string, got int"),
        ({"text": b"bytes"}, InputError, "text must be a string, got bytes"),
        ({"evidence": ["e1"]}, FactsError, "evidence must be a mapping"),
        ({"evidence": "e1"}, FactsError, "evidence must be a mapping"),
        ({"request_id": 7}, InputError, "request_id must be a string, got int"),
        ({"request_id": "  "}, InputError, "request_id is empty"),
        ({"request_id": "x" * (MAX_REQUEST_ID_CHARS + 1)}, InputError, "longer than 256"),
    ],
    ids=[
        "facts-list",
        "facts-str",
        "text-int",
        "text-bytes",
        "evidence-list",
        "evidence-str",
        "id-int",
        "id-blank",
        "id-long",
    ],
)
def test_a_route_request_checks_its_types_when_made(kwargs, error, match):
    with pytest.raises(error, match=match):
        RouteRequest(**kwargs)


def test_a_request_id_of_the_longest_length_is_taken():
    assert RouteRequest(request_id="x" * MAX_REQUEST_ID_CHARS).request_id == "x" * 256


@pytest.mark.parametrize(
    "request_",
    [
        RouteRequest(),
        RouteRequest(text="t", facts={"amount": 3}),
        RouteRequest(text=None, facts={"a": [1, 2]}, request_id="r-1"),
        RouteRequest(text="t", evidence={"required_points": ["p"], "items": []}),
    ],
    ids=["empty", "text-facts", "id", "evidence"],
)
def test_a_route_request_round_trips_through_its_dict(request_):
    doc = request_.to_dict()
    assert json.loads(json.dumps(doc)) == doc  # JSON types: the body of POST /v1/route
    assert RouteRequest.from_dict(doc) == request_


@pytest.mark.parametrize(
    ("doc", "match"),
    [
        ({"text": "t", "id": "t-1"}, r"unknown key\(s\) \['id'\]"),
        ({"txt": "t"}, r"unknown key\(s\) \['txt'\]"),
        (["text"], "a route request is a mapping, got list"),
        ({"facts": 3}, "facts must be a JSON object, got int"),
    ],
    ids=["cli-id-key", "typo", "not-a-mapping", "bad-facts"],
)
def test_from_dict_refuses_what_a_request_cannot_hold(doc, match):
    with pytest.raises(UserInputError, match=match):
        RouteRequest.from_dict(doc)
