"""Lint beyond validity: dead conditions, shadowed and overlapping rules, unread facts."""

from __future__ import annotations

import textwrap

import pytest

from hybridroute.rules import lint_rules, load_rules, parse_rules

from .conftest import EXAMPLE

HEAD = textwrap.dedent(
    """\
    name: t
    facts:
      has_permission: {type: bool, default: true}
      amount: {type: number, default: 0, min: 0, max: 10000}
      attempts: {type: int, default: 0, min: 0, max: 5}
      action: {type: str, default: "", enum: ["", issue_refund, lookup_order]}
      vip: {type: bool, default: false}
      tier: {type: str, default: ""}
      priority: {type: int, default: 1, enum: [1, 2, 3]}
      note: {type: str, nullable: true, default: null}
      tags: {type: "list[str]", default: []}
    reason_codes: [r1, r2, r3]
    default: {destination: fail, reason: default_exit}
    rules:
      - id: permission
        guard: permission
    """
)


def rule(
    rid: str, when: str, then: str = "human_review", reason: str = "r1", extra: str = ""
) -> str:
    return f'  - id: {rid}\n    when: "{when}"\n    then: {then}\n    reason: {reason}\n{extra}'


def lint(*rules: str):
    return lint_rules(parse_rules(HEAD + "".join(rules)))


def kinds(report, kind: str) -> list:
    return [f for f in report.findings if f.kind == kind]


def test_the_example_rules_are_clean_even_strictly():
    report = lint_rules(load_rules(EXAMPLE))
    assert report.findings == () and report.not_checked == ()
    assert report.errors(strict=True) == []
    assert report.lines(strict=True) == [
        "rules lint: support-rules 1 -- 7 rule(s), 9 fact(s): 0 error(s), 0 warning(s)"
    ]


@pytest.mark.parametrize(
    ("when", "said"),
    [
        ("amount > 10 and amount < 5", "`amount > 10` and `amount < 5` contradict"),
        ("amount < 0", "`amount < 0` can never be true"),
        ("amount > 10000.5", "`amount > 10000.5` can never be true"),
        ("attempts >= 6 or attempts < 0", "`attempts >= 6 or attempts < 0` can never be true"),
        ("attempts > 2 and attempts < 3", "`attempts > 2` and `attempts < 3` contradict"),
        ("priority > 3", "`priority > 3` can never be true"),
        ("vip and not vip", "`vip` and `not vip` contradict"),
        ("tier == 'a' and tier == 'b'", "`tier == 'a'` and `tier == 'b'` contradict"),
        ("note == null and note == 'x'", "`note == null` and `note == 'x'` contradict"),
        (
            "action == 'issue_refund' and vip and action != 'issue_refund'",
            "`action == 'issue_refund'` and `action != 'issue_refund'` contradict",
        ),
        ("amount > 20 and vip and amount <= 20", "`amount > 20` and `amount <= 20` contradict"),
    ],
)
def test_conditions_that_can_never_be_true_are_exact_errors(when, said):
    report = lint(rule("r", when))
    (f,) = kinds(report, "never-true")
    assert f.exact and f.rule_id == "r" and said in f.message
    assert f.message.startswith("rule 'r' can never fire: ") and "(declared: " in f.message
    assert f in report.errors(strict=True) and report.errors(strict=False) == []


def test_the_declared_bounds_are_shown():
    (f,) = kinds(lint(rule("r", "amount < 0")), "never-true")
    assert f.message.endswith("(declared: amount: number, min 0, max 10000)")


@pytest.mark.parametrize(
    ("when", "kind", "atom"),
    [
        ("amount < 0 or vip", "dead-comparison", "amount < 0"),
        ("vip or priority == 4", None, None),  # refused at load: not in the enum (validity)
        ("vip and amount >= 0", "always-true-comparison", "amount >= 0"),
        ("vip or attempts <= 5", "always-true-comparison", "attempts <= 5"),
    ],
)
def test_one_comparison_that_is_never_or_always_true(when, kind, atom):
    if kind is None:
        with pytest.raises(Exception, match="not one of its allowed values"):
            lint(rule("r", when))
        return
    report = lint(rule("r", when))
    (f,) = kinds(report, kind)
    assert f"rule 'r': `{atom}`" in f.message and f.exact
    assert not kinds(report, "never-true")


def test_a_whole_condition_that_is_always_true_says_so_and_shadows_the_next_rule():
    report = lint(rule("all", "amount >= 0"), rule("later", "vip", then="answer"))
    (always,) = kinds(report, "always-true-comparison")
    assert "the rule decides every input that reaches it" in always.message
    (never,) = kinds(report, "never-fires")
    assert never.rule_id == "later" and "'all'" in never.message and never.exact


def test_a_rule_an_earlier_rule_shadows_wholly_never_fires_with_the_facts_shown():
    report = lint(
        rule("big", "amount > 1000"),
        rule("bigger", "amount > 2000 and action == 'issue_refund'", then="answer", reason="r2"),
    )
    (f,) = kinds(report, "never-fires")
    assert f.rule_id == "bigger" and f.exact
    assert "'big' takes" in f.message and "-> human_review/r1 instead of answer/r2" in f.message
    (w,) = f.witnesses
    assert w["decided_by"] == "big" and w["facts"]["amount"] > 2000
    assert w["facts"]["action"] == "issue_refund"


def test_a_guard_can_shadow_a_condition():
    report = lint(
        "  - id: risk\n    guard: risk\n    params: {amount_limit: 500}\n",
        rule("big_refund", "amount > 600 and action == 'issue_refund'", then="answer"),
    )
    (f,) = kinds(report, "never-fires")
    assert f.rule_id == "big_refund" and "'risk' takes" in f.message
    assert "human_review/high_risk_amount instead of answer/r1" in f.message


