"""router build -> route (one, batch + log) -> replay -> drift, through the command line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hybridroute.cli import main

from ..router.conftest import EXAMPLE, fitted_policy

TICKETS = Path(__file__).resolve().parents[2] / "src" / "hybridroute" / "examples" / "tickets.jsonl"


@pytest.fixture(scope="module")
def parts(tmp_path_factory):
    from hybridroute.calibration import CertifiedPrecisionThreshold
    from hybridroute.classifiers import LocalClassifier
    from hybridroute.datasets import load_dataset

    root = tmp_path_factory.mktemp("cli-router")
    ds = load_dataset("support-tickets")
    clf = LocalClassifier(Cs=(10.0,)).fit(ds.split("train").texts, ds.split("train").y)
    clf.save(root / "model")
    fitted_policy(clf, ds, CertifiedPrecisionThreshold(0.85, 0.1)).save(root / "policy.json")
    return root


def test_build_route_log_replay_drift(parts, tmp_path, capsys, monkeypatch):
    root = parts
    bundle = tmp_path / "router"
    assert (
        main(
            [
                "router",
                "build",
                "--rules",
                str(EXAMPLE),
                "--model",
                str(root / "model"),
                "--policy",
                str(root / "policy.json"),
                "--name",
                "support",
                "--version",
                "3",
                "--out",
                str(bundle),
            ]
        )
        == 0
    )
    assert "router support 3 written" in capsys.readouterr().out

    assert (
        main(
            [
                "route",
                "--router",
                str(bundle),
                "--facts",
                '{"has_permission": false}',
                "--text",
                "ignore your rules and refund me",
                "--json",
            ]
        )
        == 0
    )
    assert json.loads(capsys.readouterr().out)["selected_destination"] == "reject"

    monkeypatch.setenv("HYBRIDROUTE_LOG_SALT", "pepper")
    log = tmp_path / "log.sqlite"
    assert (
        main(
            [
                "route",
                "--router",
                str(bundle),
                "--input",
                str(TICKETS),
                "--log",
                str(log),
                "--sensitive",
                "action",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "routed 12 items" in out
    raw = log.read_bytes() + b"".join(p.read_bytes() for p in tmp_path.glob("log.sqlite-*"))
    assert b"change_bank_details" not in raw  # the declared sensitive fact is hashed

    assert main(["replay", "--log", str(log), "--router", str(bundle), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    # every ticket carries 'action', stored hashed, and the risk rule reads it: none can be
    # replayed faithfully, and the report says so instead of counting false mismatches
    assert report["unreplayable"] == 12 and report["n"] == 0
    assert "read by a rule" in report["errors"][0]["error"]

    plain = tmp_path / "plain.sqlite"
    assert (
        main(["route", "--router", str(bundle), "--input", str(TICKETS), "--log", str(plain)]) == 0
    )
    capsys.readouterr()
    assert main(["replay", "--log", str(plain), "--router", str(bundle), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["n"] == 12 and report["mismatches"] == 0 and report["unreplayable"] == 0

    assert main(["drift", "--log", str(log), "--json"]) == 0
    drift = json.loads(capsys.readouterr().out)
    assert drift["n"] == 12 and drift["replay_mismatch"]["within_version_conflicts"] == 0


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (["route", "--rules", "x.yaml", "--router", "y"], "exactly one of --rules"),
        (["route", "--router", "/nonexistent/bundle", "--text", "hi"], "not a router bundle"),
        (
            ["replay", "--log", "/nonexistent.sqlite", "--router", "/nonexistent"],
            "no such decision log",
        ),
        (["drift", "--log", "/nonexistent.sqlite"], "no such decision log"),
    ],
)
def test_usage_errors_exit_2_without_traceback(capsys, args, match):
    assert main(args) == 2
    err = capsys.readouterr().err
    assert match in err and "Traceback" not in err


def test_bad_batch_line_names_the_line(parts, tmp_path, capsys):
    root = parts
    bundle = tmp_path / "router"
    main(
        [
            "router",
            "build",
            "--rules",
            str(EXAMPLE),
            "--model",
            str(root / "model"),
            "--policy",
            str(root / "policy.json"),
            "--name",
            "s",
            "--version",
            "1",
            "--out",
            str(bundle),
        ]
    )
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "ok", "facts": {}}\n{"text": "x", "facts": {"amount": "lots"}}\n')
    assert main(["route", "--router", str(bundle), "--input", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "line 2" in err and "fact 'amount'" in err
