"""``hybridroute datasets validate FILE --rules RULES / --router BUNDLE``: facts against a schema.

Without a schema, a CSV text column that also spells booleans or numbers is a warning
(stderr, exit 0); a typed column with an odd cell stays an error (exit 2).
"""

from __future__ import annotations

import json
import shutil

import pytest

from hybridroute.cli import main

from ..router.conftest import EXAMPLE
from .facts_bundle import GOOD, HEADER, build_bundles


@pytest.fixture(scope="module")
def bundles(tmp_path_factory):
    return build_bundles(tmp_path_factory.mktemp("facts-bundles"))


def _csv(tmp_path, *bad: str, header: str = HEADER, good: list[str] = GOOD):
    path = tmp_path / "tickets.csv"
    path.write_text("\n".join([header, *good, *bad]) + "\n", encoding="utf-8")
    return path


def _jsonl(tmp_path, *bad: dict):
    rows = [
        {"text": "where is my parcel", "label": "order_status", "facts": {"attempts": 0}},
        {"text": "refund me please", "label": "refund_request", "facts": {"amount": 12.5}},
        {"text": "parcel late again", "label": "order_status", "has_permission": False},
        {"text": "refund the rest", "label": "refund_request", "facts": {"action": ""}},
    ]
    rows += [{"text": f"bad {i}", "label": "order_status", "facts": f} for i, f in enumerate(bad)]
    path = tmp_path / "tickets.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _schema_args(how, bundles):
    return ["--rules", str(EXAMPLE)] if how == "rules" else ["--router", str(bundles["example"])]


# (cells has_permission,attempts,amount,action; column; message)
CSV_BAD = {
    "bool maybe": ("maybe,0,0,", "has_permission", "expected bool, got str 'maybe'"),
    "int two": ("true,two,0,", "attempts", "expected int, got str 'two'"),
    "int decimal": ("true,1.5,0,", "attempts", "expected int, got number '1.5'"),
    "enum": ("true,0,0,Issue_Refund", "action", "'Issue_Refund' is not one of the allowed"),
    "below min": ("true,0,-5,", "amount", "-5 is below the minimum 0"),
}


