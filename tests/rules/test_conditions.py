"""The safe condition language: what it accepts, what it refuses, and that it runs nothing."""

from __future__ import annotations

import pytest

from hybridroute.rules import ConditionError, compile_condition

TYPES = {
    "amount": "number",
    "action": "str",
    "fields": "list[str]",
    "ok": "bool",
    "meta": "object",
    "kind": "str",
}
FACTS = {
    "amount": 700,
    "action": "issue_refund",
    "fields": ("email",),
    "ok": True,
    "meta": {"tier": "gold", "n": 3},
    "kind": None,
}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("amount > 500", True),
        ("amount >= 700 and action == 'issue_refund'", True),
        ("amount < 10 or not ok", False),
        ('action in ["issue_refund", "cancel"]', True),
        ("action not in ['cancel']", True),
        ("'email' in fields", True),
        ("len(fields) == 1", True),
        ('meta.tier == "gold" and meta.n > 2', True),
        ("meta.missing == null", True),
        ("kind == null", True),
        ("kind > 'a'", False),  # ordering with null is false
        ("(amount > 500) and (ok == true)", True),
        ("amount > 5e2", True),
        ("ok == 1", False),  # booleans only equal booleans
        ("not not ok", True),
        ("'refund' in action", True),
    ],
)
def test_evaluates(text, expected):
    assert compile_condition(text, TYPES)(FACTS) is expected


def test_reports_facts_read_and_constants():
    c = compile_condition("amount > 1 and ok", TYPES)
    assert c.facts == {"amount", "ok"}
    assert c.constant is None
    assert compile_condition("true", TYPES).constant is True
    assert compile_condition("1 > 2", TYPES).constant is False


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("__import__('os').system('echo pwned')", "not allowed"),
        ("().__class__.__bases__", "unexpected"),
        ("amount.__class__", "not allowed|has no field"),
        ("open('/etc/passwd')", "function calls are not allowed"),
        ("exec('1')", "function calls are not allowed"),
        ("lambda: 1", "unexpected|unknown fact"),
        ("amount > 500; import os", "unexpected character ';'"),
        ("amount ** 2 > 1", "unexpected"),
        ("unknown_fact == 1", "unknown fact 'unknown_fact'"),
        ("action > 5", "cannot compare str with number"),
        ("len(amount) > 1", r"len\(\) needs"),
        ("amount in 5", "needs a list or string"),
        ("action.tier == 1", "has no field"),
        ("amount >", "ends too early"),
        ("(amount > 1", "ends too early|expected"),
        ("[amount] == 1", "lists hold only literals"),
        ("", "empty"),
        ("x" * 1001, "too long"),
        ("(" * 40 + "ok" + ")" * 40, "nested too deeply"),
        ("not " * 40 + "ok", "nested too deeply"),
        ("ok and " * 150 + "ok", "too long"),
    ],
)
def test_refuses(text, match):
    with pytest.raises(ConditionError, match=match):
        compile_condition(text, TYPES)


def test_no_code_runs_while_refusing(tmp_path, monkeypatch):
    marker = tmp_path / "pwned"
    attack = f"__import__('pathlib').Path('{marker}').touch()"
    with pytest.raises(ConditionError):
        compile_condition(attack, TYPES)
    assert not marker.exists()


def test_runtime_type_mismatch_in_object_field_is_an_error():
    c = compile_condition("meta.tier > 3", TYPES)
    with pytest.raises(ConditionError, match="cannot order str and int"):
        c({"meta": {"tier": "gold"}})


# ------------------------------------------------------------ missing and null (issue 15)

OBJ_TYPES = {"customer": "object", "kind": "str", "amount": "number", "tags": "list[str]"}
GOLD = {"customer": {"tier": "gold", "age": 40}, "kind": "x", "amount": 1, "tags": ("a",)}
ABSENT = {"customer": {}, "kind": None, "amount": 1, "tags": ()}
NULLED = {"customer": {"tier": None, "age": None}, "kind": None, "amount": 1, "tags": ()}
NOT_AN_OBJECT = {"customer": {"tier": "gold"}, "kind": None, "amount": 1, "tags": ()}


@pytest.mark.parametrize(
    ("text", "gold", "absent", "nulled"),
    [
        # the documented semantics of a missing key / null value
        ("customer.tier == 'gold'", True, False, False),
        ("customer.tier != 'gold'", False, True, True),
        ("customer.tier == null", False, True, True),
        ("customer.age < 18", False, False, False),  # ordering with null is false ...
        ("customer.age >= 18", True, False, False),
        ("not (customer.age >= 18)", False, True, True),  # ... its negation is true
        ("customer.tier in ['gold', 'silver']", True, False, False),
        ("customer.tier not in ['gold', 'silver']", False, True, True),
        ("customer.tier in ['gold', null]", True, True, True),
        ("len(customer.tier) == 0", False, True, True),
        ("customer.tier", True, False, False),
        ("kind == null", False, True, True),
        # the explicit forms
        ("missing(customer.tier)", False, True, True),
        ("exists(customer.tier)", True, False, False),
        ("missing(customer.tier) or customer.tier == 'gold'", True, True, True),
        ("missing(customer.age) or customer.age < 18", False, True, True),
        ("missing(kind)", False, True, True),
        ("exists(kind) and kind == 'x'", True, False, False),
        ("not missing(customer)", True, True, True),
        ("missing(customer.tier.level)", True, True, True),  # through a non-object
    ],
)
def test_missing_and_null_semantics(text, gold, absent, nulled):
    c = compile_condition(text, OBJ_TYPES)
    assert (c(GOLD), c(ABSENT), c(NULLED)) == (gold, absent, nulled)


def test_walking_through_a_non_object_reads_null():
    c = compile_condition("missing(customer.tier.level)", OBJ_TYPES)
    assert c(NOT_AN_OBJECT) is True
    assert compile_condition("customer.tier.level == null", OBJ_TYPES)(NOT_AN_OBJECT) is True


def test_exists_and_missing_are_not_reserved_names():
    types = {"exists": "int", "missing": "list[str]"}
    assert compile_condition("exists > 1", types)({"exists": 2}) is True
    assert compile_condition("len(missing) == 1 and exists(exists)", types)(
        {"exists": 0, "missing": ("a",)}
    )
    assert compile_condition("missing(missing)", types).facts == {"missing"}


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("missing(nope)", "unknown fact 'nope'"),
        ("exists(kind.x)", "fact 'kind' is a str, it has no field 'x'"),
        ("missing(1)", "expected a fact name"),
        ("missing('kind')", "expected a fact name"),
        ("missing(kind", "expected '\\)'|ends too early"),
        ("exists()", "expected a fact name"),
        ("missing(len(tags))", "expected a fact name"),
        ("missing(customer.tier) > 1", "cannot compare bool"),
        ("present(kind)", "the only functions are len\\(fact\\), exists\\(fact\\) and missing"),
        ("exists(_x)", "names starting with '_'"),
    ],
)
def test_presence_tests_are_parsed_strictly(text, match):
    with pytest.raises(ConditionError, match=match):
        compile_condition(text, OBJ_TYPES)


def test_presence_tests_read_their_fact():
    c = compile_condition("missing(customer.tier)", OBJ_TYPES)
    assert c.facts == {"customer"} and c.constant is None
