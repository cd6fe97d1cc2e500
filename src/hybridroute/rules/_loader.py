"""The safe rules-file (YAML) loader.

A rules file looks like::

    format: 1                    # rules-file format version
    name: support                # written into decisions as the router name
    version: "1"                 # ... and version
    facts:                       # the facts schema
      has_permission: {type: bool, default: true}
      amount: {type: number, default: 0}
    destinations: [refund_request, order_status]   # intent destinations (optional)
    reason_codes: [vip_customer]                   # extra reason codes (optional)
    rules:                       # in order; first match wins
      - id: permission
        guard: permission        # a built-in guard ...
      - id: big_refund
        when: "amount > 2000 and action == 'issue_refund'"   # ... or a condition
        then: human_review
        reason: vip_customer
    default: {destination: fail, reason: default_exit}     # optional; this is the default

Safety: the file is size-checked before parsing; the YAML event stream is scanned for
nesting depth, node count and aliases (refused: they allow exponential expansion) before
anything is built; only ``yaml.SafeLoader`` constructs values (Python tags are refused);
conditions go through :mod:`._conditions`, which cannot execute anything.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from ..contracts import FactSchema, Vocabulary
from ..exceptions import FactsError, RuleSetError, RulesFileError, UndeclaredValueError
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
}
_RULE_KEYS = {"id", "guard", "params", "when", "then", "reason", "description"}


def load_rules(path: str | os.PathLike[str]) -> RuleSet:
    """Load and validate a rules file.

    Raises
    ------
    RulesFileError
        One error naming the file, the rule (where there is one) and what is wrong.
    """
    p = Path(path)
    try:
        size = p.stat().st_size
    except OSError as exc:
        raise RulesFileError(
            f"cannot read rules file: {exc.strerror or exc}", path=str(p)
        ) from None
    if size > MAX_RULES_FILE_BYTES:
        raise RulesFileError(
            f"rules file is too large ({size:,} bytes; the limit is {MAX_RULES_FILE_BYTES:,})",
            path=str(p),
        )
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise RulesFileError(
            f"cannot read rules file: {exc.strerror or exc}", path=str(p)
        ) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RulesFileError(f"not UTF-8 text (byte {exc.start})", path=str(p)) from None
    return parse_rules(text, source=str(p))


def parse_rules(text: str, *, source: str = "<rules>") -> RuleSet:
    """Parse rules-file text (see the module docstring for the format)."""
    if len(text.encode("utf-8")) > MAX_RULES_FILE_BYTES:
        raise RulesFileError(
            f"rules file is too large (over {MAX_RULES_FILE_BYTES:,} bytes)", path=source
        )
    data = _safe_yaml(text, source)
    return _build(data, source)


class _Loader(yaml.SafeLoader):
    """SafeLoader that refuses aliases outright (they were already refused by the scan)."""

    def compose_node(self, parent: Any, index: Any) -> Any:  # pragma: no cover - scan refuses first
        if self.check_event(yaml.AliasEvent):
            raise RulesFileError("YAML aliases are not allowed in rules files")
        return super().compose_node(parent, index)


def _safe_yaml(text: str, source: str) -> Any:
    depth = 0
    nodes = 0
    try:
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            if isinstance(event, yaml.AliasEvent):
                mark = event.start_mark
                raise RulesFileError(
                    f"line {mark.line + 1}: YAML aliases (*name) are not allowed in rules files",
                    path=source,
                )
            if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
                depth += 1
                if depth > _MAX_YAML_DEPTH:
                    raise RulesFileError(
                        f"line {event.start_mark.line + 1}: nested too deeply "
                        f"(over {_MAX_YAML_DEPTH} levels)",
                        path=source,
                    )
            elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
                depth -= 1
            if isinstance(
                event, (yaml.ScalarEvent, yaml.MappingStartEvent, yaml.SequenceStartEvent)
            ):
                nodes += 1
                if nodes > _MAX_YAML_NODES:
                    raise RulesFileError(
                        f"too many YAML nodes (over {_MAX_YAML_NODES:,})", path=source
                    )
                tag = getattr(event, "tag", None)
                if tag and tag.startswith("tag:yaml.org,2002:python"):
                    raise RulesFileError(
                        f"line {event.start_mark.line + 1}: Python tags ({tag}) are not allowed",
                        path=source,
                    )
        return yaml.load(text, Loader=_Loader)
    except RulesFileError:
        raise
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        where = f"line {mark.line + 1}: " if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise RulesFileError(f"{where}not valid safe YAML: {problem}", path=source) from None
    except RecursionError:
        raise RulesFileError("nested too deeply", path=source) from None


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

    default = data.get("default", {"destination": "fail", "reason": "default_exit"})
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
