"""Rule coverage: which rules, rule outcomes and destinations a set of decisions reaches.

One definition, used by ``hybridroute rules test`` (the decisions of a rules file's test
cases) and by :func:`hybridroute.evaluation.evaluate_router` (the decisions over a labelled
set, through :meth:`RuleSet.coverage`), so that both name an untested rule the same way.

* **rules**: each rule's count of decisions; those never fired are listed. The default exit
  is counted on its own (``default_exit``).
* **outcomes**: the reason codes each rule can give with its parameters (a guard can give
  several: the ``tool_error`` guard retries, exhausts its budget or fails on a fatal kind; a
  ``risk`` guard without sensitive actions only ever gives ``high_risk_amount``); those no
  decision shows are listed per rule, so a guard fired only one way is seen.
* **destinations**: the destinations a decision can reach -- every rule's, the default
  exit's, and the model stage's (a router's ``model_destinations``, or the declared intent
  destinations when there is no router) -- against those reached.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from ._ruleset import RuleSet

__all__ = ["coverage_lines", "rule_coverage"]

_RULE_STAGE = "rule"


def _field(decision: Any, key: str) -> Any:
    if isinstance(decision, Mapping):
        return decision.get(key)
    return getattr(decision, key, None)


def _codes(rule: Any) -> tuple[str, ...]:
    """The reason codes a rule can give with its parameters."""
    guard = rule.guard_obj
    return guard.reachable_reason_codes() if guard is not None else tuple(rule.reason_codes)


def rule_coverage(
    ruleset: RuleSet,
    decisions: Iterable[Any],
    *,
    model_destinations: Iterable[str] | None = None,
) -> dict[str, Any]:
    """Coverage of ``ruleset`` by ``decisions``.

    Parameters
    ----------
    ruleset : RuleSet
        The rules the decisions were made with.
    decisions : iterable
        :class:`~hybridroute.contracts.Decision` values or their records (mappings with
        ``stage``, ``rule_id``, ``selected_destination`` and ``reason_code``).
    model_destinations : iterable of str, optional
        What the model stage can select; ``None``: the declared intent destinations.

    Returns
    -------
    dict
        ``decisions`` (count); ``rules``: ``total``, ``fired`` (rule id -> count, in rule
        order, never-fired rules with 0), ``never_fired``; ``default_exit`` (count);
        ``outcomes``: ``total`` (reason codes the rules can give) and ``never_reached``
        (``{"rule", "reason_code"}`` per reason code a rule can give that no decision shows); ``destinations``: ``reachable``, ``reached``
        (destination -> count), ``not_reached``; ``complete`` (every rule fired, every
        outcome and reachable destination reached).
    """
    fired: Counter[str] = Counter()
    reasons: dict[str, set[str]] = {}
    reached: Counter[str] = Counter()
    default_exit = n = 0
    for d in decisions:
        n += 1
        dest = _field(d, "selected_destination")
        if dest is not None:
            reached[str(dest)] += 1
        if _field(d, "stage") != _RULE_STAGE:
            continue
        rule_id = _field(d, "rule_id")
        if rule_id is None:
            default_exit += 1
            continue
        fired[str(rule_id)] += 1
        reasons.setdefault(str(rule_id), set()).add(str(_field(d, "reason_code")))
    never_fired = [r.id for r in ruleset.rules if not fired[r.id]]
    never_reached = [
        {"rule": r.id, "reason_code": code}
        for r in ruleset.rules
        for code in _codes(r)
        if code not in reasons.get(r.id, set())
    ]
    reachable: list[str] = []
    for rule in ruleset.rules:
        reachable.extend(rule.destinations)
    reachable.append(ruleset.default)
    model = ruleset.vocabulary.intents if model_destinations is None else model_destinations
    reachable.extend(model)
    reachable = list(dict.fromkeys(reachable))
    not_reached = [d for d in reachable if not reached[d]]
    return {
        "decisions": n,
        "rules": {
            "total": len(ruleset.rules),
            "fired": {r.id: fired[r.id] for r in ruleset.rules},
            "never_fired": never_fired,
        },
        "default_exit": default_exit,
        "outcomes": {
            "total": sum(len(_codes(r)) for r in ruleset.rules),
            "never_reached": never_reached,
        },
        "destinations": {
            "reachable": reachable,
            "reached": {d: reached[d] for d in reachable if reached[d]},
            "not_reached": not_reached,
        },
        "complete": not never_fired and not never_reached and not not_reached,
    }


def coverage_lines(cov: Mapping[str, Any], *, pending: int = 0) -> list[str]:
    """A few lines for the terminal; ``pending``: cases not run (they need a router)."""
    rules = cov["rules"]
    n_rules = rules["total"]
    fired = n_rules - len(rules["never_fired"])
    lines = [f"coverage over {cov['decisions']} decision(s):"]
    line = f"  rules fired: {fired} of {n_rules}"
    if rules["never_fired"]:
        line += "; never fired: " + ", ".join(rules["never_fired"])
    lines.append(line + f" (default exit: {cov['default_exit']})")
    missing = cov["outcomes"]["never_reached"]
    total = cov["outcomes"]["total"]
    line = f"  rule outcomes (reason codes) reached: {total - len(missing)} of {total}"
    if missing:
        line += "; never: " + ", ".join(f"{m['rule']} -> {m['reason_code']}" for m in missing)
    lines.append(line)
    dests = cov["destinations"]
    n_dest = len(dests["reachable"])
    line = f"  destinations reached: {n_dest - len(dests['not_reached'])} of {n_dest}"
    if dests["not_reached"]:
        line += "; not reached: " + ", ".join(dests["not_reached"])
    lines.append(line)
    if pending and not cov["complete"]:
        lines.append(f"  (counting only the cases run: {pending} need --router BUNDLE)")
    return lines
