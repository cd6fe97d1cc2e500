"""The policy document: policies written by the previous version load and decide as they did,
``hybridroute calibrate`` writes what it wrote before, and a fitted policy is written as it
is, never read back through the loader's checks.

``data/v2/`` holds policies written by main at 87c6b9e (format version 2), before the
techniques became one class each, with the decisions that code made with them
(``decisions.json``; how they were made: ``data/v2/README.md``).
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from hybridroute.calibration import POLICY_FORMAT_VERSION, Policy, fit_policy
from hybridroute.calibration.techniques import TECHNIQUES, CertifiedPrecisionThreshold
from hybridroute.classifiers import RankedLabels
from hybridroute.exceptions import ArtifactError

from .conftest import synthetic_proba
from .test_policy import CONTRADICTIONS, SIGNING_KEY, _rehash, _write

V2 = Path(__file__).parent / "data" / "v2"
RECORD = json.loads((V2 / "decisions.json").read_text(encoding="utf-8"))
NAMES = sorted(RECORD["policies"])


def _digest(value) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()


def _ranked(policy: Policy, rows: np.ndarray, oos: list[float] | None) -> list[dict]:
    """Full and partial rankings (k = 1, 2, 3) through ``apply``, as the record made them."""
    cases = []
    partial = policy.to_dict()["calibrator"]["method"] != "temperature"
    for i, row in enumerate(rows[:6]):
        order = np.argsort(-row, kind="stable")
        for k in (len(row), 1, 2, 3) if partial else (len(row),):
            labels = [policy.classes[j] for j in order[:k]]
            scores = [float(row[j]) for j in order[:k]]
            ext = None if oos is None else oos[i]
            out = policy.apply(
                RankedLabels(labels=tuple(labels), scores=tuple(scores)), oos_score=ext
            )
            cases.append(
                {"labels": labels, "scores": scores, "oos_score": ext, "outcome": out.to_dict()}
            )
    return cases


@pytest.fixture
def signing(monkeypatch):
    def use(name: str) -> None:
        if name == "built_signed":
            monkeypatch.setenv("HYBRIDROUTE_SIGNING_KEY", SIGNING_KEY)
        else:
            monkeypatch.delenv("HYBRIDROUTE_SIGNING_KEY", raising=False)

    return use


@pytest.mark.parametrize("name", NAMES)
def test_a_version_2_policy_loads_and_decides_as_it_did(name, signing) -> None:
    signing(name)
    want = RECORD["policies"][name]
    path = V2 / f"{name}.json"
    policy = Policy.load(path)
    rows = np.asarray(RECORD["rows"][want["rows"]])
    oos = RECORD["oos_scores"] if want["external_oos"] else None
    outcomes = policy.apply_proba(rows, oos_scores=oos)
    assert _digest([o.to_dict() for o in outcomes]) == want["outcomes_sha256"]
    assert _digest(_ranked(policy, rows, oos)) == want["ranked_sha256"]
    calibrated = policy.calibrate(rows).tolist()
    assert hashlib.sha256(json.dumps(calibrated).encode()).hexdigest() == want["calibrated_sha256"]
    assert policy.thresholds == want["thresholds"] and policy.guarantee == want["guarantee"]
    assert policy.certified is want["certified"]
    # read back, it is the very document: same seal, same bytes
    assert policy.content_sha256 == want["content_sha256"]
    assert policy.to_json() == path.read_text(encoding="utf-8")


@pytest.mark.parametrize("case", sorted(CONTRADICTIONS))
def test_a_tampered_version_2_policy_is_refused(case, tmp_path) -> None:
    edit, match = CONTRADICTIONS[case]
    doc = json.loads((V2 / "cli_precision.json").read_text(encoding="utf-8"))
    assert doc["format_version"] == 2
    edit(doc)
    p = tmp_path / "p.json"
    _write(p, _rehash(doc))
    with pytest.raises(ArtifactError, match=match) as info:
        Policy.load(p)
    assert str(p) in str(info.value) and "policy field" in str(info.value)


def test_a_new_policy_is_version_3_with_the_same_fields() -> None:
    old = json.loads((V2 / "cli_precision.json").read_text(encoding="utf-8"))
    new = Policy.load(V2 / "cli_precision.json").with_refit_threshold(
        CertifiedPrecisionThreshold(0.8, 0.1).fit(np.linspace(0, 1, 400), np.ones(400, bool))
    )
    doc = new.to_dict()
    assert POLICY_FORMAT_VERSION == 3 and doc["format_version"] == 3
    assert set(doc) == set(old)
    assert Policy.from_dict(json.loads(new.to_json())) == new


# --------------------------------------------------------------------------- calibrate


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    """The model the version-2 ``calibrate`` policies were fitted with (trained alike)."""
    from hybridroute.classifiers import LocalClassifier, load_classifier
    from hybridroute.datasets import load_dataset

    train = load_dataset("support-tickets").split("train")
    path = tmp_path_factory.mktemp("model") / "clf"
    LocalClassifier(Cs=(10.0,)).fit(train.texts, train.y).save(
        path, training_fingerprint=train.fingerprint
    )
    assert load_classifier(path).fingerprint() == RECORD["model_fingerprint"], (
        "training no longer gives the model the fixtures were fitted with"
    )
    return path


def _calibrate(model: Path, out: Path, args: list[str]) -> dict:
    from hybridroute.cli import main

    code = main(
        [
            "calibrate",
            "--dataset",
            "support-tickets",
            "--model",
            str(model),
            "--out",
            str(out),
            *args,
        ]
    )
    assert code == 0
    return json.loads(out.read_text(encoding="utf-8"))


def _without_version(doc: dict) -> dict:
    return {k: v for k, v in doc.items() if k not in ("format_version", "content_sha256")}


@pytest.mark.parametrize("name", ["cli_precision", "cli_oos_gates", "cli_cost_no_ask"])
def test_calibrate_writes_what_it_wrote_before_but_the_format_version(
    model, tmp_path, name, capsys
) -> None:
    new = _calibrate(model, tmp_path / "p.json", RECORD["cli"][name])
    old = json.loads((V2 / f"{name}.json").read_text(encoding="utf-8"))
    assert (old["format_version"], new["format_version"]) == (2, 3)
    assert _without_version(new) == _without_version(old)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(RECORD["cli"]))
def test_every_calibrate_objective_writes_what_it_wrote_before(model, tmp_path, name, capsys):
    new = _calibrate(model, tmp_path / "p.json", RECORD["cli"][name])
    old = json.loads((V2 / f"{name}.json").read_text(encoding="utf-8"))
    assert _without_version(new) == _without_version(old)


def test_calibrate_refuses_rows_the_model_was_trained_on(model, tmp_path, capsys) -> None:
    from hybridroute.cli import main

    # the model was trained on the train split: calibrating on it is a leak (the library's
    # check, which the command line calls before the model scores a row)
    out = tmp_path / "p.json"
    args = ["calibrate", "--dataset", "support-tickets", "--model", str(model), "--out", str(out)]
    assert main([*args, "--split", "train"]) == 2
    err = capsys.readouterr().err
    assert "trained on the train split of support-tickets" in err and not out.exists()


def _count_reads(monkeypatch) -> dict[str, int]:
    """Count calls of the loader's checks: the document reader and every record reader."""
    from hybridroute.calibration import _evidence, _policy, _policy_doc, calibrators, techniques

    calls = {"read_parts": 0, "check_structure": 0, "from_state": 0}
    for module, name in ((_policy, "read_parts"), (_policy_doc, "check_structure")):
        original = getattr(module, name)

        def counted(*args, _name=name, _original=original, **kwargs):
            calls[_name] += 1
            return _original(*args, **kwargs)

        monkeypatch.setattr(module, name, counted)
    for cls in (
        techniques.Technique,
        _evidence.EvidenceThresholds,
        *calibrators.CALIBRATORS.values(),
    ):
        original = cls.__dict__["from_state"].__func__

        def from_state(klass, *args, _original=original, **kwargs):
            calls["from_state"] += 1
            return _original(klass, *args, **kwargs)

        monkeypatch.setattr(cls, "from_state", classmethod(from_state))
    return calls


