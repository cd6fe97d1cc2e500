"""Rule tests: the cases a rules file carries in a ``tests:`` section, or keeps beside it.

A case gives facts (and, when the model must decide, a text) and the decision expected::

    tests:
      - name: no_permission_is_rejected         # optional; unique (else the case is "#N")
        description: nothing outranks permission # optional
        facts: {has_permission: false, amount: 9000}   # checked against the facts schema
        expect: {destination: reject, reason: permission_denied, rule: permission}
      - name: big_refund_goes_to_a_human
        facts: {amount: 750, action: issue_refund}
        expect: {destination: human_review, reason: high_risk_amount}   # 'rule' optional
      - name: plain_refund_request
        text: "Please refund the $40 you charged me twice."   # the model decides this one
        facts: {action: issue_refund, amount: 40}
        expect: {destination: refund_request, reason: confident_intent, rule: null}

``expect`` takes ``destination`` and ``reason`` (both required, both declared by the rules
file) and optionally ``rule``: the id of the rule that must decide, or ``null`` for "no
rule" (the model or the default exit). ``evidence`` (``{"required_points": [...], "items":
[...]}``, as ``hybridroute route`` takes it) may go with a text.

**Beside the file.** ``support_rules.yaml``'s tests may also live in
``support_rules.tests.yaml`` (the rules file's name with ``.tests`` before its suffix): a
mapping with ``tests:`` (and optionally ``format: 1`` and ``description``). When both hold
cases, **both run** -- the inline ones first -- and no case name may appear twice: neither
silently wins over the other.

**Malformed cases.** Every case is checked before any runs: its keys, a name given twice,
facts the schema refuses, an undeclared destination or reason code, an unknown rule id, a
rule that cannot give the expected outcome. Each bad case is named (its name or ``#N`` and
its line); together they make one :class:`~hybridroute.exceptions.RulesFileError`.

Both files are read like the rules file itself (:mod:`hybridroute.rules._loader`): regular
files only, byte limit enforced while reading, strict UTF-8, the hardened YAML checker.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .._safeio import check_text, read_text
from ..exceptions import InputError, RulesFileError, UserInputError
from ._loader import MAX_RULES_FILE_BYTES, _build, _located, parse_document
from ._ruleset import RuleSet

__all__ = ["MAX_CASES", "RuleTestCase", "RuleTestSuite", "load_rule_tests", "sibling_tests_path"]

#: Most test cases read from a rules file and its sibling together.
MAX_CASES = 5000
#: Malformed cases named in the one error line before "... and N more".
_MAX_NAMED = 20

_CASE_KEYS = ("name", "description", "facts", "text", "evidence", "expect")
_EXPECT_KEYS = ("destination", "reason", "rule")
_SIBLING_KEYS = ("format", "description", "tests")


@dataclass(frozen=True, slots=True)
class RuleTestCase:
    """One test case of a rules file.

    Attributes
    ----------
    name : str or None
        The case's name, if it has one.
    index : int
        Its 1-based position among the cases of its file.
    source : str
        The file it is written in.
    line : int or None
        The line it starts on.
    facts : mapping
        The facts as written (the schema fills in defaults when it runs).
    text : str or None
        The text the model classifies when no rule decides.
    evidence : mapping or None
        Evidence passed with the text.
    destination, reason : str
        The decision expected.
    rule : str or None
        The rule expected to decide (``None``: no rule); checked only when ``rule_given``.
    rule_given : bool
        Whether ``expect`` names a rule (or ``null``).
    description : str
        Free text.
    """

    name: str | None
    index: int
    source: str
    line: int | None
    facts: Mapping[str, Any]
    text: str | None
    evidence: Mapping[str, Any] | None
    destination: str
    reason: str
    rule: str | None = None
    rule_given: bool = False
    description: str = ""

    @property
    def label(self) -> str:
        """How messages name the case: ``case 'NAME' (#3, FILE line 12)``."""
        where = Path(self.source).name + (f" line {self.line}" if self.line else "")
        if self.name:
            return f"case {self.name!r} (#{self.index}, {where})"
        return f"case #{self.index} ({where})"

    def expected_text(self) -> str:
        """``destination/reason`` and, when given, ``by rule 'ID'`` / ``by no rule``."""
        out = f"{self.destination}/{self.reason}"
        if self.rule_given:
            out += f" by rule {self.rule!r}" if self.rule is not None else " by no rule"
        return out

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"index": self.index, "source": self.source, "line": self.line}
        if self.name:
            out["name"] = self.name
        out["facts"] = dict(self.facts)
        if self.text is not None:
            out["text"] = self.text
        expect: dict[str, Any] = {"destination": self.destination, "reason": self.reason}
        if self.rule_given:
            expect["rule"] = self.rule
        out["expect"] = expect
        return out


