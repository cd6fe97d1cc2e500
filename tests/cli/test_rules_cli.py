"""``hybridroute rules test / lint / diff`` through the command line: output and exit codes."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from hybridroute.cli import main

from ..router.conftest import EXAMPLE
from ..rules.conftest import write

TEXT = EXAMPLE.read_text(encoding="utf-8")

SMALL = textwrap.dedent(
    """\
    name: small
    version: "1"
    facts:
      has_permission: {type: bool, default: true}
      amount: {type: number, default: 0, min: 0}
      action: {type: str, default: "", enum: ["", issue_refund]}
    destinations: [refund_request]
    rules:
      - id: permission
        guard: permission
      - id: risk
        guard: risk
        params: {amount_limit: 500}
    default: {destination: human_review, reason: default_exit}
    """
)


def one_line_error(captured) -> str:
    """The refusal: one line on stderr, nothing on stdout."""
    assert captured.out == ""
    assert captured.err.startswith("error: ") and captured.err.count("\n") == 1, captured.err
    return captured.err


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    """The support router (example rules) saved as a bundle."""
    from hybridroute.router import save_router

    from ..support_router import support_router

    router, _ = support_router()
    return save_router(router, tmp_path_factory.mktemp("rules-cli") / "bundle")


# ---------------------------------------------------------------- rules test


def test_rules_test_on_the_example(capsys):
    assert main(["rules", "test", str(EXAMPLE)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"rules test: support-rules 1 -- 26 case(s) from {EXAMPLE}"
    assert out[1] == "  passed 14, failed 0, errors 0, not run 12"
    assert out[2].startswith("not run: 12 case(s) with a text that no rule decides")
    assert "  rules fired: 7 of 7 (default exit: 1)" in out
    assert "  rule outcomes (reason codes) reached: 10 of 10" in out
    assert any(
        x.startswith("  destinations reached: 6 of 18; not reached: order_status") for x in out
    )


def test_rules_test_with_a_router_runs_every_case_and_reaches_every_destination(capsys, bundle):
    assert main(["rules", "test", str(EXAMPLE), "--router", str(bundle)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1] == "  passed 26, failed 0, errors 0, not run 0"
    assert "  destinations reached: 18 of 18" in out


def test_a_failing_case_exits_1_naming_the_case_expected_decided_and_rule(tmp_path, capsys):
    body = TEXT.replace(
        "facts: {amount: 750, action: issue_refund}\n"
        "    expect: {destination: human_review, reason: high_risk_amount, rule: high_risk}",
        "facts: {amount: 750, action: issue_refund}\n"
        "    expect: {destination: refund_request, reason: confident_intent}",
    )
    path = write(tmp_path, body)
    assert main(["rules", "test", str(path)]) == 1
    out = capsys.readouterr().out.splitlines()
    line = TEXT.splitlines().index("  - name: large_refund_to_a_human") + 1
    assert (
        f"FAIL case 'large_refund_to_a_human' (#6, rules.yaml line {line}): expected "
        "refund_request/confident_intent; decided human_review/high_risk_amount by rule "
        "'high_risk'" in out
    )
    assert out[1] == "  passed 13, failed 1, errors 0, not run 12"


def test_a_model_case_that_fails_with_a_router_names_the_model(tmp_path, capsys, bundle):
    body = TEXT.replace(
        "expect: {destination: bug_report, reason: confident_intent",
        "expect: {destination: complaint, reason: confident_intent",
    )
    assert main(["rules", "test", str(write(tmp_path, body)), "--router", str(bundle)]) == 1
    out = capsys.readouterr().out
    assert "FAIL case 'bug_report_text' (#22, rules.yaml line" in out
    assert "decided bug_report/confident_intent by the model: no rule fired (stage model, " in out


def test_rules_test_json(capsys):
    assert main(["rules", "test", str(EXAMPLE), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["cases"], doc["pass"], doc["not_run"], doc["ok"]) == (26, 14, 12, True)
    assert doc["results"][0]["case"]["name"] == "no_permission_is_rejected"
    assert doc["coverage"]["rules"]["never_fired"] == []


@pytest.mark.parametrize(
    ("body", "sibling", "message"),
    [
        (
            SMALL + "tests:\n  - name: a\n    facts: {amount: -1}\n    expect: {}\n"
            "  - facts: {}\n    expect: {destination: nowhere, reason: default_exit}\n",
            None,
            "2 malformed test case(s): case 'a' (#1, rules.yaml line 16): ",
        ),
        (SMALL, "tests:\n  - facts: {action: refund}\n", "rules.yaml: 1 malformed test case(s): "),
        (SMALL, None, "no test cases: add a 'tests:' section, or write them in rules.tests.yaml"),
        (SMALL + "tests: [\n", None, "rules.yaml"),
        (SMALL.replace("amount_limit: 500", "amount_limit: -5"), None, "rule 'risk'"),
    ],
)
def test_every_refusal_is_one_line_and_exit_2(tmp_path, capsys, body, sibling, message):
    path = write(tmp_path, body)
    if sibling is not None:
        write(tmp_path, sibling, "rules.tests.yaml")
    assert main(["rules", "test", str(path)]) == 2
    assert message in one_line_error(capsys.readouterr())


def test_a_router_whose_labels_the_file_does_not_declare_is_refused(tmp_path, capsys, bundle):
    path = write(
        tmp_path,
        SMALL + "tests:\n  - facts: {}\n    expect: {destination: "
        "human_review, reason: default_exit}\n",
    )
    assert main(["rules", "test", str(path), "--router", str(bundle)]) == 2
    assert "not a declared destination" in one_line_error(capsys.readouterr())


def test_a_missing_file_is_refused(tmp_path, capsys):
    assert main(["rules", "test", str(tmp_path / "nope.yaml")]) == 2
    assert "cannot read rules file" in one_line_error(capsys.readouterr())


# ---------------------------------------------------------------- rules lint

LINTED = SMALL.replace(
    "default: {destination: human_review, reason: default_exit}\n",
    "  - id: big_refund\n    when: \"amount > 2000 and action == 'issue_refund'\"\n"
    "    then: refund_request\n"
    "  - id: odd\n    when: \"amount < 0 or action == ''\"\n    then: refund_request\n"
    "default: {destination: human_review, reason: default_exit}\n",
)


def test_rules_lint_on_the_example_is_clean(capsys):
    assert main(["rules", "lint", str(EXAMPLE), "--strict"]) == 0
    assert capsys.readouterr().out == (
        "rules lint: support-rules 1 -- 7 rule(s), 9 fact(s): 0 error(s), 0 warning(s)\n"
    )


def test_rules_lint_warns_and_strict_makes_exact_findings_errors(tmp_path, capsys):
    path = write(tmp_path, LINTED)
    assert main(["rules", "lint", str(path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "rules lint: small 1 -- 4 rule(s), 3 fact(s): 0 error(s), 3 warning(s)"
    assert out[1].startswith("warning: [never-fires] rule 'big_refund' can never fire: ")
    assert "'risk' takes" in out[1]
    assert out[2].startswith(
        "warning: [dead-comparison] rule 'odd': `amount < 0` can never be true"
    )
    assert out[3].startswith("warning: [overlap] rule 'odd' fires on only ")
    assert 'it still decides e.g. {"action": "", "amount": 0}' in out[3]
    assert main(["rules", "lint", str(path), "--strict"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0].endswith("3 error(s), 0 warning(s)") and out[1].startswith("error: [never-fires]")


def test_rules_lint_json(tmp_path, capsys):
    assert main(["rules", "lint", str(write(tmp_path, LINTED)), "--json", "--strict"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert [f["kind"] for f in doc["findings"]] == ["never-fires", "dead-comparison", "overlap"]
    assert doc["errors"] == 3 and doc["findings"][0]["witnesses"][0]["decided_by"] == "risk"


def test_rules_lint_refuses_an_invalid_file_in_one_line(tmp_path, capsys):
    path = write(tmp_path, LINTED.replace("action == 'issue_refund'", "action == 'issue_refnd'"))
    assert main(["rules", "lint", str(path)]) == 2
    err = one_line_error(capsys.readouterr())
    assert "rule 'big_refund'" in err and "'issue_refnd', which is not one of its allowed" in err


# ---------------------------------------------------------------- rules diff


@pytest.fixture
def lowered(tmp_path) -> Path:
    """The example rules with the risk limit at 300: a slice of refunds now goes to review."""
    body = TEXT.replace("amount_limit: 500", "amount_limit: 300").replace(
        'version: "1"', 'version: "2"'
    )
    return write(tmp_path, body, "new.yaml")


def test_rules_diff_on_a_labelled_set_shows_the_rerouted_slice_and_its_share(lowered, capsys):
    argv = ["rules", "diff", str(EXAMPLE), str(lowered), "--dataset", "support-tickets"]
    assert main(argv) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "rules diff: support-rules 1 -> support-rules 2 on dataset support-tickets"
    changed = next(x for x in out if x.startswith("  changed: "))
    assert changed.startswith("  changed: 66 of 1370 (4.82% of traffic): 65 rerouted (4.74%)")
    assert any("(model) [model] -> human_review [high_risk: high_risk_amount]" in x for x in out)
    assert main([*argv, "--exit-code"]) == 1
    capsys.readouterr()
    assert (
        main(
            [
                "rules",
                "diff",
                str(EXAMPLE),
                str(EXAMPLE),
                "--dataset",
                "support-tickets",
                "--exit-code",
            ]
        )
        == 0
    )


def test_rules_diff_json_on_one_split(lowered, capsys):
    argv = ["rules", "diff", str(EXAMPLE), str(lowered), "--dataset", "support-tickets"]
    assert main([*argv, "--split", "test", "--json", "--examples", "2"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["source"] == "dataset support-tickets/test" and doc["changed"] > 0
    assert len(doc["examples"]) <= 2 and doc["groups"][0]["new_rule"] == "high_risk"


def test_rules_diff_over_a_decision_log(lowered, tmp_path, capsys):
    from hybridroute.records import open_log
    from hybridroute.rules import load_rules

    rules = load_rules(EXAMPLE)
    facts = [{"amount": a, "action": "issue_refund"} for a in (100, 350, 450, 900)] + [{}] * 4
    url = f"sqlite:///{tmp_path / 'log.sqlite'}"
    with open_log(url) as log:
        log.log_many([(rules.decide(f), f"r{i}", "live") for i, f in enumerate(facts)])
    argv = ["rules", "diff", str(EXAMPLE), str(lowered), "--log", url]
    assert main(argv) == 0
    out = capsys.readouterr().out.splitlines()
    assert (
        out[0] == f"rules diff: support-rules 1 -> support-rules 2 on log {tmp_path / 'log.sqlite'}"
    )
    assert any(x.startswith("  changed: 2 of 8 (25.00% of traffic)") for x in out)
    assert any(
        "human_review [default exit] -> human_review [high_risk: high_risk_amount]" in x
        for x in out
    )
    assert any(x.strip().startswith("seq ") and "request r1" in x for x in out)
    assert main([*argv, "--router-version", "7"]) == 2
    assert "holds no live decision to replay" in one_line_error(capsys.readouterr())


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ([], "give --log URL or --dataset NAME (one of them)"),
        (["--log", "x.sqlite", "--dataset", "support-tickets"], "(one of them)"),
        (
            ["--dataset", "support-tickets", "--router-version", "1"],
            "--router-version goes with --log",
        ),
        (["--log", "x.sqlite", "--split", "test"], "--split and --data-dir go with --dataset"),
        (["--dataset", "support-tickets", "--examples", "-1"], "--examples must be at least 0"),
        (["--dataset", "support-tickets", "--split", "nope"], "has no split 'nope'"),
        (["--log", "missing.sqlite"], "no such decision log"),
    ],
)
def test_rules_diff_refusals_are_one_line(tmp_path, capsys, extra, message, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["rules", "diff", str(EXAMPLE), str(EXAMPLE), *extra]) == 2
    assert message in one_line_error(capsys.readouterr())
