"""The base of a built-in guard: named parameters, the facts it reads, one check."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ...exceptions import RuleSetError

__all__ = ["Guard", "Outcome"]


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a rule decided: destination, reason code, JSON-able detail."""

    destination: str
    reason_code: str
    detail: Mapping[str, Any] = field(default_factory=dict)


class Guard:
    """A built-in check over structured facts.

    Subclasses declare ``name``, ``params`` (parameter name -> default, ``REQUIRED`` for
    none), ``destinations`` (every destination the guard can yield) and implement
    :meth:`check`. Parameters that name a fact (ending in ``_fact``) are checked against
    the facts schema with the types in ``fact_types``.
    """

    REQUIRED: ClassVar[object] = object()

    name: ClassVar[str] = ""
    params: ClassVar[dict[str, Any]] = {}
    destinations: ClassVar[tuple[str, ...]] = ()
    reason_codes: ClassVar[tuple[str, ...]] = ()
    #: parameter naming a fact -> the fact types it accepts
    fact_types: ClassVar[dict[str, tuple[str, ...]]] = {}

    def __init__(self, rule_id: str, **params: Any) -> None:
        unknown = set(params) - set(self.params)
        if unknown:
            raise RuleSetError(
                f"guard {self.name!r} has no parameter(s) {sorted(unknown)}; "
                f"it takes {sorted(self.params)}",
                rule_id=rule_id,
            )
        values = {}
        for key, default in self.params.items():
            if key in params:
                values[key] = params[key]
            elif default is Guard.REQUIRED:
                raise RuleSetError(f"guard {self.name!r} needs parameter {key!r}", rule_id=rule_id)
            else:
                values[key] = default
        self.rule_id = rule_id
        self.values = values
        self._setup(rule_id)

    def _setup(self, rule_id: str) -> None:
        """Validate parameter values (raise RuleSetError naming ``rule_id``)."""

    def facts_read(self) -> dict[str, tuple[str, ...]]:
        """Fact name -> accepted types, for every fact this guard reads."""
        return {self.values[p]: types for p, types in self.fact_types.items()}

    def check(self, facts: Mapping[str, Any]) -> Outcome | None:
        """Return the outcome when the guard fires, else ``None``."""
        raise NotImplementedError

    def params_dict(self) -> dict[str, Any]:
        """Every parameter with its value, as JSON (for rules files and records)."""
        return {key: _jsonable(value) for key, value in self.values.items()}

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.values == self.values  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((type(self), repr(sorted(self.values.items()))))


def _jsonable(v: Any) -> Any:
    if isinstance(v, (set, frozenset)):
        return sorted(v)
    if isinstance(v, tuple):
        return list(v)
    return v


def number_param(
    guard: Guard, key: str, rule_id: str, *, minimum: float | None = None, integer: bool = False
) -> None:
    """Check that parameter ``key`` is a (whole) number, at least ``minimum``."""
    value = guard.values[key]
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    if ok and integer:
        ok = float(value).is_integer()
    if not ok:
        kind = "a whole number" if integer else "a number"
        raise RuleSetError(f"parameter {key!r} must be {kind}, got {value!r}", rule_id=rule_id)
    if minimum is not None and value < minimum:
        raise RuleSetError(
            f"parameter {key!r} must be at least {minimum}, got {value!r}", rule_id=rule_id
        )
    if integer:
        guard.values[key] = int(value)


def str_list_param(guard: Guard, key: str, rule_id: str) -> None:
    """Check that parameter ``key`` is a list of strings; store it as a frozenset."""
    value = guard.values[key]
    if (
        isinstance(value, str)
        or not isinstance(value, (list, tuple, set, frozenset))
        or not all(isinstance(v, str) for v in value)
    ):
        raise RuleSetError(
            f"parameter {key!r} must be a list of strings, got {value!r}", rule_id=rule_id
        )
    guard.values[key] = frozenset(value)
