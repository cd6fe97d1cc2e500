"""Route oscillation -> ``fail``: the same cycle of destinations repeating too often."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ...contracts import FactSchema
from ...exceptions import RuleSetError
from ._base import Guard, Outcome, number_param


def find_oscillation(
    history: Sequence[str], max_repeats: int, min_cycle: int, max_cycle: int
) -> tuple[tuple[str, ...], int] | None:
    """The first cycle (of ``min_cycle``..``max_cycle`` distinct-enough steps) that occurs
    more than ``max_repeats`` times in a row anywhere in ``history``, with its count."""
    n = len(history)
    for length in range(min_cycle, max_cycle + 1):
        if length * (max_repeats + 1) > n:
            break
        for start in range(n - length * (max_repeats + 1) + 1):
            cycle = tuple(history[start : start + length])
            if length > 1 and len(set(cycle)) < 2:
                continue  # a run of one destination is a cycle of length 1
            repeats = 1
            pos = start + length
            while pos + length <= n and tuple(history[pos : pos + length]) == cycle:
                repeats += 1
                pos += length
            if repeats > max_repeats:
                return cycle, repeats
    return None


class OscillationGuard(Guard):
    """Fires when a cycle in ``route_history`` repeats more than ``max_repeats`` times in a row.

    ``min_cycle`` / ``max_cycle`` bound the cycle lengths looked at (default 2..4: ``a, b,
    a, b, a, b`` is the cycle ``(a, b)`` three times). The offending cycle and its count go
    into the decision's ``detail``.
    """

    name = "oscillation"
    params = {
        "history_fact": "route_history",
        "max_repeats": Guard.REQUIRED,
        "min_cycle": 2,
        "max_cycle": 4,
    }
    destinations = ("fail",)
    reason_codes = ("route_oscillation",)
    fact_types = {"history_fact": ("list[str]",)}

    def _setup(self, rule_id: str) -> None:
        number_param(self, "max_repeats", rule_id, minimum=1, integer=True)
        number_param(self, "min_cycle", rule_id, minimum=1, integer=True)
        number_param(self, "max_cycle", rule_id, minimum=1, integer=True)
        if self.values["max_cycle"] < self.values["min_cycle"]:
            raise RuleSetError(
                "parameter 'max_cycle' must be at least 'min_cycle'", rule_id=rule_id
            )

    def probe_values(self, schema: FactSchema) -> dict[str, tuple[Any, ...]]:
        spec = schema[self.values["history_fact"]]
        names = (
            tuple(spec.enum[:2]) if spec.enum is not None and len(spec.enum) >= 2 else ("a", "b")
        )
        length = max(self.values["min_cycle"], 2 if len(names) >= 2 else 1)
        cycle = tuple(names[i % len(names)] for i in range(length))
        repeats = self.values["max_repeats"]
        return {spec.name: ((), cycle * repeats, cycle * (repeats + 1))}

    def check(self, facts: Mapping[str, Any]) -> Outcome | None:
        history = facts.get(self.values["history_fact"])
        if not history:
            return None
        v = self.values
        found = find_oscillation(history, v["max_repeats"], v["min_cycle"], v["max_cycle"])
        if found is None:
            return None
        cycle, repeats = found
        return Outcome(
            "fail",
            "route_oscillation",
            {"pattern": list(cycle), "repeats": repeats, "max_repeats": v["max_repeats"]},
        )
