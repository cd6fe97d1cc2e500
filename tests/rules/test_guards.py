"""Every branch of every built-in guard, in the reference routing order."""

from __future__ import annotations

import pytest

from hybridroute.exceptions import RuleSetError
from hybridroute.rules import GUARDS, Rule, reference_rules
from hybridroute.rules.guards import find_oscillation

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
