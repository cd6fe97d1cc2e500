"""A small, safe condition language over facts, compiled to closures.

Grammar (keywords are lower case)::

    expr       := or_expr
    or_expr    := and_expr ("or" and_expr)*
    and_expr   := not_expr ("and" not_expr)*
    not_expr   := "not" not_expr | comparison
    comparison := operand (("==" | "!=" | "<" | "<=" | ">" | ">=" | "in" | "not" "in") operand)?
    operand    := NUMBER | STRING | "true" | "false" | "null" | list | path
                | "len" "(" path ")" | "exists" "(" path ")" | "missing" "(" path ")"
                | "(" expr ")"
    list       := "[" (literal ("," literal)*)? "]"
    path       := NAME ("." NAME)*

Nothing here can execute code: the text is tokenised by a fixed regular expression and
parsed by hand into a tree of a handful of node kinds; no ``eval``, ``exec``, ``compile``
or attribute lookup on Python objects ever happens. Names must be declared facts (a path
``a.b`` reads key ``b`` of the object fact ``a``); names starting with an underscore are
refused. Size and nesting are bounded.

**Missing and null values.** Facts are validated before any rule runs, so a declared
top-level fact is always present (given, or its default); it is null only when declared
``nullable``. A path into an object fact whose key is absent (``customer.tier`` on
``{"customer": {}}``), or that walks through a non-object, reads as ``null``. Then:

* ``==`` / ``!=``: null equals only null. ``customer.tier == null`` is true when the key
  is absent or null; ``customer.tier == 'gold'`` is false and ``customer.tier != 'gold'``
  true.
* ordering (``<``, ``<=``, ``>``, ``>=``) with null on either side is **false**, so
  ``customer.age < 18`` does not fire for a customer without an age, while
  ``not (customer.age >= 18)`` does.
* ``x in list``: null is in a list only when the list holds ``null``; ``x in null`` is
  false and ``x not in null`` true. ``len(null)`` is 0.
* a bare path used as a condition is true when its value is truthy (null is false).

To make "missing" fire explicitly, write ``missing(path)`` (true when any key along the
path is absent, or the value is null) or its negation ``exists(path)``: for instance
``missing(customer.tier) or customer.tier == 'gold'``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..exceptions import ConditionError

__all__ = [
    "MAX_CONDITION_CHARS",
    "MAX_DEPTH",
    "CompiledCondition",
    "ConditionError",
    "compile_condition",
]

#: Longest condition text accepted.
MAX_CONDITION_CHARS = 1000
#: Deepest nesting of parentheses / operators accepted.
MAX_DEPTH = 16
_MAX_TOKENS = 200
_MAX_LIST = 100

Facts = Mapping[str, Any]


_TOKEN_RE = re.compile(
    r"""
    (?P<ws>\s+)
  | (?P<number>-?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?)
  | (?P<string>"(?:[^"\\\n]|\\["\\])*"|'(?:[^'\\\n]|\\['\\])*')
  | (?P<op>==|!=|<=|>=|<|>)
  | (?P<punct>[()\[\],.])
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
    """,
    re.VERBOSE,
)

_KEYWORDS = {"and", "or", "not", "in", "true", "false", "null", "len"}
#: Presence tests: functions only when followed by "(" (not reserved as names).
_PRESENCE = ("exists", "missing")


@dataclass(frozen=True, slots=True)
class _Tok:
    kind: str
    text: str
    pos: int


def _tokenize(text: str) -> list[_Tok]:
    toks: list[_Tok] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN_RE.match(text, pos)
        if m is None:
            raise ConditionError(f"unexpected character {text[pos]!r} at position {pos}")
        kind = m.lastgroup or ""
        if kind != "ws":
            toks.append(_Tok(kind, m.group(), pos))
            if len(toks) > _MAX_TOKENS:
                raise ConditionError(f"condition is too long (over {_MAX_TOKENS} tokens)")
        pos = m.end()
    return toks


# --------------------------------------------------------------------------- parse tree
# Nodes are tuples: ("lit", value) | ("path", (names...)) | ("len", path)
# | ("exists", path) | ("missing", path) | ("not", node) | ("and", [nodes])
# | ("or", [nodes]) | ("cmp", op, left, right)


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.toks = _tokenize(text)
        self.i = 0
        self.depth = 0

    def peek(self) -> _Tok | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self) -> _Tok:
        tok = self.peek()
        if tok is None:
            raise ConditionError("condition ends too early")
        self.i += 1
        return tok

    def expect(self, text: str) -> None:
        tok = self.take()
        if tok.text != text:
            raise ConditionError(f"expected {text!r} at position {tok.pos}, found {tok.text!r}")

    def at_word(self, word: str) -> bool:
        tok = self.peek()
        return tok is not None and tok.kind == "name" and tok.text == word

    def enter(self) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise ConditionError(f"condition is nested too deeply (over {MAX_DEPTH} levels)")

    def parse(self) -> tuple:
        node = self.expr()
        tok = self.peek()
        if tok is not None:
            raise ConditionError(f"unexpected {tok.text!r} at position {tok.pos}")
        return node

    def expr(self) -> tuple:
        self.enter()
        try:
            parts = [self.and_expr()]
            while self.at_word("or"):
                self.take()
                parts.append(self.and_expr())
            return parts[0] if len(parts) == 1 else ("or", parts)
        finally:
            self.depth -= 1

    def and_expr(self) -> tuple:
        parts = [self.not_expr()]
        while self.at_word("and"):
            self.take()
            parts.append(self.not_expr())
        return parts[0] if len(parts) == 1 else ("and", parts)

    def not_expr(self) -> tuple:
        if self.at_word("not"):
            self.take()
            self.enter()
            try:
                return ("not", self.not_expr())
            finally:
                self.depth -= 1
        return self.comparison()

    def comparison(self) -> tuple:
        left = self.operand()
        tok = self.peek()
        if tok is None:
            return left
        if tok.kind == "op":
            self.take()
            return ("cmp", tok.text, left, self.operand())
        if tok.kind == "name" and tok.text == "in":
            self.take()
            return ("cmp", "in", left, self.operand())
        if tok.kind == "name" and tok.text == "not":
            nxt = self.toks[self.i + 1] if self.i + 1 < len(self.toks) else None
            if nxt is not None and nxt.text == "in":
                self.i += 2
                return ("cmp", "not in", left, self.operand())
        return left

    def operand(self) -> tuple:
        tok = self.take()
        if tok.kind == "number":
            return ("lit", _number(tok))
        if tok.kind == "string":
            return ("lit", _string(tok))
        if tok.text == "[":
            return ("lit", self.list_literal(tok))
        if tok.text == "(":
            node = self.expr()
            self.expect(")")
            return node
        if tok.kind == "name":
            if tok.text == "true":
                return ("lit", True)
            if tok.text == "false":
                return ("lit", False)
            if tok.text == "null":
                return ("lit", None)
            if tok.text == "len":
                self.expect("(")
                path = self.path(self.take())
                self.expect(")")
                return ("len", path)
            if tok.text in _PRESENCE and (nxt := self.peek()) is not None and nxt.text == "(":
                # exists / missing are not keywords: a fact may still be called so
                self.take()
                path = self.path(self.take())
                self.expect(")")
                return (tok.text, path)
            return self.path(tok)
        raise ConditionError(f"unexpected {tok.text!r} at position {tok.pos}")

    def path(self, tok: _Tok) -> tuple:
        names = [self.name(tok)]
        while (nxt := self.peek()) is not None and nxt.text == ".":
            self.take()
            names.append(self.name(self.take()))
        return ("path", tuple(names))

    def name(self, tok: _Tok) -> str:
        if tok.kind != "name" or tok.text in _KEYWORDS:
            raise ConditionError(f"expected a fact name at position {tok.pos}, found {tok.text!r}")
        if tok.text.startswith("_"):
            raise ConditionError(
                f"names starting with '_' are not allowed ({tok.text!r} at position {tok.pos})"
            )
        if (nxt := self.peek()) is not None and nxt.text == "(":
            raise ConditionError(
                f"function calls are not allowed ({tok.text!r}(...) at position {tok.pos}); "
                "the only functions are len(fact), exists(fact) and missing(fact)"
            )
        return tok.text

    def list_literal(self, start: _Tok) -> tuple:
        items: list[Any] = []
        if (tok := self.peek()) is not None and tok.text == "]":
            self.take()
            return tuple(items)
        while True:
            tok = self.take()
            if tok.kind == "number":
                items.append(_number(tok))
            elif tok.kind == "string":
                items.append(_string(tok))
            elif tok.text in ("true", "false", "null"):
                items.append({"true": True, "false": False, "null": None}[tok.text])
            else:
                raise ConditionError(
                    f"lists hold only literals; found {tok.text!r} at position {tok.pos}"
                )
            if len(items) > _MAX_LIST:
                raise ConditionError(f"list at position {start.pos} has over {_MAX_LIST} items")
            sep = self.take()
            if sep.text == "]":
                return tuple(items)
            if sep.text != ",":
                raise ConditionError(
                    f"expected ',' or ']' at position {sep.pos}, found {sep.text!r}"
                )


def _number(tok: _Tok) -> int | float:
    text = tok.text
    value: int | float = float(text) if any(c in text for c in ".eE") else int(text)
    if isinstance(value, float) and not math.isfinite(value):
        raise ConditionError(f"number {text!r} at position {tok.pos} is not finite")
    return value


def _string(tok: _Tok) -> str:
    body = tok.text[1:-1]
    return body.replace("\\" + tok.text[0], tok.text[0]).replace("\\\\", "\\")


# --------------------------------------------------------------------------- compile


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _order(op: str) -> Callable[[Any, Any], bool]:
    def cmp(a: Any, b: Any) -> bool:
        if a is None or b is None:
            return False
        if (_is_num(a) and _is_num(b)) or (isinstance(a, str) and isinstance(b, str)):
            if op == "<":
                return bool(a < b)
            if op == "<=":
                return bool(a <= b)
            if op == ">":
                return bool(a > b)
            return bool(a >= b)
        raise ConditionError(f"cannot order {type(a).__name__} and {type(b).__name__} with {op}")

    return cmp


def _contains(a: Any, b: Any) -> bool:
    if b is None:
        return False
    if isinstance(b, str):
        if not isinstance(a, str):
            raise ConditionError(
                f"'in' a string needs a string on the left, got {type(a).__name__}"
            )
        return a in b
    if isinstance(b, (tuple, list)):
        return a in b
    raise ConditionError(f"'in' needs a list or string on the right, got {type(b).__name__}")


_FACT_KIND = {
    "bool": "bool",
    "int": "number",
    "number": "number",
    "str": "str",
    "list[str]": "list",
    "list[number]": "list",
    "object": "object",
}


def _lit_kind(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "bool"
    if _is_num(v):
        return "number"
    if isinstance(v, str):
        return "str"
    return "list"


@dataclass(frozen=True, slots=True)
class CompiledCondition:
    """A parsed condition: ``fn(facts) -> bool``, the facts it reads, and whether it is constant."""

    source: str
    fn: Callable[[Facts], bool]
    facts: frozenset[str]
    constant: bool | None  # True / False when no fact is read, else None
    #: (fact, literal) for every ``fact == lit``, ``fact != lit``, ``fact in [lits]`` and
    #: ``lit in fact`` (a list fact): what a rule set checks against declared enums
    literals: tuple[tuple[str, Any], ...] = ()

    def __call__(self, facts: Facts) -> bool:
        return self.fn(facts)


def compile_condition(
    text: str | bool, fact_types: Mapping[str, str] | None = None
) -> CompiledCondition:
    """Parse and compile ``text``.

    Parameters
    ----------
    text : str or bool
        The condition (a YAML ``true`` / ``false`` is the condition ``true`` / ``false``).
    fact_types : mapping, optional
        Declared fact name -> type (as in :class:`hybridroute.contracts.FactSpec`). When
        given, every name must be declared and obviously ill-typed comparisons (ordering a
        string fact against a number, ``len`` of a number...) are refused here rather than
        at routing time.

    Raises
    ------
    ConditionError
        With what is wrong and where (character position).
    """
    if not isinstance(text, str):
        if isinstance(text, bool):
            text = "true" if text else "false"
        else:
            raise ConditionError(f"a condition must be a string, got {type(text).__name__}")
    if len(text) > MAX_CONDITION_CHARS:
        raise ConditionError(
            f"condition is too long ({len(text)} > {MAX_CONDITION_CHARS} characters)"
        )
    if not text.strip():
        raise ConditionError("condition is empty")
    tree = _Parser(text).parse()
    used: set[str] = set()
    fn, _kind = _build(tree, fact_types, used)
    constant: bool | None = None
    if not used:
        constant = bool(fn({}))
    return CompiledCondition(
        source=text,
        fn=_as_bool(fn),
        facts=frozenset(used),
        constant=constant,
        literals=tuple(_literal_comparisons(tree, fact_types)),
    )


def _literal_comparisons(node: tuple, types: Mapping[str, str] | None) -> list[tuple[str, Any]]:
    """Every (top-level fact, literal) pair the condition compares for equality/membership."""
    out: list[tuple[str, Any]] = []
    stack = [node]
    while stack:
        n = stack.pop()
        tag = n[0]
        if tag in ("and", "or"):
            stack.extend(n[1])
        elif tag == "not":
            stack.append(n[1])
        elif tag == "cmp":
            op, left, right = n[1], n[2], n[3]
            if op in ("==", "!="):
                for a, b in ((left, right), (right, left)):
                    if a[0] == "path" and len(a[1]) == 1 and b[0] == "lit":
                        out.append((a[1][0], b[1]))
            elif op in ("in", "not in"):
                if left[0] == "path" and len(left[1]) == 1 and right[0] == "lit":
                    if isinstance(right[1], tuple):  # fact in [a, b]; not a substring test
                        out.extend((left[1][0], v) for v in right[1])
                elif left[0] == "lit" and right[0] == "path" and len(right[1]) == 1:
                    fact = right[1][0]
                    if types is not None and types.get(fact, "").startswith("list["):
                        out.append((fact, left[1]))  # 'x' in a list fact
    return out


def _as_bool(fn: Callable[[Facts], Any]) -> Callable[[Facts], bool]:
    def run(facts: Facts) -> bool:
        return bool(fn(facts))

    return run


def _build(
    node: tuple, types: Mapping[str, str] | None, used: set[str]
) -> tuple[Callable[[Facts], Any], str]:
    """Return (closure, static kind) for a node. Kinds: bool number str list object null any."""
    tag = node[0]
    if tag == "lit":
        value = node[1]
        return (lambda facts, _v=value: _v), _lit_kind(value)
    if tag == "path":
        names = node[1]
        head = names[0]
        kind = "any"
        if types is not None:
            if head not in types:
                raise ConditionError(
                    f"unknown fact {head!r} (declared: {', '.join(sorted(types)) or 'none'})"
                )
            kind = _FACT_KIND.get(types[head], "any")
            if len(names) > 1 and kind != "object":
                raise ConditionError(
                    f"fact {head!r} is a {types[head]}, it has no field {names[1]!r}"
                )
            if len(names) > 1:
                kind = "any"
        used.add(head)
        if len(names) == 1:
            return (lambda facts, _k=head: facts.get(_k)), kind
        rest = names[1:]

        def walk(facts: Facts, _h: str = head, _rest: tuple = rest) -> Any:
            value = facts.get(_h)
            for key in _rest:
                if not isinstance(value, Mapping):
                    return None
                value = value.get(key)
            return value

        return walk, kind
    if tag == "len":
        inner, kind = _build(node[1], types, used)
        if kind not in ("list", "str", "object", "any"):
            raise ConditionError(f"len() needs a list, string or object fact, not a {kind}")

        def length(facts: Facts, _f: Callable = inner) -> int:
            value = _f(facts)
            if value is None:
                return 0
            if isinstance(value, (str, tuple, list, Mapping)):
                return len(value)
            raise ConditionError(f"len() of a {type(value).__name__}")

        return length, "number"
    if tag in _PRESENCE:
        read, _ = _build(node[1], types, used)
        if tag == "exists":
            return (lambda facts, _f=read: _f(facts) is not None), "bool"
        return (lambda facts, _f=read: _f(facts) is None), "bool"
    if tag == "not":
        inner, _ = _build(node[1], types, used)
        return (lambda facts, _f=inner: not _f(facts)), "bool"
    if tag in ("and", "or"):
        parts = [_build(p, types, used)[0] for p in node[1]]
        if tag == "and":
            return (lambda facts, _p=tuple(parts): all(p(facts) for p in _p)), "bool"
        return (lambda facts, _p=tuple(parts): any(p(facts) for p in _p)), "bool"
    if tag == "cmp":
        op = node[1]
        left, lk = _build(node[2], types, used)
        right, rk = _build(node[3], types, used)
        if op in ("<", "<=", ">", ">="):
            known = {lk, rk} - {"any", "null"}
            if len(known) > 1 or known - {"number", "str"}:
                raise ConditionError(f"cannot compare {lk} with {rk} using {op!r}")
            order = _order(op)
            return (lambda facts, _l=left, _r=right, _o=order: _o(_l(facts), _r(facts))), "bool"
        if op in ("in", "not in"):
            if rk not in ("list", "str", "any", "null"):
                raise ConditionError(f"'{op}' needs a list or string on the right, not a {rk}")
            neg = op == "not in"
            return (
                lambda facts, _l=left, _r=right, _n=neg: _contains(_l(facts), _r(facts)) != _n
            ), "bool"
        if op == "==":
            return (lambda facts, _l=left, _r=right: _eq(_l(facts), _r(facts))), "bool"
        return (lambda facts, _l=left, _r=right: not _eq(_l(facts), _r(facts))), "bool"
    raise ConditionError(f"internal: unknown node {tag!r}")  # pragma: no cover


def _eq(a: Any, b: Any) -> bool:
    # true == 1 must not hold: booleans only equal booleans.
    if isinstance(a, bool) != isinstance(b, bool):
        return False
    if isinstance(a, list):
        a = tuple(a)
    if isinstance(b, list):
        b = tuple(b)
    return bool(a == b)
