"""The decision contract: destinations, reason codes, stages, the facts schema, ``Decision``.

Everything that crosses a layer boundary is defined here, and this module imports
nothing else from hybridroute except :mod:`hybridroute.exceptions` and the leaf reader
:mod:`hybridroute._safeio`.

* **Destinations** form a finite declared set: the six generic next steps
  (:data:`GENERIC_DESTINATIONS`) plus the intent destinations a user declares in a
  :class:`Vocabulary`.
* **Reason codes** are finite too: the built-in :class:`ReasonCode` members plus codes a
  rules file declares.
* A :class:`Decision` is an immutable, keyword-only value carrying the five contract
  fields (``input_snapshot``, ``allowed_destinations``, ``selected_destination``,
  ``reason_code``, ``evidence_ids``) plus router name and version, stage and, for model
  stages, label, confidence, threshold and margin. Its ``snapshot_hash`` is the SHA-256
  of the canonical JSON of the input snapshot alone, so the same input hashes the same
  across processes, machines and router versions.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Any, ClassVar

from ._safeio import MAX_INT_DIGITS, describe_bad_char, first_bad_string, parse_json
from .exceptions import FactsError, InputError, UndeclaredValueError

__all__ = [
    "GENERIC_DESTINATIONS",
    "RECORD_VERSION",
    "Decision",
    "FactSchema",
    "FactSpec",
    "ReasonCode",
    "Stage",
    "Vocabulary",
    "canonical_json",
    "snapshot_hash",
]

#: Version of the serialised decision record written by :meth:`Decision.to_dict`.
RECORD_VERSION = 1

#: The generic next steps every router knows. Intent destinations are declared on top.
GENERIC_DESTINATIONS: tuple[str, ...] = (
    "answer",
    "ask_user",
    "retry_tool",
    "fail",
    "reject",
    "human_review",
)

_NAME_RE = re.compile(r"^[a-z][a-z0-9_]*(?:[.:/-][a-z0-9_]+)*$")


class Stage(StrEnum):
    """Which layer made a decision."""

    RULE = "rule"
    MODEL = "model"
    POLICY = "policy"
    FALLBACK = "fallback"


class ReasonCode(StrEnum):
    """Built-in reason codes. Rules files may declare more (see :class:`Vocabulary`)."""

    # rule stage
    PERMISSION_DENIED = "permission_denied"
    TOOL_ERROR_RETRY = "tool_error_retry"
    RETRY_BUDGET_EXHAUSTED = "retry_budget_exhausted"
    TOOL_ERROR_FATAL = "tool_error_fatal"
    HIGH_RISK_AMOUNT = "high_risk_amount"
    SENSITIVE_ACTION = "sensitive_action"
    STEP_BUDGET_EXCEEDED = "step_budget_exceeded"
    ROUTE_OSCILLATION = "route_oscillation"
    EVIDENCE_COMPLETE = "evidence_complete"
    MISSING_USER_FIELDS = "missing_user_fields"
    RULE_MATCHED = "rule_matched"
    DEFAULT_EXIT = "default_exit"
    # model / policy stage
    CONFIDENT_INTENT = "confident_intent"
    LOW_CONFIDENCE = "low_confidence"
    LOW_MARGIN = "low_margin"
    OUT_OF_SCOPE = "out_of_scope"
    NEEDS_REVIEW = "needs_review"
    EVIDENCE_INCOMPLETE = "evidence_incomplete"
    NOT_CERTIFIED = "not_certified"
    # fallback stage (classifier could not answer)
    INVALID_LABEL = "invalid_label"
    PROVIDER_ERROR = "provider_error"
    TIMEOUT = "timeout"
    CLASSIFIER_ERROR = "classifier_error"


_BUILTIN_REASONS: frozenset[str] = frozenset(r.value for r in ReasonCode)
_STAGES: frozenset[str] = frozenset(s.value for s in Stage)


def _check_name(kind: str, value: object) -> str:
    if not isinstance(value, str) or not _NAME_RE.match(value):
        raise UndeclaredValueError(
            kind, value, ("lower-case identifiers such as 'refund_request'",)
        )
    return value


# --------------------------------------------------------------------------- canonical JSON


def _canon(obj: Any) -> Any:
    """Turn an input snapshot into plain JSON types, rejecting what JSON cannot hold."""
    t = type(obj)
    if t is str or t is bool or obj is None:
        return obj
    if t is int:
        return obj
    if t is float:
        if not math.isfinite(obj):
            raise ValueError(f"non-finite number {obj!r} cannot go into an input snapshot")
        # 1.0 and 1 are the same fact; hash them the same.
        return int(obj) if obj.is_integer() and abs(obj) < 2**53 else obj
    if t is dict or t is MappingProxyType or isinstance(obj, Mapping):
        out = {}
        for k, v in obj.items():
            if type(k) is not str:
                raise ValueError(f"snapshot keys must be strings, got {k!r}")
            out[k] = _canon(v)
        return out
    if t is tuple or t is list:
        return [_canon(v) for v in obj]
    if isinstance(obj, bool):
        return bool(obj)
    if isinstance(obj, int):
        return int(obj)
    if isinstance(obj, float):
        return _canon(float(obj))
    if isinstance(obj, str):
        return str(obj)
    # numpy scalars and the like
    if hasattr(obj, "item") and callable(obj.item):
        return _canon(obj.item())
    raise ValueError(f"value of type {t.__name__} cannot go into an input snapshot")


def canonical_json(obj: Any) -> str:
    """Canonical JSON text: sorted keys, no spaces, UTF-8, integral floats as integers."""
    return json.dumps(
        _canon(obj), sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )


def snapshot_hash(snapshot: Mapping[str, Any]) -> str:
    """SHA-256 (hex) of the canonical JSON of an input snapshot."""
    return hashlib.sha256(canonical_json(snapshot).encode("utf-8")).hexdigest()


def _json_default(obj: Any) -> Any:
    if type(obj) is MappingProxyType:
        return dict(obj)
    raise TypeError(f"value of type {type(obj).__name__} is not canonical JSON")


def hash_canonical(snapshot: Mapping[str, Any]) -> str:
    """:func:`snapshot_hash` for a snapshot already in canonical form, skipping the rewrite.

    Canonical form is what :meth:`FactSchema.validate` returns: JSON types (tuples and
    read-only mappings allowed), no integral floats, no non-finite numbers. For such input
    the result equals :func:`snapshot_hash`; it is only faster.
    """
    text = json.dumps(
        snapshot,
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        allow_nan=False,
        default=_json_default,
    )
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


_encode_str = json.encoder.encode_basestring  # the C function json.dumps uses (ensure_ascii=False)


def _encode_canonical(v: Any) -> str:
    """JSON text of one canonical value, exactly as ``json.dumps`` with sorted keys writes it."""
    t = type(v)
    if t is str:
        return _encode_str(v)
    if t is bool:
        return "true" if v else "false"
    if t is int:
        return int.__repr__(v)
    if v is None:
        return "null"
    if t is float:
        return float.__repr__(v)
    if t is tuple:
        return "[" + ",".join([_encode_canonical(x) for x in v]) + "]"
    return json.dumps(
        v,
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        allow_nan=False,
        default=_json_default,
    )


def _freeze(obj: Any) -> Any:
    """Read-only copy: mappings become MappingProxyType, lists tuples (already-frozen kept)."""
    t = type(obj)
    if t is str or t is int or t is float or t is bool or obj is None:
        return obj
    if t is MappingProxyType:
        # Read-only views are built by hybridroute itself over already-frozen values.
        return obj
    if t is dict or isinstance(obj, Mapping):
        return MappingProxyType({k: _freeze(v) for k, v in obj.items()})
    if t is tuple or t is list:
        for v in obj:
            tv = type(v)
            if not (tv is str or tv is float or tv is int or tv is bool or v is None):
                return tuple(_freeze(v) for v in obj)
        return obj if t is tuple else tuple(obj)
    return obj


def _thaw(obj: Any) -> Any:
    t = type(obj)
    if t is MappingProxyType or t is dict:
        return {k: _thaw(v) for k, v in obj.items()}
    if t is tuple or t is list:
        return [_thaw(v) for v in obj]
    return obj


# --------------------------------------------------------------------------- vocabulary


@dataclass(frozen=True, slots=True)
class Vocabulary:
    """The finite declared sets a router works with.

    Parameters
    ----------
    intents : iterable of str
        Intent destinations declared by the user (e.g. ``refund_request``), on top of the
        generic next steps.
    reason_codes : iterable of str
        Extra reason codes (e.g. declared by a rules file), on top of :class:`ReasonCode`.
    """

    intents: tuple[str, ...] = ()
    reason_codes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        intents = tuple(dict.fromkeys(self.intents))
        for name in intents:
            _check_name("destination", name)
        reasons = tuple(dict.fromkeys(self.reason_codes))
        for name in reasons:
            _check_name("reason code", name)
        object.__setattr__(self, "intents", intents)
        object.__setattr__(self, "reason_codes", reasons)

    @property
    def destinations(self) -> tuple[str, ...]:
        """Generic next steps followed by the declared intent destinations."""
        return GENERIC_DESTINATIONS + tuple(
            i for i in self.intents if i not in GENERIC_DESTINATIONS
        )

    @property
    def all_reason_codes(self) -> tuple[str, ...]:
        """Built-in reason codes followed by the declared extra ones."""
        return tuple(r.value for r in ReasonCode) + tuple(
            r for r in self.reason_codes if r not in _BUILTIN_REASONS
        )

    def check_destination(self, value: object) -> str:
        """Return ``value`` if it is a declared destination, else raise."""
        if value in GENERIC_DESTINATIONS or value in self.intents:
            return value  # type: ignore[return-value]
        raise UndeclaredValueError("destination", value, self.destinations)

    def check_reason_code(self, value: object) -> str:
        """Return ``value`` if it is a declared reason code, else raise."""
        if value in _BUILTIN_REASONS or value in self.reason_codes:
            return value  # type: ignore[return-value]
        raise UndeclaredValueError("reason code", value, self.all_reason_codes)

    def check_decision(self, decision: Decision) -> Decision:
        """Check every destination and the reason code of ``decision`` against this vocabulary."""
        for d in decision.allowed_destinations:
            self.check_destination(d)
        self.check_reason_code(decision.reason_code)
        return decision


# --------------------------------------------------------------------------- facts schema

_FACT_TYPES = ("bool", "int", "number", "str", "list[str]", "list[number]", "object")

_INT_RE = re.compile(r"^[+-]?(?:0|[1-9][0-9]*)$")
_LEADING_ZERO_RE = re.compile(r"^[+-]?0[0-9]")
_FLOAT_RE = re.compile(r"^[+-]?(?:[0-9]+\.[0-9]*|\.[0-9]+|[0-9]+)(?:[eE][+-]?[0-9]+)?$")


def json_kind(value: Any) -> str:
    """The JSON kind of a value as error messages name it (``null``, ``int``, ``object``...)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "str"
    if isinstance(value, list):
        return "list"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def parse_csv_cell(cell: str) -> tuple[str, Any]:
    """A CSV cell read as the JSON value it spells: ``(kind, value)``.

    Empty is ``null``; ``true``/``false`` (any case) are booleans; integers and decimals
    are numbers, except that a leading zero (``02134``) keeps a code as text; a cell
    starting with ``[`` or ``{`` that parses as JSON is that list or object. Anything
    else is the cell's text, unchanged. The dataset loaders and the streamed evaluation
    both read fact columns this way.

    Raises
    ------
    InputError
        For a cell that would be read unsafely: JSON with duplicate keys, nesting too deep,
        ``NaN`` or a lone surrogate (:func:`hybridroute._safeio.parse_json`), an integer of
        more than :data:`~hybridroute._safeio.MAX_INT_DIGITS` digits, or a number too large
        for a float (``1e400``). ``reason`` says which, for the caller to name row and column.
    """
    s = cell.strip()
    if not s:
        return "null", None
    low = s.lower()
    if low == "true":
        return "bool", True
    if low == "false":
        return "bool", False
    if _LEADING_ZERO_RE.match(s):
        return "str", cell  # 02134 is a code (zip, account), not a number
    if _INT_RE.match(s):
        digits = len(s.lstrip("+-"))
        if digits > MAX_INT_DIGITS:
            raise InputError(
                f"the cell holds an integer with {digits:,} digits (the limit is {MAX_INT_DIGITS})"
            )
        return "int", int(s)
    if _FLOAT_RE.match(s):
        value = float(s)
        if not math.isfinite(value):
            raise InputError(f"the cell holds a number too large for a float ({s[:40]})")
        return "number", value
    if s[0] in "[{":
        try:
            parsed = parse_json(s, what="JSON value")
        except InputError as exc:
            if exc.reason.startswith("not valid "):
                return "str", cell  # not JSON at all: the cell's text, as always
            raise InputError(f"the cell {exc.reason}") from None
        return json_kind(parsed), parsed
    return "str", cell