def test_a_partial_overlap_shows_the_facts_that_reach_the_rule_and_those_taken():
    report = lint(
        rule("big", "amount > 1000"),
        rule("refund", "amount > 100 and action == 'issue_refund'", then="answer", reason="r2"),
    )
    (f,) = kinds(report, "overlap")
    assert f.rule_id == "refund" and f.exact
    assert "'big' takes" in f.message and "it still decides e.g." in f.message
    taken = [w for w in f.witnesses if w["decided_by"] == "big"]
    reach = [w for w in f.witnesses if w["decided_by"] == "refund"]
    assert taken and all(w["facts"]["amount"] > 1000 for w in taken)
    assert reach and all(100 < w["facts"]["amount"] <= 1000 for w in reach)
    assert "add 'overlaps: [big]' to the rule" in f.message


def test_an_overlap_declared_meant_is_not_reported_but_a_dead_rule_still_is():
    meant = rule(
        "refund",
        "amount > 100 and action == 'issue_refund'",
        "answer",
        "r2",
        "    overlaps: [big]\n",
    )
    assert kinds(lint(rule("big", "amount > 1000"), meant), "overlap") == []
    dead = rule("refund", "amount > 2000", "answer", "r2", "    overlaps: [big]\n")
    assert kinds(lint(rule("big", "amount > 1000"), dead), "never-fires")


@pytest.mark.parametrize(
    "earlier",
    [
        rule("same", "amount > 1000", then="answer", reason="r2"),  # the same decision
        rule("gate", "vip", then="answer", reason="r3"),  # other facts: a gate, by design
    ],
)
def test_no_overlap_for_the_same_decision_or_a_gate_on_other_facts(earlier):
    report = lint(earlier, rule("refund", "amount > 100", then="answer", reason="r2"))
    assert kinds(report, "overlap") == [] and kinds(report, "never-fires") == []


def test_the_permission_gate_of_the_example_is_no_overlap():
    report = lint(rule("refund", "amount > 100 and action == 'issue_refund'"))
    assert kinds(report, "overlap") == [] and kinds(report, "never-fires") == []


def test_facts_no_rule_reads_and_enum_values_no_rule_reads():
    report = lint(rule("r", "action == 'issue_refund' and vip"))
    unread = {f.fact for f in kinds(report, "unread-fact")}
    assert unread == {"amount", "attempts", "tier", "priority", "note", "tags"}
    (f,) = kinds(report, "unread-enum-value")
    assert f.fact == "action" and "'', 'lookup_order'" in f.message
    assert "compare it only with 'issue_refund'" in f.message


@pytest.mark.parametrize(
    "when", ["priority >= 2 and vip", "action in ['', 'issue_refund', 'lookup_order']"]
)
def test_enum_values_read_by_ordering_or_all_named_are_read(when):
    assert kinds(lint(rule("r", when)), "unread-enum-value") == []


def test_facts_a_guard_reads_have_every_value_read():
    text = HEAD + "  - id: risk\n    guard: risk\n    params: {sensitive_actions: [issue_refund]}\n"
    assert kinds(lint_rules(parse_rules(text)), "unread-enum-value") == []


def test_a_heuristic_finding_stays_a_warning_under_strict():
    report = lint(rule("r", "'x' in tags and len(tags) > 3 and len(tags) < 2"))
    (f,) = kinds(report, "never-true")
    assert not f.exact and "searched values of tags" in f.message
    assert f not in report.errors(strict=True)
    assert any(line.startswith("warning: [never-true] (heuristic)") for line in report.lines(True))


def test_a_search_too_large_is_listed_as_not_checked():
    facts = "".join(f"  n{i}: {{type: int, default: 0}}\n" for i in range(12))
    when = " and ".join(f"n{i} > {i}" for i in range(12))
    text = HEAD.replace("facts:\n", "facts:\n" + facts) + rule("wide", when)
    report = lint_rules(parse_rules(text))
    assert report.not_checked and "rule 'wide'" in report.not_checked[0]
    assert "combinations of n0, n1" in report.not_checked[0]


def test_lint_is_deterministic_and_json_able():
    import json

    rules = (rule("big", "amount > 1000"), rule("refund", "amount > 100", "answer", "r2"))
    a, b = lint(*rules), lint(*rules)
    assert a.lines() == b.lines()
    doc = json.loads(json.dumps(a.to_dict(strict=True)))
    assert doc["errors"] == len([f for f in a.findings if f.exact])
    assert {f["level"] for f in doc["findings"]} == {"error"}


def test_a_file_of_many_overlapping_rules_lints_within_its_budget():
    import threading

    rules = "".join(
        rule(f"r{i}", f"amount > {i * 10} and action == 'issue_refund'", "answer", "r2")
        for i in range(300)
    )
    out: list = []
    t = threading.Thread(target=lambda: out.append(lint(rules)), daemon=True)
    t.start()
    t.join(60)
    assert not t.is_alive(), "lint did not finish"
    (report,) = out
    (line,) = [x for x in report.not_checked if "budget of 2,000,000 rule evaluations" in x]
    assert line.startswith("rule 'r") and "more search(es)" in line
    # the rules it did search are reported: each is redundant, the one before decides alike
    f = kinds(report, "never-fires")[0]
    assert f.message == (
        "rule 'r1' can never fire: wherever it would, an earlier rule decides first: 'r0' takes "
        "every case with the same decision"
    )
