"""The safe rules-file (YAML) loader.

A rules file looks like::

    format: 1                    # rules-file format version
    name: support                # written into decisions as the router name
    version: "1"                 # ... and version
    facts:                       # the facts schema
      has_permission: {type: bool, default: true}
      amount: {type: number, default: 0, min: 0}            # bounds: min / max
      action: {type: str, default: "", enum: ["", issue_refund, delete_account_data]}
    destinations: [refund_request, order_status]   # intent destinations (optional)
    reason_codes: [vip_customer]                   # extra reason codes (optional)
    rules:                       # in order; first match wins
      - id: permission
        guard: permission        # a built-in guard ...
      - id: big_refund
        when: "amount > 2000 and action == 'issue_refund'"   # ... or a condition
        then: human_review
        reason: vip_customer
    default: {destination: fail, reason: default_exit}     # required: the exit when no rule fires
    tests:                       # optional: cases `hybridroute rules test` runs
      - name: big_refund_to_review
        facts: {amount: 2500, action: issue_refund}
        expect: {destination: human_review, reason: vip_customer, rule: big_refund}

A fact declaration takes ``type``, ``nullable``, ``default``, ``enum`` (allowed values:
``str``, ``int``, each element of ``list[str]``), ``min`` / ``max`` (inclusive bounds:
``int``, ``number``, each element of ``list[number]``) and ``description``; see
:class:`hybridroute.contracts.FactSpec`.

A rule may say ``overlaps: [earlier_rule_id, ...]``: the earlier rules are known to take
part of its cases, so ``hybridroute rules lint`` does not report that overlap (see
:mod:`._lint`). The ``tests:`` section (and a sibling ``NAME.tests.yaml``) is read by
:func:`hybridroute.rules.load_rule_tests`, not here: routing never depends on it, and a rule
set built from the file does not carry it (a router bundle's ``rules.yaml`` has none).

Safety: the file must be a regular file (a FIFO, a device or a directory is refused
before a byte is read) and is read with its byte limit enforced while reading, as strict
UTF-8. The YAML goes through :func:`hybridroute._safeio.parse_yaml`, the one hardened
checker: the event stream is scanned for nesting depth, node count, aliases (refused: they
allow exponential expansion) and Python tags before anything is built; only
``yaml.SafeLoader`` constructs values; a duplicate key (two ``when:`` in one rule), a
non-finite or huge number is refused with its line and, inside a rule, the rule's id.
Conditions go through :mod:`._conditions`, which cannot execute anything.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from .._safeio import parse_yaml, read_text
from ..contracts import FactSchema, Vocabulary
from ..exceptions import (
    FactsError,
    InputError,
    RuleSetError,
    RulesFileError,
    UndeclaredValueError,
)
from ._ruleset import Rule, RuleSet

__all__ = ["MAX_RULES", "MAX_RULES_FILE_BYTES", "load_rules", "parse_rules"]

#: Largest rules file accepted.
MAX_RULES_FILE_BYTES = 256 * 1024
#: Most rules in one file.
MAX_RULES = 500
_MAX_YAML_DEPTH = 12
_MAX_YAML_NODES = 20_000
_FORMAT = 1

_TOP_KEYS = {
    "format",
    "name",
    "version",
    "description",
    "facts",
    "extra_facts",
    "destinations",
    "reason_codes",
    "rules",
    "default",
    "tests",
}
_RULE_KEYS = {"id", "guard", "params", "when", "then", "reason", "description", "overlaps"}


def load_rules(path: str | os.PathLike[str]) -> RuleSet:
    """Load and validate a rules file.

    The file must be a regular file of at most :data:`MAX_RULES_FILE_BYTES` bytes (the
    limit is enforced while reading: a FIFO, a device such as ``/dev/zero`` or a
    directory is refused before anything is read) in strict UTF-8.

    Raises
    ------
    RulesFileError
        One error naming the file, the line or rule (where there is one) and what is wrong.
    """
    where = os.fspath(path)
    try:
        text = read_text(path, limit=MAX_RULES_FILE_BYTES, what="rules file")
    except InputError as exc:
        raise RulesFileError(f"cannot read rules file: {_located(exc)}", path=where) from None
    ruleset = parse_rules(text, source=where)
    ruleset.source = where  # where its tests are looked for (hybridroute.rules.check_rule_tests)
    return ruleset


def parse_rules(text: str, *, source: str = "<rules>") -> RuleSet:
    """Parse rules-file text (see the module docstring for the format)."""
    return _build(parse_document(text, source=source), source)


def parse_document(text: str, *, source: str = "<rules>", what: str = "rules file") -> Any:
    """The YAML document of rules-file text, through the hardened checker (not built).

    Raises
    ------
    RulesFileError
        Too large, or YAML the checker refuses (naming the line and, inside a rule, its id).
    """
    if len(text.encode("utf-8", "surrogatepass")) > MAX_RULES_FILE_BYTES:
        raise RulesFileError(
            f"{what} is too large (over {MAX_RULES_FILE_BYTES:,} bytes)", path=source
        )
    try:
        return parse_yaml(
            text,
            source=source,
            what=what,
            max_depth=_MAX_YAML_DEPTH,
            max_nodes=_MAX_YAML_NODES,
        )
    except InputError as exc:
        rule_id = _rule_at_line(text, exc.line) if exc.line is not None else None
        raise RulesFileError(_located(exc), path=source, rule_id=rule_id) from None


def _located(exc: InputError) -> str:
    """An :class:`InputError`'s reason with its line, as rules-file messages put it."""
    return (f"line {exc.line}: " if exc.line is not None else "") + exc.reason


