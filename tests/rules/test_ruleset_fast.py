"""The rule layer's fast path makes the decisions the plain construction makes, byte for byte.

:meth:`RuleSet.decide` writes the snapshot's hash straight from the schema, freezes a
rule's detail itself (one shared value for an empty one) and calls the rules' own check
functions. Each decision is compared with the one :class:`Decision` builds from the same
facts by its general path: the snapshot hashed from scratch, the detail frozen by the
contract.
"""

from __future__ import annotations

import random
from types import MappingProxyType

import pytest

from hybridroute.contracts import Decision
from hybridroute.rules import RuleSet, load_rules, reference_rules

from .test_ruleset import EXAMPLE


def _reference() -> RuleSet:
    return reference_rules(
        retry_budget=1,
        amount_limit=500,
        sensitive_actions=["change_bank_details"],
        max_steps=12,
        max_repeats=2,
    )


def _fact_sets(n: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    kinds = [None] * 6 + ["retryable", "auth_failed", "timeout"]
    cycle = ["order_status", "refund_request"]
    out = []
    for _ in range(n):
        facts = {
            "has_permission": rng.random() > 0.1,
            "tool_error_kind": rng.choice(kinds),
            "attempts": rng.randint(0, 2),
            "amount": rng.choice([0, 499.5, 500, 500.01, 1e4, 3, 3.0]),
            "action": rng.choice(["", "issue_refund", "change_bank_details", "lookup_order"]),
            "evidence_complete": rng.random() < 0.2,
            "missing_user_fields": rng.choice([[], ["email"], ("order_number", "email")]),
            "route_history": rng.choice([[], cycle * 3, ["a", "b", "c"] * 3, cycle]),
            "step": rng.randint(0, 14),
        }
        # leave some facts out (their defaults) and some null (not given)
        for name in rng.sample(sorted(facts), rng.randint(0, 5)):
            if rng.random() < 0.5:
                del facts[name]
            elif name != "tool_error_kind":
                facts[name] = None
        out.append(facts)
    return out


def _plain(rules: RuleSet, facts: dict) -> Decision:
    """The decision built by the contract's general path (hash and freezing its own)."""
    valid = rules.validate_facts(facts)
    found = rules.match(valid) or rules._default_match
    return Decision(
        router=rules.name,
        router_version=rules.version,
        stage="rule",
        input_snapshot={"facts": dict(valid)},
        allowed_destinations=(found.destination,),
        selected_destination=found.destination,
        reason_code=found.reason_code,
        rule_id=found.rule_id,
        detail={k: v for k, v in found.detail.items()},
    )


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("which", ["example", "reference"])
def test_decide_is_the_plain_construction(which, seed):
    rules = load_rules(EXAMPLE) if which == "example" else _reference()
    names = {s.name for s in rules.schema.specs}
    reasons = set()
    for facts in _fact_sets(600, seed):
        facts = {k: v for k, v in facts.items() if k in names}
        fast = rules.decide(facts)
        plain = _plain(rules, facts)
        assert fast.to_json() == plain.to_json()
        assert fast == plain
        assert (
            type(fast.detail) is MappingProxyType and type(fast.input_snapshot) is MappingProxyType
        )
        reasons.add(fast.reason_code)
    assert len(reasons) >= 8  # every kind of outcome, the default exit among them


@pytest.mark.parametrize(
    "detail",
    [
        {"seen": [1, [2, 3]], "x": {"y": 1}},
        {"amount": 1.5, "limit": 500, "ok": True, "none": None, "s": "x"},
        {"fields": ("email",), "cycle": ["a", "b"]},
        MappingProxyType({"k": 1}),
        {},
    ],
)
def test_a_detail_is_frozen_as_the_contract_freezes_it(detail):
    from hybridroute._canonical import _freeze
    from hybridroute.rules._ruleset import _frozen_detail

    fast, plain = _frozen_detail(detail), _freeze(detail)
    assert type(fast) is MappingProxyType and fast == plain
    assert {k: type(v) for k, v in fast.items()} == {k: type(v) for k, v in plain.items()}
    if isinstance(detail, dict) and detail:
        detail["added"] = 1  # the guard's own dict may change: the frozen one does not
        assert "added" not in fast


def test_an_empty_detail_is_one_shared_value():
    rules = _reference()
    first, second = rules.decide({"has_permission": False}), rules.decide({})
    assert dict(first.detail) == {} and first.detail is second.detail
