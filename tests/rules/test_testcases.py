"""Rule test cases: the file format (inline and beside the file) and every malformed case."""

from __future__ import annotations

import os
import threading

import pytest

from hybridroute.exceptions import RulesFileError
from hybridroute.rules import load_rule_tests, load_rules, parse_rules
from hybridroute.rules._testcases import sibling_tests_path

from .conftest import EXAMPLE, SMALL, write

CASE = "  - name: {name}\n    facts: {facts}\n    expect: {expect}\n"


def case(name="c", facts="{}", expect="{destination: human_review, reason: default_exit}"):
    return CASE.format(name=name, facts=facts, expect=expect)


def test_the_example_carries_a_case_for_every_guard_outcome_and_destination():
    suite = load_rule_tests(EXAMPLE)
    assert len(suite.cases) == 26 and suite.sources == (str(EXAMPLE),)
    assert suite.rules.source == str(EXAMPLE)
    lines = EXAMPLE.read_text(encoding="utf-8").splitlines()
    for c in suite.cases:  # each case's line is the line its list item starts on
        assert lines[c.line - 1].strip() == f"- name: {c.name}"
    expected = {(c.destination, c.reason) for c in suite.cases}
    reasons = {code for r in suite.rules.rules for code in r.reason_codes}
    assert reasons <= {r for _, r in expected}
    assert set(suite.rules.vocabulary.destinations) <= {d for d, _ in expected}


def test_routing_ignores_the_tests_and_a_bundle_does_not_carry_them():
    rs = load_rules(EXAMPLE)
    assert rs.source == str(EXAMPLE)
    assert "tests" not in rs.to_dict() and "tests:" not in rs.to_yaml()
    assert parse_rules(rs.to_yaml()).to_dict() == rs.to_dict()


@pytest.mark.parametrize(
    ("name", "sibling"),
    [("rules.yaml", "rules.tests.yaml"), ("r.yml", "r.tests.yml"), ("r", "r.tests.yaml")],
)
def test_the_sibling_file_name(tmp_path, name, sibling):
    assert sibling_tests_path(tmp_path / name) == tmp_path / sibling


def test_inline_and_sibling_cases_both_run_inline_first(tmp_path):
    path = write(tmp_path, SMALL + "tests:\n" + case("inline"))
    write(tmp_path, "format: 1\ntests:\n" + case("beside"), "rules.tests.yaml")
    suite = load_rule_tests(path)
    assert [c.name for c in suite.cases] == ["inline", "beside"]
    assert suite.sources == (str(path), str(tmp_path / "rules.tests.yaml"))
    assert [c.line for c in suite.cases] == [SMALL.count("\n") + 2, 3]
    assert "rules.tests.yaml line 3" in suite.cases[1].label


def test_only_a_sibling_file_is_enough(tmp_path):
    path = write(tmp_path, SMALL)
    write(tmp_path, "tests:\n" + case("a") + case("b"), "rules.tests.yaml")
    assert [c.name for c in load_rule_tests(path).cases] == ["a", "b"]


def test_a_name_in_both_files_is_refused_naming_both(tmp_path):
    path = write(tmp_path, SMALL + "tests:\n" + case("same"))
    write(tmp_path, "tests:\n" + case("same"), "rules.tests.yaml")
    with pytest.raises(RulesFileError) as err:
        load_rule_tests(path)
    msg = str(err.value)
    assert "case 'same' (#1, rules.tests.yaml line 2): name 'same' is also case 'same'" in msg
    assert "rules.yaml line" in msg


BAD = [
    (
        "  - name: a\n    fact: {}\n    expect: {destination: fail, reason: default_exit}\n",
        "case 'a' (#1, rules.yaml line {line}): unknown key(s) ['fact']",
    ),
    (
        "  - name: a\n    facts: [1]\n    expect: {destination: fail, reason: default_exit}\n",
        "'facts' must be a mapping, got list",
    ),
    (case("a", "{tier: platinum}"), "the facts schema refuses its facts: fact 'tier': 'platinum'"),
    (case("a", "{amount: -5}"), "fact 'amount': -5 is below the minimum 0"),
    (case("a", "{colour: red}"), "fact 'colour': not declared in the facts schema"),
    (
        case("a", expect="{destination: nowhere, reason: default_exit}"),
        "expect: undeclared destination 'nowhere'",
    ),
    (case("a", expect="{destination: fail, reason: because}"), "undeclared reason code 'because'"),
    (
        case("a", expect="{destination: fail, reason: default_exit, rule: nope}"),
        "expect: rule 'nope' is not a rule of this file",
    ),
    (
        case("a", expect="{destination: fail, reason: default_exit, rule: risk}"),
        "expect: rule 'risk' cannot decide fail/default_exit (it gives human_review",
    ),
    (
        case("a", expect="{destination: fail, reason: high_risk_amount, rule: null}"),
        "with no text and no rule, only the default exit can decide",
    ),
    (case("a", expect="{destination: fail}"), "'expect' needs a 'destination' and a 'reason'"),
    (
        case("a", expect="{destination: fail, reason: default_exit, why: x}"),
        "unknown key(s) in 'expect' ['why']",
    ),
    ("  - name: a\n    facts: {}\n", "needs 'expect: {destination: ..., reason: ...}'"),
    (
        "  - name: a\n    evidence: {}\n    expect: {destination: fail, reason: default_exit}\n",
        "'evidence' goes with a 'text'",
    ),
    (
        "  - name: a\n    text: '  '\n    expect: {destination: fail, reason: default_exit}\n",
        "'text' must be a non-empty string",
    ),
    (
        "  - name: 3\n    expect: {destination: fail, reason: default_exit}\n",
        "case #1 (rules.yaml line {line}): 'name' must be a non-empty string",
    ),
    ("  - just a string\n", "case #1 (rules.yaml line {line}): must be a mapping, got str"),
]


