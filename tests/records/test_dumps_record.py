"""The stored JSON text of a record is what ``json.JSONEncoder.encode`` writes.

:func:`~hybridroute.records._logbase.dumps_record` calls the C encoder that ``encode``
would build for each record once built: the texts are compared on records of every
stage, non-ASCII and escaped text, floats (NaN and infinities included, as ``encode``
writes them), nested lists and mappings.
"""

from __future__ import annotations

import json
import random

from hybridroute.records._logbase import _C_ENCODE, dumps_record

PLAIN = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), check_circular=False)
STRINGS = [
    "",
    "refund",
    'quote " and \\ slash',
    "caf\u00e9 \u2028 \U0001f600",
    "\x01\x1f",
    "a" * 80,
]
FLOATS = [0.1, 1e16, -0.0, 2.5e-300, float("nan"), float("inf"), 0.9980913307528766]


def _value(rng: random.Random, depth: int = 0):
    kind = rng.randrange(8 if depth < 3 else 5)
    if kind == 0:
        return rng.choice(STRINGS)
    if kind == 1:
        return rng.choice(FLOATS)
    if kind == 2:
        return rng.choice([0, -1, 10**20, True, False])
    if kind == 3:
        return None
    if kind == 4:
        return rng.randint(-5, 5)
    if kind == 5:
        return [_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    if kind == 6:
        return tuple(_value(rng, depth + 1) for _ in range(rng.randrange(4)))
    return {rng.choice(STRINGS): _value(rng, depth + 1) for _ in range(rng.randrange(4))}


def test_the_c_encoder_is_used():
    assert _C_ENCODE is not None


def test_a_record_is_written_as_encode_writes_it():
    rng = random.Random(7)
    for _ in range(2000):
        record = {
            "record_version": 1,
            "stage": rng.choice(["rule", "model", "policy", "fallback"]),
            "input_snapshot": {"facts": _value(rng), "text": rng.choice(STRINGS)},
            "confidence": rng.choice([*FLOATS, None]),
            "detail": _value(rng),
        }
        assert dumps_record(record) == PLAIN.encode(record)
    assert dumps_record([1, "x"]) == PLAIN.encode([1, "x"])  # not a dict: encode itself
