"""Running rule tests: verdicts, failure messages, text cases, coverage, the build check."""

from __future__ import annotations

import pytest

from hybridroute.exceptions import RulesFileError, UserInputError
from hybridroute.router import HybridRouter
from hybridroute.rules import (
    check_rule_tests,
    load_rule_tests,
    load_rules,
    parse_rules,
    reference_rules,
    run_rule_tests,
)

from .conftest import EXAMPLE, SMALL, write

INTENTS = (
    "order_status refund_request cancel_subscription billing_dispute account_access "
    "shipping_change product_question bug_report complaint data_deletion "
    "payment_method_update return_exchange"
).split()


def test_the_example_passes_without_a_router_and_lists_the_text_cases_it_cannot_run():
    report = run_rule_tests(load_rule_tests(EXAMPLE))
    assert report.ok and (report.count("pass"), report.count("not_run")) == (14, 12)
    cov = report.coverage
    assert cov["rules"]["never_fired"] == [] and cov["outcomes"]["never_reached"] == []
    assert cov["default_exit"] == 1
    assert cov["destinations"]["not_reached"] == INTENTS  # only the model reaches them
    lines = report.lines()
    assert lines[1] == "  passed 14, failed 0, errors 0, not run 12"
    assert any(line.startswith("not run: 12 case(s) with a text") for line in lines)
    assert "  rules fired: 7 of 7 (default exit: 1)" in lines
    assert "  rule outcomes (reason codes) reached: 10 of 10" in lines


def test_the_example_with_its_router_covers_every_rule_outcome_and_destination(support):
    router, _ = support
    report = run_rule_tests(load_rule_tests(EXAMPLE), router=router)
    assert report.ok and report.count("pass") == 26, [r.message for r in report.results]
    assert report.coverage["complete"]
    assert set(report.coverage["destinations"]["reached"]) == set(
        router.rules.vocabulary.destinations
    )


def _suite(tmp_path, cases: str):
    return load_rule_tests(write(tmp_path, SMALL + "tests:\n" + cases))


LINE = SMALL.count("\n") + 2


@pytest.mark.parametrize(
    ("case", "message"),
    [
        (
            "  - name: gold\n    facts: {tier: gold, action: issue_refund, amount: 900}\n"
            "    expect: {destination: refund_request, reason: gold_refund}\n",
            f"case 'gold' (#1, rules.yaml line {LINE}): expected refund_request/gold_refund; "
            "decided human_review/high_risk_amount by rule 'risk'",
        ),
        (
            "  - facts: {tier: gold}\n"
            "    expect: {destination: refund_request, reason: gold_refund, rule: gold_refund}\n",
            f"case #1 (rules.yaml line {LINE}): expected refund_request/gold_refund by rule "
            "'gold_refund'; decided human_review/default_exit by the default exit (no rule fired)",
        ),
        (
            "  - name: perm\n    text: hi\n    facts: {has_permission: false}\n"
            "    expect: {destination: reject, reason: permission_denied, rule: null}\n",
            "expected reject/permission_denied by no rule; decided reject/permission_denied by "
            "rule 'permission'",
        ),
        (
            "  - name: talk\n    text: refund please\n    facts: {tier: gold}\n"
            "    expect: {destination: refund_request, reason: gold_refund, rule: gold_refund}\n",
            "expected refund_request/gold_refund by rule 'gold_refund'; decided: no rule fired "
            "(the model would decide)",
        ),
    ],
)
def test_a_failure_names_the_case_what_was_expected_what_decided_and_which_rule(
    tmp_path, case, message
):
    report = run_rule_tests(_suite(tmp_path, case))
    assert not report.ok and report.count("fail") == 1
    assert report.results[0].message.endswith(message)
    assert f"FAIL {report.results[0].message}" in report.lines()


def test_a_text_case_a_rule_decides_runs_without_a_router(tmp_path):
    report = run_rule_tests(
        _suite(
            tmp_path,
            "  - text: anything at all\n    facts: {amount: 501}\n"
            "    expect: {destination: human_review, reason: high_risk_amount, rule: risk}\n",
        )
    )
    assert report.ok and report.count("pass") == 1


