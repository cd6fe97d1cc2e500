"""The bounded search behind ``hybridroute rules lint``: a few values per fact, tried together.

Each fact read gets a small set of values chosen from what can change a rule's outcome:

* ``bool``: ``false``, ``true``; a fact with an ``enum``: every allowed value -- **all** of
  its values, so the search over it is exhaustive;
* ``int`` / ``number``: every constant a condition compares it with (and every threshold of
  a guard that reads it), with a value on either side and between each two, and the
  declared ``min`` / ``max``; values outside the bounds are dropped. A comparison of the
  fact with a constant changes truth only at a constant, so these values meet every region
  in which all those comparisons keep their truth values;
* ``str`` without an ``enum``: the constants compared with, ``""`` and one value equal to
  none of them (a guard comparing normalised spellings adds one that is equal only once
  normalised);
* lists and objects: a few values (empty, one element per constant, lengths around the
  constants of ``len(...)``, each dotted path set to each constant);
* a ``nullable`` fact also ``null``.

A fact's values are **exact** when they meet every region: ``bool``, ``enum``, and numbers
and strings compared only with constants by ``==``, ``!=``, ``in [...]`` and (numbers)
ordering. Ordering or substring tests on free strings, ``len(...)``, comparisons between two
facts, lists and objects make them **heuristic**: a search over them can show facts that
reach a rule (a witness is real) but cannot prove that none exist.

Cases are the product of the values of the facts searched (at most :data:`MAX_CASES`), the
other facts at their defaults. Everything here is deterministic: no sampling.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..contracts import FactSchema, FactSpec
from ..exceptions import FactsError

__all__ = ["MAX_CASES", "Domain", "FactUse", "build_domains", "cases", "condition_uses"]

#: Most combinations one search tries.
MAX_CASES = 20_000
_MAX_LIST_VALUES = 12


@dataclass
class FactUse:
    """What the conditions of a rule set do with one fact."""

    constants: list[Any] = field(default_factory=list)
    lengths: list[Any] = field(default_factory=list)
    paths: dict[tuple[str, ...], list[Any]] = field(default_factory=dict)
    inexact: set[str] = field(default_factory=set)  # why the values are not exhaustive
    ordered: bool = False  # compared by <, <=, >, >=


@dataclass(frozen=True, slots=True)
class Domain:
    """The values searched for one fact, and whether they meet every region."""

    values: tuple[Any, ...]
    exact: bool


def _single(node: tuple) -> str | None:
    """The fact of a top-level ``path`` node."""
    if node[0] == "path" and len(node[1]) == 1:
        return str(node[1][0])
    return None


def condition_uses(tree: tuple, uses: dict[str, FactUse], types: Mapping[str, str]) -> None:
    """Record in ``uses`` what the condition ``tree`` (a parse tree) does with each fact."""

    def use(name: str) -> FactUse:
        return uses.setdefault(name, FactUse())

    def operand_facts(node: tuple) -> None:
        """Facts inside an operand that is not a plain comparison with a constant."""
        tag = node[0]
        if tag == "path":
            use(node[1][0]).inexact.add("compared with another fact or expression")
        elif tag in ("len", "exists", "missing"):
            operand_facts(node[1])
        elif tag in ("and", "or"):
            for part in node[1]:
                walk(part)
        elif tag in ("not", "cmp"):
            walk(node)

    def walk(node: tuple) -> None:
        tag = node[0]
        if tag in ("and", "or"):
            for part in node[1]:
                walk(part)
        elif tag == "not":
            walk(node[1])
        elif tag == "path":
            head = node[1][0]
            if len(node[1]) > 1:
                u = use(head)
                u.paths.setdefault(tuple(node[1][1:]), []).append(None)
                u.inexact.add("an object's field")
            else:
                kind = types.get(head, "")
                use(head).constants.append(0 if kind in ("int", "number") else "")
        elif tag in ("exists", "missing"):
            path = node[1][1]
            u = use(path[0])
            if len(path) > 1:
                u.paths.setdefault(tuple(path[1:]), []).append(None)
                u.inexact.add("an object's field")
        elif tag == "cmp":
            _comparison(node, use, operand_facts, types)

    walk(tree)


def _comparison(node: tuple, use: Any, operand_facts: Any, types: Mapping[str, str]) -> None:
    op, left, right = node[1], node[2], node[3]
    for a, b in ((left, right), (right, left)):
        if a[0] == "len" and b[0] == "lit":
            u = use(a[1][1][0])
            u.lengths.append(b[1])
            u.inexact.add("len()")
            return
        if a[0] == "path" and b[0] == "lit":
            head, value = a[1][0], b[1]
            u = use(head)
            if len(a[1]) > 1:
                u.paths.setdefault(tuple(a[1][1:]), []).append(value)
                u.inexact.add("an object's field")
                return
            kind = types.get(head, "")
            if op in ("in", "not in"):
                if a is left and isinstance(value, tuple):
                    u.constants.extend(value)  # fact in [a, b]
                elif a is left:
                    u.constants.append(value)
                    u.inexact.add("a substring test")  # fact in 'text'
                else:
                    u.constants.append(value)  # 'x' in fact
                    if kind == "str":
                        u.inexact.add("a substring test")
                return
            u.constants.append(value)
            if op in ("<", "<=", ">", ">="):
                u.ordered = True
                if kind == "str":
                    u.inexact.add("string ordering")
            return
    operand_facts(left)
    operand_facts(right)


def _numbers(values: list[Any]) -> list[float]:
    return sorted(
        {float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)}
    )


def _int_points(spec: FactSpec, consts: list[float]) -> list[Any]:
    out: set[int] = set()
    for c in consts:
        lo, hi = math.floor(c), math.ceil(c)
        out.update((lo - 1, lo, hi, hi + 1))
    for b in (spec.min, spec.max):
        if b is not None:
            out.add(int(b))
    if not out:
        out.add(0)
    return sorted(out)


def _number_points(spec: FactSpec, consts: list[float]) -> list[Any]:
    marks = sorted(set(consts) | {float(b) for b in (spec.min, spec.max) if b is not None})
    out: set[float] = set(marks)
    for c in consts:
        out.update((c - 1, c + 1))
    out.update((a + b) / 2 for a, b in itertools.pairwise(marks))
    if not out:
        out.add(0.0)
    return sorted(out)


def _fresh(taken: list[Any], base: str = "other") -> str:
    name = base
    while name in taken:
        name += "_"
    return name


def _domain(spec: FactSpec, use: FactUse, probes: tuple[Any, ...]) -> Domain:
    t = spec.type
    inexact = set(use.inexact)
    consts = [*use.constants, *probes]
    values: list[Any]
    if t == "bool":
        values, inexact = [False, True], set()
    elif spec.enum is not None and t in ("str", "int"):
        values, inexact = list(spec.enum), set()
    elif t == "int":
        values = _int_points(spec, _numbers(consts))
    elif t == "number":
        values = _number_points(spec, _numbers(consts))
    elif t == "str":
        strings = [c for c in consts if isinstance(c, str)]
        values = [*dict.fromkeys(strings), "", _fresh(strings)]
    elif t in ("list[str]", "list[number]"):
        values = _list_values(spec, use, probes)
        inexact.add("a list")
    else:  # object
        values = [{}]
        for path, consts_at in use.paths.items():
            for c in consts_at:
                values.append(_nested(path, c))
        inexact.add("an object")
    if spec.nullable:
        values.append(None)
    return Domain(_canonical(spec, values), not inexact)


def _list_values(spec: FactSpec, use: FactUse, probes: tuple[Any, ...]) -> list[Any]:
    whole = [p for p in probes if isinstance(p, tuple)]
    whole += [c for c in use.constants if isinstance(c, tuple)]
    want = str if spec.type == "list[str]" else (int, float)
    items = [
        c for c in [*use.constants, *probes] if isinstance(c, want) and not isinstance(c, bool)
    ]
    if spec.enum is not None:
        items += list(spec.enum)
    if spec.type == "list[str]":
        items.append(_fresh(items, "x"))
    elif not items:
        items.append(spec.min if spec.min is not None else 0)
    items = list(dict.fromkeys(items))[:_MAX_LIST_VALUES]
    values: list[Any] = [(), *whole, *((i,) for i in items)]
    for k in _numbers(use.lengths):
        for n in {max(0, math.floor(k)), math.floor(k) + 1, math.ceil(k) + 1}:
            if n <= 64:
                values.append(tuple(items[0] for _ in range(n)))
    return values


def _nested(path: tuple[str, ...], value: Any) -> dict[str, Any]:
    out: Any = value
    for key in reversed(path):
        out = {key: out}
    return out if isinstance(out, dict) else {}


def _canonical(spec: FactSpec, values: list[Any]) -> tuple[Any, ...]:
    """The values the fact accepts, in canonical form, each once."""
    seen: set[str] = set()
    out = []
    for v in values:
        if v is None and not spec.nullable:
            continue
        try:
            c = spec.check(v)
        except (FactsError, TypeError, ValueError):
            continue
        key = json.dumps([type(c).__name__, c], sort_keys=True, default=str)
        if key not in seen:
            seen.add(key)
            out.append(c)
    return tuple(out)


def build_domains(
    schema: FactSchema,
    uses: Mapping[str, FactUse],
    probes: Mapping[str, tuple[Any, ...]],
) -> dict[str, Domain]:
    """A :class:`Domain` for every declared fact."""
    return {
        s.name: _domain(s, uses.get(s.name, FactUse()), tuple(probes.get(s.name, ())))
        for s in schema.specs
    }


def base_facts(schema: FactSchema, domains: Mapping[str, Domain]) -> dict[str, Any]:
    """Every fact at its default (a required fact at its first searched value)."""
    out = {}
    for spec in schema.specs:
        if spec.has_default:
            out[spec.name] = spec.check(spec.default) if spec.default is not None else None
        else:
            values = domains[spec.name].values
            out[spec.name] = values[0] if values else None
    return out


def size(domains: Mapping[str, Domain], names: list[str]) -> int:
    """How many cases the product over ``names`` holds."""
    return math.prod(len(domains[n].values) for n in names)


def cases(
    base: Mapping[str, Any], domains: Mapping[str, Domain], names: list[str]
) -> Iterator[dict[str, Any]]:
    """Every combination of the values of ``names`` (the other facts as in ``base``)."""
    for combo in itertools.product(*(domains[n].values for n in names)):
        facts = dict(base)
        facts.update(zip(names, combo, strict=True))
        yield facts
