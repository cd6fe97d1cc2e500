"""Rule coverage: one definition for `rules test` and `evaluate` on a labelled set."""

from __future__ import annotations

import pytest

from hybridroute.evaluation import evaluate_router
from hybridroute.rules import load_rules, parse_rules
from hybridroute.rules._coverage import coverage_lines

from .conftest import EXAMPLE, SMALL


def _d(rule_id, destination, reason, stage="rule"):
    return {
        "stage": stage,
        "rule_id": rule_id,
        "selected_destination": destination,
        "reason_code": reason,
    }


def test_rules_never_fired_outcomes_and_destinations_never_reached():
    rs = load_rules(EXAMPLE)
    cov = rs.coverage(
        [
            _d("permission", "reject", "permission_denied"),
            _d("tool_error", "retry_tool", "tool_error_retry"),
            _d("tool_error", "retry_tool", "tool_error_retry"),
            _d(None, "human_review", "default_exit"),
            _d(None, "refund_request", "confident_intent", stage="model"),
        ]
    )
    assert cov["decisions"] == 5 and cov["default_exit"] == 1
    assert cov["rules"]["fired"]["tool_error"] == 2
    assert cov["rules"]["never_fired"] == [
        "high_risk",
        "step_budget",
        "oscillation",
        "evidence",
        "missing_fields",
    ]
    never = {(m["rule"], m["reason_code"]) for m in cov["outcomes"]["never_reached"]}
    assert ("tool_error", "retry_budget_exhausted") in never
    assert ("tool_error", "tool_error_fatal") in never
    assert ("tool_error", "tool_error_retry") not in never
    dests = cov["destinations"]
    assert dests["reached"] == {
        "reject": 1,
        "retry_tool": 2,
        "human_review": 1,
        "refund_request": 1,
    }
    assert "order_status" in dests["not_reached"] and "refund_request" not in dests["not_reached"]
    assert not cov["complete"]
    lines = coverage_lines(cov)
    assert lines[1].startswith("  rules fired: 2 of 7; never fired: high_risk, step_budget")


@pytest.mark.parametrize(
    ("model", "reachable"),
    [
        (None, ["reject", "human_review", "refund_request", "order_status"]),
        ((), ["reject", "human_review", "refund_request"]),
        (
            ("order_status", "ask_user"),
            ["reject", "human_review", "refund_request", "order_status", "ask_user"],
        ),
    ],
)
def test_model_destinations_decide_what_the_model_can_reach(model, reachable):
    # rules' destinations and the default exit first, then the model stage's
    cov = parse_rules(SMALL).coverage([], model_destinations=model)
    assert cov["destinations"]["reachable"] == reachable
    assert cov["destinations"]["not_reached"] == reachable


def test_evaluate_on_a_labelled_set_with_facts_reports_the_rule_coverage(support):
    router, ds = support
    part = ds.split("test")
    ev = evaluate_router(router, part, n_boot=10)
    cov = ev["rule_coverage"]
    assert cov["decisions"] == ev["n"] == len(part)
    fired = {k: v for k, v in cov["rules"]["fired"].items() if v}
    # the same counts as the per-rule statistics: one definition of "fired"
    assert fired == {k: v["fires"] for k, v in ev["rules"].items() if k != "default_exit"}
    assert set(cov["destinations"]["reachable"]) == set(router.rules.vocabulary.destinations)
    rows_reached = {r["destination"] for r in ev.rows}
    assert set(cov["destinations"]["reached"]) == rows_reached
    assert set(cov["destinations"]["not_reached"]) == (
        set(cov["destinations"]["reachable"]) - rows_reached
    )


def test_the_evaluation_report_shows_the_rule_coverage(support, tmp_path):
    from hybridroute.evaluation import write_report

    router, ds = support
    ev = evaluate_router(router, ds.split("test").split("test"), n_boot=10)
    files = write_report(ev, tmp_path / "report", title="t")
    md = files["markdown"].read_text(encoding="utf-8")
    assert "## Rule coverage" in md and "| rules |" in md and "| destinations |" in md


@pytest.mark.parametrize(
    ("guard", "codes"),
    [
        ("risk\n    params: {amount_limit: 500}", ["high_risk_amount"]),
        ("risk\n    params: {sensitive_actions: [issue_refund]}", ["sensitive_action"]),
        (
            "tool_error\n    params: {retry_budget: 0}",
            ["retry_budget_exhausted", "tool_error_fatal"],
        ),
        ("tool_error\n    params: {retryable_kinds: []}", ["tool_error_fatal"]),
        (
            "tool_error",
            ["tool_error_retry", "retry_budget_exhausted", "tool_error_fatal"],
        ),
    ],
)
def test_only_the_outcomes_a_guard_can_give_with_its_parameters_are_expected(guard, codes):
    text = SMALL.replace(
        "  - id: risk\n    guard: risk\n    params: {amount_limit: 500}\n",
        f"  - id: g\n    guard: {guard}\n",
    ).replace(
        "facts:\n",
        "facts:\n  tool_error_kind: {type: str, nullable: true, default: null}\n"
        "  attempts: {type: int, default: 0, min: 0}\n",
    )
    cov = parse_rules(text).coverage([])
    assert [m["reason_code"] for m in cov["outcomes"]["never_reached"] if m["rule"] == "g"] == codes
