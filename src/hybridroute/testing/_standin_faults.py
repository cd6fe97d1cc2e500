"""Fault injection of the stand-in LLM: which request fails, and how.

The kinds (see :mod:`hybridroute.testing.standin_llm` for what the client sees of each)
are :data:`FAULT_KINDS`; the exclusive ones (all but ``slow``, a modifier drawn on its
own) partition one uniform draw, so their rates must sum to at most 1
(:func:`parse_fault_rates`). Draws are seeded and keyed by the request's messages and
how many times the same messages have been seen (:func:`draw_fault`), so *which* request
fails does not depend on arrival order under concurrency.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ._standin_answers import unit

__all__ = [
    "EXCLUSIVE_FAULTS",
    "FAULT_KINDS",
    "OUT_OF_SET_LABEL",
    "draw_fault",
    "parse_fault_rates",
]

#: Faults that replace the answer; one uniform draw is partitioned among them.
EXCLUSIVE_FAULTS: tuple[str, ...] = (
    "rate_limit",
    "server_error",
    "hang",
    "malformed_json",
    "out_of_set",
    "empty_choices",
    "truncated",
    "huge_body",  # last, so that adding it left the draws of the kinds above unchanged
)
#: Every fault kind the stand-in knows (``slow`` is a modifier drawn on its own).
FAULT_KINDS: tuple[str, ...] = ("slow", *EXCLUSIVE_FAULTS)

#: The label the ``out_of_set`` fault answers with (never a member of a sane label set).
OUT_OF_SET_LABEL = "not_a_declared_label"


def parse_fault_rates(items: Iterable[str] | Mapping[str, float] | None) -> dict[str, float]:
    """Validate fault rates given as a mapping or as ``KIND=RATE`` strings.

    Raises
    ------
    ValueError
        For an unknown kind, a rate outside [0, 1], or exclusive rates summing above 1.
    """
    if items is None:
        return {}
    pairs: list[tuple[str, Any]] = []
    if isinstance(items, Mapping):
        pairs = list(items.items())
    else:
        for item in items:
            kind, sep, text = str(item).partition("=")
            if not sep:
                raise ValueError(f"fault rate {item!r}: expected KIND=RATE, e.g. rate_limit=0.1")
            pairs.append((kind.strip(), text.strip()))
    rates: dict[str, float] = {}
    for kind, raw in pairs:
        if kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault kind {kind!r}; known: {', '.join(FAULT_KINDS)}")
        try:
            rate = float(raw)
        except (TypeError, ValueError):
            raise ValueError(f"fault rate for {kind!r} is not a number: {raw!r}") from None
        if not 0.0 <= rate <= 1.0:  # also rejects NaN
            raise ValueError(f"fault rate for {kind!r} must be in [0, 1], got {rate}")
        rates[kind] = rate
    total = sum(r for k, r in rates.items() if k in EXCLUSIVE_FAULTS)
    if total > 1.0 + 1e-12:
        raise ValueError(f"exclusive fault rates sum to {total:.3f} > 1")
    return rates


def draw_fault(
    faults: Mapping[str, float], *, seed: int, key: str, occurrence: int
) -> tuple[str | None, bool]:
    """The exclusive fault (or ``None``) and whether the request is slow, for the
    ``occurrence``-th request whose messages hash to ``key``."""
    u = unit("fault", seed, key, occurrence)
    kind: str | None = None
    edge = 0.0
    for name in EXCLUSIVE_FAULTS:
        edge += faults.get(name, 0.0)
        if u < edge:
            kind = name
            break
    slow = unit("slow", seed, key, occurrence) < faults.get("slow", 0.0)
    return kind, slow