def _rule_at_line(text: str, line: int) -> str | None:
    """The id of the rule whose YAML spans ``line`` (1-based), for error messages.

    Only the node tree is composed (no value is constructed), after the hardened scan has
    bounded the document; anything unexpected just means no rule is named.
    """
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except (yaml.YAMLError, RecursionError, ValueError):
        return None
    if not isinstance(root, yaml.MappingNode):
        return None
    for key, value in root.value:
        if not (isinstance(key, yaml.ScalarNode) and key.value == "rules"):
            continue
        if not isinstance(value, yaml.SequenceNode):
            return None
        found = None
        for item in value.value:
            if item.start_mark.line + 1 > line:
                break
            found = item
        if found is None or not isinstance(found, yaml.MappingNode):
            return None
        if line > _last_line(found) or line > _last_line(value):
            return None
        for k, v in found.value:
            if (
                isinstance(k, yaml.ScalarNode)
                and k.value == "id"
                and isinstance(v, yaml.ScalarNode)
            ):
                return str(v.value)
        return None
    return None


def _last_line(node: Any) -> int:
    """The last line (1-based) a node spans: a block node ends where the next one starts."""
    end = node.end_mark
    return int(end.line) + (1 if end.column > 0 else 0)


def _fail(message: str, source: str, rule_id: str | None = None) -> RulesFileError:
    return RulesFileError(message, path=source, rule_id=rule_id)


def _build(data: Any, source: str) -> RuleSet:
    if data is None:
        raise _fail("the rules file is empty", source)
    if not isinstance(data, Mapping):
        raise _fail(f"the top level must be a mapping, got {type(data).__name__}", source)
    unknown = set(map(str, data)) - _TOP_KEYS
    if unknown:
        raise _fail(
            f"unknown top-level key(s) {sorted(unknown)}; allowed: {sorted(_TOP_KEYS)}", source
        )
    fmt = data.get("format", _FORMAT)
    if fmt != _FORMAT:
        raise _fail(
            f"rules-file format {fmt!r} is not supported (this version reads format {_FORMAT})",
            source,
        )

    facts = data.get("facts")
    if not isinstance(facts, Mapping) or not facts:
        raise _fail("'facts' must be a non-empty mapping declaring each fact's type", source)
    extra = data.get("extra_facts", "forbid")
    if extra not in ("forbid", "ignore"):
        raise _fail("'extra_facts' must be 'forbid' or 'ignore'", source)
    try:
        schema = FactSchema.from_dict(facts, extra=extra)
    except FactsError as exc:
        raise _fail(f"in 'facts': {exc}", source) from None

    try:
        vocabulary = Vocabulary(
            intents=tuple(_str_list(data.get("destinations", []), "destinations", source)),
            reason_codes=tuple(_str_list(data.get("reason_codes", []), "reason_codes", source)),
        )
    except UndeclaredValueError as exc:
        raise _fail(str(exc), source) from None

    rules_data = data.get("rules")
    if not isinstance(rules_data, list):
        raise _fail("'rules' must be a list of rules", source)
    if len(rules_data) > MAX_RULES:
        raise _fail(f"too many rules ({len(rules_data)} > {MAX_RULES})", source)
    fact_types = {s.name: s.type for s in schema.specs}
    rules = []
    for pos, item in enumerate(rules_data):
        rules.append(_rule(item, pos, fact_types, source))

    if "default" not in data:
        raise _fail(
            "no default exit: declare 'default: {destination: ..., reason: ...}' (the "
            "destination taken when no rule fires)",
            source,
        )
    default = data["default"]
    if not isinstance(default, Mapping):
        raise _fail(
            "'default' must be a mapping with a 'destination' (and optionally 'reason')", source
        )
    bad = set(default) - {"destination", "reason"}
    if bad:
        raise _fail(f"'default' has unknown key(s) {sorted(bad)}", source)
    if not default.get("destination"):
        raise _fail("no default exit: 'default' has no 'destination'", source)

    try:
        return RuleSet(
            rules,
            schema=schema,
            default=str(default["destination"]),
            default_reason=str(default.get("reason", "default_exit")),
            vocabulary=vocabulary,
            name=str(data.get("name", Path(source).stem)),
            version=str(data.get("version", "0")),
        )
    except RuleSetError as exc:
        raise RulesFileError(_strip_rule_prefix(exc), path=source, rule_id=exc.rule_id) from None


