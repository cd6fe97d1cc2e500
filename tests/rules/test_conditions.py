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
