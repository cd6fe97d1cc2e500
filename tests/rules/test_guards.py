"""Every branch of every built-in guard, in the reference routing order."""

from __future__ import annotations

import pytest

from hybridroute.contracts import FactSchema
from hybridroute.exceptions import FactsError, RuleSetError
from hybridroute.rules import GUARDS, Rule, RuleSet, reference_rules
from hybridroute.rules.guards import find_oscillation
from hybridroute.rules.guards._base import normalize_token

RULES = reference_rules(
    retry_budget=1,
    amount_limit=500,
    sensitive_actions=["delete_account_data"],
    max_steps=12,
    max_repeats=2,
    default="fail",
)
OSC = ["a", "b", "a", "b", "a", "b"]


@pytest.mark.parametrize(
    ("facts", "destination", "reason", "rule_id"),
    [
        ({"has_permission": False}, "reject", "permission_denied", "permission"),
        # permission outranks everything, including a retryable error and high risk
        (
            {"has_permission": False, "tool_error_kind": "retryable", "amount": 9999},
            "reject",
            "permission_denied",
            "permission",
        ),
        (
            {"tool_error_kind": "retryable", "attempts": 0},
            "retry_tool",
            "tool_error_retry",
            "tool_error",
        ),
        (
            {"tool_error_kind": "retryable", "attempts": 1},
            "fail",
            "retry_budget_exhausted",
            "tool_error",
        ),
        (
            {"tool_error_kind": "retryable", "attempts": 5},
            "fail",
            "retry_budget_exhausted",
            "tool_error",
        ),
        ({"tool_error_kind": "auth_failed"}, "fail", "tool_error_fatal", "tool_error"),
        ({"amount": 500.01}, "human_review", "high_risk_amount", "risk"),
        ({"amount": 500}, "fail", "default_exit", None),
        ({"action": "delete_account_data"}, "human_review", "sensitive_action", "risk"),
        ({"step": 13}, "fail", "step_budget_exceeded", "step_budget"),
        ({"step": 12}, "fail", "default_exit", None),
        ({"route_history": OSC}, "fail", "route_oscillation", "oscillation"),
        ({"route_history": OSC[:4]}, "fail", "default_exit", None),
        (
            {"evidence_complete": True, "missing_user_fields": ["email"]},
            "answer",
            "evidence_complete",
            "evidence",
        ),
        (
            {"missing_user_fields": ["email", "order_number"]},
            "ask_user",
            "missing_user_fields",
            "missing_user_fields",
        ),
        ({}, "fail", "default_exit", None),
    ],
)
def test_reference_order(facts, destination, reason, rule_id):
    d = RULES.decide(facts)
    assert (d.selected_destination, d.reason_code, d.rule_id) == (destination, reason, rule_id)
    assert d.stage == "rule"
    assert d.allowed_destinations == (destination,)


def test_details_carry_the_diagnosis():
    assert dict(RULES.decide({"missing_user_fields": ["email"]}).detail) == {
        "missing_user_fields": ("email",)
    }
    osc = RULES.decide({"route_history": OSC}).detail
    assert list(osc["pattern"]) == ["a", "b"] and osc["repeats"] == 3
    retry = RULES.decide({"tool_error_kind": "retryable", "attempts": 0}).detail
    assert retry["retry_budget"] == 1 and retry["attempts"] == 0
    assert RULES.decide({"step": 20}).detail["max_steps"] == 12


def test_restored_attempts_earn_no_extra_retry():
    # attempts are a fact: replaying the same (restored) facts cannot retry again
    first = RULES.decide({"tool_error_kind": "retryable", "attempts": 0})
    restored = RULES.decide(
        {"tool_error_kind": "retryable", "attempts": first.detail["attempts"] + 1}
    )
    assert (first.selected_destination, restored.selected_destination) == ("retry_tool", "fail")


@pytest.mark.parametrize(
    ("history", "found"),
    [
        (["a", "b"] * 3, (("a", "b"), 3)),
        (["x", "a", "b", "c"] * 1 + ["a", "b", "c"] * 2, (("a", "b", "c"), 3)),
        (["a", "b"] * 2, None),
        (["a"] * 10, None),  # a run of one destination is not an oscillation
        (["a", "b", "a", "c", "a", "b"], None),
        ([], None),
    ],
)
def test_find_oscillation(history, found):
    assert find_oscillation(history, max_repeats=2, min_cycle=2, max_cycle=4) == found


