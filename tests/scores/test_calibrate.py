"""calibrate_scores: fit_policy on a file's rows, the model binding, the hold-out and the
evaluation; calibrate_from_scores: the ``calibrate --scores`` mode."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from hybridroute.calibration import Policy, fit_policy
from hybridroute.exceptions import DatasetError, UserInputError
from hybridroute.scores import calibrate_scores, evaluate_scores, read_scores

CLASSES = ["a", "b", "c"]


def synthetic(n: int, seed: int) -> tuple[np.ndarray, list[str]]:
    """A model that is right about as often as it is confident."""
    rng = np.random.default_rng(seed)
    proba = rng.dirichlet([0.4, 0.4, 0.4], size=n)
    gold = [CLASSES[rng.choice(3, p=row)] for row in proba]
    return proba, gold


def write_scores(
    path: Path, proba: np.ndarray, gold: list[str], header: dict | None = None
) -> Path:
    if path.suffix == ".csv":
        lines = ["id,label," + ",".join(f"score:{c}" for c in CLASSES)]
        lines += [
            f"{path.stem}-{i},{g}," + ",".join(repr(float(v)) for v in row)
            for i, (g, row) in enumerate(zip(gold, proba, strict=True))
        ]
    else:
        lines = [json.dumps(header)] if header else []
        lines += [
            json.dumps({"id": f"{path.stem}-{i}", "label": g, "scores": [float(v) for v in row]})
            for i, (g, row) in enumerate(zip(gold, proba, strict=True))
        ]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("scores")
    cal = write_scores(root / "cal.csv", *synthetic(1200, 1))
    test = write_scores(root / "test.csv", *synthetic(600, 2))
    return cal, test


def test_the_policy_is_fit_policy_on_the_files_rows(files):
    cal, _ = files
    table = read_scores(cal)
    policy, report = calibrate_scores(table, test_fraction=0.0, target=0.9, delta=0.05)
    direct = fit_policy(table.proba(), table.gold, CLASSES, target=0.9, delta=0.05)
    assert policy.thresholds == direct.thresholds and policy.guarantee == direct.guarantee
    assert policy.certified and report["certified"]
    assert report["evaluation"] is None and report["test"]["source"] is None
    prov = policy.provenance
    assert prov["scores_fingerprint"] == table.fingerprint and prov["scores_layout"] == "per_class"


@pytest.mark.parametrize(
    ("given", "header", "source"),
    [
        (None, None, "scores_file"),
        (None, "cd" * 32, "declared"),
        ("ab" * 32, None, "model"),
        ("cd" * 32, "cd" * 32, "model"),
    ],
)
def test_the_policy_is_bound_to_the_model_given_declared_or_the_file(
    tmp_path, given, header, source
):
    proba, gold = synthetic(400, 3)
    head = {"format": "hybridroute.scores", "classes": CLASSES}
    if header:
        head["model_fingerprint"] = header
    table = read_scores(write_scores(tmp_path / "s.jsonl", proba, gold, head))
    policy, report = calibrate_scores(table, model_fingerprint=given, target=0.8, delta=0.1)
    expected = given or header or table.fingerprint
    assert policy.model_fingerprint == expected
    assert report["model_binding"] == {"fingerprint": expected, "source": source}


def test_a_declared_model_that_is_not_the_given_one_is_refused(tmp_path):
    proba, gold = synthetic(100, 3)
    head = {"format": "hybridroute.scores", "classes": CLASSES, "model_fingerprint": "cd" * 32}
    table = read_scores(write_scores(tmp_path / "s.jsonl", proba, gold, head))
    with pytest.raises(DatasetError, match="declares model cdcdcdcdcdcd…, not the model given"):
        calibrate_scores(table, model_fingerprint="ab" * 32)


def test_the_hold_out_is_seeded_disjoint_and_evaluated(files):
    cal, _ = files
    table = read_scores(cal)
    _, first = calibrate_scores(
        table, test_fraction=0.25, seed=7, target=0.85, delta=0.1, n_boot=50
    )
    _, again = calibrate_scores(
        table, test_fraction=0.25, seed=7, target=0.85, delta=0.1, n_boot=50
    )
    _, other = calibrate_scores(
        table, test_fraction=0.25, seed=8, target=0.85, delta=0.1, n_boot=50
    )
    assert first == again and first["evaluation"] != other["evaluation"]
    assert first["test"]["rows"] == 300 and first["calibration_rows"] == 900
    ev = first["evaluation"]
    assert ev["n"] == 300 and 0 < ev["coverage"] <= 1 and ev["selective_precision"] is not None
    assert "items" not in ev and "latency" not in ev


def test_the_evaluation_is_evaluate_classifier_over_the_same_scores(files):
    """One definition per number: the metrics equal those of a classifier giving the scores."""
    from hybridroute.classifiers.adapter import FunctionAdapter
    from hybridroute.evaluation import evaluate_classifier

    cal, test = files
    policy, report = calibrate_scores(
        read_scores(cal), test=read_scores(test), target=0.85, delta=0.1, n_boot=100
    )
    table = read_scores(test)
    rows = {item: i for i, item in enumerate(table.ids)}
    clf = FunctionAdapter(lambda ids: table.scores[[rows[i] for i in ids]], CLASSES).fit()
    direct = evaluate_classifier(clf, list(table.ids), list(table.gold), policy=policy, n_boot=100)
    for key in ("n", "accuracy", "accuracy_ci", "macro_f1", "ece", "aurc", "coverage"):
        assert report["evaluation"][key] == direct[key], key
    assert report["evaluation"]["selective_precision"] == direct["selective_precision"]
    assert evaluate_scores(policy, table, n_boot=100)["coverage"] == direct["coverage"]


@pytest.mark.parametrize(
    ("make_test", "match"),
    [
        (lambda cal, tmp: cal, "the test scores are the calibration scores"),
        (
            lambda cal, tmp: tmp / "other.jsonl",
            "must have the calibration file's classes, in the same order",
        ),
    ],
    ids=["same-file", "other-classes"],
)
def test_test_scores_must_be_other_rows_of_the_same_classes(files, tmp_path, make_test, match):
    cal, _ = files
    head = {"format": "hybridroute.scores", "classes": ["c", "b", "a"]}
    write_scores(tmp_path / "other.jsonl", *synthetic(50, 4), head)
    with pytest.raises(DatasetError, match=match):
        calibrate_scores(read_scores(cal), test=read_scores(make_test(cal, tmp_path)))


def test_top_label_files_refuse_what_needs_every_class(tmp_path):
    proba, gold = synthetic(600, 5)
    top = proba.argmax(axis=1)
    lines = ["label,predicted,confidence"] + [
        f"{g},{CLASSES[t]},{float(row[t])!r}" for g, t, row in zip(gold, top, proba, strict=True)
    ]
    path = tmp_path / "top.csv"
    path.write_text("\n".join(lines) + "\n")
    table = read_scores(path)
    with pytest.raises(DatasetError, match="temperature calibrator rescales every class"):
        calibrate_scores(table, calibrator="temperature")
    with pytest.raises(DatasetError, match="a margin gate needs the runner-up"):
        calibrate_scores(table, margin=True)
    policy, report = calibrate_scores(table, target=0.8, delta=0.1, n_boot=50)
    assert policy.to_dict()["calibrator"]["method"] == "isotonic"
    assert report["layout"] == "top_label" and report["evaluation"]["n"] == 150


def test_too_few_rows_is_a_dataset_error_naming_the_file(tmp_path):
    path = write_scores(tmp_path / "tiny.csv", *synthetic(3, 6))
    with pytest.raises(DatasetError, match=r"tiny\.csv.*too few in-scope calibration rows"):
        calibrate_scores(read_scores(path), test_fraction=0.0, calibrator_fraction=0.3)


# --------------------------------------------------------------------------- the CLI mode


def test_calibrate_from_scores_writes_the_policy_and_prints_the_summary(files, tmp_path, capsys):
    from hybridroute.cli._scores import calibrate_from_scores

    cal, test = files
    out = tmp_path / "policy.json"
    report = calibrate_from_scores(
        scores=cal, test_scores=test, out=out, target=0.85, delta=0.1, objective="precision"
    )
    printed = capsys.readouterr().out
    policy = Policy.load(out)
    assert policy.content_sha256 == report["content_sha256"]
    assert policy.provenance["command"] == "hybridroute calibrate --scores"
    assert f"evaluated on     {test} (n 600)" in printed
    assert "bound to the scores file itself: refit with --model DIR" in printed
    calibrate_from_scores(scores=cal, out=out, as_json=True, target=0.85, delta=0.1)
    doc = json.loads(capsys.readouterr().out)
    assert doc["test"]["source"] == "held_out" and doc["out"] == str(out)


@pytest.mark.parametrize("which", ["scores", "test_scores"])
def test_the_policy_may_not_overwrite_an_input(files, which):
    from hybridroute.cli._scores import calibrate_from_scores

    cal, test = files
    out = cal if which == "scores" else test
    with pytest.raises(UserInputError, match="is also an input"):
        calibrate_from_scores(scores=cal, test_scores=test, out=out)
