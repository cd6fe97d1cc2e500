"""RouteRequest through the router: ``check()`` validates without routing, its CheckedRequest
is a frozen value routed without a second check, and every entry point decides the same."""

from __future__ import annotations

import asyncio
import dataclasses
from types import MappingProxyType

import pytest

from hybridroute.contracts import RouteRequest
from hybridroute.exceptions import FactsError, InputError, UserInputError
from hybridroute.router import CheckedRequest, HybridRouter
from hybridroute.rules import RuleSet

EVIDENCE = {
    "required_points": ["refund_window"],
    "items": [{"id": "kb-1", "point": "refund_window", "source": "kb", "score": 0.9}],
}

# (facts, text, evidence): rule-decided, the default exit, classified, with evidence
ITEMS = [
    pytest.param({"has_permission": False}, "refund me", None, id="rule"),
    pytest.param({"amount": 5000}, None, None, id="rule-no-text"),
    pytest.param({}, None, None, id="default-exit"),
    pytest.param({}, "   ", None, id="blank-text"),
    pytest.param({}, "where is my parcel?", None, id="classified"),
    pytest.param({"amount": 12.0}, "I want my money back", None, id="classified-facts"),
    pytest.param({}, "what is the refund window?", EVIDENCE, id="evidence"),
]


def _as_json(decisions):
    return [d.to_json() for d in decisions]


@pytest.mark.parametrize(("facts", "text", "evidence"), ITEMS)
def test_every_form_of_an_item_gets_the_same_decision(router, facts, text, evidence):
    request = RouteRequest(text=text, facts=facts, evidence=evidence)
    mapping = {"facts": facts, "text": text, "evidence": evidence}
    one = router.route(facts, text, evidence=evidence)
    forms = {
        "route(request)": [router.route(request)],
        "route(checked)": [router.route(router.check(request))],
        "route_many(mapping)": router.route_many([mapping]),
        "route_many(request)": router.route_many([request]),
        "route_many(checked)": router.route_many([router.check(request)]),
        "route_many(mapping with an id)": router.route_many([{**mapping, "id": "t-1"}]),
        "aroute(request)": [asyncio.run(router.aroute(request))],
        "aroute_many(checked)": asyncio.run(router.aroute_many([router.check(mapping)])),
    }
    for form, decisions in forms.items():
        assert _as_json(decisions) == [one.to_json()], form


@pytest.mark.parametrize(("facts", "text", "evidence"), ITEMS)
def test_check_gives_the_snapshot_and_hash_every_decision_records(router, facts, text, evidence):
    checked = router.check(RouteRequest(text=text, facts=facts, evidence=evidence))
    decision = router.route(facts, text, evidence=evidence)
    assert dict(checked.snapshot) == dict(decision.input_snapshot)
    assert checked.snapshot_hash == decision.snapshot_hash
    assert checked.facts == decision.input_snapshot["facts"]
    if decision.stage == "rule":
        assert checked.rule_decision == decision
    else:
        assert checked.rule_decision is None and checked.text == text


def test_a_batch_of_checked_values_matches_a_batch_of_mappings(router, support):
    test = support.split("test")
    names = set(router.rules.schema.names)
    mappings = [
        {"facts": {k: v for k, v in test.facts(i).items() if k in names}, "text": t}
        for i, t in enumerate(test.texts)
    ]
    checked = [router.check(RouteRequest(text=m["text"], facts=m["facts"])) for m in mappings]
    assert _as_json(router.route_many(checked)) == _as_json(router.route_many(mappings))
    assert {c.rule_decision is None for c in checked} == {True, False}  # both paths ran


BAD = [
    pytest.param({"amount": "lots"}, "hi", None, FactsError, "fact 'amount'", id="fact-type"),
    pytest.param({"no_such_fact": 1}, "hi", None, FactsError, "not declared", id="undeclared"),
    pytest.param({}, "a\x00b", None, InputError, "NUL", id="nul-text"),
    pytest.param({}, "caf\udce9", None, InputError, "lone surrogate", id="surrogate"),
    pytest.param({}, "x" * 100_001, None, InputError, "the limit", id="too-long"),
    pytest.param({}, 42, None, InputError, "must be a string, got int", id="text-int"),
    pytest.param([1], "hi", None, FactsError, "JSON object, got list", id="facts-list"),
    pytest.param({}, "hi", {"items": 5}, FactsError, "'items' must be a list", id="evidence"),
    pytest.param({}, "hi", 7, FactsError, "must be a mapping", id="evidence-int"),
    # a rule decides: the text is still checked, as routing checks it
    pytest.param({"has_permission": False}, "a\x00", None, InputError, "NUL", id="ruled-nul"),
]


@pytest.mark.parametrize(("facts", "text", "evidence", "error", "match"), BAD)
def test_check_refuses_exactly_what_routing_refuses(router, facts, text, evidence, error, match):
    item = {"facts": facts, "text": text, "evidence": evidence}
    with pytest.raises(error, match=match) as by_check:
        router.check(item)
    with pytest.raises(error, match=match) as by_route:
        router.route_many([item])
    assert str(by_check.value) == str(by_route.value)
    assert isinstance(by_check.value, UserInputError)