def test_calibrate_writes_the_fitted_parts_without_reading_them_back(
    model, tmp_path, monkeypatch, capsys
) -> None:
    calls = _count_reads(monkeypatch)
    evidence = "src/hybridroute/calibration/data/support_evidence_labels.jsonl"
    out = tmp_path / "p.json"
    args = ["--objective", "oos", "--target", "0.8", "--precision-target", "0.8", "--margin"]
    _calibrate(model, out, [*args, "--per-class", "--evidence", evidence])
    assert calls == {"read_parts": 0, "check_structure": 0, "from_state": 0}
    Policy.load(out)  # the counters do count: loading reads every part back
    assert calls["read_parts"] == calls["check_structure"] == 1 and calls["from_state"] >= 5


def test_fit_policy_and_save_never_read_the_parts_back(tmp_path, monkeypatch) -> None:
    proba, y = synthetic_proba(1500, 4, 3)
    gold = [("a", "b", "c", "d")[i] for i in y]
    calls = _count_reads(monkeypatch)
    for kwargs in ({"margin": True, "per_class": True}, {"objective": "three-way"}):
        fit_policy(proba, gold, ["a", "b", "c", "d"], target=0.9, **kwargs).save(
            tmp_path / "p.json"
        )
    assert calls == {"read_parts": 0, "check_structure": 0, "from_state": 0}