def _strip_rule_prefix(exc: RuleSetError) -> str:
    text = str(exc)
    prefix = f"rule {exc.rule_id!r}: " if exc.rule_id is not None else "rule set: "
    return text[len(prefix) :] if text.startswith(prefix) else text


def _str_list(value: Any, key: str, source: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _fail(f"'{key}' must be a list of strings", source)
    return value


def _rule(item: Any, pos: int, fact_types: Mapping[str, str], source: str) -> Rule:
    if not isinstance(item, Mapping):
        raise _fail(f"rule #{pos + 1} must be a mapping, got {type(item).__name__}", source)
    rid = item.get("id")
    if not isinstance(rid, str) or not rid.strip():
        raise _fail(f"rule #{pos + 1} has no string 'id'", source)
    unknown = set(map(str, item)) - _RULE_KEYS
    if unknown:
        raise _fail(f"unknown key(s) {sorted(unknown)}; allowed: {sorted(_RULE_KEYS)}", source, rid)
    description = item.get("description", "")
    if not isinstance(description, str):
        raise _fail("'description' must be a string", source, rid)
    overlaps = item.get("overlaps", [])
    if not isinstance(overlaps, list) or not all(isinstance(v, str) for v in overlaps):
        raise _fail("'overlaps' must be a list of earlier rule ids", source, rid)
    rule = _rule_body(item, rid, description, fact_types, source)
    rule.overlaps = tuple(dict.fromkeys(overlaps))
    return rule


def _rule_body(
    item: Mapping[str, Any], rid: str, description: str, fact_types: Mapping[str, str], source: str
) -> Rule:
    has_guard = "guard" in item
    has_when = "when" in item
    if has_guard == has_when:
        raise _fail(
            "a rule has either 'guard' (a built-in) or 'when' + 'then' (a condition)", source, rid
        )
    try:
        if has_guard:
            if "then" in item or "reason" in item:
                raise _fail("a guard rule takes 'params', not 'then'/'reason'", source, rid)
            params = item.get("params", {}) or {}
            if not isinstance(params, Mapping):
                raise _fail("'params' must be a mapping", source, rid)
            if not isinstance(item["guard"], str):
                raise _fail("'guard' must be the name of a built-in guard", source, rid)
            return Rule.guard(
                rid, item["guard"], description, **{str(k): v for k, v in params.items()}
            )
        if "params" in item:
            raise _fail("a condition rule takes 'then' and 'reason', not 'params'", source, rid)
        then = item.get("then")
        if not isinstance(then, str):
            raise _fail("a condition rule needs 'then': the destination", source, rid)
        reason = item.get("reason", "rule_matched")
        if not isinstance(reason, str):
            raise _fail("'reason' must be a reason-code string", source, rid)
        when = item["when"]
        if not isinstance(when, (str, bool)):
            raise _fail("'when' must be a condition string", source, rid)
        return Rule.when(rid, when, then, reason, description, fact_types=fact_types)
    except RuleSetError as exc:
        raise RulesFileError(_strip_rule_prefix(exc), path=source, rule_id=rid) from None