@dataclass(frozen=True, slots=True)
class RuleTestSuite:
    """A rules file's rule set and its test cases.

    Attributes
    ----------
    rules : RuleSet
        Built from the file (as :func:`~hybridroute.rules.load_rules` builds it).
    cases : tuple of RuleTestCase
        Inline cases first, then the sibling file's.
    sources : tuple of str
        The files the cases were read from (the rules file, the sibling, or both).
    """

    rules: RuleSet
    cases: tuple[RuleTestCase, ...]
    sources: tuple[str, ...] = field(default=())


def sibling_tests_path(path: str | os.PathLike[str]) -> Path:
    """``NAME.tests.SUFFIX`` beside ``NAME.SUFFIX`` (``rules.yaml`` -> ``rules.tests.yaml``)."""
    p = Path(path)
    suffix = p.suffix or ".yaml"
    return p.with_name(f"{p.stem if p.suffix else p.name}.tests{suffix}")


def load_rule_tests(path: str | os.PathLike[str]) -> RuleTestSuite:
    """Read a rules file, its ``tests:`` section and its sibling tests file, and check them.

    Parameters
    ----------
    path : str or path-like
        The rules file.

    Returns
    -------
    RuleTestSuite
        Its rule set (with ``source`` set) and every case, checked.

    Raises
    ------
    RulesFileError
        The rules file or the sibling is unreadable or malformed, or one or more cases are
        (each named, with its line, in the one message).
    """
    where = os.fspath(path)
    text = _read(where, "rules file")
    doc = parse_document(text, source=where)
    ruleset = _build(doc, where)
    ruleset.source = where
    parts: list[tuple[str, str, Any]] = []
    if isinstance(doc, Mapping) and "tests" in doc:
        parts.append((where, text, doc["tests"]))
    sibling = sibling_tests_path(where)
    if os.path.lexists(sibling):
        stext = _read(str(sibling), "rule tests file")
        sdoc = parse_document(stext, source=str(sibling), what="rule tests file")
        if not isinstance(sdoc, Mapping) or "tests" not in sdoc:
            raise RulesFileError(
                "must be a mapping with a 'tests:' list of cases", path=str(sibling)
            )
        unknown = sorted(set(map(str, sdoc)) - set(_SIBLING_KEYS))
        if unknown:
            raise RulesFileError(
                f"unknown top-level key(s) {unknown}; allowed: {list(_SIBLING_KEYS)}",
                path=str(sibling),
            )
        if sdoc.get("format", 1) != 1:
            raise RulesFileError(
                f"format {sdoc.get('format')!r} is not supported (this version reads format 1)",
                path=str(sibling),
            )
        parts.append((str(sibling), stext, sdoc["tests"]))
    cases: list[RuleTestCase] = []
    problems: list[str] = []
    names: dict[str, str] = {}
    for source, src_text, items in parts:
        if not isinstance(items, list):
            raise RulesFileError("'tests' must be a list of cases", path=source)
        if len(cases) + len(items) > MAX_CASES:
            raise RulesFileError(f"too many test cases (over {MAX_CASES})", path=source)
        lines = _case_lines(src_text)
        for pos, item in enumerate(items):
            line = lines[pos] if pos < len(lines) else None
            case, problem = _case(item, pos + 1, source, line, ruleset)
            if problem is not None:
                problems.append(problem)
                continue
            assert case is not None
            if case.name is not None:
                if case.name in names:
                    problems.append(f"{case.label}: name {case.name!r} is also {names[case.name]}")
                    continue
                names[case.name] = case.label
            cases.append(case)
    if problems:
        shown = "; ".join(problems[:_MAX_NAMED])
        more = f"; ... and {len(problems) - _MAX_NAMED} more" if len(problems) > _MAX_NAMED else ""
        raise RulesFileError(f"{len(problems)} malformed test case(s): {shown}{more}", path=where)
    return RuleTestSuite(ruleset, tuple(cases), tuple(s for s, _, _ in parts))