def _type_ok(type_: str, value: Any) -> bool:
    if type_ == "bool":
        return isinstance(value, bool)
    if type_ == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if type_ == "number":
        return (
            isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        )
    if type_ == "str":
        return isinstance(value, str)
    if type_ == "list[str]":
        return isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value)
    if type_ == "list[number]":
        return isinstance(value, (list, tuple)) and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
            for v in value
        )
    if type_ == "object":
        return isinstance(value, Mapping)
    raise AssertionError(type_)  # pragma: no cover - guarded by FactSpec


#: Fact types that may declare ``enum`` (for list[str]: each element) ...
_ENUM_TYPES = ("str", "int", "list[str]")
#: Keys of one fact's declaration in a rules file (:meth:`FactSchema.from_dict`).
_DECLARATION_KEYS = ("type", "nullable", "default", "enum", "min", "max", "description")
#: ... and ``min`` / ``max`` (for list[number]: each element).
_BOUND_TYPES = ("int", "number", "list[number]")
#: Most allowed values shown in an error message.
_SHOW_ALLOWED = 20

# NUL and lone surrogates (what undecodable bytes or a "\ud800" JSON escape become): no
# fact may hold them (hybridroute._safeio says why, for every reader alike)
_text_problem = describe_bad_char


def _deep_text_problem(value: Any) -> str | None:
    """:func:`_text_problem` for every key and string inside an object fact."""
    found = first_bad_string(value)
    if found is None:
        return None
    return f"a string in it {describe_bad_char(found[0])}"


