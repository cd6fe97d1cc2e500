"""``hybridroute route --rules``: the record for each built-in branch, and clean errors."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from hybridroute.cli import main

EXAMPLE = str(
    Path(__file__).resolve().parents[2] / "src" / "hybridroute" / "examples" / "support_rules.yaml"
)
CONTRACT = (
    "input_snapshot",
    "allowed_destinations",
    "selected_destination",
    "reason_code",
    "evidence_ids",
)


@pytest.mark.parametrize(
    ("facts", "destination", "reason"),
    [
        ({"has_permission": False, "amount": 10_000}, "reject", "permission_denied"),
        ({"tool_error_kind": "retryable", "attempts": 0}, "retry_tool", "tool_error_retry"),
        ({"tool_error_kind": "retryable", "attempts": 1}, "fail", "retry_budget_exhausted"),
        ({"tool_error_kind": "auth_failed"}, "fail", "tool_error_fatal"),
        ({"amount": 900}, "human_review", "high_risk_amount"),
        ({"action": "override_fraud_hold"}, "human_review", "sensitive_action"),
        ({"step": 13}, "fail", "step_budget_exceeded"),
        ({"route_history": ["a", "b", "a", "b", "a", "b"]}, "fail", "route_oscillation"),
        ({"evidence_complete": True}, "answer", "evidence_complete"),
        ({"missing_user_fields": ["email"]}, "ask_user", "missing_user_fields"),
        ({}, "human_review", "default_exit"),
    ],
)
def test_json_record_for_each_branch(capsys, facts, destination, reason):
    assert main(["route", "--rules", EXAMPLE, "--facts", json.dumps(facts), "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    for key in CONTRACT:
        assert key in record
    assert record["selected_destination"] == destination
    assert record["reason_code"] == reason
    assert record["input_snapshot"]["facts"]["step"] == facts.get("step", 0)


def test_facts_from_file_and_plain_output(tmp_path, capsys):
    f = tmp_path / "facts.json"
    f.write_text('{"missing_user_fields": ["email"]}', encoding="utf-8")
    assert main(["route", "--rules", EXAMPLE, "--facts", f"@{f}"]) == 0
    out = capsys.readouterr().out
    assert "ask_user" in out and "missing_user_fields" in out


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (["--facts", '{"attempts": "x"}'], "fact 'attempts': expected int"),
        (["--facts", "{not json"], "not valid JSON"),
        (["--facts", "[1]"], "must be a JSON object"),
        (["--facts", "@/nonexistent/facts.json"], "cannot read facts file"),
        (["--facts", '{"colour": 1}'], "fact 'colour': not declared"),
    ],
)
def test_bad_facts_exit_2_with_one_line(capsys, args, match):
    assert main(["route", "--rules", EXAMPLE, *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert re.search(match, err)


def test_bad_rules_file_exits_2_without_traceback(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "facts: {x: {type: int}}\nrules:\n  - id: a\n    when: __import__('os')\n    then: fail\n"
    )
    proc = subprocess.run(
        [sys.executable, "-m", "hybridroute", "route", "--rules", str(bad), "--facts", "{}"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert str(bad) in proc.stderr and "rule 'a'" in proc.stderr
    assert proc.stderr.strip().count("\n") == 0


@pytest.mark.parametrize(
    "other", [{}, {"amount": 10**6}, {"tool_error_kind": "retryable"}, {"evidence_complete": True}]
)
def test_cli_no_permission_is_always_reject(capsys, other):
    facts = {**other, "has_permission": False}
    assert main(["route", "--rules", EXAMPLE, "--facts", json.dumps(facts), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["selected_destination"] == "reject"
