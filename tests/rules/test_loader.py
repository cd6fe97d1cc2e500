"""The rules-file loader: the example file, every error message, and hostile files."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from hybridroute.exceptions import RulesFileError
from hybridroute.rules import GUARDS, load_rules, parse_rules

EXAMPLE = (
    Path(__file__).resolve().parents[2] / "src" / "hybridroute" / "examples" / "support_rules.yaml"
)

HEAD = textwrap.dedent(
    """\
    name: t
    facts:
      has_permission: {type: bool, default: true}
      amount: {type: number, default: 0}
      action: {type: str, default: ""}
    """
)


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
            HEAD
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
        (HEAD + "rules: []\ndefault: {reason: x}\n", "no default exit", None),
        (
            HEAD + "rules: []\ndefault: {destination: nowhere}\n",
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
    with pytest.raises(RulesFileError, match="cannot read rules file"):
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
    with pytest.raises(RulesFileError, match="too large"):
        load_rules(path)


def test_too_many_rules(tmp_path):
    rules = "".join(f"  - id: r{i}\n    when: amount > {i}\n    then: fail\n" for i in range(501))
    with pytest.raises(RulesFileError, match="too many rules"):
        load_rules(write(tmp_path, HEAD + "rules:\n" + rules))


def test_parse_rules_from_text():
    rs = parse_rules(HEAD + "rules:\n  - id: p\n    guard: permission\n", source="inline")
    assert rs.decide({"has_permission": False}).selected_destination == "reject"