def _short(value: Any, width: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= width else text[: width - 3] + "..."


def _show_allowed(values: tuple[Any, ...]) -> str:
    shown = ", ".join(_short(v, 40) for v in values[:_SHOW_ALLOWED])
    more = "" if len(values) <= _SHOW_ALLOWED else f", ... ({len(values)} in all)"
    return shown + more


def _is_real(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


@dataclass(frozen=True, slots=True, kw_only=True)
class FactSpec:
    """One declared fact: name, type, whether it may be null, its default and allowed values.

    A fact with no default is required. ``type`` is one of ``bool``, ``int``, ``number``,
    ``str``, ``list[str]``, ``list[number]``, ``object``.

    Parameters
    ----------
    name : str
        An identifier.
    type : str
        The fact type.
    nullable : bool
        Whether ``null`` is accepted (``null`` is never subject to ``enum``/``min``/``max``).
    default : optional
        The value of a fact left out; without one the fact is required. It must itself
        pass every check below.
    enum : sequence, optional
        The allowed values, for ``str`` and ``int`` facts and for each element of a
        ``list[str]`` fact: any other value is refused (:class:`FactsError` naming the
        field and the allowed values). Compared exactly: ``"Issue_Refund"`` is not
        ``"issue_refund"``. Values must be distinct and of the fact's (element) type.
    min, max : number, optional
        Inclusive bounds for ``int`` and ``number`` facts and for each element of a
        ``list[number]`` fact (whole numbers for ``int``); ``min <= max``.
    description : str
        Free text.

    Every string a fact holds (a ``str`` fact, each element of a ``list[str]`` fact,
    every key and string inside an ``object`` fact) must be valid Unicode without NUL
    characters: a lone surrogate cannot be written as UTF-8, and NUL makes two strings
    look the same to a person but not to a program.
    """

    _NO_DEFAULT: ClassVar[object] = object()

    name: str
    type: str
    nullable: bool = False
    default: Any = _NO_DEFAULT
    enum: tuple[Any, ...] | None = None
    min: int | float | None = None
    max: int | float | None = None
    description: str = ""
    # derived: the enum as a set, and whether no constraint beyond the type applies
    _allowed: frozenset[Any] | None = field(init=False, repr=False, compare=False, default=None)
    _plain: bool = field(init=False, repr=False, compare=False, default=True)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", self.name):
            raise FactsError("fact names must be identifiers", field=str(self.name))
        if self.type not in _FACT_TYPES:
            raise FactsError(
                f"unknown type {self.type!r}; use one of {', '.join(_FACT_TYPES)}", field=self.name
            )
        if not isinstance(self.nullable, bool):
            raise FactsError(
                f"'nullable' must be true or false, got {_short(self.nullable)}", field=self.name
            )
        if not isinstance(self.description, str):
            raise FactsError("'description' must be a string", field=self.name)
        self._declare_enum()
        self._declare_bounds()
        object.__setattr__(
            self, "_plain", self.enum is None and self.min is None and self.max is None
        )
        if self.has_default:
            if not self._accepts(self.default):
                raise FactsError(
                    f"default {self.default!r} is not a valid {self._type_text()}",
                    field=self.name,
                )
            problem = self._problem(_canon(self.default))
            if problem is not None:
                raise FactsError(f"default {problem}", field=self.name)

    def _declare_enum(self) -> None:
        enum = self.enum
        if enum is None:
            return
        if self.type not in _ENUM_TYPES:
            raise FactsError(
                f"'enum' is for {', '.join(_ENUM_TYPES)} facts, not {self.type}", field=self.name
            )
        if isinstance(enum, (str, bytes, Mapping)) or not isinstance(enum, (list, tuple)):
            raise FactsError(
                f"'enum' must be a list of allowed values, got {_short(enum)}", field=self.name
            )
        if not enum:
            raise FactsError("'enum' must list at least one allowed value", field=self.name)
        want_str = self.type != "int"
        seen: set[Any] = set()
        for pos, v in enumerate(enum):
            if want_str:
                ok = type(v) is str
                if ok and (problem := _text_problem(v)) is not None:
                    raise FactsError(f"'enum' value #{pos + 1} {problem}", field=self.name)
            else:
                ok = type(v) is int
            if not ok:
                kind = "strings" if want_str else "whole numbers"
                raise FactsError(
                    f"'enum' values of a {self.type} fact must be {kind}; value #{pos + 1} is "
                    f"{_short(v)}",
                    field=self.name,
                )
            if v in seen:
                raise FactsError(f"'enum' lists {_short(v)} twice", field=self.name)
            seen.add(v)
        object.__setattr__(self, "enum", tuple(enum))
        object.__setattr__(self, "_allowed", frozenset(enum))

    def _declare_bounds(self) -> None:
        for key in ("min", "max"):
            bound = getattr(self, key)
            if bound is None:
                continue
            if self.type not in _BOUND_TYPES:
                raise FactsError(
                    f"'{key}' is for {', '.join(_BOUND_TYPES)} facts, not {self.type}",
                    field=self.name,
                )
            if not _is_real(bound) or (isinstance(bound, float) and not math.isfinite(bound)):
                raise FactsError(
                    f"'{key}' must be a finite number, got {_short(bound)}", field=self.name
                )
            if self.type == "int":
                if isinstance(bound, float) and not bound.is_integer():
                    raise FactsError(
                        f"'{key}' of an int fact must be a whole number, got {bound!r}",
                        field=self.name,
                    )
                bound = int(bound)
            elif isinstance(bound, float) and bound.is_integer() and abs(bound) < 2**53:
                bound = int(bound)  # 0.0 and 0 are the same bound (and write the same)
            object.__setattr__(self, key, bound)
        if self.min is not None and self.max is not None and self.min > self.max:
            raise FactsError(
                f"'min' ({self.min!r}) is greater than 'max' ({self.max!r})", field=self.name
            )

    @property
    def has_default(self) -> bool:
        """Whether the fact may be left out (it then takes its default)."""
        return self.default is not FactSpec._NO_DEFAULT

    @property
    def required(self) -> bool:
        """Whether the fact must be given."""
        return not self.has_default

    def _type_text(self) -> str:
        return self.type + (" or null" if self.nullable else "")

    def _accepts(self, value: Any) -> bool:
        if value is None:
            return self.nullable
        return _type_ok(self.type, value)

    def _value_problem(self, value: Any) -> str | None:
        """Why one scalar (a value, or a list element) breaks ``enum``/``min``/``max``."""
        allowed = self._allowed
        if allowed is not None and value not in allowed:
            return f"{_short(value)} is not one of the allowed values ({_show_allowed(self.enum or ())})"
        if self.min is not None and value < self.min:
            return f"{_short(value)} is below the minimum {self.min!r}"
        if self.max is not None and value > self.max:
            return f"{_short(value)} is above the maximum {self.max!r}"
        return None

    def _problem(self, value: Any) -> str | None:
        """Why a canonical value of the right type is still refused, or ``None``."""
        if value is None:
            return None
        typ = self.type
        if typ == "str":
            problem = _text_problem(value)
            if problem is not None:
                return f"{_short(value)} {problem}"
            return None if self._plain else self._value_problem(value)
        if typ == "int" or typ == "number":
            return None if self._plain else self._value_problem(value)
        if typ == "list[str]":
            for pos, item in enumerate(value):
                problem = _text_problem(item)
                if problem is None and not self._plain:
                    problem = self._value_problem(item)
                elif problem is not None:
                    problem = f"{_short(item)} {problem}"
                if problem is not None:
                    return f"element #{pos + 1}: {problem}"
            return None
        if typ == "list[number]":
            if self._plain:
                return None
            for pos, item in enumerate(value):
                problem = self._value_problem(item)
                if problem is not None:
                    return f"element #{pos + 1}: {problem}"
            return None
        if typ == "object":
            return _deep_text_problem(value)
        return None

    def check(self, value: Any) -> Any:
        """Return ``value`` in canonical form, or raise :class:`FactsError`.

        Canonical form: lists become tuples, integral floats of a ``number`` fact become
        ints (``1.0`` and ``1`` are the same fact), objects become read-only plain JSON.
        A value of the right type is still refused when it is outside the declared
        ``enum`` / ``min`` / ``max``, or holds a NUL character or a lone surrogate.
        """
        # Fast paths on exact JSON types (facts usually come from JSON); anything else
        # (numpy scalars, subclasses) and every refusal takes the general path below.
        t = type(value)
        typ = self.type
        if value is None:
            if self.nullable:
                return None
        elif typ == "bool":
            if t is bool:
                return value
        elif typ == "str":
            if t is str and value.isascii() and "\x00" not in value:
                allowed = self._allowed
                if allowed is None or value in allowed:
                    return value
        elif typ == "int":
            if t is int:
                if self._plain:
                    return value
                lo, hi, allowed = self.min, self.max, self._allowed
                if (
                    (lo is None or value >= lo)
                    and (hi is None or value <= hi)
                    and (allowed is None or value in allowed)
                ):
                    return value
        elif typ == "number":
            if t is int or (t is float and math.isfinite(value)):
                if t is float and value.is_integer() and abs(value) < 2**53:
                    value = int(value)
                if self._plain:
                    return value
                lo, hi = self.min, self.max
                if (lo is None or value >= lo) and (hi is None or value <= hi):
                    return value
        elif typ == "list[str]":
            if t is list or t is tuple:
                for x in value:
                    if type(x) is not str:
                        break
                else:
                    joined = "".join(value)
                    allowed = self._allowed
                    if (
                        joined.isascii()
                        and "\x00" not in joined
                        and (allowed is None or allowed.issuperset(value))
                    ):
                        return tuple(value)
        if not self._accepts(value):
            raise FactsError(
                f"expected {self._type_text()}, got {type(value).__name__} {value!r}"[:300],
                field=self.name,
            )
        out = _freeze(_canon(value))
        problem = self._problem(out)
        if problem is not None:
            raise FactsError(problem, field=self.name)
        return out

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.type}
        if self.nullable:
            out["nullable"] = True
        if self.has_default:
            out["default"] = _thaw(self.default)
        if self.enum is not None:
            out["enum"] = list(self.enum)
        if self.min is not None:
            out["min"] = self.min
        if self.max is not None:
            out["max"] = self.max
        if self.description:
            out["description"] = self.description
        return out


@dataclass(frozen=True, slots=True)
class FactSchema:
    """The declared facts a rule set reads.

    Parameters
    ----------
    specs : iterable of FactSpec
        The declared facts.
    extra : {"forbid", "ignore"}
        What to do with an undeclared fact: raise :class:`FactsError` (default), or drop
        it from the validated facts (it then never reaches a rule nor the snapshot).
    """

    specs: tuple[FactSpec, ...]
    extra: str = "forbid"
    _by_name: Mapping[str, FactSpec] = field(init=False, repr=False, compare=False)
    _plan: tuple[tuple[str, FactSpec, Any], ...] = field(init=False, repr=False, compare=False)
    _json_plan: tuple[tuple[str, str, Any, str], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        specs = tuple(self.specs)
        by_name: dict[str, FactSpec] = {}
        for s in specs:
            if s.name in by_name:
                raise FactsError("declared twice in the facts schema", field=s.name)
            by_name[s.name] = s
        if self.extra not in ("forbid", "ignore"):
            raise ValueError("extra must be 'forbid' or 'ignore'")
        object.__setattr__(self, "specs", specs)
        object.__setattr__(self, "_by_name", MappingProxyType(by_name))
        # each fact's default in canonical form, checked once here (canonical values are
        # immutable, so every validated fact set can share them)
        object.__setattr__(
            self,
            "_plan",
            tuple(
                (s.name, s, s.check(s.default) if s.has_default else FactSpec._NO_DEFAULT)
                for s in specs
            ),
        )
        # canonical_json's plan: names sorted, their JSON key prefix, each default and its JSON
        object.__setattr__(
            self,
            "_json_plan",
            tuple(
                (
                    name,
                    _encode_str(name) + ":",
                    d,
                    "" if d is FactSpec._NO_DEFAULT else _encode_canonical(d),
                )
                for name, _, d in sorted(self._plan, key=lambda entry: entry[0])
            ),
        )

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._by_name)

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def __getitem__(self, name: str) -> FactSpec:
        return self._by_name[name]

    def validate(self, facts: Mapping[str, Any] | None) -> dict[str, Any]:
        """Check ``facts`` and return them complete: declared order, defaults filled in.

        Raises
        ------
        FactsError
            Naming the field that is missing, undeclared or of the wrong type.
        """
        if facts is None:
            facts = {}
        if type(facts) is not dict and not isinstance(facts, Mapping):
            raise FactsError(f"facts must be a JSON object, got {type(facts).__name__}")
        by_name = self._by_name
        if self.extra == "forbid":
            for k in facts:
                if k not in by_name:
                    raise FactsError(
                        "not declared in the facts schema (declared: " + ", ".join(by_name) + ")",
                        field=str(k),
                    )
        out: dict[str, Any] = {}
        missing = FactSpec._NO_DEFAULT
        for name, spec, default in self._plan:
            if name in facts:
                out[name] = spec.check(facts[name])
            elif default is not missing:
                out[name] = default
            else:
                raise FactsError("required fact is missing", field=name)
        return out

    def canonical_json(self, valid: Mapping[str, Any]) -> str:
        """Canonical JSON of facts returned by :meth:`validate` (what :func:`canonical_json`
        gives for them), written directly from the declared names for speed."""
        parts = []
        for name, prefix, default, default_json in self._json_plan:
            v = valid[name]
            # a fact left at its default is the very default object (see validate)
            parts.append(prefix + (default_json if v is default else _encode_canonical(v)))
        return "{" + ",".join(parts) + "}"

    def to_dict(self) -> dict[str, Any]:
        return {s.name: s.to_dict() for s in self.specs}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, extra: str = "forbid") -> FactSchema:
        """Build a schema from ``{name: {type, nullable?, default?, enum?, min?, max?, description?}}``.

        Raises
        ------
        FactsError
            Naming the fact whose declaration is malformed: an unknown key or type, an
            ``enum`` / ``min`` / ``max`` on a type that does not take it, enum values of the
            wrong type or repeated, ``min > max``, a default outside them.
        """
        if not isinstance(data, Mapping):
            raise FactsError(
                f"the facts schema must be a mapping of fact name to declaration, got "
                f"{type(data).__name__}"
            )
        specs = []
        for name, spec in data.items():
            if not isinstance(spec, Mapping):
                raise FactsError(
                    "a fact declaration must be a mapping with a 'type'", field=str(name)
                )
            unknown = set(map(str, spec)) - set(_DECLARATION_KEYS)
            if unknown:
                raise FactsError(
                    f"unknown keys {sorted(unknown)} in its declaration; allowed: "
                    + ", ".join(_DECLARATION_KEYS),
                    field=str(name),
                )
            if "type" not in spec:
                raise FactsError("declaration has no 'type'", field=str(name))
            kwargs: dict[str, Any] = {
                "name": name,
                "type": spec["type"],
                "nullable": spec.get("nullable", False),
                "description": spec.get("description", ""),
            }
            for key in ("default", "enum", "min", "max"):
                if key in spec:
                    kwargs[key] = spec[key]
            specs.append(FactSpec(**kwargs))
        return cls(tuple(specs), extra=extra)


