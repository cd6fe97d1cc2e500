"""``hybridroute router build --redact-pii KINDS``: the bundle redacts; route, log, replay agree."""

from __future__ import annotations

import json

import pytest

from hybridroute.cli import main

from .conftest import EXAMPLE, fitted_policy

TEXT = "Where is my order? Card 4111-1111-1111-1111, mail jo@example.com, call 555-123-4567."


@pytest.fixture(scope="module")
def parts(tmp_path_factory):
    from hybridroute.calibration import CertifiedPrecisionThreshold
    from hybridroute.classifiers import LocalClassifier
    from hybridroute.classifiers._persistence import classifier_fingerprint
    from hybridroute.datasets import load_dataset

    root = tmp_path_factory.mktemp("cli-pii")
    ds = load_dataset("support-tickets")
    clf = LocalClassifier(Cs=(10.0,)).fit(ds.split("train").texts, ds.split("train").y)
    clf.save(root / "model")
    policy = fitted_policy(clf, ds, CertifiedPrecisionThreshold(0.85, 0.1))
    policy.with_model_fingerprint(classifier_fingerprint(root / "model")).save(root / "policy.json")
    return root


def build(root, out, *extra):
    return main(
        [
            "router",
            "build",
            "--rules",
            str(EXAMPLE),
            "--model",
            str(root / "model"),
            "--policy",
            str(root / "policy.json"),
            *extra,
            "--name",
            "s",
            "--version",
            "1",
            "--out",
            str(out),
        ]
    )


@pytest.mark.parametrize(
    ("extra", "kinds"),
    [
        (("--redact-pii", "all"), ["email", "iban", "card", "phone"]),
        (("--redact-pii", "phone,email"), ["email", "phone"]),
        (("--redact-pii=card",), ["card"]),
        ((), None),
    ],
)
def test_build_records_the_kinds(parts, tmp_path, capsys, extra, kinds):
    out = tmp_path / "b"
    assert build(parts, out, *extra) == 0
    said = capsys.readouterr().out
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest.get("redact_pii") == kinds
    assert ("redacts " + ", ".join(kinds)) in said if kinds else "redacts" not in said


@pytest.mark.parametrize(
    ("value", "match"),
    [
        ("ssn", "--redact-pii: 'ssn' is not a kind"),
        ("email,passport", "'passport' is not a kind"),
        ("--name", "'--name' is not a kind"),
    ],
)
def test_an_unknown_kind_exits_2_naming_the_option(parts, tmp_path, capsys, value, match):
    assert build(parts, tmp_path / "b", "--redact-pii", value) == 2
    err = capsys.readouterr().err
    assert match in err and "Traceback" not in err
    assert not (tmp_path / "b").exists()


def test_route_log_and_replay_through_a_redacting_bundle(parts, tmp_path, capsys):
    bundle = tmp_path / "b"
    assert build(parts, bundle, "--redact-pii", "all") == 0
    capsys.readouterr()
    assert main(["route", "--router", str(bundle), "--text", TEXT, "--json"]) == 0
    decision = json.loads(capsys.readouterr().out)
    assert decision["input_snapshot"]["text"] == (
        "Where is my order? Card [CARD], mail [EMAIL], call [PHONE]."
    )
    tickets = tmp_path / "t.jsonl"
    tickets.write_text(
        "".join(
            json.dumps({"id": f"t{i}", "text": f"{TEXT} ({i})", "facts": {}}) + "\n"
            for i in range(5)
        )
    )
    log = tmp_path / "log.sqlite"
    assert main(["route", "--router", str(bundle), "--input", str(tickets), "--log", str(log)]) == 0
    capsys.readouterr()
    raw = b"".join(p.read_bytes() for p in tmp_path.glob("log.sqlite*"))
    for secret in (b"4111", b"jo@example", b"555-123"):
        assert secret not in raw
    assert main(["replay", "--log", str(log), "--router", str(bundle), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["n"] == 5 and report["mismatches"] == 0 and report["unreplayable"] == 0