def test_a_model_decision_that_differs_names_the_label_and_confidence(support, tmp_path):
    router, _ = support
    text = EXAMPLE.read_text(encoding="utf-8").replace(
        "expect: {destination: order_status, reason: confident_intent",
        "expect: {destination: refund_request, reason: confident_intent",
    )
    suite = load_rule_tests(write(tmp_path, text))
    report = run_rule_tests(suite, router=_with_rules(router, suite.rules))
    (failed,) = [r for r in report.results if r.status == "fail"]
    assert failed.case.name == "order_status_text"
    assert failed.message.startswith(
        "case 'order_status_text' (#15, rules.yaml line 137): expected "
        "refund_request/confident_intent by no rule; decided order_status/confident_intent by "
        "the model: no rule fired (stage model, label 'order_status', confidence 0."
    )


def _with_rules(router, rules):
    return HybridRouter(
        rules=rules,
        classifier=router.classifier,
        policy=router.policy,
        name=router.name,
        version=router.version,
    )


def test_a_router_with_other_rules_is_refused(support, tmp_path):
    router, _ = support
    suite = _suite(
        tmp_path, "  - facts: {}\n    expect: {destination: human_review, reason: default_exit}\n"
    )
    with pytest.raises(UserInputError, match="other rules than the rules file under test"):
        run_rule_tests(suite, router=router)


def test_a_case_the_router_refuses_is_an_error_not_a_pass(support, tmp_path):
    router, _ = support
    text = EXAMPLE.read_text(encoding="utf-8") + (
        "  - name: bad_evidence\n    text: where is my parcel\n    evidence: {items: 3}\n"
        "    expect: {destination: order_status, reason: confident_intent}\n"
    )
    suite = load_rule_tests(write(tmp_path, text))
    report = run_rule_tests(suite, router=_with_rules(router, suite.rules))
    (bad,) = [r for r in report.results if r.status == "error"]
    assert bad.case.name == "bad_evidence" and not report.ok
    assert any(line.startswith("ERROR case 'bad_evidence'") for line in report.lines())


# ---------------------------------------------------------------- the build check


def test_check_rule_tests_passes_the_example_and_refuses_a_failing_file(tmp_path):
    assert check_rule_tests(load_rules(EXAMPLE)).count("pass") == 14
    path = write(
        tmp_path,
        SMALL + "tests:\n  - name: wrong\n    facts: {amount: 900}\n"
        "    expect: {destination: refund_request, reason: gold_refund}\n"
        "  - name: right\n    facts: {amount: 900}\n"
        "    expect: {destination: human_review, reason: high_risk_amount}\n",
    )
    with pytest.raises(RulesFileError) as err:
        check_rule_tests(load_rules(path))
    text = str(err.value)
    assert text.startswith(f"{path}: 1 of the 2 rule test case(s) run fail")
    assert "case 'wrong' (#1, rules.yaml line" in text and "by rule 'risk'" in text
    assert "\n" not in text


def test_check_rule_tests_has_nothing_to_check_for_rules_built_in_code(tmp_path):
    rs = reference_rules(retry_budget=1, amount_limit=10, max_steps=3, max_repeats=2)
    assert check_rule_tests(rs) is None
    assert check_rule_tests(parse_rules(SMALL)) is None  # no file: no source
    assert check_rule_tests(load_rules(write(tmp_path, SMALL))) is None  # a file without tests


def test_check_rule_tests_refuses_a_file_changed_since_it_was_loaded(tmp_path):
    path = write(tmp_path, SMALL)
    rs = load_rules(path)
    write(tmp_path, SMALL.replace("amount_limit: 500", "amount_limit: 50"))
    with pytest.raises(RulesFileError, match="changed since its rules were loaded"):
        check_rule_tests(rs)


def test_check_rule_tests_refuses_malformed_cases(tmp_path):
    path = write(tmp_path, SMALL + "tests:\n  - facts: {tier: x}\n    expect: {}\n")
    with pytest.raises(RulesFileError, match="1 malformed test case"):
        check_rule_tests(load_rules(path))
