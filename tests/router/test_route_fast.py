"""``route_many`` of plain dict items takes a shorter path and decides exactly the same.

A plain dict item (facts a dict or absent, text a string or absent, no evidence) that a
rule decides comes back as the rules' decision without the request and checked values
the router would build and throw away. On many generated items -- each kind of rule
outcome, the default exit, classified items, facts left out or null, extra keys -- the
decisions equal those of the same items routed as :class:`RouteRequest` values, and an
item with two faults is refused with the error the general path gives.
"""

from __future__ import annotations

import random

import pytest

from hybridroute.contracts import RouteRequest
from hybridroute.exceptions import UserInputError
from hybridroute.router._request import check_item, check_request


def _items(n: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    texts = [None, "", "  ", "where is my parcel?", "I want a refund for order 61002"]
    out = []
    for _ in range(n):
        facts = {
            "has_permission": rng.random() > 0.15,
            "tool_error_kind": rng.choice([None, None, "retryable", "timeout"]),
            "attempts": rng.randint(0, 2),
            "amount": rng.choice([0, 12.5, 501, 499.0]),
            "action": rng.choice(["", "issue_refund", "change_bank_details"]),
            "missing_user_fields": rng.choice([[], ["email"]]),
            "route_history": rng.choice([[], ["a", "b"] * 3]),
            "step": rng.randint(0, 14),
        }
        for name in rng.sample(sorted(facts), rng.randint(0, 6)):
            if rng.random() < 0.5:
                del facts[name]
            elif name != "tool_error_kind":
                facts[name] = None
        item: dict = {"facts": facts, "text": rng.choice(texts)}
        if rng.random() < 0.1:
            item = {"text": item["text"]}  # no facts at all
        if rng.random() < 0.1:
            item["request_id"] = f"r-{rng.randint(0, 99)}"  # other keys are ignored
        out.append(item)
    return out


@pytest.mark.parametrize("seed", [0, 1])
def test_plain_items_decide_as_requests_do(router, seed):
    items = _items(400, seed)
    requests = [RouteRequest(text=i.get("text"), facts=i.get("facts")) for i in items]
    fast = router.route_many(items)
    plain = router.route_many(requests)
    assert [d.to_json() for d in fast] == [d.to_json() for d in plain]
    assert fast == plain
    stages = {d.stage for d in fast}
    assert "rule" in stages and stages - {"rule"}  # both paths ran
    for item, decision in zip(items, fast, strict=True):
        checked = check_request(
            router, RouteRequest(text=item.get("text"), facts=item.get("facts"))
        )
        got = check_item(router, item)
        if checked.rule_decision is not None:
            assert got == checked.rule_decision == decision
        else:
            assert got == checked  # the same checked value (the router is not compared)
            assert got.request == checked.request


DOUBLE_FAULTS = [
    {"facts": {"amount": "lots"}, "text": 42},  # the request's own check comes first
    {"facts": {"no_such_fact": 1}, "text": "hi", "evidence": 7},
    {"facts": [1], "text": "a\x00b"},
    {"facts": {"amount": "lots"}, "text": "a\x00b"},  # the facts before the text
    {"facts": {"has_permission": False}, "text": "x" * 100_001},
]


@pytest.mark.parametrize("item", DOUBLE_FAULTS)
def test_an_item_with_two_faults_is_refused_as_the_general_path_refuses(router, item):
    with pytest.raises(UserInputError) as general:
        check_request(router, RouteRequest(**{k: v for k, v in item.items()}))
    with pytest.raises(UserInputError) as fast:
        router.route_many([item])
    assert type(fast.value) is type(general.value)
    assert str(fast.value) == str(general.value)
