"""The rule layer's cheaper equivalents give exactly what the general paths give.

* :func:`hybridroute.contracts.rule_decision` sets a rule decision's slots itself:
  the value equals the one :class:`Decision`'s constructor makes of the same arguments,
  field by field and type by type, and anything the constructor would have to check or
  freeze goes through the constructor.
* :meth:`FactSchema.canonical_json` looks the ``"key":value`` text of a value up in a
  per-fact cache: on many generated fact sets (strings that look like keys, numbers that
  are equal but written differently, nulls, lists) it writes what
  :func:`hybridroute._canonical.canonical_json` writes, however full its cache is.
"""

from __future__ import annotations

import dataclasses
import random
from types import MappingProxyType

import pytest

from hybridroute import _facts
from hybridroute._canonical import canonical_json
from hybridroute.contracts import Decision, FactSchema, FactSpec, rule_decision
from hybridroute.exceptions import UndeclaredValueError
from hybridroute.rules import load_rules

from .test_ruleset import EXAMPLE


def _constructed(*args) -> Decision:
    router, version, snapshot, digest, destination, reason, rule_id, detail = args
    return Decision(
        router=router,
        router_version=version,
        stage="rule",
        input_snapshot=snapshot,
        snapshot_hash=digest,
        allowed_destinations=(destination,),
        selected_destination=destination,
        reason_code=reason,
        rule_id=rule_id,
        detail=detail,
    )


def _same(fast: Decision, plain: Decision) -> None:
    assert fast == plain
    assert fast.to_json() == plain.to_json()
    for f in dataclasses.fields(Decision):
        a, b = getattr(fast, f.name), getattr(plain, f.name)
        assert a == b and type(a) is type(b), f.name


@pytest.mark.parametrize(
    "rule_id, detail",
    [
        ("high_risk", MappingProxyType({"amount": 900, "amount_limit": 500})),
        (None, MappingProxyType({})),
        ("oscillation", MappingProxyType({"cycle": ("a", "b"), "repeats": 3})),
    ],
)
def test_a_rule_decision_is_what_the_constructor_makes(rule_id, detail):
    snapshot = MappingProxyType({"facts": MappingProxyType({"amount": 900, "ok": True})})
    args = ("r", "1", snapshot, "ab" * 32, "human_review", "high_risk_amount", rule_id, detail)
    fast = rule_decision(*args)
    _same(fast, _constructed(*args))
    assert type(fast) is Decision
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.reason_code = "other"  # type: ignore[misc]


def test_what_the_constructor_must_check_or_freeze_goes_through_it():
    snap = MappingProxyType({"facts": MappingProxyType({})})
    with pytest.raises(UndeclaredValueError):
        rule_decision("r", "1", snap, "ab" * 32, "fail", "", None, MappingProxyType({}))
    # a plain dict is frozen, a missing hash computed, exactly as the constructor does
    args = ("r", "1", {"facts": {"x": [1]}}, "", "fail", "default_exit", None, {"y": [2]})
    fast = rule_decision(*args)
    _same(fast, _constructed(*args))
    assert type(fast.input_snapshot) is MappingProxyType and fast.snapshot_hash


def test_every_example_decision_matches_the_constructor():
    rules = load_rules(EXAMPLE)
    rng = random.Random(5)
    for _ in range(300):
        facts = {
            "amount": rng.choice([0, 10, 501.5]),
            "has_permission": rng.random() > 0.2,
            "step": rng.randint(0, 15),
        }
        d = rules.decide(facts)
        plain = _constructed(
            d.router,
            d.router_version,
            d.input_snapshot,
            d.snapshot_hash,
            d.selected_destination,
            d.reason_code,
            d.rule_id,
            d.detail,
        )
        _same(d, plain)


# --------------------------------------------------------------------------- canonical JSON

_KEYISH = [
    "",
    "a",
    "sk-" + "A1" * 10,
    "api_key=hunter2hunter2",
    "Bearer abcdefghijklmnopqrstuvwxyz",
    'quote"and\\slash',
    "caf\u00e9",
    "\u2028line",
    "x" * 300,
    "1",
    "true",
    "null",
]


def _schema() -> FactSchema:
    return FactSchema(
        (
            FactSpec(name="flag", type="bool", default=False),
            FactSpec(name="maybe", type="bool", nullable=True, default=None),
            FactSpec(name="count", type="int", default=0),
            FactSpec(name="amount", type="number", default=0),
            FactSpec(name="word", type="str", default=""),
            FactSpec(name="kind", type="str", nullable=True, default=None, enum=["a", "b"]),
            FactSpec(name="words", type="list[str]", default=[]),
            FactSpec(name="nums", type="list[number]", default=[]),
            FactSpec(name="obj", type="object", default={}),
        )
    )


def _values(rng: random.Random) -> dict:
    out = {
        "flag": rng.choice([True, False, None]),
        "maybe": rng.choice([True, False, None]),
        "count": rng.choice([0, 1, -1, 2**60, 10**16, rng.randint(-5, 5)]),
        "amount": rng.choice([0, 1, 1.0, 1.5, -0.0, 1e16, 10**16, 2.0**53, 1e300, 0.1, 7]),
        "word": rng.choice(_KEYISH),
        "kind": rng.choice(["a", "b", None]),
        "words": rng.choice([[], ["a"], ("a",), _KEYISH[:3], [rng.choice(_KEYISH)]]),
        "nums": rng.choice([[], [1, 1.0], [1e16], [0.5, 2]]),
        "obj": rng.choice([{}, {"k": [1, "x"]}, {"sk": {"a": None}}]),
    }
    return {k: v for k, v in out.items() if rng.random() < 0.85}


@pytest.mark.parametrize("cache_size", [2, 1024])
def test_canonical_json_with_its_cache_writes_what_canonical_json_writes(monkeypatch, cache_size):
    monkeypatch.setattr(_facts, "_PIECES", cache_size)
    schema = _schema()
    rng = random.Random(cache_size)
    for _ in range(3000):
        valid = schema.validate(_values(rng))
        assert schema.canonical_json(valid) == canonical_json(valid)
    # and again with every cache warm
    for _ in range(500):
        valid = schema.validate(_values(rng))
        assert schema.canonical_json(valid) == canonical_json(valid)


def test_numbers_equal_but_written_apart_are_not_confused():
    schema = _schema()
    for first, second in [(10**16, 1e16), (1e16, 10**16), (2**60, float(2**60))]:
        for value in (first, second, first):
            valid = schema.validate({"amount": value, "nums": [value]})
            assert schema.canonical_json(valid) == canonical_json(valid)
    # ints and bools are not confused either (an int fact never holds a bool)
    for value in (1, 0, 1, 0):
        valid = schema.validate({"count": value, "flag": bool(value)})
        assert schema.canonical_json(valid) == canonical_json(valid)
