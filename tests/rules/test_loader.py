"""The rules-file loader: the example file, every error message, and hostile files."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from hybridroute.exceptions import RulesFileError
from hybridroute.rules import GUARDS, RuleSet, load_rules, parse_rules

EXAMPLE = (
    Path(__file__).resolve().parents[2] / "src" / "hybridroute" / "examples" / "support_rules.yaml"
)

#: facts and no default exit
BARE = textwrap.dedent(
    """\
    name: t
    facts:
      has_permission: {type: bool, default: true}
      amount: {type: number, default: 0}
      action: {type: str, default: ""}
    """
)
DEFAULT = "default: {destination: fail, reason: default_exit}\n"
HEAD = BARE + DEFAULT


def write(tmp_path: Path, body: str) -> Path:
    p = tmp_path / "rules.yaml"
    p.write_text(body, encoding="utf-8")
    return p


def test_example_uses_every_built_in_guard():
    rs = load_rules(EXAMPLE)
    assert {r.guard_obj.name for r in rs.rules if r.guard_obj} == set(GUARDS)
    assert rs.name == "support-rules" and rs.version == "1"
    assert "refund_request" in rs.vocabulary.intents


def test_condition_rule_from_yaml(tmp_path):
    rs = load_rules(
        write(
            tmp_path,
            BARE
            + textwrap.dedent(
                """\
        reason_codes: [vip_refund]
        rules:
          - id: perm
            guard: permission
          - id: vip
            when: "amount > 1000 and action in ['issue_refund']"
            then: human_review
            reason: vip_refund
        default: {destination: answer}
        """
            ),
        )
    )
    assert rs.decide({"amount": 1500, "action": "issue_refund"}).reason_code == "vip_refund"
    assert rs.decide({}).selected_destination == "answer"


@pytest.mark.parametrize(
    ("body", "match", "rule_id"),
    [
        ("", "the rules file is empty", None),
        ("- 1\n- 2\n", "top level must be a mapping", None),
        ("rules: []\n", "'facts' must be a non-empty mapping", None),
        (HEAD + "rules: {}\n", "'rules' must be a list", None),
        (HEAD + "colour: red\nrules: []\n", r"unknown top-level key\(s\) \['colour'\]", None),
        (HEAD + "format: 7\nrules: []\n", "format 7 is not supported", None),
        (HEAD + "rules:\n  - guard: permission\n", "rule #1 has no string 'id'", None),
        (
            HEAD + "rules:\n  - id: a\n    guard: permission\n    then: fail\n",
            "takes 'params', not 'then'",
            "a",
        ),
        (HEAD + "rules:\n  - id: a\n", "either 'guard'", "a"),
        (HEAD + "rules:\n  - id: a\n    when: amount > 1\n", "needs 'then'", "a"),
        (
            HEAD + "rules:\n  - id: a\n    when: amount > 1\n    then: refunds\n",
            "undeclared destination 'refunds'",
            "a",
        ),
        (
            HEAD + "rules:\n  - id: a\n    when: colour == 1\n    then: fail\n",
            "unknown fact 'colour'",
            "a",
        ),
        (HEAD + "rules:\n  - id: a\n    when: amount >\n    then: fail\n", "bad condition", "a"),
        (HEAD + "rules:\n  - id: a\n    guard: risk\n", "needs 'amount_limit'", "a"),
        (
            HEAD
            + "rules:\n  - id: a\n    guard: permission\n  - id: a\n    guard: risk\n    params: {amount_limit: 1}\n",
            "duplicate rule id",
            "a",
        ),
        (
            HEAD
            + "rules:\n  - id: a\n    when: true\n    then: fail\n  - id: b\n    guard: permission\n",
            "shadows it",
            "b",
        ),
        (BARE + "rules: []\ndefault: {reason: x}\n", "no default exit", None),
        (BARE + "rules: []\n", "no default exit: declare 'default", None),
        (
            BARE + "rules:\n  - id: p\n    guard: permission\n",
            "no default exit: declare 'default",
            None,
        ),
        (BARE + "rules: []\ndefault: fail\n", "'default' must be a mapping", None),
        (BARE + "rules: []\ndefault: null\n", "'default' must be a mapping", None),
        (
            BARE + "rules: []\ndefault: {destination: nowhere}\n",
            "undeclared destination 'nowhere'",
            None,
        ),
        (
            HEAD + "rules:\n  - id: a\n    guard: permission\n    wat: 1\n",
            r"unknown key\(s\) \['wat'\]",
            "a",
        ),
        ("facts: {x: {type: int}}\nrules: [\n", "not valid safe YAML", None),
        ("facts:\n  x: {type: float}\nrules: []\n", "unknown type 'float'", None),
    ],
)
def test_errors_name_file_and_rule(tmp_path, body, match, rule_id):
    path = write(tmp_path, body)
    with pytest.raises(RulesFileError, match=match) as info:
        load_rules(path)
    assert info.value.path == str(path)
    assert str(path) in str(info.value)
    assert info.value.rule_id == rule_id
    if rule_id is not None:
        assert f"rule {rule_id!r}" in str(info.value)


def test_missing_and_non_utf8_files(tmp_path):
    with pytest.raises(RulesFileError, match="rules file not found"):
        load_rules(tmp_path / "nope.yaml")
    p = tmp_path / "latin.yaml"
    p.write_bytes(b"name: caf\xe9\n")
    with pytest.raises(RulesFileError, match="not UTF-8"):
        load_rules(p)


# ------------------------------------------------------------------ hostile files


@pytest.mark.parametrize(
    ("body", "match"),
    [
        ("!!python/object/apply:os.system ['touch {marker}']\n", "Python tags|not valid safe YAML"),
        (
            HEAD + "rules:\n  - !!python/object/apply:os.system ['touch {marker}']\n",
            "Python tags|not valid safe YAML",
        ),
        (
            HEAD
            + "rules:\n  - id: a\n    when: \"__import__('os').system('touch {marker}')\"\n    then: fail\n",
            "not allowed",
        ),
        (
            HEAD
            + 'rules:\n  - id: a\n    when: "().__class__.__bases__[0].__subclasses__()"\n    then: fail\n',
            "unexpected",
        ),
        (
            HEAD + 'rules:\n  - id: a\n    when: "action.__class__ == 1"\n    then: fail\n',
            "not allowed|has no field",
        ),
        (
            HEAD
            + 'rules:\n  - id: a\n    when: "'
            + "(" * 200
            + "amount > 1"
            + ")" * 200
            + '"\n    then: fail\n',
            "nested too deeply|too long",
        ),
        ("facts: " + "[" * 5000 + "]" * 5000 + "\n", "nested too deeply"),
        (
            "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
            "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\n",
            "aliases",
        ),
    ],
)
def test_hostile_files_are_refused_and_run_nothing(tmp_path, body, match):
    marker = tmp_path / "pwned"
    path = write(tmp_path, body.replace("{marker}", str(marker)))
    with pytest.raises(RulesFileError, match=match):
        load_rules(path)
    assert not marker.exists()


def test_multi_megabyte_file_is_refused_before_parsing(tmp_path):
    path = tmp_path / "big.yaml"
    path.write_text(HEAD + "rules:\n" + "# padding\n" * 400_000, encoding="utf-8")
    assert path.stat().st_size > 3_000_000
    with pytest.raises(RulesFileError, match="larger than the limit of 262,144 bytes"):
        load_rules(path)


def test_too_many_rules(tmp_path):
    rules = "".join(f"  - id: r{i}\n    when: amount > {i}\n    then: fail\n" for i in range(501))
    with pytest.raises(RulesFileError, match="too many rules"):
        load_rules(write(tmp_path, HEAD + "rules:\n" + rules))


def test_parse_rules_from_text():
    rs = parse_rules(HEAD + "rules:\n  - id: p\n    guard: permission\n", source="inline")
    assert rs.decide({"has_permission": False}).selected_destination == "reject"


# ------------------------------------------------------------------ issue 15

RULE_A = "  - id: a\n    when: amount > 1\n    then: fail\n"


@pytest.mark.parametrize(
    ("body", "key", "line", "rule_id"),
    [
        # two `when:` in one rule: the second used to win silently
        (
            HEAD
            + "rules:\n  - id: a\n    when: amount > 1\n    when: amount > 9\n    then: fail\n",
            "when",
            10,
            "a",
        ),
        (
            HEAD + "rules:\n" + RULE_A + "  - id: b\n    guard: permission\n    guard: evidence\n",
            "guard",
            13,
            "b",
        ),
        (
            HEAD + "rules:\n" + RULE_A + "  - id: r\n    guard: risk\n    params:\n"
            "      amount_limit: 10\n      amount_limit: 1000000\n",
            "amount_limit",
            15,
            "r",
        ),
        (
            HEAD + "rules:\n  - {id: c, when: amount > 1, then: fail, then: answer}\n",
            "then",
            8,
            "c",
        ),
        (HEAD + "rules:\n" + RULE_A + "rules: []\n", "rules", 11, None),
        (HEAD + "rules: []\ndefault: {destination: answer}\n", "default", 8, None),
        (
            "name: t\nfacts:\n  amount: {type: number, default: 0}\n"
            "  amount: {type: str, default: ''}\nrules: []\n" + DEFAULT,
            "amount",
            4,
            None,
        ),
        (
            "name: t\nfacts:\n  amount: {type: number, default: 0, default: -5}\nrules: []\n"
            + DEFAULT,
            "default",
            3,
            None,
        ),
        ("name: a\nname: b\n" + BARE[8:] + "rules: []\n" + DEFAULT, "name", 2, None),
    ],
)
def test_duplicate_keys_are_refused_with_line_and_rule(tmp_path, body, key, line, rule_id):
    path = write(tmp_path, body)
    with pytest.raises(RulesFileError, match=f"line {line}: duplicate key '{key}'") as info:
        load_rules(path)
    assert info.value.path == str(path) and str(path) in str(info.value)
    assert info.value.rule_id == rule_id
    if rule_id is not None:
        assert f"rule {rule_id!r}" in str(info.value)


@pytest.mark.parametrize(
    ("value", "match"),
    [
        (".nan", "not finite"),
        (".inf", "not finite"),
        ("-.inf", "not finite"),
        ("1" * 80, "80 digits"),
    ],
)
def test_non_finite_or_huge_numbers_are_refused(tmp_path, value, match):
    body = HEAD + f"rules:\n  - id: r\n    guard: risk\n    params: {{amount_limit: {value}}}\n"
    with pytest.raises(RulesFileError, match=match) as info:
        load_rules(write(tmp_path, body))
    assert info.value.rule_id == "r" and "line 10" in str(info.value)


def _memory_bound() -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))


def _read_bounded(call: str, timeout: float = 60.0) -> str:
    """Run ``call`` in a child process under a time and memory bound (a reader that blocks
    on a FIFO or reads /dev/zero forever fails the test instead of hanging or eating
    memory); return ``"ErrorType|message"`` or ``"ok"``."""
    code = (
        "import resource, sys\n"
        "resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))\n"
        "try:\n"
        f"    {call}\n"
        "    print('ok')\n"
        "except Exception as exc:\n"
        "    print(type(exc).__name__ + '|' + str(exc))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout.strip()


@pytest.mark.parametrize("kind", ["fifo", "dev_zero", "dev_null", "directory"])
def test_non_regular_files_are_refused_without_reading(tmp_path, kind):
    if kind == "fifo":
        path = tmp_path / "rules.fifo"
        os.mkfifo(path)
        match = "FIFO"
    elif kind == "dev_zero":
        path, match = Path("/dev/zero"), "character device"
    elif kind == "dev_null":
        path, match = Path("/dev/null"), "character device"
    else:
        path, match = tmp_path, "directory"
    out = _read_bounded(f"from hybridroute.rules import load_rules; load_rules({str(path)!r})")
    assert out.startswith("RulesFileError|"), out
    assert str(path) in out and match in out and "must be a regular file" in out


@pytest.mark.parametrize("target", ["/dev/zero", "fifo", "dir"])
def test_cli_refuses_a_non_regular_rules_file_with_exit_2_and_one_line(tmp_path, target):
    if target == "fifo":
        target = str(tmp_path / "r.fifo")
        os.mkfifo(target)
    elif target == "dir":
        target = str(tmp_path)
    proc = subprocess.run(
        [sys.executable, "-m", "hybridroute", "route", "--rules", target, "--facts", "{}"],
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=_memory_bound,  # a regression reading /dev/zero fails, not swaps
    )
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip().count("\n") == 0 and target in proc.stderr
    assert "a rules file must be a regular file" in proc.stderr


def test_a_file_growing_past_the_limit_is_refused(tmp_path, monkeypatch):
    """The limit is enforced while reading, not trusted from the reported size."""
    import hybridroute._safeio as safeio

    path = write(tmp_path, HEAD + "rules: []\n" + "#" * 300_000 + "\n")
    real_fstat = os.fstat

    def lying_fstat(fd):
        st = real_fstat(fd)
        return os.stat_result((st.st_mode, *st[1:6], 10, *st[7:]))  # claims 10 bytes

    monkeypatch.setattr(safeio.os, "fstat", lying_fstat)
    with pytest.raises(RulesFileError, match="larger than the limit"):
        load_rules(path)


def test_to_yaml_writes_the_default_and_the_declarations():
    rs = load_rules(EXAMPLE)
    text = rs.to_yaml()
    assert "default:" in text and "enum:" in text and "min: 0" in text
    again = parse_rules(text, source="saved")
    assert again.to_dict() == rs.to_dict()
    assert again.schema == rs.schema


def test_a_rule_set_with_a_custom_default_round_trips():
    rs = parse_rules(BARE + "rules: []\ndefault: {destination: ask_user, reason: default_exit}\n")
    again = parse_rules(rs.to_yaml())
    assert (again.default, again.default_reason) == ("ask_user", "default_exit")
    assert isinstance(again, RuleSet)


@pytest.mark.parametrize(
    ("decl", "match"),
    [
        ("{type: str, enum: [a, b], default: c}", "default 'c' is not one of the allowed values"),
        ("{type: str, enum: a}", "'enum' must be a list"),
        ("{type: number, min: 5, max: 1}", "'min' \\(5\\) is greater than 'max' \\(1\\)"),
        ("{type: bool, enum: [true]}", "'enum' is for str, int"),
        ("{type: int, min: .nan}", "not finite"),
        ("{type: str, enum: [a, a]}", "'enum' lists 'a' twice"),
    ],
)
def test_bad_fact_declarations_name_file_and_fact(tmp_path, decl, match):
    body = f"name: t\nfacts:\n  x: {decl}\nrules: []\n" + DEFAULT
    path = write(tmp_path, body)
    with pytest.raises(RulesFileError, match=match) as info:
        load_rules(path)
    assert str(path) in str(info.value)
    if "nan" not in decl:
        assert "fact 'x'" in str(info.value)


def test_sensitive_action_outside_the_action_enum_is_a_rules_file_error(tmp_path):
    body = (
        "name: t\nfacts:\n  action: {type: str, default: '', enum: ['', delete_account_data]}\n"
        "rules:\n  - id: risky\n    guard: risk\n"
        "    params: {sensitive_actions: [delete_acount_data]}\n" + DEFAULT
    )
    with pytest.raises(
        RulesFileError, match="'delete_acount_data' is not an allowed value"
    ) as info:
        load_rules(write(tmp_path, body))
    assert info.value.rule_id == "risky"
