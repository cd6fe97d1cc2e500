"""The impact of a rules change: every decision that changes, its share, and schema changes."""

from __future__ import annotations

import pytest

from hybridroute.datasets import load_dataset
from hybridroute.records import open_log
from hybridroute.rules import diff_rules, load_rules, parse_rules
from hybridroute.rules._diff import DiffInput, inputs_from_dataset, inputs_from_records

from .conftest import EXAMPLE, SMALL

TEXT = EXAMPLE.read_text(encoding="utf-8")
OLD = load_rules(EXAMPLE)


def new_rules(*edits: tuple[str, str]) -> object:
    text = TEXT.replace('version: "1"', 'version: "2"')
    for a, b in edits:
        assert a in text, a
        text = text.replace(a, b)
    return parse_rules(text, source="new.yaml")


@pytest.fixture(scope="module")
def tickets():
    return load_dataset("support-tickets")


def _expected_reroute(ds, lo: float, hi: float) -> tuple[int, int]:
    """(rerouted, reason changed) by the risk limit lowered from ``hi`` to ``lo``, counted
    without the diff: rows with an amount in (lo, hi] that no rule before the risk rule
    decides -- sent to review now, or (a sensitive action) still, for another reason."""
    rerouted = reason = 0
    for facts in ds.iter_facts():
        valid = OLD.validate_facts({k: v for k, v in facts.items() if k in OLD.schema})
        before = OLD.match(valid)
        if not lo < abs(valid["amount"]) <= hi:
            continue
        if before is not None and before.rule_id in ("permission", "tool_error"):
            continue
        if before is not None and before.rule_id == "high_risk":
            reason += 1  # a sensitive action: human review already, now for the amount
        else:
            rerouted += 1
    return rerouted, reason


def test_a_lower_risk_limit_silently_reroutes_a_slice_and_the_diff_shows_its_share(tickets):
    new = new_rules(("amount_limit: 500", "amount_limit: 300"))
    d = diff_rules(OLD, new, inputs_from_dataset(tickets), source="dataset support-tickets")
    n, reason = _expected_reroute(tickets, 300, 500)
    total = len(tickets)
    assert n > 20 and reason == 1  # a real slice of traffic
    assert d["inputs"] == d["compared"] == total and d["unreplayable"] == 0
    assert (d["rerouted"], d["reason_changed"], d["changed"]) == (n, reason, n + reason)
    assert d["changed_share"] == round((n + reason) / total, 6)
    assert d["rerouted_share"] == round(n / total, 6)
    groups = d["groups"]
    assert sum(g["count"] for g in groups) == n + reason
    assert all(g["new_destination"] == "human_review" for g in groups)
    assert any(g["old_by"] == "high_risk: sensitive_action" for g in groups)
    assert all(g["new_by"] == "high_risk: high_risk_amount" for g in groups)
    top = groups[0]
    assert (top["old_destination"], top["old_by"]) == ("(model)", "model")
    assert top["old_rule"] is None and top["new_rule"] == "high_risk"
    assert groups == sorted(groups, key=lambda g: -g["count"])
    assert len(d["examples"]) == len(groups)  # the first input of each change
    ex = d["examples"][0]
    assert 300 < ex["facts"]["amount"] <= 500 and "row" in ex["ref"]
    lines = d.summary_lines()
    changed = n + reason
    assert any(
        f"changed: {changed} of {total} ({changed / total:.2%} of traffic)" in x for x in lines
    )
    assert any("(model) [model] -> human_review [high_risk: high_risk_amount]" in x for x in lines)


