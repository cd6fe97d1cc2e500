"""``hybridroute calibrate``: every objective writes a loadable policy; clean errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hybridroute.calibration import Policy
from hybridroute.cli import main


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    from hybridroute.classifiers import LocalClassifier
    from hybridroute.datasets import load_dataset

    train = load_dataset("support-tickets").split("train")
    path = tmp_path_factory.mktemp("model") / "clf"
    LocalClassifier(Cs=(10.0,)).fit(train.texts, train.y).save(
        path, training_fingerprint=train.fingerprint
    )
    return path


def run(model_dir: Path, out: Path, *extra: str, capsys=None) -> tuple[int, dict | str]:
    args = [
        "calibrate",
        "--dataset",
        "support-tickets",
        "--model",
        str(model_dir),
        "--out",
        str(out),
        *extra,
    ]
    code = main(args)
    if capsys is None:
        return code, ""
    captured = capsys.readouterr()
    if "--json" in extra and code == 0:
        return code, json.loads(captured.out)
    return code, captured.out + captured.err


def test_precision_objective_json(model_dir, tmp_path, capsys) -> None:
    out = tmp_path / "policy.json"
    code, s = run(
        model_dir,
        out,
        "--objective",
        "precision",
        "--target",
        "0.8",
        "--delta",
        "0.1",
        "--json",
        capsys=capsys,
    )
    assert code == 0
    assert s["certified"] is True and s["bound"] >= 0.8
    assert s["threshold"] is not None and 0 < s["expected_coverage"] <= 1
    assert s["calibration_size"] > 100
    pol = Policy.load(out)
    prov = pol.provenance
    assert prov["split_seed"] == 0 and len(prov["dataset_fingerprint"]) >= 12
    assert pol.calibration_data["out_of_scope_share"] > 0
    assert pol.thresholds["auto"] == s["threshold"]


def test_same_inputs_give_byte_identical_policy(model_dir, tmp_path) -> None:
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    assert run(model_dir, a, "--target", "0.8", "--delta", "0.1")[0] == 0
    assert run(model_dir, b, "--target", "0.8", "--delta", "0.1")[0] == 0
    assert a.read_bytes() == b.read_bytes()


@pytest.mark.parametrize(
    "extra",
    [
        ("--objective", "empirical", "--target", "0.85"),
        ("--objective", "coverage", "--target", "0.7"),
        ("--objective", "cost", "--cost-misroute", "20", "--cost-ask-user", "1"),
        ("--objective", "cost", "--no-ask"),
        ("--objective", "three-way", "--target", "0.85", "--ask-target", "0.6"),
        ("--objective", "oos", "--target", "0.8", "--precision-target", "0.8", "--delta", "0.1"),
        ("--calibrator", "isotonic", "--target", "0.8", "--delta", "0.1", "--margin"),
        ("--calibrator", "none", "--target", "0.8", "--per-class"),
        ("--objective", "coverage", "--target", "0.7", "--per-class"),
        (
            "--target",
            "0.8",
            "--evidence",
            "src/hybridroute/calibration/data/support_evidence_labels.jsonl",
        ),
    ],
)
def test_objectives_and_options(model_dir, tmp_path, capsys, extra) -> None:
    out = tmp_path / "p.json"
    code, text = run(model_dir, out, *extra, capsys=capsys)
    assert code == 0, text
    assert "calibration rows" in text and "certified" in text
    pol = Policy.load(out)
    assert pol.classes
    if "--evidence" in extra:
        assert set(pol.evidence_thresholds) == {"bm25", "char_tfidf"}
    if "oos" in extra:
        assert pol.thresholds["oos"]["score"] == "label_probability"
        # the delta asked for, and how it was split between the two certificates
        assert "recall target 0.8000" in text and "delta 0.1000 split: 0.0500 each" in text
    if "three-way" in extra:
        assert "ask-zone target 0.6000" in text and "split: 0.0250 each" in text


def test_uncertifiable_target_says_so(model_dir, tmp_path, capsys) -> None:
    out = tmp_path / "p.json"
    code, text = run(model_dir, out, "--target", "0.999", "--delta", "0.01", capsys=capsys)
    assert code == 0
    assert "certified        NO" in text and "nothing is auto-routed" in text
    assert "would need" in text
    assert Policy.load(out).thresholds["auto"] is None


@pytest.mark.parametrize(
    "extra,match",
    [
        (("--target", "1.5"), "--target"),
        (("--delta", "0"), "--delta"),
        (("--objective", "three-way", "--ask-target", "1.2"), "--ask-target"),
        (("--objective", "oos", "--precision-target", "0"), "--precision-target"),
        (("--calibrator-fraction", "1"), "--calibrator-fraction"),
        (("--objective", "cost", "--per-class"), "--per-class"),
    ],
)
def test_bad_options_exit_2(model_dir, tmp_path, capsys, extra, match) -> None:
    code, text = run(model_dir, tmp_path / "p.json", *extra, capsys=capsys)
    assert code == 2 and match in text


def test_missing_model_is_one_line_exit_2(tmp_path, capsys) -> None:
    code, text = run(tmp_path / "nope", tmp_path / "p.json", capsys=capsys)
    assert code == 2
    assert text.startswith("error: ") and text.count("\n") == 1


def test_model_trained_on_the_calibration_rows_is_refused(tmp_path, capsys) -> None:
    from hybridroute.classifiers import LocalClassifier

    rows = [("refund please", "refund"), ("where is my parcel", "track")] * 30
    csv = tmp_path / "set.csv"
    csv.write_text(
        "text,label,split\n"
        + "".join(f"{t} {i},{lab},train\n" for i, (t, lab) in enumerate(rows))
        + "refund now,refund,test\nparcel late,track,test\n"
    )
    from hybridroute.datasets import load_dataset

    train = load_dataset(str(csv)).split("train")
    model = tmp_path / "m"
    LocalClassifier(Cs=(1.0,)).fit(train.texts, train.y).save(
        model, training_fingerprint=train.fingerprint
    )
    code = main(
        [
            "calibrate",
            "--dataset",
            str(csv),
            "--model",
            str(model),
            "--out",
            str(tmp_path / "p.json"),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and "whole train split" in err


def test_named_split(model_dir, tmp_path, capsys) -> None:
    out = tmp_path / "p.json"
    code, _ = run(model_dir, out, "--split", "test", "--target", "0.8", "--json", capsys=capsys)
    assert code == 0 and Policy.load(out).provenance["calibration_split"] == "test"
    code, text = run(model_dir, out, "--split", "val", capsys=capsys)
    assert code == 2 and "no split 'val'" in text


@pytest.mark.parametrize(
    "extra,kwargs",
    [
        (("--target", "0.8", "--delta", "0.1"), {"target": 0.8, "delta": 0.1}),
        (
            (
                "--objective",
                "oos",
                "--target",
                "0.8",
                "--precision-target",
                "0.8",
                "--margin",
                "--per-class",
                "--calibrator",
                "isotonic",
                "--seed",
                "3",
                "--fallback",
                "ask_user",
            ),
            {
                "objective": "oos",
                "target": 0.8,
                "precision_target": 0.8,
                "margin": True,
                "per_class": True,
                "calibrator": "isotonic",
                "seed": 3,
                "fallback": "ask_user",
            },
        ),
        (
            ("--objective", "cost", "--no-ask", "--cost-misroute", "7"),
            {"objective": "cost", "costs": {"misroute": 7.0, "ask_user": None}},
        ),
    ],
)
def test_cli_writes_exactly_what_fit_policy_builds(model_dir, tmp_path, extra, kwargs) -> None:
    from hybridroute.calibration import fit_policy
    from hybridroute.classifiers import load_classifier
    from hybridroute.datasets import load_dataset

    out = tmp_path / "p.json"
    assert run(model_dir, out, *extra)[0] == 0
    ds = load_dataset("support-tickets")
    cal = ds.split("calibration")
    clf = load_classifier(model_dir)
    pol = fit_policy(
        clf.predict_proba(list(cal.texts)),
        [str(v) for v in cal.y],
        [str(c) for c in clf.classes_],
        oos_label=ds.oos_label,
        provenance={
            "command": "hybridroute calibrate",
            "dataset": "support-tickets",
            "dataset_name": ds.name,
            "dataset_fingerprint": ds.fingerprint,
            "calibration_split": "calibration",
            "calibration_split_fingerprint": cal.fingerprint,
            "calibration_split_carved": False,
            "calibration_fraction": None,
            "model_kind": clf.kind,
            "model_training_fingerprint": clf.training_fingerprint_,
        },
        model_fingerprint=clf.fingerprint(),
        **kwargs,
    )
    assert out.read_text(encoding="utf-8") == pol.to_json()
    assert Policy.load(out).model_fingerprint == clf.manifest_["fingerprint"]


def test_oos_objective_on_a_set_without_out_of_scope_rows(tmp_path, capsys) -> None:
    from hybridroute.classifiers import LocalClassifier
    from hybridroute.datasets import load_dataset

    rows = [("refund please", "refund"), ("where is my parcel", "track")] * 20
    csv = tmp_path / "set.csv"
    csv.write_text(
        "text,label,split\n"
        + "".join(f"{t} {i},{lab},train\n" for i, (t, lab) in enumerate(rows))
        + "".join(f"{t} again {i},{lab},calibration\n" for i, (t, lab) in enumerate(rows))
    )
    train = load_dataset(str(csv)).split("train")
    model = tmp_path / "m"
    LocalClassifier(Cs=(1.0,)).fit(train.texts, train.y).save(
        model, training_fingerprint=train.fingerprint
    )
    code = main(
        [
            "calibrate",
            "--dataset",
            str(csv),
            "--model",
            str(model),
            "--out",
            str(tmp_path / "p.json"),
            "--objective",
            "oos",
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and "no out-of-scope rows in its calibration split" in err


def test_policy_records_the_model_it_was_fitted_on(model_dir, tmp_path, capsys) -> None:
    from hybridroute.classifiers._persistence import classifier_fingerprint

    out = tmp_path / "p.json"
    code, s = run(model_dir, out, "--target", "0.8", "--delta", "0.1", "--json", capsys=capsys)
    assert code == 0
    fp = classifier_fingerprint(model_dir)
    assert s["model_fingerprint"] == fp and s["signed"] is False
    assert Policy.load(out).model_fingerprint == fp
    assert json.loads((model_dir / "manifest.json").read_text())["fingerprint"] == fp


def test_signed_model_needs_the_key_and_signs_the_policy(model_dir, tmp_path, capsys, monkeypatch):
    from hybridroute.classifiers import load_classifier

    key = "c" * 32
    monkeypatch.setenv("HYBRIDROUTE_SIGNING_KEY", key)
    out = tmp_path / "p.json"
    # an unsigned model is refused while a key is set (stripping a signature must not pass)
    code, text = run(model_dir, out, capsys=capsys)
    assert code == 2 and "is not signed" in text and str(model_dir) in text
    signed_model = load_classifier_unsigned(model_dir, monkeypatch).save(tmp_path / "signed")
    monkeypatch.setenv("HYBRIDROUTE_SIGNING_KEY", key)
    code, s = run(signed_model, out, "--target", "0.8", "--delta", "0.1", "--json", capsys=capsys)
    assert code == 0 and s["signed"] is True
    assert json.loads(out.read_text())["signature"]["algorithm"] == "hmac-sha256"
    assert Policy.load(out).model_fingerprint == load_classifier(signed_model).fingerprint()
    monkeypatch.delenv("HYBRIDROUTE_SIGNING_KEY")
    code, text = run(signed_model, tmp_path / "q.json", capsys=capsys)
    assert code == 2 and "HYBRIDROUTE_SIGNING_KEY is not set" in text


def load_classifier_unsigned(path, monkeypatch):
    """Load an unsigned model with the key unset (then it can be saved again, signed)."""
    from hybridroute.classifiers import load_classifier

    with monkeypatch.context() as m:
        m.delenv("HYBRIDROUTE_SIGNING_KEY", raising=False)
        return load_classifier(path)


@pytest.mark.parametrize(
    ("extra", "calibrator"),
    [
        ((), "temperature"),
        (("--calibrator-fraction", "0.5"), "temperature"),
        (("--calibrator", "isotonic", "--calibrator-fraction", "0.4"), "isotonic"),
        (("--calibrator", "none"), None),
    ],
)
def test_the_summary_says_which_rows_fit_what(model_dir, tmp_path, capsys, extra, calibrator):
    from hybridroute.datasets import load_dataset

    n_rows = len(load_dataset("support-tickets").split("calibration"))
    code, s = run(model_dir, tmp_path / "p.json", *extra, "--json", capsys=capsys)
    assert code == 0
    assert s["calibrator_size"] + s["threshold_size"] == n_rows
    assert s["calibration_size"] == s["threshold_size"]  # the certificate's rows
    assert s["calibration_split"] == "calibration"
    code, text = run(model_dir, tmp_path / "q.json", *extra, capsys=capsys)
    line = next(x for x in text.splitlines() if x.startswith("calibration rows"))
    head = f"calibration rows {n_rows} of split 'calibration': "
    if calibrator is None:
        assert line == head + f"all {n_rows} fit the thresholds (no calibrator fitted)"
    else:
        assert line == head + (
            f"{s['calibrator_size']} fit the {calibrator} calibrator, "
            f"the other {s['threshold_size']} the thresholds"
        )
    # every other count on the page names what it counts
    cover = next(x for x in text.splitlines() if x.startswith("expected coverage"))
    assert cover.endswith(f"(share of the {s['threshold_size']} threshold rows auto-routed)")
