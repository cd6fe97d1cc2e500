"""The impact of a rules change before it ships: the same inputs through two rule sets.

:func:`diff_rules` replays inputs -- the facts of a decision log's stored snapshots, or the
rows of a labelled set with facts -- through an ``old`` and a ``new`` rule set and reports
every decision that would change, without building a bundle or calling a model:

* each input gets, from each rule set, the **rule** that fires (destination, reason code,
  rule id), else the **model** when the input has a text (the classifier and policy are the
  same on both sides, so two "model" outcomes are the same decision), else the **default
  exit**; or **refused** when that rule set's facts schema refuses the input;
* a decision **changes** when its destination or its reason code differs (a change of rule
  id alone, same destination and reason, is counted apart as ``rule_only``); counts by
  (old destination, new destination, old rule, new rule), the share of the inputs compared,
  and the first input of each group as an example -- its facts as stored (a log stores them
  redacted: sensitive facts as salted hashes, credentials scrubbed).

**When the schemas differ.** A logged snapshot's facts went through the schema of the
router that logged them; ``new`` may declare other facts. Each rule set validates the
facts as it would live: a fact ``new`` adds with a default takes that default (counted
under ``defaults_applied``); a fact ``new`` adds without a default, a fact ``new`` no longer
declares (with ``extra_facts: forbid``), or a value its type, ``enum`` or bounds now refuse
makes the input **refused by the new rules** -- its own category, with the fact named,
counted as changed traffic (callers sending it would be refused). ``drop_removed_facts``
drops the facts ``new`` does not declare first (callers that stop sending them). A labelled
set's rows give each rule set the columns it declares (as ``hybridroute evaluate`` routes
them). Inputs ``old`` refuses are compared the same way (``refused_by_old``).

Inputs whose sensitive facts are stored hashed and read by a rule of either set cannot be
replayed faithfully: they are counted as ``unreplayable`` and left out of the share.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..exceptions import FactsError

__all__ = ["DiffInput", "RulesDiff", "diff_rules", "inputs_from_dataset", "inputs_from_records"]

_MODEL = "(model)"
_REFUSED = "(refused)"


@dataclass(frozen=True, slots=True)
class DiffInput:
    """One input to replay through both rule sets.

    Attributes
    ----------
    facts : mapping
        The facts (a logged snapshot's, as stored; or a labelled row's).
    text : str or None
        Its text: when no rule fires, the model decides.
    hashed : frozenset of str
        Facts stored as salted hashes (a log's ``detail.hashed_facts``).
    declared_only : bool
        Give each rule set only the facts it declares (a labelled set's columns).
    ref : mapping
        Where it comes from, for examples (``seq``, ``decision_id``... or ``row``, ``id``).
    """

    facts: Mapping[str, Any]
    text: str | None = None
    hashed: frozenset[str] = frozenset()
    declared_only: bool = False
    ref: Mapping[str, Any] = field(default_factory=dict)


def inputs_from_records(rows: Iterable[Mapping[str, Any]]) -> Iterator[DiffInput]:
    """Inputs from a decision log's rows (``log.rows()``) or decision records."""
    for pos, row in enumerate(rows):
        yield _record_input(row, pos)


def _record_input(row: Mapping[str, Any], pos: int) -> DiffInput:
    rec = row["record"] if "record" in row else row
    snap = rec.get("input_snapshot") or {}
    facts = snap.get("facts") if isinstance(snap, Mapping) else None
    text = snap.get("text") if isinstance(snap, Mapping) else None
    detail = rec.get("detail") or {}
    ref = {
        "position": pos,
        "seq": row.get("seq"),
        "decision_id": row.get("decision_id"),
        "request_id": row.get("item_id"),
        "logged": {
            "router": rec.get("router"),
            "router_version": rec.get("router_version"),
            "stage": rec.get("stage"),
            "destination": rec.get("selected_destination"),
            "reason_code": rec.get("reason_code"),
            "rule_id": rec.get("rule_id"),
        },
    }
    return DiffInput(
        facts=facts if isinstance(facts, Mapping) else {},
        text=text if isinstance(text, str) else None,
        hashed=frozenset(detail.get("hashed_facts") or ()),
        ref=ref,
    )


def inputs_from_dataset(dataset: Any) -> Iterator[DiffInput]:
    """Inputs from a labelled set's rows (facts + text); each rule set reads its own facts."""
    ids, texts = dataset.ids, dataset.texts
    for i, facts in enumerate(dataset.iter_facts()):
        yield DiffInput(
            facts=facts, text=texts[i], declared_only=True, ref={"row": i + 1, "id": ids[i]}
        )


@dataclass(frozen=True, slots=True)
class _Outcome:
    kind: str  # rule | default | model | refused
    destination: str
    reason_code: str | None
    by: str  # "RULE_ID: REASON", "default exit", "model", or "refused: fact 'x'"
    rule_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "destination": self.destination,
            "reason_code": self.reason_code,
            "rule_id": self.rule_id,
            "by": self.by,
        }


def _decide(rules: Any, inp: DiffInput, drop_undeclared: bool) -> tuple[_Outcome, str | None]:
    """The outcome of ``rules`` on ``inp``, and the field of a refusal (if refused)."""
    facts = inp.facts
    if inp.declared_only or drop_undeclared:
        facts = {k: v for k, v in facts.items() if k in rules.schema}
    try:
        valid = rules.validate_facts(facts)
        match = rules.match(valid)
    except FactsError as exc:
        what = f"fact {exc.field!r}" if exc.field is not None else "a rule cannot be evaluated"
        return _Outcome("refused", _REFUSED, None, what), exc.field
    if match is not None:
        rid = match.rule_id
        by = f"{rid}: {match.reason_code}"
        return _Outcome("rule", match.destination, match.reason_code, by, rid), None
    if isinstance(inp.text, str) and inp.text.strip():
        return _Outcome("model", _MODEL, None, "model"), None
    return _Outcome("default", rules.default, rules.default_reason, "default exit"), None


def schema_changes(old: Any, new: Any) -> dict[str, Any]:
    """Facts ``new`` adds, removes, or declares otherwise than ``old`` (descriptions aside)."""
    added = {}
    for name in new.names:
        if name not in old:
            spec = new[name]
            added[name] = (
                {"default": spec.to_dict().get("default")}
                if spec.has_default
                else {"required": True}
            )
    removed = [name for name in old.names if name not in new]
    changed = {}
    for name in old.names:
        if name not in new:
            continue
        a, b = old[name].to_dict(), new[name].to_dict()
        a.pop("description", None)
        b.pop("description", None)
        diffs = {k: [a.get(k), b.get(k)] for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)}
        if diffs:
            changed[name] = diffs
    out: dict[str, Any] = {"added": added, "removed": removed, "changed": changed}
    if old.extra != new.extra:
        out["extra_facts"] = [old.extra, new.extra]
    return out


