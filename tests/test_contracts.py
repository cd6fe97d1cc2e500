"""The decision contract: Decision values, vocabularies, the facts schema, snapshot hashes."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hybridroute.contracts import (
    GENERIC_DESTINATIONS,
    Decision,
    FactSchema,
    FactSpec,
    ReasonCode,
    Vocabulary,
    canonical_json,
    hash_canonical,
    json_kind,
    parse_csv_cell,
    snapshot_hash,
)
from hybridroute.exceptions import FactsError, UndeclaredValueError


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


@given(
    st.fixed_dictionaries(
        {"n": st.integers(-100, 100)},
        optional={
            "amount": st.floats(-1e6, 1e6, allow_nan=False) | st.integers(-1000, 1000),
            "kind": st.none() | st.text(max_size=5),
            "fields": st.lists(st.text(max_size=4), max_size=3),
            "meta": st.dictionaries(
                st.text(max_size=3),
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