def test_a_rule_that_cannot_be_evaluated_is_refused_by_check(router, monkeypatch):
    from hybridroute.rules import ConditionError

    rule_id, check = router.rules._checks[0]

    def broken(facts):
        raise ConditionError("cannot compare None with 3")

    monkeypatch.setattr(router.rules, "_checks", ((rule_id, broken), *router.rules._checks[1:]))
    with pytest.raises(FactsError, match=f"rule '{rule_id}' cannot be evaluated"):
        router.check(RouteRequest(text="hi"))


def test_routing_a_checked_value_does_not_check_it_again(router, monkeypatch):
    calls = []
    validate = RuleSet.validate_facts

    def counting(self, facts):
        calls.append(facts)
        return validate(self, facts)

    monkeypatch.setattr(RuleSet, "validate_facts", counting)
    requests = [RouteRequest(text=f"where is parcel {i}?", facts={"amount": i}) for i in range(5)]
    checked = [router.check(r) for r in requests]
    assert len(calls) == 5
    router.route_many(checked)
    asyncio.run(router.aroute_many(checked))
    router.route(checked[0])
    assert len(calls) == 5  # checked once, routed three times
    router.route_many(requests)  # requests, not checked values: checked as they are routed
    assert len(calls) == 10


def test_a_value_checked_by_another_router_is_checked_again(router, local_clf, support):
    v2 = router.with_policy(router.policy, version="2")
    checked = router.check(
        RouteRequest(text="where is my parcel?", facts={"has_permission": False})
    )
    assert checked.rule_decision is not None and checked.rule_decision.router_version == "1"
    (decision,) = v2.route_many([checked])
    assert decision.router_version == "2"  # v2's rules decided, not v1's recorded decision
    assert decision == v2.route({"has_permission": False}, "where is my parcel?")


def test_a_checked_request_is_a_frozen_keyword_only_slotted_value(router):
    checked = router.check(RouteRequest(text="where is my parcel?", facts={"amount": 3}))
    assert isinstance(checked, CheckedRequest)
    with pytest.raises(dataclasses.FrozenInstanceError):
        checked.text = "other"  # type: ignore[misc]
    assert not hasattr(checked, "__dict__")
    with pytest.raises(TypeError):
        CheckedRequest(checked.request)  # type: ignore[misc]  # keyword-only
    assert isinstance(checked.snapshot, MappingProxyType)
    with pytest.raises(TypeError):
        checked.snapshot["text"] = "changed"  # type: ignore[index]
    assert checked.router is router and "router=" not in repr(checked)


def test_the_snapshot_with_evidence_is_read_only_all_the_way_down(router):
    checked = router.check(RouteRequest(text="what is the refund window?", evidence=EVIDENCE))
    evidence = checked.snapshot["evidence"]
    assert isinstance(evidence, MappingProxyType)
    assert isinstance(evidence["items"], tuple) and isinstance(
        evidence["items"][0], MappingProxyType
    )
    # the decision records the same values (and its JSON the same lists)
    decision = router.route_many([checked])[0]
    assert decision.to_dict()["input_snapshot"]["evidence"] == {
        "required_points": ["refund_window"],
        "items": [{"id": "kb-1", "point": "refund_window", "source": "kb", "score": 0.9}],
    }


@pytest.mark.parametrize(
    ("item", "match"),
    [(42, "got int"), ("where is my parcel", "got str"), (("text", {}), "got tuple")],
    ids=["int", "str", "tuple"],
)
def test_an_item_of_another_kind_is_a_type_error(router, item, match):
    with pytest.raises(TypeError, match=match):
        router.route_many([item])
    with pytest.raises(TypeError, match=match):
        router.check(item)


@pytest.mark.parametrize(
    "extra", [{"text": "hi"}, {"evidence": {"items": []}}], ids=["text", "evidence"]
)
def test_a_request_is_routed_with_nothing_beside_it(router, extra):
    request = RouteRequest(text="where is my parcel?")
    with pytest.raises(TypeError, match="holds its own"):
        router.route(request, **extra)
    with pytest.raises(TypeError, match="holds its own"):
        asyncio.run(router.aroute(router.check(request), **extra))


def test_the_request_id_is_not_part_of_the_input(router):
    a = router.check(RouteRequest(text="where is my parcel?", request_id="t-1"))
    b = router.check(RouteRequest(text="where is my parcel?", request_id="t-2"))
    assert a.snapshot_hash == b.snapshot_hash and "request_id" not in a.snapshot
    assert router.route(a).to_json() == router.route(b).to_json()


def test_a_redacting_router_checks_the_redacted_text(rules, local_clf, policy):
    redacting = HybridRouter(
        rules=rules,
        classifier=local_clf,
        policy=policy,
        name="support",
        version="1",
        redact_pii="email",
    )
    checked = redacting.check(RouteRequest(text="refund to jane@example.com please"))
    assert checked.text == checked.snapshot["text"] == "refund to [EMAIL] please"
    assert checked.request.text == "refund to jane@example.com please"  # as given
    assert redacting.route(checked) == redacting.route({}, "refund to jane@example.com please")
