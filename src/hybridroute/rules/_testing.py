"""Running a rules file's tests: each case's decision against what it expects, and coverage.

A case without a text is decided by the rules alone (a rule, or the default exit). A case
with a text is decided by the rules too when a rule fires on its facts (rules run first and
never read text); when none does, the model decides, so the case runs only with a router
(``hybridroute rules test FILE --router BUNDLE``: that bundle's classifier and policy with
*this file's* rules). Without one such a case is reported as not run -- unless it expects a
rule, which then plainly did not fire: a failure.

Every failure names the case (name or ``#N``, file and line), what was expected, what was
decided and what decided it (the rule's id, the default exit, or the model stage with its
label and confidence).

:func:`check_rule_tests` is the check a router bundle's build makes: it refuses (a
:class:`~hybridroute.exceptions.RulesFileError`, one line) when a case of the rules file
the rule set was loaded from fails.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from ..exceptions import RulesFileError, UserInputError
from ._coverage import coverage_lines
from ._ruleset import RuleMatch, RuleSet

if TYPE_CHECKING:
    from ..contracts import Decision
from ._testcases import RuleTestCase, RuleTestSuite, load_rule_tests

__all__ = ["CaseResult", "RuleTestReport", "check_rule_tests", "run_rule_tests"]

#: Case statuses, in the order they are counted.
STATUSES = ("pass", "fail", "not_run", "error")
_RULE_STAGE = "rule"
_LISTED_IN_REFUSAL = 5


@dataclass(frozen=True, slots=True)
class CaseResult:
    """The outcome of one case.

    Attributes
    ----------
    case : RuleTestCase
        The case.
    status : str
        ``pass``, ``fail``, ``not_run`` (a text no rule decides, and no router) or
        ``error`` (the router refused the case's input).
    decided : mapping or None
        ``stage``, ``destination``, ``reason_code``, ``rule_id``, ``label``,
        ``confidence`` of the decision (``None`` when not run or refused).
    message : str
        For a failure: expected, decided, and by what; else why it did not run, or the error.
    """

    case: RuleTestCase
    status: str
    decided: Mapping[str, Any] | None
    message: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "case": self.case.to_dict(),
            "status": self.status,
            "decided": None if self.decided is None else dict(self.decided),
            "message": self.message,
        }


def decided_by(decided: Mapping[str, Any]) -> str:
    """What made a decision: ``by rule 'ID'``, ``by the default exit`` or the model stage."""
    if decided["stage"] == _RULE_STAGE:
        rid = decided.get("rule_id")
        return f"by rule {rid!r}" if rid is not None else "by the default exit (no rule fired)"
    conf = decided.get("confidence")
    shown = f", confidence {conf:.3f}" if isinstance(conf, (int, float)) else ""
    label = decided.get("label")
    return (
        f"by the model: no rule fired (stage {decided['stage']}"
        + (f", label {label!r}" if label is not None else "")
        + f"{shown})"
    )


class RuleTestReport:
    """What :func:`run_rule_tests` found: each case's result and the coverage.

    Attributes
    ----------
    rules : RuleSet
        The rule set tested.
    sources : tuple of str
        The files the cases came from.
    results : tuple of CaseResult
        One per case, in order.
    coverage : dict
        :meth:`RuleSet.coverage` of the decisions made (cases run).
    with_router : bool
        Whether a router ran the text cases that no rule decides.
    """

    def __init__(
        self,
        rules: RuleSet,
        sources: tuple[str, ...],
        results: tuple[CaseResult, ...],
        coverage: dict[str, Any],
        with_router: bool,
    ) -> None:
        self.rules = rules
        self.sources = sources
        self.results = results
        self.coverage = coverage
        self.with_router = with_router

    def count(self, status: str) -> int:
        """How many cases have ``status``."""
        return sum(1 for r in self.results if r.status == status)

    @property
    def ok(self) -> bool:
        """No case failed or was refused."""
        return not any(r.status in ("fail", "error") for r in self.results)

    def to_dict(self) -> dict[str, Any]:
        return {
            "rules": {"name": self.rules.name, "version": self.rules.version},
            "sources": list(self.sources),
            "cases": len(self.results),
            **{s: self.count(s) for s in STATUSES},
            "ok": self.ok,
            "with_router": self.with_router,
            "results": [r.to_dict() for r in self.results],
            "coverage": self.coverage,
        }

    def lines(self) -> list[str]:
        """The terminal report: a summary, every failure and refusal, then the coverage."""
        names = ", ".join(self.sources) or "(no test cases)"
        out = [
            f"rules test: {self.rules.name} {self.rules.version} -- {len(self.results)} case(s) "
            f"from {names}",
            f"  passed {self.count('pass')}, failed {self.count('fail')}, errors "
            f"{self.count('error')}, not run {self.count('not_run')}",
        ]
        for r in self.results:
            if r.status == "fail":
                out.append(f"FAIL {r.message}")
            elif r.status == "error":
                out.append(f"ERROR {r.case.label}: {r.message}")
        not_run = [r for r in self.results if r.status == "not_run"]
        if not_run:
            shown = ", ".join(r.case.name or f"#{r.case.index}" for r in not_run[:12])
            more = ", ..." if len(not_run) > 12 else ""
            out.append(
                f"not run: {len(not_run)} case(s) with a text that no rule decides (the model "
                f"would; give --router BUNDLE): {shown}{more}"
            )
        out.extend(coverage_lines(self.coverage, pending=len(not_run)))
        return out

    def refusal(self) -> str:
        """One line for a build that refuses: how many failed and the first few failures."""
        bad = [r for r in self.results if r.status in ("fail", "error")]
        run = len(self.results) - self.count("not_run")
        shown = "; ".join(
            r.message if r.status == "fail" else f"{r.case.label}: {r.message}"
            for r in bad[:_LISTED_IN_REFUSAL]
        )
        more = (
            f"; ... and {len(bad) - _LISTED_IN_REFUSAL} more"
            if len(bad) > _LISTED_IN_REFUSAL
            else ""
        )
        return (
            f"{len(bad)} of the {run} rule test case(s) run fail (hybridroute rules test shows "
            f"them all): {shown}{more}"
        )


class RuleTestRouter(Protocol):
    """What running rule tests needs of a router (``HybridRouter`` is one; the rules
    package does not import the router): its rules, its model's destinations, and
    :meth:`route`."""

    @property
    def rules(self) -> RuleSet: ...

    @property
    def model_destinations(self) -> Iterable[str]: ...

    def route(
        self,
        facts: Mapping[str, Any],
        text: str | None = None,
        *,
        evidence: Mapping[str, Any] | None = None,
    ) -> Decision: ...


def _from_match(match: RuleMatch) -> dict[str, Any]:
    return {
        "stage": _RULE_STAGE,
        "destination": match.destination,
        "reason_code": match.reason_code,
        "rule_id": match.rule_id,
        "label": None,
        "confidence": None,
    }


def _from_decision(d: Decision) -> dict[str, Any]:
    return {
        "stage": str(d.stage),
        "destination": d.selected_destination,
        "reason_code": str(d.reason_code),
        "rule_id": d.rule_id,
        "label": d.label,
        "confidence": d.confidence,
    }


def _judge(case: RuleTestCase, decided: dict[str, Any]) -> CaseResult:
    ok = decided["destination"] == case.destination and decided["reason_code"] == case.reason
    if case.rule_given and decided["rule_id"] != case.rule:
        ok = False
    if ok:
        return CaseResult(case, "pass", decided)
    message = (
        f"{case.label}: expected {case.expected_text()}; decided "
        f"{decided['destination']}/{decided['reason_code']} {decided_by(decided)}"
    )
    return CaseResult(case, "fail", decided, message)


def _run_one(rules: RuleSet, case: RuleTestCase, router: RuleTestRouter | None) -> CaseResult:
    try:
        if case.text is None:
            return _judge(case, _from_match(rules.evaluate(case.facts)))
        if router is not None:
            d = router.route(case.facts, case.text, evidence=case.evidence)
            return _judge(case, _from_decision(d))
        match = rules.match(rules.validate_facts(case.facts))
    except UserInputError as exc:
        return CaseResult(case, "error", None, str(exc))
    if match is not None:
        return _judge(case, _from_match(match))
    if case.rule_given and case.rule is not None:
        message = (
            f"{case.label}: expected {case.expected_text()}; decided: no rule fired (the "
            "model would decide)"
        )
        return CaseResult(case, "fail", None, message)
    return CaseResult(case, "not_run", None, "no rule decides it: the model would")


def run_rule_tests(suite: RuleTestSuite, *, router: RuleTestRouter | None = None) -> RuleTestReport:
    """Run every case of ``suite`` and measure the coverage of the decisions made.

    Parameters
    ----------
    suite : RuleTestSuite
        From :func:`load_rule_tests`.
    router : HybridRouter, optional
        Runs the text cases no rule decides (and, for uniformity, every text case). Its
        rules must be the suite's (``hybridroute rules test --router`` pairs the bundle's
        classifier and policy with the file's rules).

    Returns
    -------
    RuleTestReport

    Raises
    ------
    UserInputError
        ``router`` routes with other rules than the suite's.
    """
    rules = suite.rules
    if router is not None and router.rules.to_dict() != rules.to_dict():
        raise UserInputError(
            "the router routes with other rules than the rules file under test; pair its "
            "classifier and policy with the file's rules"
        )
    results = tuple(_run_one(rules, c, router) for c in suite.cases)
    decisions = [
        {
            "stage": r.decided["stage"],
            "rule_id": r.decided["rule_id"],
            "selected_destination": r.decided["destination"],
            "reason_code": r.decided["reason_code"],
        }
        for r in results
        if r.decided is not None
    ]
    model = None if router is None else tuple(router.model_destinations)
    coverage = rules.coverage(decisions, model_destinations=model)
    return RuleTestReport(rules, suite.sources, results, coverage, router is not None)


def check_rule_tests(
    ruleset: RuleSet, *, router: RuleTestRouter | None = None
) -> RuleTestReport | None:
    """Refuse a rule set whose own tests fail (what a router bundle's build calls).

    The tests are those of the file ``ruleset`` was loaded from (its ``source``): the
    ``tests:`` section and the sibling ``NAME.tests.yaml``. A rule set built in code, or
    loaded from a file without tests, has nothing to check.

    Parameters
    ----------
    ruleset : RuleSet
        The rules about to be bundled.
    router : HybridRouter, optional
        Also run the text cases no rule decides through it. A bundle's build passes none:
        a handful of example texts is no verdict on a model (its policy's certificate and
        the promotion gate are), and a new model must not fail a build on one borderline
        text. ``hybridroute rules test --router`` runs them.

    Returns
    -------
    RuleTestReport or None
        The report when there were cases, else ``None``.

    Raises
    ------
    RulesFileError
        One line naming the file: a case failed (the first few named with what was
        expected and what decided), a case is malformed, or the file changed since the
        rule set was loaded from it.
    """
    source = getattr(ruleset, "source", None)
    if source is None:
        return None
    suite = load_rule_tests(source)
    if suite.rules.to_dict() != ruleset.to_dict():
        raise RulesFileError(
            "the file changed since its rules were loaded; load it again", path=source
        )
    if not suite.cases:
        return None
    report = run_rule_tests(RuleTestSuite(ruleset, suite.cases, suite.sources), router=router)
    if not report.ok:
        raise RulesFileError(report.refusal(), path=source)
    return report
