"""``hybridroute route --rules``: the record for each built-in branch, clean errors, hostile
input (bounded: a regression fails instead of hanging) and scrubbed output."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from hybridroute.cli import main
from hybridroute.contracts import snapshot_hash

from ..hostile import bounded

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
        (["--facts", "{not json"], "--facts, line 1: not valid facts JSON"),
        (["--facts", "[1]"], "must be a JSON object"),
        (["--facts", "@/nonexistent/facts.json"], "facts file not found"),
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


# ---------------------------------------------------------------- hostile input (item 6)


def bounded_main(args, timeout: float = 60.0) -> int:
    """``main(args)`` in a thread joined with a timeout: a regression fails, never hangs."""
    return bounded(main, args, timeout=timeout)


def _limit_memory() -> None:  # pragma: no cover - runs in the child
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))


def run_cli(*args, timeout: float = 60.0, env=None):
    """The CLI in a subprocess, bounded in time and memory; arguments may be bytes."""
    proc = subprocess.run(
        [sys.executable, "-m", "hybridroute", *args],
        capture_output=True,
        timeout=timeout,
        env=env,
        preexec_fn=_limit_memory,
    )
    return (
        proc.returncode,
        proc.stdout.decode("utf-8", "replace"),
        proc.stderr.decode("utf-8", "replace"),
    )


def one_error_line(err: str) -> str:
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


HOSTILE_FACTS = [
    # duplicate keys: the first value must not be silently replaced
    ('{"has_permission": false, "has_permission": true}', "duplicate key 'has_permission'"),
    ('{"amount": 1, "step": 2, "amount": 3}', "duplicate key 'amount'"),
    ('{"step": 1,\n "step": 1}', "line 2: duplicate key 'step'"),
    ('{"x": {"a": 1, "a": 2}}', "duplicate key 'a'"),
    # nesting
    ("[" * 1000 + "]" * 1000, "nested too deeply"),
    ('{"a":' * 1000 + "1" + "}" * 1000, "nested too deeply"),
    ('{"route_history": ' + "[" * 100 + "]" * 100 + "}", "nested too deeply"),
    # huge integers
    ('{"amount": ' + "9" * 5000 + "}", "integer with 5000 digits"),
    ('{"amount": -' + "1" * 4301 + "}", "integer with 4301 digits"),
    ('{"step": [' + "7" * 100 + "]}", "integer with 100 digits"),
    # non-finite numbers
    ('{"amount": NaN}', "NaN"),
    ('{"amount": Infinity}', "Infinity"),
    ('{"amount": -Infinity}', "Infinity"),
    ('{"amount": 1e999}', "too large for a float"),
    # lone surrogate escapes
    ('{"missing_user_fields": ["\\ud800"]}', "lone surrogate"),
    ('{"\\udfff": 1}', "lone surrogate"),
]


@pytest.mark.parametrize(("facts", "match"), HOSTILE_FACTS)
def test_hostile_inline_facts_exit_2_naming_the_option(capsys, facts, match):
    assert bounded_main(["route", "--rules", EXAMPLE, "--facts", facts]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert line.startswith("error: --facts")
    assert re.search(match, line), line


@pytest.mark.parametrize(("facts", "match"), HOSTILE_FACTS)
def test_hostile_facts_files_exit_2_naming_the_file(tmp_path, capsys, facts, match):
    f = tmp_path / "facts.json"
    f.write_text(facts, encoding="utf-8")
    assert bounded_main(["route", "--rules", EXAMPLE, "--facts", f"@{f}"]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert line.startswith(f"error: {f}")
    assert re.search(match, line), line


def test_facts_file_byte_limit(tmp_path, capsys):
    from hybridroute.cli._route import MAX_FACTS_BYTES

    ok = tmp_path / "ok.json"
    body = '{"step": 1}'
    ok.write_text(body + " " * (MAX_FACTS_BYTES - len(body)), encoding="utf-8")
    assert bounded_main(["route", "--rules", EXAMPLE, "--facts", f"@{ok}", "--json"]) == 0
    capsys.readouterr()
    big = tmp_path / "big.json"
    big.write_text(body + " " * (MAX_FACTS_BYTES - len(body) + 1), encoding="utf-8")
    assert bounded_main(["route", "--rules", EXAMPLE, "--facts", f"@{big}"]) == 2
    assert "larger than the limit" in one_error_line(capsys.readouterr().err)
    assert bounded_main(["route", "--rules", EXAMPLE, "--facts", " " * (MAX_FACTS_BYTES + 1)]) == 2
    assert "--facts: longer than the limit" in one_error_line(capsys.readouterr().err)


@pytest.mark.parametrize(
    ("content", "match"),
    [
        (b'{"step": 1, "x": "\xff"}', "not UTF-8"),
        (b"\xfe\xff\x00{", "not UTF-8"),
        (b'{"step": "\xed\xa0\x80"}', "not UTF-8"),  # an encoded surrogate
    ],
)
def test_facts_file_that_is_not_utf8(tmp_path, capsys, content, match):
    f = tmp_path / "facts.json"
    f.write_bytes(content)
    assert bounded_main(["route", "--rules", EXAMPLE, "--facts", f"@{f}"]) == 2
    assert match in one_error_line(capsys.readouterr().err)


def _special(kind: str, tmp_path: Path) -> str:
    if kind == "fifo":
        p = tmp_path / "facts.fifo"
        os.mkfifo(p)
        return str(p)
    if kind == "dir":
        return str(tmp_path)
    if kind == "symlink-to-zero":
        p = tmp_path / "link.json"
        p.symlink_to("/dev/zero")
        return str(p)
    return kind


SPECIAL_FILES = [
    ("/dev/zero", "character device"),
    ("/dev/urandom", "character device"),
    ("symlink-to-zero", "character device"),
    ("fifo", "FIFO"),
    ("dir", "directory"),
]


@pytest.mark.parametrize(("kind", "match"), SPECIAL_FILES)
def test_facts_from_a_device_fifo_or_directory_exit_2_at_once(tmp_path, kind, match):
    path = _special(kind, tmp_path)
    rc, _, err = run_cli("route", "--rules", EXAMPLE, "--facts", f"@{path}", timeout=60)
    assert rc == 2
    line = one_error_line(err)
    assert path in line and match in line


@pytest.mark.parametrize(
    ("arg", "value", "match"),
    [
        ("--facts", b'{"missing_user_fields": ["caf\xe9"]}', "--facts: the value is not valid"),
        ("--facts", b'{"step": 1, "\xff\xfe": 2}', "--facts: the value is not valid"),
        ("--id", b"req-\xff", "--id is not valid Unicode"),
    ],
)
def test_undecodable_command_line_bytes_exit_2(arg, value, match):
    extra = [] if arg == "--facts" else ["--facts", "{}"]
    rc, _, err = run_cli("route", "--rules", EXAMPLE, *extra, arg.encode(), value)
    assert rc == 2
    assert match in one_error_line(err)


@pytest.mark.parametrize(
    ("value", "match"),
    [("", "--id is empty"), ("   ", "--id is empty"), ("x" * 257, "longer than 256")],
)
def test_bad_request_ids(capsys, value, match):
    assert bounded_main(["route", "--rules", EXAMPLE, "--id", value]) == 2
    assert match in one_error_line(capsys.readouterr().err)


def test_single_route_with_an_id_is_logged_once(tmp_path, capsys):
    log = tmp_path / "log.sqlite"
    args = ["route", "--rules", EXAMPLE, "--facts", '{"step": 3}', "--log", str(log)]
    for _ in range(3):
        assert bounded_main([*args, "--id", "req-1"]) == 0
    err = capsys.readouterr().err
    assert err.count("already logged") == 2
    assert bounded_main(args) == 0  # no id: no request id, logged again
    from hybridroute.records import DecisionLog

    with DecisionLog(log) as dl:
        assert [r["item_id"] for r in dl.rows()] == ["req-1", None]


# ---------------------------------------------------------------- printed output is scrubbed


def test_json_output_is_scrubbed_like_the_log(monkeypatch, capsys):
    fake = "sk-test-" + "Zq9" * 12
    monkeypatch.setenv("OPENAI_API_KEY", fake)
    facts = json.dumps({"missing_user_fields": [fake, "AKIA" + "B" * 16]})
    assert bounded_main(["route", "--rules", EXAMPLE, "--facts", facts, "--json"]) == 0
    out = capsys.readouterr().out
    assert fake not in out and "AKIA" + "B" * 16 not in out
    record = json.loads(out)
    assert record["input_snapshot"]["facts"]["missing_user_fields"] == ["[REDACTED]"] * 2
    # the printed hash is the hash of what is printed, not of the input
    assert record["snapshot_hash"] == snapshot_hash(record["input_snapshot"])


@pytest.mark.parametrize("as_json", [True, False])
def test_sensitive_facts_are_hashed_in_what_is_printed(monkeypatch, capsys, as_json):
    monkeypatch.setenv("HYBRIDROUTE_LOG_SALT", "a-long-enough-pepper")
    facts = '{"action": "override_fraud_hold", "missing_user_fields": ["email"]}'
    args = ["route", "--rules", EXAMPLE, "--facts", facts, "--sensitive", "action"]
    assert bounded_main(args + (["--json"] if as_json else [])) == 0
    out = capsys.readouterr().out
    assert "override_fraud_hold" not in out
    if as_json:
        record = json.loads(out)
        assert record["input_snapshot"]["facts"]["action"].startswith("hmac-sha256:")
        assert record["snapshot_hash"] == snapshot_hash(record["input_snapshot"])
        assert record["detail"]["hashed_facts"] == ["action"]
    else:
        assert "hmac-sha256:" in out and "human_review" in out


def test_sensitive_facts_without_a_salt_exit_2(monkeypatch, capsys):
    monkeypatch.delenv("HYBRIDROUTE_LOG_SALT", raising=False)
    assert bounded_main(["route", "--rules", EXAMPLE, "--sensitive", "action", "--json"]) == 2
    assert "no salt" in one_error_line(capsys.readouterr().err)


@pytest.mark.parametrize("value", ['"ana-at-example-dot-com"', "12345", '["x-secret-y"]'])
def test_a_sensitive_facts_bad_value_is_not_echoed(monkeypatch, capsys, value):
    monkeypatch.setenv("HYBRIDROUTE_LOG_SALT", "a-long-enough-pepper")
    facts = f'{{"action": {value}}}'
    assert (
        bounded_main(["route", "--rules", EXAMPLE, "--facts", facts, "--sensitive", "action"]) == 2
    )
    line = one_error_line(capsys.readouterr().err)
    assert "fact 'action'" in line and "not shown" in line
    for piece in ("ana-at-example", "12345", "x-secret-y"):
        assert piece not in line
