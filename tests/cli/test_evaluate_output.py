"""``hybridroute evaluate``: every count printed says what it counts (the report's labels),
the stages are explained where they are shown, and ``--json`` holds the counts each rate
is over and the fallbacks by cause."""

from __future__ import annotations

import json

import pytest

from hybridroute.cli import main
from hybridroute.cli._evaluate import headline_lines
from hybridroute.evaluation._report import STAGE_MEANING, _headline

from .facts_bundle import build_bundles


@pytest.fixture(scope="module")
def bundles(tmp_path_factory):
    return build_bundles(tmp_path_factory.mktemp("evaluate-output"))


def _evaluate(capsys, *args):
    argv = ["evaluate", "--dataset", "support-tickets", "--no-track", "--n-boot", "20", *args]
    assert main(argv) == 0
    return capsys.readouterr().out


@pytest.fixture(scope="module")
def router_json(bundles):
    import io
    from contextlib import redirect_stdout

    buf = io.StringIO()
    argv = ["evaluate", "--dataset", "support-tickets", "--router", str(bundles["example"])]
    with redirect_stdout(buf):
        assert main([*argv, "--no-track", "--n-boot", "20", "--json"]) == 0
    return json.loads(buf.getvalue())


@pytest.mark.parametrize(
    "key", ["n_classified", "n_auto_routed", "n_next_step", "n_with_confidence"]
)
def test_json_holds_the_count_each_rate_is_over(router_json, key):
    assert isinstance(router_json[key], int) and 0 < router_json[key] <= router_json["n"]


def test_json_holds_fallbacks_by_cause_and_how_the_intervals_were_made(router_json):
    assert router_json["fallbacks_by_cause"] == {}  # the example router never falls back here
    assert router_json["decisions_by_stage"].get("fallback", 0) == 0
    assert router_json["bootstrap"]["n_boot"] == 20
    # the counts add up: rule + classified = all; auto-routed ones are classified ones
    stages = router_json["decisions_by_stage"]
    assert stages["rule"] + router_json["n_classified"] == router_json["n"] == 273
    assert router_json["n_auto_routed"] <= router_json["n_classified"]


@pytest.mark.parametrize("mode", ["router", "model"])
def test_every_printed_count_says_what_it_counts(bundles, capsys, router_json, mode):
    if mode == "router":
        out = _evaluate(capsys, "--router", str(bundles["example"]))
        ev = router_json
    else:
        root = bundles["example"].parent
        args = ("--model", str(root / "model"), "--policy", str(root / "policy.json"))
        out = _evaluate(capsys, *args)
        ev = json.loads(_evaluate(capsys, *args, "--json"))
    lines = out.splitlines()
    # no bare key: each metric line is the report's name, the value and what it is
    assert not any(line.split()[:1] in (["n"], ["decisions_by_stage"]) for line in lines[1:])
    for name, value, meaning in _headline(ev):
        if value is not None:
            assert any(
                line.startswith(f"  {name} ") and line.endswith(meaning) for line in lines
            ), name
    if mode == "router":
        assert "  decisions by stage (of the 273 items):" in lines
        for stage, meaning in STAGE_MEANING.items():
            count = ev["decisions_by_stage"].get(stage, 0)
            assert any(
                line.split()[:2] == [stage, str(count)] and meaning in line for line in lines
            )
    else:
        assert not any("decisions by stage" in line for line in lines)


def test_fallbacks_are_listed_by_cause_under_the_stages():
    ev = {
        "mode": "router",
        "n": 5,
        "n_classified": 3,
        "decisions_by_stage": {"fallback": 2, "model": 1, "rule": 2},
        "fallbacks_by_cause": {"classifier_abstained": 1, "classifier_error (TypeError)": 1},
    }
    lines = headline_lines(ev)
    at = lines.index("  fallbacks by cause (the fallback stage's decisions):")
    assert [line.split() for line in lines[at + 1 :]] == [
        ["classifier_abstained", "1"],
        ["classifier_error", "(TypeError)", "1"],
    ]
    fallback = next(line for line in lines if line.split()[:1] == ["fallback"])
    assert fallback.split()[1] == "2" and STAGE_MEANING["fallback"] in fallback
    assert any(line.split()[:2] == ["policy", "0"] for line in lines)  # every stage shown
