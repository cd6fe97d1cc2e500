"""``hybridroute rules lint``: what a valid rules file may still get wrong.

A rule set that loads is valid (no duplicate ids, no undeclared destination, no rule
shadowed by an unconditional one, no condition comparing an ``enum`` fact with a value its
enum does not allow...). Lint looks further, with the bounded search of :mod:`._domain`:

=========================  ================================================================
``never-true``             a rule's condition can never be true given the declared facts:
                           contradictory bounds (``amount > 10 and amount < 5``), a
                           comparison outside a fact's ``min`` / ``max`` or ``enum``; the
                           smallest set of conditions that contradict is named
``dead-comparison``        one comparison inside a condition can never be true (the rule
                           can still fire through the rest)
``always-true-comparison`` one comparison is always true (``amount >= 0`` with ``min: 0``)
``never-fires``            the condition can hold, but wherever it does an earlier rule
                           decides first
``overlap``                an earlier rule that reads the same facts takes part of a later
                           rule's cases with another decision, so the later one fires only
                           on a subset: the facts that reach it and those taken are shown
                           (say ``overlaps: [earlier_id]`` on the rule when that is meant)
``unread-enum-value``      values of an ``enum`` fact that conditions compare with no rule
                           reads: they fall through with every other value
``unread-fact``            a fact declared but read by no rule
=========================  ================================================================

**Exact or heuristic.** A finding built on a witness (the facts of an ``overlap``) is always
real. A finding that something can *never* happen is exact when every fact searched has
exact values (:mod:`._domain`: booleans, enums, numbers and strings compared with
constants); otherwise it is heuristic -- no case of the search reached it -- and says so.
Findings are warnings; with ``strict`` the exact ones are errors (``hybridroute rules lint
--strict`` exits 1), the heuristic ones stay warnings. A search over more than
:data:`~._domain.MAX_CASES` combinations, or past the lint's :data:`MAX_EVALUATIONS`, is
skipped and listed as not checked.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any

from ..exceptions import ConditionError
from ._conditions import _build, _Parser
from ._domain import (
    MAX_CASES,
    Domain,
    FactUse,
    base_facts,
    build_domains,
    cases,
    condition_uses,
    size,
)
from ._ruleset import Rule, RuleSet

__all__ = ["LINT_KINDS", "MAX_EVALUATIONS", "LintFinding", "LintReport", "lint_rules"]

#: Finding kinds, in the order they are reported for a rule.
LINT_KINDS = (
    "never-true",
    "dead-comparison",
    "always-true-comparison",
    "never-fires",
    "overlap",
    "unread-enum-value",
    "unread-fact",
)
_EXAMPLES = 2
#: Most rule evaluations one lint makes (a search of N cases checking k rules costs N * k):
#: a few seconds at most, however many rules; the searches past it are listed as not checked.
MAX_EVALUATIONS = 2_000_000


@dataclass(frozen=True, slots=True)
class LintFinding:
    """One finding.

    Attributes
    ----------
    kind : str
        One of :data:`LINT_KINDS`.
    message : str
        One line: the rule or fact, what is wrong, the facts that show it.
    rule_id : str or None
        The rule concerned (``None`` for a fact).
    fact : str or None
        The fact concerned, where there is one.
    exact : bool
        Proven over every region of the facts searched (else heuristic).
    witnesses : tuple of mapping
        Facts showing it (the searched facts only), with what decided them.
    """

    kind: str
    message: str
    rule_id: str | None = None
    fact: str | None = None
    exact: bool = True
    witnesses: tuple[Mapping[str, Any], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "rule_id": self.rule_id,
            "fact": self.fact,
            "exact": self.exact,
            "message": self.message,
            "witnesses": [dict(w) for w in self.witnesses],
        }


@dataclass(frozen=True, slots=True)
class LintReport:
    """The findings of :func:`lint_rules`.

    Attributes
    ----------
    rules : RuleSet
        The rule set linted.
    findings : tuple of LintFinding
        In rule order, then the facts'.
    not_checked : tuple of str
        Searches skipped (over :data:`~._domain.MAX_CASES` combinations), one line each.
    """

    rules: RuleSet
    findings: tuple[LintFinding, ...]
    not_checked: tuple[str, ...] = field(default=())

    def errors(self, strict: bool) -> list[LintFinding]:
        """The findings that are errors: the exact ones under ``strict``, else none."""
        return [f for f in self.findings if strict and f.exact]

    def to_dict(self, strict: bool = False) -> dict[str, Any]:
        errors = self.errors(strict)
        return {
            "rules": {"name": self.rules.name, "version": self.rules.version},
            "strict": strict,
            "errors": len(errors),
            "warnings": len(self.findings) - len(errors),
            "findings": [
                {**f.to_dict(), "level": "error" if f in errors else "warning"}
                for f in self.findings
            ],
            "not_checked": list(self.not_checked),
        }

    def lines(self, strict: bool = False) -> list[str]:
        errors = self.errors(strict)
        n_err = len(errors)
        out = [
            f"rules lint: {self.rules.name} {self.rules.version} -- {len(self.rules.rules)} "
            f"rule(s), {len(self.rules.schema.specs)} fact(s): {n_err} error(s), "
            f"{len(self.findings) - n_err} warning(s)"
        ]
        for f in self.findings:
            level = "error" if f in errors else "warning"
            tag = "" if f.exact else " (heuristic)"
            out.append(f"{level}: [{f.kind}]{tag} {f.message}")
        out.extend(f"not checked: {line}" for line in self.not_checked)
        return out


# --------------------------------------------------------------------------- helpers


def _lit(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    if isinstance(value, tuple):
        return "[" + ", ".join(_lit(v) for v in value) + "]"
    return repr(value)


def render(node: tuple) -> str:
    """A parse-tree node written back in the condition language."""
    tag = node[0]
    if tag == "lit":
        return _lit(node[1])
    if tag == "path":
        return ".".join(node[1])
    if tag in ("len", "exists", "missing"):
        return f"{tag}({render(node[1])})"
    if tag == "not":
        return f"not {_paren(node[1])}"
    if tag in ("and", "or"):
        return f" {tag} ".join(_paren(p) for p in node[1])
    return f"{render(node[2])} {node[1]} {render(node[3])}"


def _paren(node: tuple) -> str:
    return f"({render(node)})" if node[0] in ("and", "or") else render(node)


def _node_facts(node: tuple) -> set[str]:
    tag = node[0]
    if tag == "path":
        return {node[1][0]}
    if tag in ("len", "exists", "missing", "not"):
        return _node_facts(node[1])
    if tag in ("and", "or"):
        return set().union(*(_node_facts(p) for p in node[1]))
    if tag == "cmp":
        return _node_facts(node[2]) | _node_facts(node[3])
    return set()


def _compile(node: tuple, types: Mapping[str, str]) -> Callable[[Mapping[str, Any]], bool]:
    fn, _ = _build(node, types, set())

    def run(facts: Mapping[str, Any]) -> bool:
        try:
            return bool(fn(facts))
        except ConditionError:
            return False

    return run


def _fires(rule: Rule, facts: Mapping[str, Any]) -> Any:
    try:
        return rule.check(facts)
    except ConditionError:
        return None


def _shown(facts: Mapping[str, Any], names: list[str]) -> dict[str, Any]:
    return {n: _plain(facts[n]) for n in sorted(names)}


def _plain(v: Any) -> Any:
    if isinstance(v, tuple):
        return [_plain(x) for x in v]
    if isinstance(v, Mapping):
        return {str(k): _plain(x) for k, x in v.items()}
    return v


def _text(facts: Mapping[str, Any]) -> str:
    return json.dumps(facts, sort_keys=True, ensure_ascii=False, default=str)


def _declared(rs: RuleSet, names: set[str]) -> str:
    """How the facts are declared, for a message: ``amount: number, min 0``."""
    parts = []
    for name in sorted(names):
        spec = rs.schema[name]
        bits = [spec.type]
        if spec.enum is not None:
            bits.append("enum " + ", ".join(_lit(v) for v in spec.enum[:8]))
        if spec.min is not None:
            bits.append(f"min {spec.min!r}")
        if spec.max is not None:
            bits.append(f"max {spec.max!r}")
        parts.append(f"{name}: {', '.join(bits)}")
    return "; ".join(parts)


class _Search:
    """The shared state of one lint: domains, defaults, and what was skipped."""

    def __init__(self, rs: RuleSet) -> None:
        self.rs = rs
        self.types = {s.name: s.type for s in rs.schema.specs}
        self.trees: dict[str, tuple] = {}
        uses: dict[str, FactUse] = {}
        probes: dict[str, list[Any]] = {}
        for rule in rs.rules:
            if rule.condition is not None:
                tree = _Parser(rule.condition.source).parse()
                self.trees[rule.id] = tree
                condition_uses(tree, uses, self.types)
            elif rule.guard_obj is not None:
                for fact, values in rule.guard_obj.probe_values(rs.schema).items():
                    probes.setdefault(fact, []).extend(values)
        self.uses = uses
        self.domains: dict[str, Domain] = build_domains(
            rs.schema, uses, {k: tuple(v) for k, v in probes.items()}
        )
        self.base = base_facts(rs.schema, self.domains)
        self.not_checked: list[str] = []
        self.budget = MAX_EVALUATIONS
        self.over_budget: list[str] = []  # searches skipped once the budget was spent

    def skipped(self) -> tuple[str, ...]:
        """The searches not made, one line each (those past the budget in one line)."""
        out = list(self.not_checked)
        if self.over_budget:
            first = self.over_budget[0]
            more = len(self.over_budget) - 1
            out.append(
                f"{first}{f' and {more} more search(es)' if more else ''}: the lint's budget of "
                f"{MAX_EVALUATIONS:,} rule evaluations is spent"
            )
        return tuple(out)

    def exact(self, names: set[str] | list[str]) -> bool:
        return all(self.domains[n].exact for n in names)

    def fits(self, names: list[str], what: str, rules: int = 1) -> bool:
        """Whether a search over ``names`` checking ``rules`` rules a case fits the limits
        (one search, and the whole lint's :data:`MAX_EVALUATIONS`); if not, say so."""
        n = size(self.domains, names)
        if n > MAX_CASES:
            self.not_checked.append(f"{what}: {n:,} combinations of {', '.join(names)}")
            return False
        if n * rules > self.budget:
            self.over_budget.append(what)
            return False
        self.budget -= n * rules
        return True

    def satisfiable(self, fn: Callable[[Mapping[str, Any]], bool], names: list[str]) -> bool:
        return any(fn(f) for f in cases(self.base, self.domains, names))


# --------------------------------------------------------------------------- the checks


def _never_true(s: _Search, rule: Rule) -> list[LintFinding]:
    tree = s.trees[rule.id]
    names = sorted(_node_facts(tree))
    if not names or not s.fits(names, f"rule {rule.id!r}'s condition"):
        return []
    if s.satisfiable(_compile(tree, s.types), names):
        return _comparisons(s, rule, tree)
    conjuncts = tree[1] if tree[0] == "and" else [tree]
    for k in range(1, min(3, len(conjuncts)) + 1):
        for subset in combinations(conjuncts, k):
            facts = sorted(set().union(*(_node_facts(c) for c in subset)))
            if not facts or not s.exact(facts) or size(s.domains, facts) > MAX_CASES:
                continue
            node = subset[0] if k == 1 else ("and", list(subset))
            if not s.satisfiable(_compile(node, s.types), facts):
                what = (
                    f"`{render(subset[0])}` can never be true"
                    if k == 1
                    else " and ".join(f"`{render(c)}`" for c in subset) + " contradict"
                )
                return [
                    LintFinding(
                        "never-true",
                        f"rule {rule.id!r} can never fire: {what} (declared: "
                        f"{_declared(s.rs, set(facts))})",
                        rule.id,
                        facts[0] if len(facts) == 1 else None,
                    )
                ]
    exact = s.exact(names)
    return [
        LintFinding(
            "never-true",
            f"rule {rule.id!r} can never fire: no combination of the "
            f"{'declared' if exact else 'searched'} values of {', '.join(names)} makes "
            f"`{render(tree)}` true (declared: {_declared(s.rs, set(names))})",
            rule.id,
            exact=exact,
        )
    ]


def _atoms(node: tuple) -> list[tuple]:
    tag = node[0]
    if tag in ("and", "or"):
        return [a for p in node[1] for a in _atoms(p)]
    if tag == "not":
        return _atoms(node[1])
    return [node] if tag == "cmp" else []


def _comparisons(s: _Search, rule: Rule, tree: tuple) -> list[LintFinding]:
    """Comparisons of one fact with a constant that are never / always true on their own."""
    out = []
    for atom in _atoms(tree):
        facts = sorted(_node_facts(atom))
        if len(facts) != 1 or not s.exact(facts):
            continue
        fn = _compile(atom, s.types)
        values = [fn(f) for f in cases(s.base, s.domains, facts)]
        if not values or (any(values) and not all(values)):
            continue
        kind = "always-true-comparison" if all(values) else "dead-comparison"
        said = "is always true" if all(values) else "can never be true"
        if atom is tree:
            said += ": the rule decides every input that reaches it"
        out.append(
            LintFinding(
                kind,
                f"rule {rule.id!r}: `{render(atom)}` {said} (declared: "
                f"{_declared(s.rs, set(facts))})",
                rule.id,
                facts[0],
            )
        )
    return out


def _outcome(o: Any) -> str:
    return f"{o.destination}/{o.reason_code}"


def _overlaps(s: _Search, pos: int) -> list[LintFinding]:
    rules = s.rs.rules
    rule = rules[pos]
    mine = set(rule.facts_read())
    related = [r for r in rules[:pos] if set(r.facts_read()) & mine]
    gates = [r for r in rules[:pos] if r not in related]
    searched = sorted(mine.union(*(set(r.facts_read()) for r in related)))
    others = sorted({f for g in gates for f in g.facts_read()} - set(searched))
    base = dict(s.base)
    shut = any(_fires(g, base) is not None for g in gates)  # at the defaults
    what = f"the earlier rules that gate rule {rule.id!r}"
    if shut and others and s.fits(others, what, len(gates)):
        # the facts only the other earlier rules read: values under which none of them fires
        # (permission granted, no tool error...), so that the search sees past them
        for facts in cases(base, s.domains, others):
            if not any(_fires(g, facts) for g in gates):
                base = facts
                break
        else:
            closed = [g.id for g in gates if _fires(g, base) is not None]
            return [
                LintFinding(
                    "never-fires",
                    f"rule {rule.id!r} can never fire: for every value of {', '.join(others)} "
                    f"an earlier rule decides first ({', '.join(map(repr, closed))} at the "
                    "defaults)",
                    rule.id,
                    exact=s.exact(others),
                )
            ]
    if not related or not s.fits(searched, f"rule {rule.id!r} against earlier rules", pos + 1):
        return []
    holds = reached = same = 0
    alike: list[str] = []  # earlier rules that take cases with the same decision
    taken: dict[str, list[Any]] = {}
    reach_examples: list[dict[str, Any]] = []
    for facts in cases(base, s.domains, searched):
        own = _fires(rule, facts)
        if own is None:
            continue
        taker = next(((r, o) for r in rules[:pos] if (o := _fires(r, facts)) is not None), None)
        if taker is None:
            holds += 1
            reached += 1
            if len(reach_examples) < _EXAMPLES:
                reach_examples.append(_shown(facts, searched))
            continue
        r, o = taker
        if r not in related:
            continue  # a gate on other facts (permission...): by design, not an overlap
        holds += 1
        if (o.destination, o.reason_code) == (own.destination, own.reason_code):
            same += 1
            if r.id not in alike:
                alike.append(r.id)
            continue
        entry = taken.setdefault(r.id, [0, None, o, own])
        entry[0] += 1
        if entry[1] is None:
            entry[1] = _shown(facts, searched)
    if not holds:
        return []
    exact = s.exact(searched) and s.exact(others)
    witnesses = tuple(
        {"facts": ex, "decided_by": rid, "decision": _outcome(o), "instead_of": _outcome(own)}
        for rid, (_, ex, o, own) in taken.items()
    )
    takers = "; ".join(
        f"{rid!r} takes {n} (e.g. {_text(ex)} -> {_outcome(o)} instead of {_outcome(own)})"
        for rid, (n, ex, o, own) in taken.items()
    )
    if not reached:
        ids = ", ".join(map(repr, alike))
        also = f"; {same} case(s) go to {ids} with the same decision" if same else ""
        verb = "takes" if len(alike) == 1 else "take"
        first = f"{takers}{also}" if takers else f"{ids} {verb} every case with the same decision"
        return [
            LintFinding(
                "never-fires",
                f"rule {rule.id!r} can never fire: wherever it would, an earlier rule decides "
                f"first: {first}",
                rule.id,
                exact=exact,
                witnesses=witnesses,
            )
        ]
    unmeant = {rid: v for rid, v in taken.items() if rid not in rule.overlaps}
    if not unmeant:
        return []
    reach = ", ".join(_text(ex) for ex in reach_examples)
    takers = "; ".join(
        f"{rid!r} takes {n} (e.g. {_text(ex)} -> {_outcome(o)} instead of {_outcome(own)})"
        for rid, (n, ex, o, own) in unmeant.items()
    )
    return [
        LintFinding(
            "overlap",
            f"rule {rule.id!r} fires on only {reached} of the {holds} searched cases where it "
            f"holds: {takers}; it still decides e.g. {reach} (if meant, add 'overlaps: "
            f"[{', '.join(unmeant)}]' to the rule)",
            rule.id,
            witnesses=tuple(w for w in witnesses if w["decided_by"] in unmeant)
            + tuple({"facts": ex, "decided_by": rule.id} for ex in reach_examples),
        )
    ]


def _facts_findings(s: _Search) -> list[LintFinding]:
    rs = s.rs
    read: set[str] = set()
    by_guard: set[str] = set()
    for rule in rs.rules:
        read.update(rule.facts_read())
        if rule.guard_obj is not None:
            by_guard.update(rule.facts_read())
    out = []
    for spec in rs.schema.specs:
        if spec.name not in read:
            out.append(
                LintFinding(
                    "unread-fact",
                    f"fact {spec.name!r} is declared but no rule reads it (only the snapshot "
                    "records it)",
                    fact=spec.name,
                )
            )
            continue
        use = s.uses.get(spec.name)
        if spec.enum is None or spec.name in by_guard or use is None:
            continue
        if use.ordered:
            continue  # ordering compares every value
        mentioned = set(use.constants)
        unread = [v for v in spec.enum if v not in mentioned]
        if mentioned & set(spec.enum) and unread:
            out.append(
                LintFinding(
                    "unread-enum-value",
                    f"fact {spec.name!r}: no rule reads the value(s) "
                    f"{', '.join(_lit(v) for v in unread)} (the conditions compare it only with "
                    f"{', '.join(_lit(v) for v in spec.enum if v in mentioned)}); they fall "
                    "through with every other value",
                    fact=spec.name,
                )
            )
    return out


def lint_rules(rules: RuleSet) -> LintReport:
    """Lint ``rules`` (see the module docstring for what is found, and how exactly).

    Parameters
    ----------
    rules : RuleSet
        A valid rule set (:func:`~hybridroute.rules.load_rules`).

    Returns
    -------
    LintReport
    """
    s = _Search(rules)
    findings: list[LintFinding] = []
    for pos, rule in enumerate(rules.rules):
        dead = []
        if rule.condition is not None:
            dead = _never_true(s, rule)
            findings.extend(dead)
        if pos and not any(f.kind == "never-true" for f in dead):
            findings.extend(_overlaps(s, pos))
    findings.extend(_facts_findings(s))
    return LintReport(rules, tuple(findings), s.skipped())
