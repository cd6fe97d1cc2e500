"""``hybridroute train``: local end to end on small files, llm/cascade configuration, errors."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from hybridroute.classifiers import load_classifier
from hybridroute.cli import main
from hybridroute.datasets import load_dataset
from hybridroute.evaluation import evaluate_classifier

_INTENTS = {
    "refund": ["refund", "money back", "reimburse me"],
    "shipping": ["delivery", "parcel", "courier"],
    "password": ["password", "log in", "locked out"],
}
_FILLER = "please i need help with my order today thanks hello can you tell me about".split()


def _rows(splits: dict[str, int], seed: int = 0) -> list[dict[str, str]]:
    rng = np.random.default_rng(seed)
    rows = []
    for split, n in splits.items():
        for label, phrases in _INTENTS.items():
            for _ in range(n):
                words = list(rng.choice(_FILLER, size=4))
                words.insert(int(rng.integers(0, 5)), str(rng.choice(phrases)))
                rows.append({"text": " ".join(words), "label": label, "split": split})
    return rows


def _write_csv(path: Path, rows: list[dict[str, str]], split: bool = True) -> Path:
    fields = ["text", "label", "split"] if split else ["text", "label"]
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=fields, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    return path


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("data")
    rows = _rows({"train": 20, "test": 8})
    jsonl = d / "set.jsonl"
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return {
        "csv": _write_csv(d / "set.csv", rows),
        "jsonl": jsonl,
        "val": _write_csv(d / "val.csv", _rows({"train": 20, "validation": 6, "test": 8})),
        "nosplit": _write_csv(d / "nosplit.csv", _rows({"train": 20}), split=False),
        "tiny": _write_csv(d / "tiny.csv", _rows({"train": 1})[:2], split=False),
        "notrain": _write_csv(d / "notrain.csv", _rows({"test": 5})),
    }


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def run_json(capsys, *args: str) -> dict:
    code, out, err = run(capsys, *args, "--json")
    assert code == 0, err
    return json.loads(out)


# --------------------------------------------------------------------------- local


@pytest.mark.parametrize("kind", ["csv", "jsonl"])
def test_local_on_a_file_with_splits(files, tmp_path, capsys, kind) -> None:
    out = tmp_path / "model"
    report = run_json(
        capsys, "train", "--dataset", f"{kind}:{files[kind]}", "--out", str(out), "--cs", "1,10"
    )
    assert report["classifier"] == "local"
    # a set without a calibration split: 20% of train carved out (calibrate's default)
    carved = load_dataset(f"{kind}:{files[kind]}").with_calibration_split(0.2, seed=0)
    assert report["n_train"] == carved.splits["train"] == 48
    assert report["calibration_carved"] == {"fraction": 0.2, "seed": 0, "n_rows": 12}
    assert report["n_test"] == 24
    assert report["evaluated"] is True
    assert report["test_accuracy"] >= 0.9
    assert 0.0 <= report["test_macro_f1"] <= 1.0
    assert report["train_seconds"] > 0
    assert report["validation"]["source"] == "carved from train"
    assert report["C"] in (1.0, 10.0)
    # The saved model loads, scores as reported, and records what it was trained on.
    clf = load_classifier(out)
    train = carved.split("train")
    assert clf.training_fingerprint_ == train.fingerprint == report["training_fingerprint"]
    assert clf.manifest_["metadata"]["test"]["test_accuracy"] == report["test_accuracy"]
    test = load_dataset(f"{kind}:{files[kind]}").split("test")
    accuracy = np.mean(np.array(clf.predict(test.texts)) == np.array(test.y))
    assert accuracy == pytest.approx(report["test_accuracy"])
    # the numbers `hybridroute evaluate` gives for the same model on the same split
    ev = evaluate_classifier(clf, test.texts, test.y, n_boot=10)
    assert (report["test_accuracy"], report["test_macro_f1"]) == (ev["accuracy"], ev["macro_f1"])


def test_text_report(files, tmp_path, capsys) -> None:
    code, out, err = run(
        capsys, "train", "--dataset", f"csv:{files['csv']}", "--out", str(tmp_path / "m")
    )
    assert code == 0, err
    assert "trained local on set: 48 rows, 3 labels" in out
    assert "calibration split carved from train and not trained on: 12 rows" in out
    assert "(its defaults)" in out
    assert "chosen on" in out and "carved from train" in out
    assert "test: accuracy" in out and "macro-F1" in out and "on 24 rows" in out
    assert f"saved to {tmp_path / 'm'}" in out


def test_validation_split_is_used_for_c(files, tmp_path, capsys) -> None:
    report = run_json(
        capsys,
        "train",
        "--dataset",
        f"csv:{files['val']}",
        "--out",
        str(tmp_path / "m"),
        "--cs",
        "1,10",
    )
    assert report["validation"]["source"] == "validation split"
    assert report["validation"]["n_rows"] == 18
    assert report["n_train"] == 48  # validation and calibration rows are not trained on


def test_single_c_skips_the_search(files, tmp_path, capsys) -> None:
    report = run_json(
        capsys,
        "train",
        "--dataset",
        f"csv:{files['csv']}",
        "--out",
        str(tmp_path / "m"),
        "--cs",
        "10",
    )
    assert report["C"] == 10.0
    assert report["validation"]["n_rows"] == 0


def test_a_file_without_splits_is_split_and_the_report_says_so(files, tmp_path, capsys) -> None:
    """60 rows, no split column: 36 train / 12 calibration / 12 test when loaded; the
    calibration and test rows are not trained on, the test rows are scored."""
    args = ["train", "--dataset", f"csv:{files['nosplit']}", "--cs", "10"]
    report = run_json(capsys, *args, "--out", str(tmp_path / "m"))
    ds = load_dataset(f"csv:{files['nosplit']}")
    assert ds.splits == {"train": 36, "calibration": 12, "test": 12}
    assert report["n_train"] == 36 and report["n_test"] == 12 and report["evaluated"]
    assert "calibration_carved" not in report  # the file's calibration split is used as is
    assert report["training_fingerprint"] == ds.split("train").fingerprint
    (note,) = report["dataset_notes"]
    assert "no 'split' column" in note
    code, out, err = run(capsys, *args, "--out", str(tmp_path / "n"))
    assert code == 0, err
    assert "note: nosplit.csv has no 'split' column" in out


def test_a_set_too_small_to_split_trains_on_every_row(files, tmp_path, capsys) -> None:
    report = run_json(
        capsys, "train", "--dataset", f"csv:{files['tiny']}", "--cs", "10",
        "--out", str(tmp_path / "m"),
    )  # fmt: skip
    assert report["n_train"] == 2
    assert report["test_accuracy"] is None and report["n_test"] == 0


def test_calibration_fraction_zero_trains_on_all_of_train(files, tmp_path, capsys) -> None:
    report = run_json(
        capsys, "train", "--dataset", f"csv:{files['csv']}", "--cs", "10",
        "--calibration-fraction", "0", "--out", str(tmp_path / "m"),
    )  # fmt: skip
    assert report["n_train"] == 60 and "calibration_carved" not in report


@pytest.mark.parametrize(
    ("given", "expected"), [(None, "oos"), ("none", None), ("refund", "refund")]
)
def test_the_out_of_scope_label_of_a_file(tmp_path, capsys, given, expected) -> None:
    rows = _rows({"train": 10, "test": 4}) + [
        {"text": f"what is the weather {i}", "label": "oos", "split": "train"} for i in range(8)
    ]
    path = _write_csv(tmp_path / "o.csv", rows)
    extra = [] if given is None else ["--oos-label", given]
    report = run_json(
        capsys, "train", "--dataset", f"csv:{path}", "--cs", "10", *extra,
        "--out", str(tmp_path / "m"),
    )  # fmt: skip
    assert report["oos_label"] == expected


def test_same_seed_same_bytes(files, tmp_path, capsys) -> None:
    args = ["train", "--dataset", f"csv:{files['csv']}", "--cs", "1,10", "--seed", "5"]
    assert run(capsys, *args, "--out", str(tmp_path / "a"))[0] == 0
    assert run(capsys, *args, "--out", str(tmp_path / "b"))[0] == 0
    for name in ("arrays.npz", "vocabulary.json"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


def test_calibration_split_is_carved_and_not_trained_on(files, tmp_path, capsys) -> None:
    report = run_json(
        capsys,
        "train",
        "--dataset",
        f"csv:{files['csv']}",
        "--out",
        str(tmp_path / "m"),
        "--cs",
        "10",
        "--calibration-fraction",
        "0.25",
        "--seed",
        "3",
    )
    carved = load_dataset(f"csv:{files['csv']}").with_calibration_split(0.25, seed=3)
    assert report["n_train"] == carved.splits["train"] < 60
    assert report["training_fingerprint"] == carved.split("train").fingerprint
    meta = load_classifier(tmp_path / "m").manifest_["metadata"]
    assert meta["calibration_carved"]["n_rows"] == carved.splits["calibration"]


def test_existing_out_needs_force(files, tmp_path, capsys) -> None:
    out = tmp_path / "m"
    args = ["train", "--dataset", f"csv:{files['csv']}", "--cs", "10", "--out", str(out)]
    assert run(capsys, *args)[0] == 0
    code, _, err = run(capsys, *args)
    assert code == 2
    assert "exists and is not empty" in err and "--force" in err and str(out) in err
    assert run(capsys, *args, "--force")[0] == 0


def test_report_names_the_saved_model_fingerprint(files, tmp_path, capsys) -> None:
    out = tmp_path / "model"
    report = run_json(
        capsys, "train", "--dataset", f"csv:{files['csv']}", "--out", str(out), "--cs", "1"
    )
    manifest = json.loads((out / "manifest.json").read_text())
    assert report["model_fingerprint"] == manifest["fingerprint"]
    assert report["signed"] is False and "signature" not in manifest
    assert load_classifier(out).fingerprint() == manifest["fingerprint"]


@pytest.mark.parametrize("key", [None, "r" * 32])
def test_training_twice_gives_byte_identical_directories(files, tmp_path, capsys, monkeypatch, key):
    if key is not None:
        monkeypatch.setenv("HYBRIDROUTE_SIGNING_KEY", key)
    dirs = []
    for name in ("a", "b"):
        out = tmp_path / name
        code, _, err = run(
            capsys, "train", "--dataset", f"csv:{files['val']}", "--out", str(out), "--cs", "1,10"
        )
        assert code == 0, err
        dirs.append(out)
    names = sorted(p.name for p in dirs[0].iterdir())
    assert names == sorted(p.name for p in dirs[1].iterdir())
    for name in names:
        assert (dirs[0] / name).read_bytes() == (dirs[1] / name).read_bytes(), name


def test_train_signs_with_a_key_set(files, tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("HYBRIDROUTE_SIGNING_KEY", "t" * 32)
    out = tmp_path / "model"
    code, text, err = run(
        capsys, "train", "--dataset", f"csv:{files['csv']}", "--out", str(out), "--cs", "1"
    )
    assert code == 0, err
    assert ", signed)" in text
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["signature"]["algorithm"] == "hmac-sha256"
    assert "t" * 32 not in (out / "manifest.json").read_text()


# --------------------------------------------------------------------------- llm, cascade


def test_llm_is_configured_without_requests(files, tmp_path, capsys) -> None:
    out = tmp_path / "llm"
    report = run_json(
        capsys,
        "train",
        "--dataset",
        f"csv:{files['csv']}",
        "--classifier",
        "llm",
        "--model",
        "openai/stand-in",
        "--api-base",
        "http://127.0.0.1:9/v1",
        "--out",
        str(out),
    )
    assert report["classifier"] == "llm"
    assert report["evaluated"] is False
    assert report["test_accuracy"] is None
    assert report["n_test"] == 24
    clf = load_classifier(out)
    assert clf.kind == "llm"
    assert sorted(clf.classes_) == ["password", "refund", "shipping"]


def test_llm_server_examples_and_temperature_reach_the_classifier(files, tmp_path, capsys):
    out = tmp_path / "llm"
    run_json(
        capsys,
        "train",
        "--dataset",
        f"csv:{files['csv']}",
        "--classifier",
        "llm",
        "--model",
        "openai/smol",
        "--api-base",
        "http://127.0.0.1:9/v1",
        "--server",
        "llama_cpp",
        "--similar-examples",
        "3",
        "--temperature",
        "0",
        "--out",
        str(out),
    )
    clf = load_classifier(out)
    assert (clf.server, clf.n_similar_examples, clf.temperature) == ("llama_cpp", 3, 0.0)


def test_cascade_saves_both_stages(files, tmp_path, capsys) -> None:
    out = tmp_path / "cascade"
    report = run_json(
        capsys,
        "train",
        "--dataset",
        f"csv:{files['csv']}",
        "--classifier",
        "cascade",
        "--model",
        "openai/stand-in",
        "--api-base",
        "http://127.0.0.1:9/v1",
        "--escalate-below",
        "0.5",
        "--cs",
        "10",
        "--out",
        str(out),
    )
    assert report["classifier"] == "cascade"
    assert report["escalate_below"] == 0.5
    clf = load_classifier(out)
    assert clf.kind == "cascade"
    assert clf.local.kind == "local" and clf.llm.kind == "llm"


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--classifier", "cascade", "--model", "openai/x"], "needs --escalate-below"),
        (["--classifier", "llm"], "need --model"),
        (
            ["--classifier", "llm", "--model", "m", "--mode", "xml"],
            "--classifier llm: unknown mode",
        ),
        (["--classifier", "llm", "--model", "m", "--timeout", "0"], "--classifier llm: Retry"),
        (
            ["--classifier", "cascade", "--model", "m", "--escalate-below", "0.5", "--mode", "x"],
            "--classifier llm: unknown mode 'x'",
        ),
        (["--classifier", "cascade", "--escalate-below", "0.5"], "need --model"),
        (
            ["--classifier", "llm", "--model", "m", "--server", "vllm-ish"],
            "--classifier llm: unknown server 'vllm-ish'",
        ),
        (
            ["--classifier", "llm", "--model", "m", "--similar-examples", "-1"],
            "--classifier llm: n_similar_examples must be an integer >= 0",
        ),
        (["--cs", "1,abc"], "expected comma-separated numbers"),
        (["--cs", "0"], "positive numbers"),
        (["--calibration-fraction", "1.5"], "must be in [0, 1)"),
        (["--classifier", "nope"], "nope"),
    ],
)
def test_option_errors(files, tmp_path, capsys, extra, message) -> None:
    code, _, err = run(
        capsys, "train", "--dataset", f"csv:{files['csv']}", "--out", str(tmp_path / "m"), *extra
    )
    assert code == 2
    assert message in err
    assert "Traceback" not in err
    assert not (tmp_path / "m").exists()


@pytest.mark.parametrize(
    ("dataset", "extra", "message"),
    [
        ("notrain", [], "has no 'train' split"),
        ("tiny", ["--calibration-fraction", "0.2"], "has no splits"),
        ("nosplit", ["--calibration-fraction", "0.2"], "already has a calibration split"),
    ],
)
def test_dataset_errors(files, tmp_path, capsys, dataset, extra, message) -> None:
    code, _, err = run(
        capsys,
        "train",
        "--dataset",
        f"csv:{files[dataset]}",
        "--out",
        str(tmp_path / "m"),
        *extra,
    )
    assert code == 2
    assert message in err
    assert err.count("\n") == 1  # one line


def test_missing_file_is_a_user_error(tmp_path, capsys) -> None:
    code, _, err = run(
        capsys, "train", "--dataset", f"csv:{tmp_path / 'none.csv'}", "--out", str(tmp_path / "m")
    )
    assert code == 2
    assert "none.csv" in err


def test_option_that_does_not_apply(files, tmp_path, capsys) -> None:
    code, _, err = run(
        capsys,
        "train",
        "--dataset",
        f"csv:{files['csv']}",
        "--oos",
        "drop",
        "--out",
        str(tmp_path / "m"),
    )
    assert code == 2
    assert "oos" in err


def test_llm_evaluate_scores_against_a_stand_in(files, tmp_path, capsys) -> None:
    """--evaluate scores the LLM on the test split; an abstention counts as wrong."""
    from hybridroute.testing import LabelMapPolicy, StandInLLM

    test = load_dataset(f"csv:{files['csv']}").split("test")
    answers = dict(zip(test.texts, test.y, strict=True))
    texts = sorted(answers)
    for text in texts[:2]:
        answers[text] = "refund" if answers[text] != "refund" else "shipping"  # wrong
    for text in texts[2:4]:
        answers[text] = "not_a_label"  # out of set, also after the repair: abstention
    predicted = [answers[t] for t in test.texts]
    expected = np.mean([p == g for p, g in zip(predicted, test.y, strict=True)])
    with StandInLLM(LabelMapPolicy(answers), labels=sorted(_INTENTS)) as server:
        report = run_json(
            capsys,
            "train",
            "--dataset",
            f"csv:{files['csv']}",
            "--classifier",
            "llm",
            "--model",
            "openai/stand-in",
            "--api-base",
            server.api_base,
            "--evaluate",
            "--out",
            str(tmp_path / "llm"),
        )
    assert report["evaluated"] is True
    assert report["test_abstained"] == sum(p == "not_a_label" for p in predicted)
    assert report["test_accuracy"] == pytest.approx(expected)
    assert report["test_accuracy"] < 1.0


# ------------------------------------------------------------- own data: train, then calibrate


@pytest.mark.parametrize("kind", ["nosplit", "csv"])  # no split column; only train / test
def test_train_then_calibrate_just_works_on_a_file_of_your_own(files, tmp_path, capsys, kind):
    """Issue 29 (the own-data path): with the defaults of both commands, the calibration
    rows `calibrate` uses are rows `train` left out, whatever splits the file has."""
    ref = f"csv:{files[kind]}"
    report = run_json(capsys, "train", "--dataset", ref, "--cs", "10", "--out", str(tmp_path / "m"))
    code, out, err = run(
        capsys, "calibrate", "--dataset", ref, "--model", str(tmp_path / "m"),
        "--target", "0.8", "--delta", "0.2", "--out", str(tmp_path / "policy.json"),
    )  # fmt: skip
    assert code == 0, err
    assert "policy written to" in out
    n_cal = 12 if kind == "nosplit" else report["calibration_carved"]["n_rows"]
    assert f"calibration rows {n_cal} of split 'calibration'" in out


def test_calibrate_refuses_a_model_trained_on_its_calibration_rows(files, tmp_path, capsys):
    ref = f"csv:{files['csv']}"
    run_json(
        capsys, "train", "--dataset", ref, "--cs", "10", "--calibration-fraction", "0",
        "--out", str(tmp_path / "m"),
    )  # fmt: skip
    code, _, err = run(
        capsys, "calibrate", "--dataset", ref, "--model", str(tmp_path / "m"),
        "--out", str(tmp_path / "policy.json"),
    )  # fmt: skip
    assert code == 2 and "train" in err
