"""The deterministic rule layer: ordered rules over structured facts, first match wins.

Rules read facts, never free text. A rule is a built-in guard (see
:mod:`hybridroute.rules.guards`) or a condition in a small, safe language
(:func:`compile_condition`). A :class:`RuleSet` is validated when built and yields
rule-stage :class:`~hybridroute.contracts.Decision` records. Rules files (YAML) are loaded
by :func:`load_rules`, which cannot execute anything planted in the file.
"""

from ._conditions import ConditionError, compile_condition
from ._loader import load_rules, parse_rules
from ._ruleset import Rule, RuleMatch, RuleSet, reference_fact_schema, reference_rules
from .guards import GUARDS

__all__ = [
    "GUARDS",
    "ConditionError",
    "Rule",
    "RuleMatch",
    "RuleSet",
    "compile_condition",
    "load_rules",
    "parse_rules",
    "reference_fact_schema",
    "reference_rules",
]