def test_reordering_two_guards_reroutes_the_inputs_both_fire_on(tickets):
    # missing fields before evidence: complete evidence with a missing field now asks
    evidence = "  - id: evidence\n    guard: evidence\n"
    missing = "  - id: missing_fields\n    guard: missing_user_fields\n"
    new = new_rules((evidence + missing, missing + evidence))
    both = sum(
        1
        for f in tickets.iter_facts()
        if f["evidence_complete"]
        and f["missing_user_fields"]
        and OLD.evaluate({k: v for k, v in f.items() if k in OLD.schema}).rule_id == "evidence"
    )
    d = diff_rules(OLD, new, inputs_from_dataset(tickets))
    assert both > 0 and d["changed"] == d["rerouted"] == both
    (g,) = d["groups"]
    assert (g["old_by"], g["new_by"]) == (
        "evidence: evidence_complete",
        "missing_fields: missing_user_fields",
    )


def test_identical_rules_change_nothing(tickets):
    d = diff_rules(OLD, new_rules(), inputs_from_dataset(tickets))
    assert (d["changed"], d["rule_only"], d["groups"], d["examples"]) == (0, 0, [], [])
    assert d["changed_share"] == 0.0


def test_a_rule_that_takes_over_with_the_same_decision_is_counted_apart():
    old = parse_rules(SMALL)
    new = parse_rules(
        SMALL.replace(
            "rules:\n",
            "rules:\n  - id: early_big\n    when: 'amount > 500'\n    then: human_review\n"
            "    reason: high_risk_amount\n",
        )
    )
    d = diff_rules(old, new, [DiffInput({"amount": 900}), DiffInput({"amount": 10})])
    assert (d["changed"], d["rule_only"]) == (0, 1)


# ---------------------------------------------------------------- schemas that differ


FACTS = [
    {"has_permission": True, "amount": 12.5, "action": "issue_refund", "tier": "gold"},
    {"has_permission": True, "amount": 900, "action": "", "tier": "basic"},
    {"has_permission": False, "amount": 3, "action": "lookup_order", "tier": "basic"},
]


def _inputs():
    return [DiffInput(f, text="some text", ref={"row": i + 1}) for i, f in enumerate(FACTS)]


def test_a_fact_new_adds_with_a_default_takes_it_and_is_counted():
    new = parse_rules(SMALL.replace("facts:\n", "facts:\n  channel: {type: str, default: web}\n"))
    d = diff_rules(parse_rules(SMALL), new, _inputs())
    assert d["schema"]["added"] == {"channel": {"default": "web"}}
    assert d["defaults_applied"] == {"channel": 3} and d["changed"] == 0
    assert any("3 input(s) lack the new fact 'channel'" in x for x in d.summary_lines())


@pytest.mark.parametrize(
    ("edit", "refused", "fact"),
    [
        # a fact removed: callers still sending it are refused (extra_facts: forbid)
        (("  tier: {type: str, default: basic, enum: [basic, gold]}\n", ""), 3, "tier"),
        # a required fact added
        (("facts:\n", "facts:\n  channel: {type: str}\n"), 3, "channel"),
        # a type change: amount is now a whole number
        (
            (
                "amount: {type: number, default: 0, min: 0}",
                "amount: {type: int, default: 0, min: 0}",
            ),
            1,
            "amount",
        ),
        # an enum narrowed
        (('enum: ["", issue_refund, lookup_order]', 'enum: ["", issue_refund]'), 1, "action"),
    ],
)
def test_inputs_the_new_schema_refuses_are_their_own_category(edit, refused, fact):
    new_text = SMALL.replace(*edit)
    if fact == "tier":
        new_text = new_text.replace("tier == 'gold' and ", "")
    d = diff_rules(parse_rules(SMALL), parse_rules(new_text), _inputs())
    assert d["refused_by_new"] == refused and d["refusals"] == {f"fact {fact!r}": refused}
    refused_groups = [g for g in d["groups"] if g["new_destination"] == "(refused)"]
    assert sum(g["count"] for g in refused_groups) == refused
    assert all(g["new_by"] == f"fact {fact!r}" for g in refused_groups)
    assert d["changed"] >= refused  # a refused request is changed traffic


