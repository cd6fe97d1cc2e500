"""A file set with its own column names and out-of-scope label goes through ``train``,
``calibrate`` and ``evaluate`` with the same options (issue 29: the own-data path)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from hybridroute.cli import main
from hybridroute.datasets import load_dataset

OPTIONS = (
    "--text-column",
    "utterance",
    "--label-column",
    "intent",
    "--split-column",
    "part",
    "--oos-label",
    "unknown",
)


@pytest.fixture(scope="module")
def own_csv(tmp_path_factory) -> Path:
    """The bundled tickets under other column names, out-of-scope rows labelled 'unknown'."""
    ds = load_dataset("support-tickets")
    path = tmp_path_factory.mktemp("own") / "tickets.csv"
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["utterance", "intent", "part"])
        for text, label, split in zip(ds.texts, ds.y, ds.frame["split"], strict=True):
            w.writerow([text, "unknown" if label == ds.oos_label else label, split])
    return path


@pytest.fixture(scope="module")
def model(own_csv, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("model") / "m"
    assert main(["train", "--dataset", f"csv:{own_csv}", "--out", str(out), *OPTIONS]) == 0
    return out


def test_calibrate_and_evaluate_take_the_file_options(own_csv, model, tmp_path, capsys):
    policy = tmp_path / "p.json"
    args = ["calibrate", "--dataset", f"csv:{own_csv}", "--model", str(model)]
    oos = ["--objective", "oos", "--target", "0.8", "--precision-target", "0.9"]
    assert main([*args, "--out", str(policy), *oos, *OPTIONS]) == 0, capsys.readouterr()
    assert "out-of-scope recall target 0.8000" in capsys.readouterr().out
    report = tmp_path / "report"
    code = main(
        [
            "evaluate", "--dataset", f"csv:{own_csv}", "--model", str(model), "--policy",
            str(policy), "--report", str(report), "--no-track", "--json", *OPTIONS,
        ]
    )  # fmt: skip
    out = capsys.readouterr()
    assert code == 0, out.err
    assert json.loads(out.out)["n"] == 273


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        # without the options the file's columns are not found
        ((), "utterance"),
        # the same columns, but the out-of-scope rows not declared: the oos objective refuses
        ((*OPTIONS[:6], "--oos-label", "none"), "out-of-scope"),
    ],
)
def test_calibrate_without_the_training_options_is_refused(
    own_csv, model, tmp_path, capsys, extra, message
):
    code = main(
        [
            "calibrate", "--dataset", f"csv:{own_csv}", "--model", str(model), "--out",
            str(tmp_path / "p.json"), "--objective", "oos", "--target", "0.8", *extra,
        ]
    )  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2
    assert message in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("option", ["--text-column", "--oos-label"])
def test_file_options_are_refused_with_from_log(tmp_path, capsys, option):
    code = main(
        [
            "calibrate", "--from-log", str(tmp_path / "log.sqlite"), "--router",
            str(tmp_path / "r"), "--out", str(tmp_path / "new"), option, "x",
        ]
    )  # fmt: skip
    assert code == 2
    assert option in capsys.readouterr().err
