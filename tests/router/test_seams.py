"""The typed seams: the protocols the layers after the router read it through (evaluation,
records, monitoring) name members the real HybridRouter and RuleSet have, and mypy accepts
the real types for them (and refuses a rule set for a router)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from hybridroute.evaluation._routing import BatchRouter, RulesWithSchema
from hybridroute.monitoring._routing import RouterLike, RuleLike, RuleSetLike
from hybridroute.records._vocabulary import RoutesByModel, RoutesByRules
from hybridroute.service._commit import GroupLog

ROOT = Path(__file__).resolve().parents[2]


def members(protocol: type) -> set[str]:
    """The names a protocol declares (its properties, methods and annotations)."""
    names = set(getattr(protocol, "__annotations__", {}))
    for klass in protocol.__mro__:
        if klass in (object,) or klass.__name__ in ("Protocol", "Generic"):
            continue
        names.update(n for n in vars(klass) if not n.startswith("_"))
    return names


@pytest.mark.parametrize(
    "protocol",
    [BatchRouter, RouterLike, RoutesByModel],
    ids=["evaluation", "monitoring", "records"],
)
def test_a_router_has_what_each_layer_reads(router, protocol):
    missing = sorted(m for m in members(protocol) if not hasattr(router, m))
    assert missing == []


@pytest.mark.parametrize(
    "protocol",
    [RulesWithSchema, RuleSetLike, RoutesByRules],
    ids=["evaluation", "monitoring", "records"],
)
def test_a_rule_set_has_what_each_layer_reads(rules, protocol):
    missing = sorted(m for m in members(protocol) if not hasattr(rules, m))
    assert missing == []
    for rule in rules.rules:
        assert all(hasattr(rule, m) for m in members(RuleLike))


def test_a_decision_log_has_what_the_committer_reads(tmp_path):
    from hybridroute.records import open_log

    with open_log(tmp_path / "log.sqlite") as log:
        assert all(callable(getattr(log, m)) for m in members(GroupLog))


def test_members_sees_properties_and_methods():
    assert {"classes", "rules", "route_many", "name", "version"} <= members(BatchRouter)
    assert {"policy", "replay", "redact_pii"} <= members(RouterLike)


CONFORMANCE = """
from hybridroute.evaluation._routing import BatchRouter, RulesWithSchema
from hybridroute.monitoring._routing import RouterLike, RuleSetLike
from hybridroute.records._logbase import LogBase
from hybridroute.records._vocabulary import RoutesByModel, RoutesByRules
from hybridroute.router import HybridRouter
from hybridroute.rules import RuleSet
from hybridroute.service._commit import GroupLog


def fits(router: HybridRouter, rules: RuleSet, log: LogBase) -> None:
    a: BatchRouter = router
    b: RouterLike = router
    c: RoutesByModel = router
    d: RuleSetLike = rules
    e: RoutesByRules = rules
    f: RulesWithSchema = rules
    g: RoutesByModel = b  # monitoring's view of a router passes to the records'
    h: BatchRouter = b  # and to the evaluation's
    i: GroupLog = log


def refused(rules: RuleSet) -> None:
    x: RouterLike = rules  # line 23: a rule set is no router
"""


@pytest.mark.slow
def test_mypy_accepts_the_real_types_for_the_protocols(tmp_path):
    """mypy over a snippet (slow: a cold mypy cache takes a minute or two)."""
    snippet = tmp_path / "conformance.py"
    snippet.write_text(textwrap.dedent(CONFORMANCE).lstrip(), encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--ignore-missing-imports", str(snippet)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )
    errors = [line for line in proc.stdout.splitlines() if ": error:" in line]
    assert len(errors) == 1, proc.stdout
    assert "conformance.py:23:" in errors[0] and '"RuleSet"' in errors[0]
