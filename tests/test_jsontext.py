"""hybridroute._jsontext: orjson's text only where it reads back as the very value.

The decision log stores records with :func:`~hybridroute.records._logbase.dumps_record`
and the service answers with ``_json_bytes``; both take orjson's text when
:func:`fast_dumps` keeps it and the standard library's otherwise. What must hold: the
text always reads back as the value (on generated trees), and every value orjson writes
differently -- NaN and infinities, tuples, types JSON does not have -- or refuses gets the
standard library's text or error, as before.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import json
import math
import random

import pytest

from hybridroute._jsontext import fast_dumps
from hybridroute.records._logbase import dumps_record
from hybridroute.service._routes import _json_bytes


def _stdlib(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _tree(rng: random.Random, depth: int = 0) -> object:
    kind = rng.randrange(9 if depth < 4 else 6)
    if kind == 0:
        return rng.choice([None, True, False])
    if kind == 1:
        return rng.randint(-(2**63), 2**63 - 1)
    if kind == 2:
        return rng.choice([0.1, -0.0, 1e16, 1e-7, 5e-324, 1.7976931348623157e308, 2.5])
    if kind == 3:
        return rng.uniform(-1e6, 1e6)
    if kind in (4, 5):
        alphabet = 'ab "\\\n\t\x00\x1fé€😀\u2028/'
        return "".join(rng.choice(alphabet) for _ in range(rng.randrange(12)))
    if kind == 6:
        return [_tree(rng, depth + 1) for _ in range(rng.randrange(5))]
    return {f"k{i}{rng.choice('xé')}": _tree(rng, depth + 1) for i in range(rng.randrange(5))}


def test_generated_trees_read_back_equal_and_match_the_standard_library() -> None:
    rng = random.Random(20261203)
    kept = 0
    for _ in range(3000):
        value = _tree(rng)
        raw = fast_dumps(value)
        assert raw is not None, value  # plain JSON values are always orjson's
        kept += 1
        assert json.loads(raw) == value == json.loads(_stdlib(value))
        assert dumps_record({"v": value}) == raw.join([b'{"v":', b"}"]).decode()
    assert kept == 3000


@pytest.mark.parametrize(
    "value",
    [
        {"confidence": math.nan},
        {"scores": [0.5, math.inf]},
        {"detail": {"low": -math.inf}},
    ],
)
def test_non_finite_numbers_keep_the_standard_librarys_text_and_refusal(value: object) -> None:
    assert fast_dumps(value) is None  # orjson would write null
    assert dumps_record(value) == _stdlib(value)  # NaN / Infinity, as the log always stored
    assert "null" not in dumps_record(value)
    with pytest.raises(ValueError, match="Out of range float values"):
        _json_bytes(value)  # an answer never carries a NaN


class _Color(enum.Enum):
    RED = "red"


class _Code(enum.StrEnum):
    OK = "ok"


@dataclasses.dataclass
class _Point:
    x: int


@pytest.mark.parametrize(
    "value",
    [
        {"t": (1, 2)},  # a tuple reads back as a list
        {"big": 2**64},  # beyond 64 bits: orjson refuses
        {1: "a"},  # a key that is not a string
        {"s": "\ud800"},  # a lone surrogate
        {"color": _Color.RED},
        {"point": _Point(1)},
        {"when": dt.datetime(2026, 12, 3)},
    ],
)
def test_values_orjson_writes_otherwise_go_to_the_standard_library(value: object) -> None:
    assert fast_dumps(value) is None
    try:
        expected: str | type[Exception] = _stdlib(value)
    except (TypeError, ValueError) as exc:
        expected = type(exc)
    if isinstance(expected, str):
        assert dumps_record(value) == expected
    else:
        with pytest.raises(expected):
            dumps_record(value)


def test_a_str_enum_is_written_as_its_text() -> None:
    value = {"code": _Code.OK}
    raw = fast_dumps(value)
    assert raw == b'{"code":"ok"}' and dumps_record(value) == _stdlib(value)


def test_a_logged_record_is_stored_as_orjsons_text(tmp_path: object) -> None:
    from hybridroute.contracts import Decision
    from hybridroute.records import DecisionLog

    decision = Decision(
        router="r",
        router_version="1",
        stage="model",
        selected_destination="a",
        allowed_destinations=("a", "b"),
        reason_code="confident_intent",
        evidence_ids=(),
        input_snapshot={"text": "naïve", "facts": {"amount": 2.5e-7}},
        label="a",
        confidence=0.75,
        detail={"classifier": {"labels": ["a", "b"], "scores": [0.75, 0.25]}},
    )
    log = DecisionLog(f"{tmp_path}/log.sqlite")
    (logged,) = log.log_many([(decision, "req-1", "live")])
    stored = log._query("SELECT record FROM decisions")[0][0]
    assert stored == fast_dumps(logged.record).decode()  # type: ignore[union-attr]
    assert json.loads(stored) == logged.record == next(iter(log.records()))
    assert '"amount":2.5e-7' in stored  # orjson's spelling; the standard library's: 2.5e-07