# --------------------------------------------------------------------------- in memory


def test_a_gate_value_edited_in_memory_decides_and_is_not_written(tmp_path) -> None:
    proba, y = synthetic_proba(2000, 4, 1)
    gold = [("a", "b", "c", "d")[i] for i in y]
    policy = fit_policy(proba, gold, ["a", "b", "c", "d"], target=0.9, delta=0.1)
    doc = policy.to_dict()
    old = doc["thresholds"]["auto"]
    doc["thresholds"]["auto"] = new = min(0.999, old + 0.05)
    edited = Policy(doc)
    calibrated = policy.calibrate(proba).max(1)
    rows = proba[(calibrated >= old) & (calibrated < new)]
    assert len(rows) > 0
    assert {o.action for o in policy.apply_proba(rows)} == {"auto_route"}
    assert {o.threshold for o in edited.apply_proba(rows)} == {new}
    assert "auto_route" not in {o.action for o in edited.apply_proba(rows)}
    with pytest.raises(ValueError, match=r"thresholds\.auto"):
        edited.save(tmp_path / "p.json")


# --------------------------------------------------------------------------- the registry


class OneStartPrecisionThreshold(CertifiedPrecisionThreshold):
    """A new technique: one file (here, a class) and one registry line."""

    method = "one_start_precision"
    objective = None

    def __init__(self, target: float = 0.95, delta: float = 0.05, n_starts: int = 1) -> None:
        super().__init__(target, delta, n_starts)


def test_a_new_technique_is_one_class_and_one_registry_line(tmp_path, monkeypatch) -> None:
    proba, y = synthetic_proba(3000, 4, 5)
    conf, correct = proba.max(1), proba.argmax(1) == y
    fitted = OneStartPrecisionThreshold(0.9, 0.1).fit(conf, correct)
    assert fitted.certified_
    with pytest.raises(ValueError, match="'one_start_precision' cannot be checked"):
        Policy.build(classes=["a", "b", "c", "d"], threshold=fitted)
    monkeypatch.setitem(TECHNIQUES, OneStartPrecisionThreshold.method, OneStartPrecisionThreshold)
    policy = Policy.build(classes=["a", "b", "c", "d"], threshold=fitted)
    policy.save(tmp_path / "p.json")
    loaded = Policy.load(tmp_path / "p.json")
    assert loaded == policy and loaded.apply_proba(proba) == policy.apply_proba(proba)
    doc = json.loads((tmp_path / "p.json").read_text())
    doc["objective"]["fit"]["bound"] = 0.999
    _write(tmp_path / "p.json", _rehash(doc))
    with pytest.raises(ArtifactError, match=r"objective\.fit\.bound"):
        Policy.load(tmp_path / "p.json")  # its own certificate is checked on load


@pytest.mark.parametrize("name", sorted(TECHNIQUES))
def test_every_technique_is_registered_under_its_record_name(name) -> None:
    assert TECHNIQUES[name].method == name


def test_the_version_2_fixtures_are_the_files_main_wrote(tmp_path) -> None:
    # guard against an accidental rewrite of the fixtures by a later format
    for name in NAMES:
        doc = json.loads((V2 / f"{name}.json").read_text(encoding="utf-8"))
        assert doc["format_version"] == 2 and doc["library_version"] == "0.1.0", name
    shutil.copy(V2 / "demo.json", tmp_path / "demo.json")
    assert Policy.load(tmp_path / "demo.json").provenance["command"] == "hybridroute demo"
