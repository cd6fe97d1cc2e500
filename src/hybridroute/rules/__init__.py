"""The deterministic rule layer: ordered rules over structured facts, first match wins.

Rules read facts, never free text. A rule is a built-in guard (see
:mod:`hybridroute.rules.guards`) or a condition in a small, safe language
(:func:`compile_condition`). A :class:`RuleSet` is validated when built and yields
rule-stage :class:`~hybridroute.contracts.Decision` records. Rules files (YAML) are loaded
by :func:`load_rules`, which cannot execute anything planted in the file.

Rules as code: a rules file carries its own test cases (a ``tests:`` section, or a sibling
``NAME.tests.yaml``) read by :func:`load_rule_tests` and run by :func:`run_rule_tests`
(:func:`check_rule_tests` is what a bundle's build calls); :func:`lint_rules` finds what a
valid file may still get wrong; :func:`diff_rules` replays logged facts through two rule
sets and reports every decision that would change.
"""

from ._conditions import ConditionError, compile_condition
from ._diff import diff_rules
from ._lint import lint_rules
from ._loader import load_rules, parse_rules
from ._ruleset import Rule, RuleMatch, RuleSet, reference_fact_schema, reference_rules
from ._testcases import load_rule_tests
from ._testing import check_rule_tests, run_rule_tests
from .guards import GUARDS

__all__ = [
    "GUARDS",
    "ConditionError",
    "Rule",
    "RuleMatch",
    "RuleSet",
    "check_rule_tests",
    "compile_condition",
    "diff_rules",
    "lint_rules",
    "load_rule_tests",
    "load_rules",
    "parse_rules",
    "reference_fact_schema",
    "reference_rules",
    "run_rule_tests",
]