def _read(path: str, what: str) -> str:
    try:
        return read_text(path, limit=MAX_RULES_FILE_BYTES, what=what)
    except InputError as exc:
        raise RulesFileError(f"cannot read {what}: {_located(exc)}", path=path) from None


def _case_lines(text: str) -> list[int]:
    """The 1-based line each item of the top-level ``tests:`` list starts on.

    Only the node tree is composed (no value is constructed), after the hardened checker
    has bounded the document.
    """
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except (yaml.YAMLError, RecursionError, ValueError):  # pragma: no cover - checked before
        return []
    if not isinstance(root, yaml.MappingNode):
        return []
    for key, value in root.value:
        if isinstance(key, yaml.ScalarNode) and key.value == "tests":
            if isinstance(value, yaml.SequenceNode):
                return [int(item.start_mark.line) + 1 for item in value.value]
    return []


def _case(
    item: Any, index: int, source: str, line: int | None, ruleset: RuleSet
) -> tuple[RuleTestCase | None, str | None]:
    """The checked case, or ``(None, the problem named with the case)``."""
    at = f"{Path(source).name} line {line}" if line else Path(source).name
    if not isinstance(item, Mapping):
        return None, f"case #{index} ({at}): must be a mapping, got {type(item).__name__}"
    name = item.get("name")
    label = (
        f"case {name!r} (#{index}, {at})"
        if isinstance(name, str) and name
        else f"case #{index} ({at})"
    )

    def bad(message: str) -> tuple[None, str]:
        return None, f"{label}: {message}"

    unknown = sorted(set(map(str, item)) - set(_CASE_KEYS))
    if unknown:
        return bad(f"unknown key(s) {unknown}; allowed: {list(_CASE_KEYS)}")
    if name is not None and (not isinstance(name, str) or not name.strip()):
        return bad("'name' must be a non-empty string")
    description = item.get("description", "")
    if not isinstance(description, str):
        return bad("'description' must be a string")
    facts = item.get("facts", {})
    if facts is None:
        facts = {}
    if not isinstance(facts, Mapping):
        return bad(f"'facts' must be a mapping, got {type(facts).__name__}")
    text = item.get("text")
    if text is not None:
        if not isinstance(text, str) or not text.strip():
            return bad("'text' must be a non-empty string")
        try:
            check_text(text, what="'text'")
        except InputError as exc:
            return bad(exc.reason)
    evidence = item.get("evidence")
    if evidence is not None:
        if text is None:
            return bad("'evidence' goes with a 'text' (only the model stage reads it)")
        if not isinstance(evidence, Mapping):
            return bad("'evidence' must be a mapping")
    expect = item.get("expect")
    if not isinstance(expect, Mapping):
        return bad("needs 'expect: {destination: ..., reason: ...}'")
    unknown = sorted(set(map(str, expect)) - set(_EXPECT_KEYS))
    if unknown:
        return bad(f"unknown key(s) in 'expect' {unknown}; allowed: {list(_EXPECT_KEYS)}")
    dest, reason = expect.get("destination"), expect.get("reason")
    if not isinstance(dest, str) or not isinstance(reason, str):
        return bad("'expect' needs a 'destination' and a 'reason' (strings)")
    try:
        ruleset.vocabulary.check_destination(dest)
        ruleset.vocabulary.check_reason_code(reason)
    except UserInputError as exc:
        return bad(f"expect: {exc}")
    rule_given = "rule" in expect
    rule = expect.get("rule")
    if rule is not None:
        known = {r.id: r for r in ruleset.rules}
        if not isinstance(rule, str) or rule not in known:
            return bad(f"expect: rule {rule!r} is not a rule of this file")
        r = known[rule]
        if dest not in r.destinations or reason not in r.reason_codes:
            return bad(
                f"expect: rule {rule!r} cannot decide {dest}/{reason} (it gives "
                f"{', '.join(r.destinations)} with {', '.join(r.reason_codes)})"
            )
    elif rule_given and text is None and reason != ruleset.default_reason:
        return bad("expect: with no text and no rule, only the default exit can decide")
    try:
        ruleset.validate_facts(facts)
    except UserInputError as exc:
        return bad(f"the facts schema refuses its facts: {exc}")
    return (
        RuleTestCase(
            name=name if isinstance(name, str) else None,
            index=index,
            source=source,
            line=line,
            facts=dict(facts),
            text=text,
            evidence=evidence,
            destination=dest,
            reason=reason,
            rule=rule,
            rule_given=rule_given,
            description=description,
        ),
        None,
    )