# --------------------------------------------------------------------------- decision


_DECISION_KEYS = (
    "record_version",
    "router",
    "router_version",
    "stage",
    "selected_destination",
    "allowed_destinations",
    "reason_code",
    "evidence_ids",
    "input_snapshot",
    "snapshot_hash",
    "rule_id",
    "label",
    "confidence",
    "threshold",
    "margin",
    "detail",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Decision:
    """One routing decision: an immutable, JSON-round-trippable record.

    Parameters
    ----------
    router, router_version : str
        Which router (name and version) made the decision.
    input_snapshot : mapping
        The facts used and, when a model was consulted, the text (``{"facts": ..., "text": ...}``).
        Stored read-only; must hold JSON types only.
    allowed_destinations : tuple of str
        The destinations this decision was allowed to pick from.
    selected_destination : str
        The chosen destination; must be one of ``allowed_destinations``.
    reason_code : str
        Why; a declared reason code.
    evidence_ids : tuple of str
        Ids of the evidence items the decision relied on.
    stage : {"rule", "model", "policy", "fallback"}
        Which layer decided.
    rule_id : str, optional
        The rule that fired, for rule-stage decisions.
    label, confidence, threshold, margin : optional
        For model and policy stages: the top label, its (calibrated) confidence, the fitted
        threshold it was compared with and the top-1/top-2 margin.
    detail : mapping
        Further JSON-able diagnosis (missing fields, an oscillation pattern, ...).
    snapshot_hash : str
        Computed from ``input_snapshot`` when left empty.
    """

    router: str
    router_version: str
    input_snapshot: Mapping[str, Any]
    allowed_destinations: tuple[str, ...]
    selected_destination: str
    reason_code: str
    stage: str
    evidence_ids: tuple[str, ...] = ()
    rule_id: str | None = None
    label: str | None = None
    confidence: float | None = None
    threshold: float | None = None
    margin: float | None = None
    detail: Mapping[str, Any] = field(default_factory=dict)
    snapshot_hash: str = ""

    def __post_init__(self) -> None:
        if self.stage not in _STAGES:
            raise UndeclaredValueError("stage", self.stage, tuple(sorted(_STAGES)))
        allowed = self.allowed_destinations
        if not isinstance(allowed, tuple):
            allowed = tuple(allowed)
            object.__setattr__(self, "allowed_destinations", allowed)
        if self.selected_destination not in allowed:
            raise UndeclaredValueError("destination", self.selected_destination, allowed)
        if not isinstance(self.reason_code, str) or not self.reason_code:
            raise UndeclaredValueError(
                "reason code", self.reason_code, tuple(sorted(_BUILTIN_REASONS))
            )
        if not isinstance(self.evidence_ids, tuple):
            object.__setattr__(self, "evidence_ids", tuple(self.evidence_ids))
        snap = self.input_snapshot
        if not isinstance(snap, MappingProxyType):
            snap = _freeze(snap)
            object.__setattr__(self, "input_snapshot", snap)
        if not isinstance(self.detail, MappingProxyType):
            object.__setattr__(self, "detail", _freeze(self.detail))
        if not self.snapshot_hash:
            object.__setattr__(self, "snapshot_hash", snapshot_hash(snap))

    def to_dict(self) -> dict[str, Any]:
        """The record as plain JSON types, in a fixed key order."""
        return {
            "record_version": RECORD_VERSION,
            "router": self.router,
            "router_version": self.router_version,
            "stage": str(self.stage),
            "selected_destination": self.selected_destination,
            "allowed_destinations": list(self.allowed_destinations),
            "reason_code": str(self.reason_code),
            "evidence_ids": list(self.evidence_ids),
            "input_snapshot": _thaw(self.input_snapshot),
            "snapshot_hash": self.snapshot_hash,
            "rule_id": self.rule_id,
            "label": self.label,
            "confidence": self.confidence,
            "threshold": self.threshold,
            "margin": self.margin,
            "detail": _thaw(self.detail),
        }

    def to_json(self) -> str:
        """The record as one line of JSON (keys in the fixed order of :meth:`to_dict`)."""
        return json.dumps(self.to_dict(), ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def from_dict(
        cls,
        data: Mapping[str, Any],
        *,
        vocabulary: Vocabulary | None = None,
        verify_hash: bool = True,
    ) -> Decision:
        """Rebuild a decision from :meth:`to_dict` output, checking it thoroughly.

        Raises :class:`UndeclaredValueError` for an undeclared stage, destination or reason
        code (the latter two checked against ``vocabulary`` when one is given) and
        :class:`ValueError` for unknown or missing keys, a wrong record version, or a
        ``snapshot_hash`` that does not match the snapshot. With ``verify_hash=False`` the
        recorded hash is kept as it is (a logged record whose sensitive facts were replaced
        by salted hashes still carries the hash of the original input).
        """
        if not isinstance(data, Mapping):
            raise ValueError(f"a decision record must be a JSON object, got {type(data).__name__}")
        unknown = set(data) - set(_DECISION_KEYS)
        if unknown:
            raise ValueError(f"unknown keys in decision record: {sorted(unknown)}")
        required = (
            "router",
            "router_version",
            "stage",
            "selected_destination",
            "allowed_destinations",
            "reason_code",
            "input_snapshot",
        )
        missing = [k for k in required if k not in data]
        if missing:
            raise ValueError(f"decision record lacks {missing}")
        version = data.get("record_version", RECORD_VERSION)
        if version != RECORD_VERSION:
            raise ValueError(
                f"decision record version {version!r} is not supported (expected {RECORD_VERSION})"
            )
        decision = cls(
            router=data["router"],
            router_version=data["router_version"],
            stage=data["stage"],
            selected_destination=data["selected_destination"],
            allowed_destinations=tuple(data["allowed_destinations"]),
            reason_code=data["reason_code"],
            evidence_ids=tuple(data.get("evidence_ids") or ()),
            input_snapshot=data["input_snapshot"],
            rule_id=data.get("rule_id"),
            label=data.get("label"),
            confidence=data.get("confidence"),
            threshold=data.get("threshold"),
            margin=data.get("margin"),
            detail=data.get("detail") or {},
            snapshot_hash="" if verify_hash else (data.get("snapshot_hash") or ""),
        )
        given = data.get("snapshot_hash")
        if verify_hash and given and given != decision.snapshot_hash:
            raise ValueError(
                "snapshot_hash does not match the input snapshot "
                f"(record says {given[:12]}…, content hashes to {decision.snapshot_hash[:12]}…)"
            )
        if vocabulary is not None:
            vocabulary.check_decision(decision)
        return decision