@pytest.mark.parametrize(
    ("name", "params", "match"),
    [
        ("tool_error", {"retry_budget": -1}, "at least 0"),
        ("tool_error", {"retry_budget": 1.5}, "whole number"),
        ("tool_error", {"retryable_kinds": "retryable"}, "list of strings"),
        ("risk", {}, "needs 'amount_limit' or"),
        ("risk", {"amount_limit": "big"}, "must be a number"),
        # non-finite limits: every comparison with NaN is false, so the rule would never fire
        ("risk", {"amount_limit": float("nan")}, "'amount_limit' must be a finite number, got nan"),
        ("risk", {"amount_limit": float("inf")}, "must be a finite number, got inf"),
        ("risk", {"amount_limit": float("-inf")}, "must be a finite number"),
        ("risk", {"amount_limit": -1}, "'amount_limit' must be at least 0"),
        ("risk", {"amount_limit": True}, "must be a number"),
        ("risk", {"sensitive_actions": [" -- "]}, "is empty once normalised"),
        ("step_budget", {"max_steps": float("nan")}, "'max_steps' must be a finite number"),
        ("step_budget", {"max_steps": float("inf")}, "must be a finite number"),
        ("tool_error", {"retry_budget": float("nan")}, "'retry_budget' must be a finite number"),
        ("oscillation", {"max_repeats": float("inf")}, "'max_repeats' must be a finite number"),
        ("step_budget", {}, "needs parameter 'max_steps'"),
        ("oscillation", {"max_repeats": 0}, "at least 1"),
        ("oscillation", {"max_repeats": 2, "min_cycle": 3, "max_cycle": 2}, "at least 'min_cycle'"),
        ("permission", {"colour": "red"}, r"no parameter\(s\) \['colour'\]"),
        ("telepathy", {}, "unknown guard 'telepathy'"),
    ],
)
def test_guard_parameter_errors_name_the_rule(name, params, match):
    with pytest.raises(RuleSetError, match=match) as info:
        Rule.guard("my_rule", name, **params)
    assert info.value.rule_id == "my_rule"
    assert "my_rule" in str(info.value)


def test_all_guards_are_registered():
    assert set(GUARDS) == {
        "permission",
        "tool_error",
        "risk",
        "step_budget",
        "oscillation",
        "evidence",
        "missing_user_fields",
    }


# ------------------------------------------------------------ spelling and sign (issue 15)

# every way of writing ``delete_account_data`` that a person reads as the same action
SPELLINGS = [
    "DELETE_ACCOUNT_DATA",
    "Delete_Account_Data",
    " delete_account_data",
    "delete_account_data\t\n",
    "delete-account-data",
    "delete account data",
    "delete -- account__data",
    "delete\u2011account\u2013data",  # non-breaking hyphen, en dash
    "delete_account_data\x00",
    "\x00delete_account\x07_data",
    "delete_acc\u200bount_data",  # zero-width space
    "\ufeffdelete_account_data\u200d",  # BOM, zero-width joiner
    "delete_account_data\u202e",  # bidi override
    "ｄｅｌｅｔｅ＿ａｃｃｏｕｎｔ＿ｄａｔａ",  # fullwidth
    "DＥLETE_ACCOUNT_DATA",
    "délete_accoùnt_data",  # accents
    "delete_account_data\u0301",  # a combining accent on the last letter
    "delete\u00a0account\u2003data",  # no-break and em spaces
]


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_normalize_token_folds_every_spelling(spelling):
    assert normalize_token(spelling) == "delete_account_data"


@pytest.mark.parametrize(
    "other",
    ["delete_account", "delete_account_data2", "deleteaccountdata", "undelete_account_data", ""],
)
def test_normalize_token_keeps_different_words_different(other):
    assert normalize_token(other) != "delete_account_data"


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_risk_guard_fires_for_every_spelling(spelling):
    """Without an enum on the action fact, the guard itself compares normalised values."""
    guard = RULES.rules[2].guard_obj
    out = guard.check({"amount": 0, "action": spelling})
    assert out is not None and out.reason_code == "sensitive_action"
    assert out.detail["action"] == spelling  # the decision records what was sent


@pytest.mark.parametrize("spelling", [s for s in SPELLINGS if "\x00" not in s])
def test_spellings_go_to_human_review_end_to_end(spelling):
    d = RULES.decide({"action": spelling})
    assert (d.selected_destination, d.reason_code) == ("human_review", "sensitive_action")


@pytest.mark.parametrize("spelling", [s for s in SPELLINGS if "\x00" in s])
def test_nul_in_an_action_is_refused_before_any_rule(spelling):
    with pytest.raises(FactsError, match=r"fact 'action': .*NUL"):
        RULES.decide({"action": spelling})