class RulesDiff(dict):
    """A JSON-able rules diff (a dict) with :meth:`summary_lines`."""

    def summary_lines(self) -> list[str]:
        """The terminal report: schema changes, counts, groups and examples."""
        o, n = self["old"], self["new"]
        lines = [
            f"rules diff: {o['name']} {o['version']} -> {n['name']} {n['version']} on "
            f"{self['source']}"
        ]
        sc = self["schema"]
        parts = [
            f"added fact {k!r} ("
            + ("required" if v.get("required") else f"default {v['default']!r}")
            + ")"
            for k, v in sc["added"].items()
        ]
        parts += [f"removed fact {k!r}" for k in sc["removed"]]
        for k, diffs in sc["changed"].items():
            parts += [f"{k!r} {what} {a!r} -> {b!r}" for what, (a, b) in diffs.items()]
        if "extra_facts" in sc:
            parts.append(f"extra_facts {sc['extra_facts'][0]} -> {sc['extra_facts'][1]}")
        if parts:
            lines.append("  facts schema: " + "; ".join(parts))
        for fact, count in self["defaults_applied"].items():
            lines.append(f"  {count} input(s) lack the new fact {fact!r}: its default applies")
        lines.append(
            f"  {self['inputs']} input(s): {self['compared']} compared, {self['unreplayable']} "
            "not replayable (sensitive facts stored hashed and read by a rule)"
        )
        lines.append(
            f"  changed: {self['changed']} of {self['compared']} ({_pct(self['changed_share'])} "
            f"of traffic): {self['rerouted']} rerouted ({_pct(self['rerouted_share'])}), "
            f"{self['reason_changed']} same destination with another reason code; refused by the "
            f"new rules {self['refused_by_new']}, by the old {self['refused_by_old']}"
        )
        if self["rule_only"]:
            lines.append(
                f"  {self['rule_only']} decision(s) keep destination and reason code but are "
                "made by another rule"
            )
        if self["groups"]:
            lines.append("  old -> new [deciding rule]:")
            for g in self["groups"]:
                lines.append(
                    f"    {g['count']:>7} {_pct(g['share']):>7}  {g['old_destination']} "
                    f"[{g['old_by']}] -> {g['new_destination']} [{g['new_by']}]"
                )
        if self["examples"]:
            lines.append("  examples (facts as stored):")
            for ex in self["examples"]:
                facts = json.dumps(ex["facts"], sort_keys=True, ensure_ascii=False, default=str)
                logged = ex["ref"].get("logged") or {}
                was = (
                    f" (logged: {logged['destination']}/{logged['reason_code']})"
                    if logged.get("destination") is not None
                    else ""
                )
                lines.append(
                    f"    {_where(ex['ref'])}: {ex['old']['destination']} [{ex['old']['by']}]"
                    f"{was} -> {ex['new']['destination']} [{ex['new']['by']}] {facts}"
                )
        return lines