@pytest.mark.parametrize(("body", "message"), BAD)
def test_each_malformed_case_is_named_with_its_line(tmp_path, body, message):
    path = write(tmp_path, SMALL + "tests:\n" + body)
    line = SMALL.count("\n") + 2
    with pytest.raises(RulesFileError) as err:
        load_rule_tests(path)
    text = str(err.value)
    assert text.startswith(f"{path}: 1 malformed test case(s): ")
    assert message.replace("{line}", str(line)) in text
    assert "\n" not in text


def test_every_malformed_case_is_named_in_one_error(tmp_path):
    body = case("ok") + case("bad1", "{tier: x}") + case("ok2") + case("bad2", "{amount: -1}")
    body += "  - expect: {destination: nowhere, reason: default_exit}\n"
    path = write(tmp_path, SMALL + "tests:\n" + body)
    with pytest.raises(RulesFileError) as err:
        load_rule_tests(path)
    text = str(err.value)
    assert "3 malformed test case(s)" in text
    for label in ("case 'bad1' (#2,", "case 'bad2' (#4,", "case #5 ("):
        assert label in text
    assert "'ok'" not in text and "'ok2'" not in text


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("tests: {a: 1}\n", "'tests' must be a list of cases"),
        ("- a\n", "must be a mapping with a 'tests:' list of cases"),
        ("format: 2\ntests: []\n", "format 2 is not supported"),
        ("tests: []\nrules: []\n", "unknown top-level key(s) ['rules']"),
        ("tests:\n  - &a {name: x}\n  - *a\n", "alias"),
        ("tests: []\ntests: []\n", "duplicate key"),
    ],
)
def test_a_malformed_sibling_file_is_refused(tmp_path, body, message):
    path = write(tmp_path, SMALL)
    write(tmp_path, body, "rules.tests.yaml")
    with pytest.raises(RulesFileError, match=r"rules\.tests\.yaml") as err:
        load_rule_tests(path)
    assert message in str(err.value)


def test_an_inline_tests_value_that_is_no_list_is_refused(tmp_path):
    path = write(tmp_path, SMALL + "tests: all of them\n")
    with pytest.raises(RulesFileError, match="'tests' must be a list of cases"):
        load_rule_tests(path)
    assert load_rules(path).name == "small"  # routing never reads the tests


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_sibling_that_is_a_fifo_is_refused_without_blocking(tmp_path):
    path = write(tmp_path, SMALL)
    os.mkfifo(tmp_path / "rules.tests.yaml")
    out: list[BaseException] = []
    t = threading.Thread(target=lambda: _catch(out, path), daemon=True)
    t.start()
    t.join(10)
    assert not t.is_alive(), "reading the sibling blocked"
    assert isinstance(out[0], RulesFileError) and "regular file" in str(out[0])


def test_a_sibling_that_is_a_directory_is_refused(tmp_path):
    path = write(tmp_path, SMALL)
    (tmp_path / "rules.tests.yaml").mkdir()
    with pytest.raises(RulesFileError, match="cannot read rule tests file"):
        load_rule_tests(path)


def _catch(out: list[BaseException], path) -> None:
    try:
        load_rule_tests(path)
    except BaseException as exc:  # handed to the test thread
        out.append(exc)


@pytest.mark.parametrize(
    ("overlaps", "message"),
    [
        ("[gold_refund]", "'overlaps' names 'gold_refund', which is not an earlier rule"),
        ("[later]", "'overlaps' names 'later'"),
        ("risk", "'overlaps' must be a list"),
    ],
)
def test_overlaps_must_name_earlier_rules(tmp_path, overlaps, message):
    body = SMALL.replace(
        "    reason: gold_refund\n", f"    reason: gold_refund\n    overlaps: {overlaps}\n"
    )
    with pytest.raises(RulesFileError, match="rule 'gold_refund'") as err:
        load_rules(write(tmp_path, body))
    assert message in str(err.value)


def test_overlaps_round_trip_through_the_rules_document(tmp_path):
    body = SMALL.replace(
        "    reason: gold_refund\n", "    reason: gold_refund\n    overlaps: [risk]\n"
    )
    rs = load_rules(write(tmp_path, body))
    assert rs.rules[-1].overlaps == ("risk",)
    assert parse_rules(rs.to_yaml()).rules[-1].overlaps == ("risk",)
