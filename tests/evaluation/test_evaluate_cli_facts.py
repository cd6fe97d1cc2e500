"""``hybridroute evaluate --router``: the set's facts are checked against the router's schema
before anything is routed; a bad fact is exit 2 naming row and column."""

from __future__ import annotations

import json

import pytest

from hybridroute.cli import main

from ..cli.facts_bundle import GOOD as FOUR
from ..cli.facts_bundle import HEADER, build_bundles

GOOD = [*FOUR, "cancel my plan,cancel_subscription,test,true,0,0,cancel_subscription"]


@pytest.fixture(scope="module")
def bundles(tmp_path_factory):
    return build_bundles(tmp_path_factory.mktemp("evaluate-facts"))


def _evaluate(bundle, dataset, *extra):
    argv = ["evaluate", "--router", str(bundle), "--dataset", dataset, "--no-track"]
    return main([*argv, "--n-boot", "20", *extra])


# (the bad row's cells has_permission,attempts,amount,action; column; message)
CSV_BAD = {
    "bool maybe": ("maybe,0,0,", "has_permission", "expected bool, got str 'maybe'"),
    "int two": ("true,two,0,", "attempts", "expected int, got str 'two'"),
    "int decimal": ("true,0.5,0,", "attempts", "expected int, got number '0.5'"),
    "below min": ("true,0,-5,", "amount", "-5 is below the minimum 0"),
    "enum": ("true,0,0,DELETE-ACCOUNT-DATA", "action", "'DELETE-ACCOUNT-DATA' is not one of"),
}


@pytest.mark.parametrize("case", list(CSV_BAD), ids=list(CSV_BAD))
def test_bad_csv_fact_is_exit_2_before_routing(tmp_path, capsys, bundles, case):
    cells, column, message = CSV_BAD[case]
    path = tmp_path / "t.csv"
    path.write_text("\n".join([HEADER, *GOOD, f"bad one,order_status,test,{cells}"]) + "\n")
    assert _evaluate(bundles["example"], f"csv:{path}") == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith(f"error: {path}, row 6, column '{column}': {message}")


@pytest.mark.parametrize(
    ("facts", "column", "message"),
    [
        ({"has_permission": "maybe"}, "has_permission", "expected bool, got str 'maybe'"),
        ({"attempts": "two"}, "attempts", "expected int, got str 'two'"),
        ({"tool_error_kind": "oops"}, "tool_error_kind", "'oops' is not one of"),
        ({"step": -2}, "step", "-2 is below the minimum 0"),
    ],
)
def test_bad_jsonl_fact_is_exit_2_before_routing(tmp_path, capsys, bundles, facts, column, message):
    rows = [
        {"text": t, "label": lab, "split": "test", "facts": {"attempts": 0}}
        for t, lab in (("where is my parcel", "order_status"), ("refund me", "refund_request"))
    ]
    rows += [{"text": "bad one", "label": "order_status", "split": "test", "facts": facts}]
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert _evaluate(bundles["example"], f"jsonl:{path}") == 2
    assert capsys.readouterr().err.startswith(f"error: {path}, row 3, column '{column}': {message}")


def test_named_set_breaking_the_router_schema_names_row_id_and_column(capsys, bundles):
    assert _evaluate(bundles["strict"], "support-tickets") == 2
    err = capsys.readouterr().err
    assert err.startswith("error: support-tickets, row ")
    assert "column 'attempts': 1 is above the maximum 0 (row id 'st-" in err
    assert "rows break the facts schema in all" in err
    assert err.count("\n") == 1


def test_good_sets_are_evaluated(tmp_path, capsys, bundles):
    path = tmp_path / "good.csv"  # 'tier' is no declared fact: routed without it
    path.write_text("\n".join([HEADER + ",tier", *(g + ",gold" for g in GOOD)]) + "\n")
    assert _evaluate(bundles["example"], f"csv:{path}", "--json") == 0
    assert json.loads(capsys.readouterr().out)["n"] == 5
    assert _evaluate(bundles["example"], "support-tickets", "--json") == 0
    assert json.loads(capsys.readouterr().out)["n"] == 273