def test_drop_removed_facts_reads_inputs_as_callers_that_stopped_sending_them():
    new = parse_rules(
        SMALL.replace("  tier: {type: str, default: basic, enum: [basic, gold]}\n", "").replace(
            "tier == 'gold' and ", ""
        )
    )
    d = diff_rules(parse_rules(SMALL), new, _inputs(), drop_removed_facts=True)
    assert d["schema"]["removed"] == ["tier"] and d["refused_by_new"] == 0
    # the gold-only refund rule now fires for everyone asking for a refund: row 1 was gold
    assert d["changed"] == 0
    basic_refund = [DiffInput({"amount": 5, "action": "issue_refund", "tier": "basic"}, "t")]
    d = diff_rules(parse_rules(SMALL), new, basic_refund, drop_removed_facts=True)
    assert d["changed"] == 1 and d["groups"][0]["new_by"] == "gold_refund: gold_refund"


def test_inputs_the_old_schema_refuses_are_counted_too():
    d = diff_rules(
        parse_rules(SMALL),
        parse_rules(SMALL.replace("enum: [basic, gold]", "enum: [basic, gold, silver]")),
        [DiffInput({"tier": "silver"}), DiffInput({"tier": "silver", "has_permission": False})],
    )
    assert d["refused_by_old"] == 2 and d["changed"] == 2
    assert {g["old_destination"] for g in d["groups"]} == {"(refused)"}


# ---------------------------------------------------------------- from a decision log


@pytest.fixture(scope="module")
def logged(support, tmp_path_factory):
    """The support router's decisions on the test split, logged live."""
    router, ds = support
    part = ds.split("test")
    names = set(router.rules.schema.names)
    items = [
        {"facts": {k: v for k, v in f.items() if k in names and v is not None}, "text": t}
        for f, t in zip(part.iter_facts(), part.texts, strict=True)
    ]
    url = f"sqlite:///{tmp_path_factory.mktemp('diff-log') / 'log.sqlite'}"
    with open_log(url) as log:
        log.log_many([(d, f"r{i}", "live") for i, d in enumerate(router.route_many(items))])
    return url, part


def test_the_diff_over_a_log_replays_the_stored_facts(logged):
    url, part = logged
    new = new_rules(("amount_limit: 500", "amount_limit: 300"))
    with open_log(url, create=False) as log:
        d = diff_rules(OLD, new, inputs_from_records(log.rows(role="live")), source="log")
        rows = list(log.rows(role="live"))
    from_set = diff_rules(OLD, new, inputs_from_dataset(part))
    assert d["inputs"] == len(part) == len(rows)
    assert (d["changed"], d["groups"][0]["count"]) == (
        from_set["changed"],
        from_set["groups"][0]["count"],
    )
    ex = d["examples"][0]
    assert ex["ref"]["decision_id"] and ex["ref"]["logged"]["stage"] in ("model", "policy")
    assert 300 < ex["facts"]["amount"] <= 500
    # the gate's path: a RuleSet's own diff over log rows gives the same report
    assert OLD.diff(new, rows, source="log") == d


def test_facts_stored_hashed_and_read_by_a_rule_cannot_be_replayed(support, tmp_path):
    router, ds = support
    url = f"sqlite:///{tmp_path / 'hashed.sqlite'}"
    items = [{"facts": {"amount": a}, "text": "where is my order"} for a in (10, 400, 900)]
    with open_log(url, sensitive_fields=("amount",), salt="s") as log:
        log.log_many([(d, None, "live") for d in router.route_many(items)])
        rows = list(log.rows())
    new = new_rules(("amount_limit: 500", "amount_limit: 300"))
    d = diff_rules(OLD, new, rows)
    assert (d["inputs"], d["unreplayable"], d["compared"], d["changed_share"]) == (3, 3, 0, None)


def test_max_examples_bounds_the_examples_not_the_counts(tickets):
    new = new_rules(("amount_limit: 500", "amount_limit: 100"))
    d = diff_rules(OLD, new, inputs_from_dataset(tickets), max_examples=1)
    assert len(d["examples"]) == 1 and len(d["groups"]) > 1
    with pytest.raises(ValueError, match="max_examples"):
        diff_rules(OLD, new, [], max_examples=-1)
