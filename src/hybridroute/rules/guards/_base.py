"""The base of a built-in guard: named parameters, the facts it reads, one check."""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ...contracts import FactSchema
from ...exceptions import RuleSetError

__all__ = ["Guard", "Outcome", "normalize_token"]


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

    def check_schema(self, schema: FactSchema) -> None:
        """Check the parameters against what the schema allows (its ``enum`` / ``min`` /
        ``max``), once the rule set is built: raise :class:`RuleSetError` naming the rule
        for a parameter that can never match an allowed value (a typo that would make the
        guard dead). The facts read are already known to be declared with the right type.
        """

    def check(self, facts: Mapping[str, Any]) -> Outcome | None:
        """Return the outcome when the guard fires, else ``None``."""
        raise NotImplementedError

    def reachable_reason_codes(self) -> tuple[str, ...]:
        """The reason codes this guard can give with its parameters (a subset of
        ``reason_codes``, which lists every code the guard kind has): what rule coverage
        expects a guard's tests to reach."""
        return self.reason_codes

    def probe_values(self, schema: FactSchema) -> dict[str, tuple[Any, ...]]:
        """Where this guard's outcome can change, for ``hybridroute rules lint``'s search.

        Fact name -> for a scalar fact, the constants its check compares with (the search
        tries values on both sides of each); for a list fact, whole values to try. A guard
        that only tests a boolean or emptiness needs none (the search tries those anyway).
        """
        return {}

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
    """Check that parameter ``key`` is a finite (whole) number, at least ``minimum``.

    NaN and the infinities are refused: every comparison with NaN is false, so a NaN
    limit would make a guard that never fires.
    """
    value = guard.values[key]
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    if ok and isinstance(value, float):
        if not math.isfinite(value):
            raise RuleSetError(
                f"parameter {key!r} must be a finite number, got {value!r}", rule_id=rule_id
            )
        if integer:
            ok = value.is_integer()
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


# --------------------------------------------------------------------------- normalisation

# Already normal: lower-case ASCII words joined by single underscores (the common case,
# checked without touching unicodedata).
_PLAIN_TOKEN_RE = re.compile(r"[a-z0-9]+(?:_[a-z0-9]+)*")
# Dropped: control (Cc), format (Cf: zero-width space / joiner, BOM, bidi marks),
# surrogate (Cs), private-use (Co) and unassigned (Cn) characters, and combining marks
# (Mn, Me: accents added to a letter).
_DROPPED = frozenset(("Cc", "Cf", "Cs", "Co", "Cn", "Mn", "Me"))


def normalize_token(value: str) -> str:
    """The form in which guards compare an identifier-like value (an action, a kind).

    Unicode NFKC (fullwidth ``ｄｅｌｅｔｅ`` is ``delete``), case folded, accents and
    control / format characters (NUL, zero-width space, BOM, bidi marks) dropped; any run
    of whitespace, hyphens, dashes and underscores becomes one ``_``, and one at either
    end is dropped. So ``" Delete-Account\u200bData\x00"`` and ``"DELETE__ACCOUNT_DATA"``
    are both ``delete_account_data``. Letters that merely look alike in another script
    (a Cyrillic ``а``) stay different: declare an ``enum`` on the fact to refuse those.
    """
    if _PLAIN_TOKEN_RE.fullmatch(value):
        return value
    text = unicodedata.normalize("NFKD", unicodedata.normalize("NFKC", value).casefold())
    chars = []
    for ch in text:
        if ch.isspace() or ch == "_":
            chars.append(" ")
            continue
        cat = unicodedata.category(ch)
        if cat == "Pd":  # hyphen-minus and every other dash
            chars.append(" ")
        elif cat not in _DROPPED:
            chars.append(ch)
    return "_".join(unicodedata.normalize("NFKC", "".join(chars)).split())


def show_values(values: tuple[Any, ...], limit: int = 20) -> str:
    """Up to ``limit`` values for an error message."""
    shown = ", ".join(repr(v)[:40] for v in values[:limit])
    return shown + ("" if len(values) <= limit else f", ... ({len(values)} in all)")