@pytest.mark.parametrize(
    "declared", ["DELETE-ACCOUNT-DATA", " Delete Account Data ", "delete_account_data"]
)
def test_declared_sensitive_actions_are_normalised_too(declared):
    rs = reference_rules(
        retry_budget=1, amount_limit=None, sensitive_actions=[declared], max_steps=9, max_repeats=2
    )
    for action in ("delete_account_data", "DELETE_ACCOUNT_DATA", "delete-account-data"):
        assert rs.decide({"action": action}).reason_code == "sensitive_action"
    assert rs.decide({"action": "delete_account"}).reason_code == "default_exit"


SIGNED = FactSchema.from_dict(
    {"amount": {"type": "number", "default": 0}, "action": {"type": "str", "default": ""}}
)


@pytest.mark.parametrize(
    ("amount", "fires"),
    [
        (-100000, True),
        (-500.01, True),
        (-500, False),
        (-0.0, False),
        (0, False),
        (499.99, False),
        (500, False),
        (500.01, True),
        (100000, True),
    ],
)
def test_amounts_are_compared_by_magnitude(amount, fires):
    """A refund of -100000 moves as much money as a charge of +100000."""
    rs = RuleSet([Rule.guard("risk", "risk", amount_limit=500)], schema=SIGNED)
    d = rs.decide({"amount": amount})
    assert (d.reason_code == "high_risk_amount") is fires


def test_negative_amounts_are_refused_where_the_schema_says_min_0():
    with pytest.raises(FactsError, match="fact 'amount': -100000 is below the minimum 0"):
        RULES.decide({"amount": -100000, "action": "issue_refund"})


def _schema(**decl):
    return FactSchema.from_dict(decl)


@pytest.mark.parametrize(
    ("rule", "schema", "match"),
    [
        (
            Rule.guard("risk", "risk", sensitive_actions=["delete_acount_data"]),
            _schema(action={"type": "str", "default": "", "enum": ["", "delete_account_data"]}),
            "sensitive action 'delete_acount_data' is not an allowed value of fact 'action'",
        ),
        (
            Rule.guard("risk", "risk", sensitive_actions=["wipe", "delete_account_data"]),
            _schema(action={"type": "str", "enum": ["delete_account_data", "look"]}),
            "sensitive action 'wipe' is not an allowed value",
        ),
        (
            Rule.guard("risk", "risk", amount_limit=1000),
            _schema(amount={"type": "number", "default": 0, "min": 0, "max": 1000}),
            "amount_limit 1000 can never be exceeded: fact 'amount' is declared between 0 and 1000",
        ),
        (
            Rule.guard("risk", "risk", amount_limit=50),
            _schema(amount={"type": "int", "default": 0, "min": -50, "max": 10}),
            "amount_limit 50 can never be exceeded",
        ),
        (
            Rule.guard("tool_error", "tool_error", retryable_kinds=["retryable", "timout"]),
            _schema(
                tool_error_kind={
                    "type": "str",
                    "nullable": True,
                    "default": None,
                    "enum": ["retryable", "timeout"],
                },
                attempts={"type": "int", "default": 0},
            ),
            "retryable kind 'timout' is not an allowed value of fact 'tool_error_kind'",
        ),
        (
            Rule.guard("step_budget", "step_budget", max_steps=12),
            _schema(step={"type": "int", "default": 0, "min": 0, "max": 12}),
            "max_steps 12 can never be exceeded: fact 'step' is declared with max 12",
        ),
    ],
)
def test_guards_that_could_never_fire_under_the_schema_are_refused(rule, schema, match):
    with pytest.raises(RuleSetError, match=match) as info:
        RuleSet([rule], schema=schema)
    assert info.value.rule_id == rule.id


@pytest.mark.parametrize(
    ("rule", "schema"),
    [
        (
            Rule.guard("risk", "risk", sensitive_actions=["Delete-Account-Data"]),
            _schema(action={"type": "str", "default": "", "enum": ["", "delete_account_data"]}),
        ),
        (
            Rule.guard("risk", "risk", amount_limit=1000),
            _schema(amount={"type": "number", "default": 0, "min": -5000, "max": 1000}),
        ),
        (
            Rule.guard("risk", "risk", amount_limit=1000),
            _schema(amount={"type": "number", "default": 0, "max": 1000}),  # negatives can
        ),
        (
            Rule.guard("step_budget", "step_budget", max_steps=12),
            _schema(step={"type": "int", "default": 0, "min": 0, "max": 13}),
        ),
    ],
)
def test_guards_that_can_fire_under_the_schema_are_accepted(rule, schema):
    RuleSet([rule], schema=schema)
