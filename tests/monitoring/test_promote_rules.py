"""The promotion gate's rules check uses the rules diff when only the rules changed."""

from __future__ import annotations

from hybridroute.records import open_log
from hybridroute.rules import diff_rules, parse_rules

from ..router.conftest import EXAMPLE
from .test_promote import (
    ITEMS,
    LOOSER_RULES,
    A,
    ScoreClassifier,
    gate,
    make_log,
    router,
)

#: a rule added after the risk rule: tickets without an amount (the incumbent's model routed
#: them) now go to human review
STRICTER_RULES = parse_rules(
    EXAMPLE.read_text().replace(
        "  - id: step_budget\n",
        "  - id: no_amount\n    when: 'amount == 0'\n    then: human_review\n"
        "    reason: needs_review\n  - id: step_budget\n",
    )
)


def test_only_the_rules_changed_so_the_gate_reports_the_rules_diff(tmp_path):
    url = make_log(tmp_path)
    report = gate(url, router("2", rules=LOOSER_RULES), max_listed=3)
    check = report.check("rules")
    f = check.figures
    assert f["only_rules_changed"] and check.status == "fail"
    impact = f["impact"]
    with open_log(url, create=False) as log:
        rows = list(log.rows(router_version="1", role="live"))
    same = diff_rules(A.rules, LOOSER_RULES, rows, max_examples=3)
    # the same comparison as `hybridroute rules diff OLD NEW --log URL`
    for key in ("inputs", "compared", "changed", "changed_share", "groups"):
        assert impact[key] == same[key], key
    high_amount = sum(1 for it in ITEMS if it["facts"] == {"amount": 900})
    assert impact["changed"] == f["changed"] == high_amount
    (g,) = impact["groups"]
    assert (g["old_by"], g["new_by"]) == ("high_risk: high_risk_amount", "model")
    assert "only the rules changed, so by the rules diff" in check.reason
    assert f"{high_amount} of {len(ITEMS)} logged inputs" in check.reason
    lines = report.summary_lines()
    assert any(
        x.strip().startswith(f"rules diff: {high_amount} ")
        and "human_review [high_risk: high_risk_amount] -> (model) [model]" in x
        for x in lines
    )


def test_a_slice_newly_sent_to_review_is_counted_as_changed(tmp_path):
    url = make_log(tmp_path, name="stricter.sqlite")
    check = gate(url, router("2", rules=STRICTER_RULES)).check("rules")
    impact = check.figures["impact"]
    no_amount = sum(1 for it in ITEMS if it["facts"] == {})
    assert impact["changed"] == check.figures["changed"] == no_amount
    assert impact["changed_share"] == round(no_amount / len(ITEMS), 6)
    assert {g["new_by"] for g in impact["groups"]} == {"no_amount: needs_review"}
    allowed = gate(url, router("2", rules=STRICTER_RULES), allow_rule_changes=True)
    assert allowed.check("rules").status == "pass"


def test_when_the_model_changed_too_the_rules_diff_is_not_the_comparison(tmp_path):
    url = make_log(tmp_path, name="model.sqlite")
    other = router("2", rules=LOOSER_RULES, clf=ScoreClassifier(flip_every=7))
    f = gate(url, other).check("rules").figures
    assert f["rules_changed"] and not f["only_rules_changed"] and f["impact"] is None


def test_unchanged_rules_need_no_diff(tmp_path):
    url = make_log(tmp_path, name="same.sqlite")
    f = gate(url, router("2")).check("rules").figures
    assert not f["rules_changed"] and f["impact"] is None
