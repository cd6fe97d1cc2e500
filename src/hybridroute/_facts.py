"""The facts schema: the declared facts a rule set reads, their types and allowed values.

:class:`FactSpec` declares one fact (type, nullable, default, ``enum``, ``min`` / ``max``);
:class:`FactSchema` checks a set of facts against the declarations and returns them in
canonical form, and writes their canonical JSON directly (the hot path of every routed
decision). Both are part of the decision contract and are re-exported by
:mod:`hybridroute.contracts` (and the top-level package).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar

from ._canonical import _canon, _encode_canonical, _encode_str, _freeze, _thaw
from ._safeio import describe_bad_char, first_bad_string
from .exceptions import FactsError

__all__ = ["FactSchema", "FactSpec"]

_FACT_TYPES = ("bool", "int", "number", "str", "list[str]", "list[number]", "object")


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

#: canonical_json keeps the "key":value text of up to _PIECES values per fact (each at most
#: _MAX_PIECE characters) of these types: their canonical values (exact bools, ints,
#: strings, tuples of strings, or null) are equal only when their JSON texts are, so a
#: value can look its text up. Not numbers: the float 1e16 equals the int 10**16 but is
#: written 1e+16; nor objects (read-only mappings cannot be looked up).
_PIECE_TYPES = frozenset({"bool", "int", "str", "list[str]"})
_PIECES = 1024
_MAX_PIECE = 256

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
        Whether ``null`` is a value of the fact (never subject to ``enum``/``min``/``max``).
        For a fact that is not nullable, ``null`` in a set of facts means "not given"
        (:meth:`FactSchema.validate`): its default applies, or it is missing if required.
        :meth:`check` itself, which checks one value, refuses it.
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

    Notes
    -----
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
    _json_plan: tuple[tuple[str, str, Any, str, dict[Any, str] | None], ...] = field(
        init=False, repr=False, compare=False
    )

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
        # canonical_json's plan: names sorted, their JSON key prefix, each default's
        # "key":value text, and a cache of the "key":value texts of the fact's values (for
        # the types whose canonical values are equal only when their JSON is; see _PIECES)
        object.__setattr__(
            self,
            "_json_plan",
            tuple(
                (
                    name,
                    _encode_str(name) + ":",
                    d,
                    ""
                    if d is FactSpec._NO_DEFAULT
                    else _encode_str(name) + ":" + _encode_canonical(d),
                    {} if spec.type in _PIECE_TYPES else None,
                )
                for name, spec, d in sorted(self._plan, key=lambda entry: entry[0])
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

        ``null`` (``None``) for a fact that is not declared ``nullable`` means "not given",
        exactly as if the key were absent: the fact takes its default, or is refused as a
        missing required fact; ``{"action": None}`` and ``{}`` validate to the same facts
        (and so to the same snapshot and hash). A nullable fact keeps ``None`` as its value.

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
                value = facts[name]
                if value is not None or spec.nullable:
                    out[name] = spec.check(value)
                    continue
                # null for a fact that is not nullable: not given, exactly as if the key
                # were absent (the default, the same snapshot), as the conditions read it
            if default is not missing:
                out[name] = default
            elif name in facts:
                raise FactsError(
                    "required fact is missing (null, and it is not declared nullable)", field=name
                )
            else:
                raise FactsError("required fact is missing", field=name)
        return out

    def canonical_json(self, valid: Mapping[str, Any]) -> str:
        """Canonical JSON of facts returned by :meth:`validate` (what :func:`canonical_json`
        gives for them), written directly from the declared names for speed."""
        parts = []
        for name, prefix, default, default_piece, pieces in self._json_plan:
            v = valid[name]
            if v is default:
                # a fact left at its default is the very default object (see validate)
                parts.append(default_piece)
            elif pieces is None:
                parts.append(prefix + _encode_canonical(v))
            else:
                piece = pieces.get(v)
                if piece is None:
                    piece = prefix + _encode_canonical(v)
                    if len(piece) <= _MAX_PIECE:
                        if len(pieces) >= _PIECES:
                            pieces.clear()
                        pieces[v] = piece
                parts.append(piece)
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
