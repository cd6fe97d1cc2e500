"""Rule-set validation, evaluation, and the hypothesis properties of the rule layer."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hybridroute.contracts import GENERIC_DESTINATIONS, FactSchema, FactSpec, Vocabulary
from hybridroute.exceptions import FactsError, RuleSetError
from hybridroute.rules import Rule, RuleSet, load_rules, reference_fact_schema

EXAMPLE = (
    Path(__file__).resolve().parents[2] / "src" / "hybridroute" / "examples" / "support_rules.yaml"
)
RULES = load_rules(EXAMPLE)
SCHEMA = reference_fact_schema()
TYPES = {s.name: s.type for s in SCHEMA.specs}


def test_condition_rules_and_custom_reason_codes():
    rs = RuleSet(
        [
            Rule.guard("permission", "permission"),
            Rule.when(
                "vip",
                "amount > 1000 and action == 'issue_refund'",
                "human_review",
                "vip_refund",
                fact_types=TYPES,
            ),
        ],
        schema=SCHEMA,
        vocabulary=Vocabulary(reason_codes=("vip_refund",)),
        default="ask_user",
    )
    assert rs.decide({"amount": 2000, "action": "issue_refund"}).reason_code == "vip_refund"
    assert rs.decide({"amount": 2000}).selected_destination == "ask_user"


@pytest.mark.parametrize(
    ("build", "match", "rule_id"),
    [
        (
            lambda: [Rule.guard("a", "permission"), Rule.guard("a", "evidence")],
            "duplicate rule id",
            "a",
        ),
        (
            lambda: [Rule.when("x", "amount > 1", "refunds", fact_types=TYPES)],
            "undeclared destination 'refunds'",
            "x",
        ),
        (
            lambda: [Rule.when("x", "amount > 1", "fail", "because", fact_types=TYPES)],
            "undeclared reason code 'because'",
            "x",
        ),
        (
            lambda: [Rule.when("all", "true", "fail"), Rule.guard("p", "permission")],
            "shadows it",
            "p",
        ),
        (lambda: [Rule.when("never", "1 > 2", "fail")], "can never fire", "never"),
        (
            lambda: [Rule.guard("p1", "permission"), Rule.guard("p2", "permission")],
            "same guard",
            "p2",
        ),
        (lambda: [Rule.when("x", "colour == 'red'", "fail")], "does not declare", "x"),
    ],
)
def test_validation_errors_name_the_rule(build, match, rule_id):
    with pytest.raises(RuleSetError, match=match) as info:
        RuleSet(build(), schema=SCHEMA)
    assert info.value.rule_id == rule_id


def test_no_default_exit_is_an_error():
    with pytest.raises(RuleSetError, match="no default exit"):
        RuleSet([Rule.guard("p", "permission")], schema=SCHEMA, default=None)
    with pytest.raises(RuleSetError, match="default exit: undeclared destination 'somewhere'"):
        RuleSet([Rule.guard("p", "permission")], schema=SCHEMA, default="somewhere")


def test_guard_reading_a_wrongly_typed_fact_is_an_error():
    schema = FactSchema((FactSpec(name="has_permission", type="str", default="yes"),))
    with pytest.raises(RuleSetError, match="declared str"):
        RuleSet([Rule.guard("p", "permission")], schema=schema)


def test_bad_facts_name_the_field():
    with pytest.raises(FactsError, match="fact 'attempts': expected int"):
        RULES.decide({"attempts": "two"})
    with pytest.raises(FactsError, match="fact 'colour': not declared"):
        RULES.decide({"colour": "red"})


# ---------------------------------------------------------------- hypothesis properties

ACTIONS = RULES.schema["action"].enum
KINDS = RULES.schema["tool_error_kind"].enum

facts_strategy = st.fixed_dictionaries(
    {},
    optional={
        "has_permission": st.booleans(),
        "tool_error_kind": st.none() | st.sampled_from(KINDS),
        "attempts": st.integers(0, 10),
        "amount": st.floats(0, 1e7, allow_nan=False) | st.integers(0, 10_000),
        "action": st.sampled_from(ACTIONS),
        "evidence_complete": st.booleans(),
        "missing_user_fields": st.lists(st.sampled_from(["email", "order_number"]), max_size=2),
        "route_history": st.lists(
            st.sampled_from(["refund_request", "billing_dispute", "answer"]), max_size=10
        ),
        "step": st.integers(0, 30),
    },
)


@given(facts_strategy)
def test_no_permission_always_rejects(facts):
    facts = {**facts, "has_permission": False}
    d = RULES.decide(facts)
    assert (d.selected_destination, d.reason_code, d.rule_id) == (
        "reject",
        "permission_denied",
        "permission",
    )


@given(facts_strategy)
def test_every_valid_fact_combination_ends_in_a_declared_destination(facts):
    d = RULES.decide(facts)
    assert d.selected_destination is not None
    assert RULES.vocabulary.check_destination(d.selected_destination)
    assert d.selected_destination in GENERIC_DESTINATIONS
    RULES.vocabulary.check_reason_code(d.reason_code)
    assert d.snapshot_hash and len(d.snapshot_hash) == 64


@settings(max_examples=25, deadline=None)
@given(st.lists(facts_strategy, min_size=1, max_size=8))
def test_same_facts_same_decision_in_two_processes(batch):
    here = [RULES.decide(f).to_dict() for f in batch]
    code = (
        "import json, sys\n"
        "from hybridroute.rules import load_rules\n"
        f"rs = load_rules({str(EXAMPLE)!r})\n"
        "batch = json.loads(sys.stdin.read())\n"
        "print(json.dumps([rs.decide(f).to_dict() for f in batch]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        input=json.dumps(batch),
        capture_output=True,
        text=True,
        check=True,
    )
    there = json.loads(out.stdout)
    assert there == json.loads(json.dumps(here))
    assert [d["snapshot_hash"] for d in there] == [d["snapshot_hash"] for d in here]


# ---------------------------------------------------------------- declared values (issue 15)

SENSITIVE = {"delete_account_data", "change_bank_details", "override_fraud_hold"}


@settings(max_examples=300)
@given(
    st.text(max_size=24)
    | st.sampled_from(sorted(SENSITIVE)).map(str.upper)
    | st.sampled_from(sorted(SENSITIVE)).map(lambda a: a.replace("_", "-"))
    | st.sampled_from(sorted(SENSITIVE)).map(lambda a: f" {a}\u200b")
)
def test_an_undeclared_action_is_refused_never_routed(action):
    """The example rules declare an enum on ``action``: any other spelling is a FactsError."""
    if action in ACTIONS:
        d = RULES.decide({"action": action})
        assert (d.reason_code == "sensitive_action") == (action in SENSITIVE)
        return
    with pytest.raises(FactsError, match="fact 'action': "):
        RULES.decide({"action": action})


@pytest.mark.parametrize(
    ("facts", "match"),
    [
        ({"amount": -100000}, "fact 'amount': -100000 is below the minimum 0"),
        ({"amount": -0.01}, "fact 'amount': -0.01 is below the minimum 0"),
        ({"attempts": -1}, "fact 'attempts': -1 is below the minimum 0"),
        ({"step": -5}, "fact 'step': -5 is below the minimum 0"),
        ({"tool_error_kind": "Retryable"}, "fact 'tool_error_kind': 'Retryable' is not one of"),
        ({"tool_error_kind": ""}, "fact 'tool_error_kind': '' is not one of"),
        ({"action": "delete_account_data\x00"}, "fact 'action': .* holds a NUL character"),
    ],
)
def test_the_example_rules_refuse_undeclared_values(facts, match):
    with pytest.raises(FactsError, match=match):
        RULES.decide(facts)


def test_reference_schema_refuses_negative_counters():
    for name in ("attempts", "step", "amount"):
        with pytest.raises(FactsError, match=f"fact '{name}': -1 is below the minimum 0"):
            SCHEMA.validate({name: -1})


ENUM_SCHEMA = FactSchema.from_dict(
    {
        "action": {
            "type": "str",
            "default": "",
            "enum": ["", "issue_refund", "delete_account_data"],
        },
        "tags": {"type": "list[str]", "default": [], "enum": ["vip", "new"]},
        "level": {"type": "int", "default": 1, "enum": [1, 2]},
        "note": {"type": "str", "default": ""},
    }
)
ENUM_TYPES = {s.name: s.type for s in ENUM_SCHEMA.specs}


@pytest.mark.parametrize(
    ("condition", "bad"),
    [
        ("action == 'issue_refnd'", "'issue_refnd'"),
        ("'delete-account-data' == action", "'delete-account-data'"),
        ("action != 'Issue_Refund'", "'Issue_Refund'"),
        ("action in ['issue_refund', 'delete_acount_data']", "'delete_acount_data'"),
        ("not (action not in ['ISSUE_REFUND'])", "'ISSUE_REFUND'"),
        ("note == 'x' or action == 'refund'", "'refund'"),
        ("'vp' in tags", "'vp'"),
        ("level == 3", "3"),
        ("level == true", "True"),
        ("action == 1", "1"),
    ],
)
def test_a_condition_comparing_with_an_undeclared_value_is_refused(condition, bad):
    rule = Rule.when("typo", condition, "human_review", fact_types=ENUM_TYPES)
    with pytest.raises(RuleSetError, match="which is not one of its allowed values") as info:
        RuleSet([rule], schema=ENUM_SCHEMA)
    assert info.value.rule_id == "typo"
    assert f"with {bad}," in str(info.value)


@pytest.mark.parametrize(
    "condition",
    [
        "action == 'issue_refund'",
        "action in ['', 'delete_account_data']",
        "'vip' in tags and level == 2",
        "note == 'anything'",  # no enum on note
        "'refund' in action",  # a substring test, not a value
        "action == null",
        "level == 2.0",
    ],
)
def test_conditions_with_declared_values_are_accepted(condition):
    RuleSet([Rule.when("ok", condition, "human_review", fact_types=ENUM_TYPES)], schema=ENUM_SCHEMA)