@pytest.mark.parametrize("how", ["rules", "router"])
@pytest.mark.parametrize("case", list(CSV_BAD), ids=list(CSV_BAD))
def test_csv_fact_breaking_the_rules_is_exit_2_naming_row_and_column(
    tmp_path, capsys, bundles, how, case
):
    cells, column, message = CSV_BAD[case]
    path = _csv(tmp_path, f"bad ticket,order_status,test,{cells}")
    assert main(["datasets", "validate", str(path), *_schema_args(how, bundles)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith(f"error: {path}, row 5, column '{column}': {message}")
    assert captured.err.count("\n") == 1


JSONL_BAD = {
    "bool maybe": ({"has_permission": "maybe"}, "has_permission", "expected bool, got str"),
    "int two": ({"attempts": "two"}, "attempts", "expected int, got str 'two'"),
    "int as float": ({"attempts": 1.0}, "attempts", "expected int, got number 1.0"),
    "enum": ({"tool_error_kind": "oops"}, "tool_error_kind", "'oops' is not one of"),
    "list element": (
        {"missing_user_fields": ["a", 3]},
        "missing_user_fields",
        "expected list[str], got list",
    ),
    "below min": ({"step": -1}, "step", "-1 is below the minimum 0"),
}


@pytest.mark.parametrize("how", ["rules", "router"])
@pytest.mark.parametrize("case", list(JSONL_BAD), ids=list(JSONL_BAD))
def test_jsonl_fact_breaking_the_rules_is_exit_2(tmp_path, capsys, bundles, how, case):
    facts, column, message = JSONL_BAD[case]
    path = _jsonl(tmp_path, facts)
    assert main(["datasets", "validate", str(path), *_schema_args(how, bundles)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {path}, row 5, column '{column}': {message}")


def test_all_reports_every_bad_row(tmp_path, capsys):
    path = _csv(
        tmp_path,
        "bad one,order_status,test,maybe,0,0,",
        "fine,refund_request,test,true,0,0,",
        "bad two,order_status,test,true,two,0,",
        "bad three,refund_request,test,true,0,-1,",
    )
    assert main(["datasets", "validate", str(path), "--rules", str(EXAMPLE), "--all"]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert lines == [
        f"{path}, row 5, column 'has_permission': expected bool, got str 'maybe'",
        f"{path}, row 7, column 'attempts': expected int, got str 'two'",
        f"{path}, row 8, column 'amount': -1 is below the minimum 0",
        f"error: {path}, row 5, column 'has_permission': 3 bad row(s); the first: expected "
        "bool, got str 'maybe'",
    ]


@pytest.mark.parametrize("how", ["rules", "router"])
def test_good_file_passes_and_says_what_was_checked(tmp_path, capsys, bundles, how):
    path = _csv(tmp_path)
    assert main(["datasets", "validate", str(path), *_schema_args(how, bundles)]) == 0
    captured = capsys.readouterr()
    assert captured.err == ""
    assert captured.out.startswith(f"ok: {path}: 4 rows, 2 labels (test 4)")
    assert "checked against the facts of support-rules 1" in captured.out
    assert "4 of 9 declared facts are columns (the others take their defaults)" in captured.out
    # the same file, checked or not, is the same set
    assert main(["datasets", "validate", str(path)]) == 0
    plain = capsys.readouterr().out
    assert plain.split("fingerprint ")[1] == captured.out.split("fingerprint ")[1]


def test_undeclared_column_is_a_warning_when_the_rules_forbid_extra_facts(tmp_path, capsys):
    good = [line + ",gold" for line in GOOD]
    path = _csv(tmp_path, header=HEADER + ",tier", good=good)
    assert main(["datasets", "validate", str(path), "--rules", str(EXAMPLE)]) == 0
    captured = capsys.readouterr()
    assert captured.err == (
        f"warning: {path}, row 0, column 'tier': not a declared fact (declared: "
        "has_permission, tool_error_kind, attempts, amount, action, evidence_complete, "
        "missing_user_fields, route_history, step); the facts schema forbids undeclared "
        "facts, so a router given one as a fact refuses it\n"
    )
    assert "; not declared, so no rule reads them: tier;" in captured.out
    lenient = tmp_path / "lenient.yaml"
    lenient.write_text(EXAMPLE.read_text(encoding="utf-8") + "extra_facts: ignore\n")
    assert main(["datasets", "validate", str(path), "--rules", str(lenient)]) == 0
    captured = capsys.readouterr()
    assert captured.err == "" and "not declared, so no rule reads them: tier" in captured.out


def test_a_required_fact_must_be_a_column(tmp_path, capsys):
    rules = tmp_path / "required.yaml"
    text = EXAMPLE.read_text(encoding="utf-8")
    rules.write_text(text.replace("facts:\n", "facts:\n  channel: {type: str}\n", 1))
    path = _csv(tmp_path)
    assert main(["datasets", "validate", str(path), "--rules", str(rules)]) == 2
    assert capsys.readouterr().err.startswith(
        f"error: {path}, row 0, column 'channel': a required fact (the facts schema gives it "
        "no default) is not a fact column"
    )


def test_rules_and_router_together_are_a_usage_error(tmp_path, capsys, bundles):
    path = _csv(tmp_path)
    argv = ["datasets", "validate", str(path), "--rules", str(EXAMPLE)]
    assert main([*argv, "--router", str(bundles["example"])]) == 2
    assert "give --rules FILE or --router BUNDLE, not both" in capsys.readouterr().err


def test_a_changed_bundle_is_refused_before_its_rules_are_read(tmp_path, capsys, bundles):
    bundle = tmp_path / "bundle"
    shutil.copytree(bundles["example"], bundle)
    rules = bundle / "rules.yaml"
    text = rules.read_text(encoding="utf-8")
    assert "    min: 0\n" in text
    rules.write_text(text.replace("    min: 0\n", "    min: -9\n", 1))  # a looser rule
    assert main(["datasets", "validate", str(_csv(tmp_path)), "--router", str(bundle)]) == 2
    assert "checksum mismatch" in capsys.readouterr().err


# ------------------------------------------------------------------------- no schema


@pytest.mark.parametrize(
    ("cells", "row", "said"),
    [
        (["true", "maybe", "no", "yes"], 2, "str 'maybe' here, bool 'true' at row 1"),
        (["gold", "3", "silver", "gold"], 2, "int '3' here, str 'gold' at row 1"),
        (["2", "two", "three", "2"], 2, "str 'two' here, int '2' at row 1"),
    ],
)
def test_mixed_kinds_without_a_schema_are_a_warning(tmp_path, capsys, cells, row, said):
    good = [f"{line},{cell}" for line, cell in zip(GOOD, cells, strict=True)]
    path = _csv(tmp_path, header=HEADER + ",tier", good=good)
    assert main(["datasets", "validate", str(path)]) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith(f"ok: {path}: 4 rows")
    warning, hint = captured.err.splitlines()
    assert (
        warning.startswith(f"warning: {path}, row {row}, column 'tier': the column mixes kinds")
        and said in warning
    )
    assert hint == (
        f"hint: check the facts against their declared types: hybridroute datasets validate "
        f"{path} --rules RULES (or --router BUNDLE)"
    )
    assert main(["datasets", "show", f"csv:{path}"]) == 0
    out = capsys.readouterr().out
    assert "notes (what the loader did by default, and problems found and kept):" in out
    assert said in out


@pytest.mark.parametrize(
    ("cells", "row", "message"),
    [
        (["true", "false", "maybe", "true"], 3, "expected bool like the other rows"),
        (["1", "2", "two", "3"], 3, "expected int like the other rows"),
    ],
)
def test_odd_cell_in_a_typed_column_without_a_schema_is_exit_2(
    tmp_path, capsys, cells, row, message
):
    good = [f"{line},{cell}" for line, cell in zip(GOOD, cells, strict=True)]
    path = _csv(tmp_path, header=HEADER + ",n", good=good)
    assert main(["datasets", "validate", str(path)]) == 2
    assert capsys.readouterr().err.startswith(f"error: {path}, row {row}, column 'n': {message}")