def _pct(share: float | None) -> str:
    return "-" if share is None else f"{share:.2%}"


def _where(ref: Mapping[str, Any]) -> str:
    if "row" in ref:
        return f"row {ref['row']} (id {ref.get('id')})"
    rid = ref.get("request_id")
    return f"seq {ref.get('seq')} (decision {ref.get('decision_id')}" + (
        f", request {rid})" if rid is not None else ")"
    )


def _share(k: int, n: int) -> float | None:
    return round(k / n, 6) if n else None


def diff_rules(
    old: Any,
    new: Any,
    inputs: Iterable[Any],
    *,
    max_examples: int = 10,
    drop_removed_facts: bool = False,
    source: str = "the inputs given",
) -> RulesDiff:
    """Replay ``inputs`` through ``old`` and ``new`` and report what would change.

    Parameters
    ----------
    old, new : RuleSet
        The rules now, and the rules proposed.
    inputs : iterable
        :class:`DiffInput` values, decision-log rows (``log.rows()``) or decision records
        (read through :func:`inputs_from_records`); see also :func:`inputs_from_dataset`.
    max_examples : int, default 10
        Examples listed: the first input of each group, largest groups first.
    drop_removed_facts : bool, default False
        Drop the facts ``new`` does not declare before it validates them (callers that
        stop sending them), instead of counting the inputs as refused.
    source : str
        What the inputs are, for the report (``log sqlite:///...``, ``dataset NAME``).

    Returns
    -------
    RulesDiff
        ``old`` / ``new`` (name, version, source), ``source``, ``schema`` (facts added,
        removed, changed), ``inputs``, ``unreplayable``, ``compared``, ``changed`` and
        ``changed_share``, ``rerouted`` and ``rerouted_share``, ``reason_changed``,
        ``rule_only``, ``refused_by_new``, ``refused_by_old``, ``refusals`` (new-side
        refusals by fact), ``defaults_applied``, ``groups`` (``old_destination``,
        ``new_destination``, ``old_rule``, ``new_rule``, ``old_reason_code``,
        ``new_reason_code``, ``old_by`` / ``new_by`` as printed, ``count``, ``share``; the
        largest first), ``examples``.
    """
    if isinstance(max_examples, bool) or not isinstance(max_examples, int) or max_examples < 0:
        raise ValueError(f"max_examples must be a count, got {max_examples!r}")
    read = {f for rs in (old, new) for rule in rs.rules for f in rule.facts_read()}
    added = [name for name in new.schema.names if name not in old.schema]
    n = unreplayable = rerouted = reason_changed = rule_only = 0
    refused_new = refused_old = 0
    refusals: Counter[str] = Counter()
    defaulted: Counter[str] = Counter()
    groups: Counter[tuple[str, str, str, str]] = Counter()
    first: dict[tuple[str, str, str, str], dict[str, Any]] = {}
    outcomes: dict[tuple[str, str, str, str], tuple[_Outcome, _Outcome]] = {}
    for item in _as_inputs(inputs):
        n += 1
        if item.hashed & read:
            unreplayable += 1
            continue
        a, a_field = _decide(old, item, False)
        b, b_field = _decide(new, item, drop_removed_facts)
        if (a_field is not None and a_field in item.hashed) or (
            b_field is not None and b_field in item.hashed
        ):
            unreplayable += 1
            continue
        for name in added:
            value = item.facts.get(name)
            if value is None and new.schema[name].has_default and not new.schema[name].nullable:
                defaulted[name] += 1
        if a.kind == "refused" and b.kind == "refused":
            continue
        if (a.destination, a.reason_code) == (b.destination, b.reason_code):
            if a.rule_id != b.rule_id:
                rule_only += 1
            continue
        if a.destination != b.destination:
            rerouted += 1
        else:
            reason_changed += 1
        if b.kind == "refused":
            refused_new += 1
            refusals[b.by] += 1
        if a.kind == "refused":
            refused_old += 1
        key = (a.destination, b.destination, a.by, b.by)
        groups[key] += 1
        if key not in first:
            outcomes[key] = (a, b)
            first[key] = {
                "ref": dict(item.ref),
                "facts": dict(item.facts),
                "old": _shown(a),
                "new": _shown(b),
            }
    compared = n - unreplayable
    changed = rerouted + reason_changed
    ordered = sorted(groups.items(), key=lambda kv: (-kv[1], kv[0]))
    return RulesDiff(
        {
            "old": _about(old),
            "new": _about(new),
            "source": source,
            "schema": schema_changes(old.schema, new.schema),
            "inputs": n,
            "unreplayable": unreplayable,
            "compared": compared,
            "changed": changed,
            "changed_share": _share(changed, compared),
            "rerouted": rerouted,
            "rerouted_share": _share(rerouted, compared),
            "reason_changed": reason_changed,
            "rule_only": rule_only,
            "refused_by_new": refused_new,
            "refused_by_old": refused_old,
            "refusals": dict(sorted(refusals.items())),
            "defaults_applied": dict(sorted(defaulted.items())),
            "groups": [
                {
                    "old_destination": k[0],
                    "new_destination": k[1],
                    "old_rule": outcomes[k][0].rule_id,
                    "new_rule": outcomes[k][1].rule_id,
                    "old_reason_code": outcomes[k][0].reason_code,
                    "new_reason_code": outcomes[k][1].reason_code,
                    "old_by": k[2],
                    "new_by": k[3],
                    "count": c,
                    "share": _share(c, compared),
                }
                for k, c in ordered
            ],
            "examples": [first[k] for k, _ in ordered[:max_examples]],
        }
    )


def _shown(o: _Outcome) -> dict[str, Any]:
    return {"destination": o.destination, "reason_code": o.reason_code, "by": o.by}


def _about(rules: Any) -> dict[str, Any]:
    return {"name": rules.name, "version": rules.version, "source": getattr(rules, "source", None)}


def _as_inputs(inputs: Iterable[Any]) -> Iterator[DiffInput]:
    for pos, item in enumerate(inputs):
        yield item if isinstance(item, DiffInput) else _record_input(item, pos)
