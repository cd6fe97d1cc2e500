"""Bring your own model, end to end: a model trained with plain scikit-learn outside
hybridroute writes its scores to files; ``calibrate --scores`` fits and certifies a policy
bound to the model; a router bundle on the adapter routes, evaluates, serves and replays."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from hybridroute.calibration import Policy
from hybridroute.classifiers import load_classifier
from hybridroute.classifiers.adapter import TRUSTED_CODE_ENV, FunctionAdapter, SklearnAdapter
from hybridroute.cli import main
from hybridroute.datasets import load_dataset
from hybridroute.exceptions import ArtifactError
from hybridroute.router import HybridRouter, load_router, save_router
from hybridroute.rules import load_rules

from ..service.helpers import TEXTS

EXAMPLE = (
    Path(__file__).resolve().parents[2] / "src" / "hybridroute" / "examples" / "support_rules.yaml"
)


def _external_model():
    """TF-IDF + logistic regression, straight from scikit-learn (nothing of hybridroute)."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline

    train = load_dataset("support-tickets").split("train")
    vec = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True)
    clf = LogisticRegression(C=10.0, solver="newton-cg", max_iter=500)
    return make_pipeline(vec, clf).fit(list(train.texts), list(train.y))


def _write_scores(model, split, path: Path) -> Path:
    """The user's own export: pandas for CSV, plain json for JSONL."""
    import pandas as pd

    proba = model.predict_proba(list(split.texts))
    classes = [str(c) for c in model.classes_]
    if path.suffix == ".csv":
        frame = pd.DataFrame(proba, columns=[f"score:{c}" for c in classes])
        frame.insert(0, "label", list(split.y))
        frame.insert(0, "text", list(split.texts))
        frame.insert(0, "id", list(split.ids))
        frame.to_csv(path, index=False)
    else:
        with path.open("w") as fh:
            fh.write(json.dumps({"format": "hybridroute.scores", "classes": classes}) + "\n")
            for i, row in enumerate(proba):
                item = {"id": split.ids[i], "label": split.y[i], "scores": row.tolist()}
                fh.write(json.dumps(item) + "\n")
    return path


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    from hybridroute.cli._scores import calibrate_from_scores

    root = tmp_path_factory.mktemp("byo")
    ds = load_dataset("support-tickets")
    model = _external_model()
    cal = _write_scores(model, ds.split("calibration"), root / "calibration.csv")
    test = _write_scores(model, ds.split("test"), root / "test.jsonl")
    adapter = SklearnAdapter(model, model_id="support-lr").fit()
    adapter.save(root / "model")
    report = calibrate_from_scores(
        scores=cal,
        test_scores=test,
        model=root / "model",
        out=root / "policy.json",
        objective="precision",
        target=0.85,
        delta=0.1,
        calibrator="temperature",
        oos_label="out_of_scope",
        n_boot=200,
    )
    router = HybridRouter(
        rules=load_rules(EXAMPLE),
        classifier=load_classifier(root / "model"),
        policy=Policy.load(root / "policy.json"),
        name="byo",
        version="1",
    )
    bundle = save_router(router, root / "bundle")
    return {
        "root": root,
        "ds": ds,
        "model": model,
        "adapter": adapter,
        "report": report,
        "bundle": bundle,
        "cal": cal,
        "test": test,
    }


def test_calibrate_from_scores_certifies_a_policy_bound_to_the_adapter(world):
    report, adapter = world["report"], world["adapter"]
    policy = Policy.load(world["root"] / "policy.json")
    assert report["certified"] and policy.certified
    assert policy.model_fingerprint == adapter.fingerprint()
    assert report["model_binding"]["source"] == "model"
    assert policy.provenance["scores_fingerprint"] == report["scores_fingerprint"]
    ev = report["evaluation"]
    assert ev["n"] == 273 and ev["coverage"] > 0.3 and ev["selective_precision"] > 0.85


def test_scores_evaluation_equals_the_router_classifier_on_the_texts(world):
    """The file's scores and the adapter's are the same model: the same metrics."""
    from hybridroute.evaluation import evaluate_classifier

    router = load_router(world["bundle"])
    test = world["ds"].split("test")
    direct = evaluate_classifier(
        router.classifier, list(test.texts), list(test.y), policy=router.policy, n_boot=200
    )
    for key in ("accuracy", "macro_f1", "coverage", "selective_precision", "ece"):
        assert world["report"]["evaluation"][key] == pytest.approx(direct[key], abs=1e-6), key


def test_router_build_route_and_evaluate_commands_use_the_adapter(world, capsys):
    root = world["root"]
    bundle = str(root / "cli-bundle")
    build = ["router", "build", "--rules", str(EXAMPLE), "--model", str(root / "model")]
    build += ["--policy", str(root / "policy.json"), "--name", "byo", "--version", "1"]
    assert main([*build, "--out", bundle]) == 0
    capsys.readouterr()
    code = main(
        [
            "route",
            "--router",
            bundle,
            "--text",
            "where is my parcel",
            "--facts",
            '{"amount": 20}',
            "--json",
        ]
    )
    assert code == 0
    decision = json.loads(capsys.readouterr().out)
    assert decision["label"] == "order_status" and decision["stage"] in ("model", "policy")
    code = main(
        [
            "evaluate",
            "--router",
            bundle,
            "--dataset",
            "support-tickets",
            "--no-track",
            "--n-boot",
            "50",
            "--json",
        ]
    )
    assert code == 0
    metrics = json.loads(capsys.readouterr().out)
    assert metrics["n"] == 273 and metrics["coverage"] > 0


@pytest.mark.service
def test_the_service_serves_the_bundle_and_its_log_replays(world, tmp_path, monkeypatch):
    from fastapi.testclient import TestClient

    from hybridroute.records import open_log, replay
    from hybridroute.service import ServiceConfig, create_app

    monkeypatch.delenv("HYBRIDROUTE_ADMIN_TOKEN", raising=False)
    log = f"sqlite:///{tmp_path / 'decisions.sqlite'}"
    config = ServiceConfig(router=world["bundle"], log=log, commit_window_s=0.0)
    items = [
        {"text": t, "facts": {"amount": 20}, "request_id": f"r{i}"} for i, t in enumerate(TEXTS)
    ]
    with TestClient(create_app(config)) as client:
        r = client.post("/v1/route/batch", json={"items": items})
        assert r.status_code == 200, r.text
        stages = {res["decision"]["stage"] for res in r.json()["results"]}
        assert "model" in stages
    router = load_router(world["bundle"])
    with open_log(log) as opened:
        records = list(opened.records())
        assert len(records) == len(TEXTS)
        assert replay(records, router)["mismatches"] == 0
        assert replay(records, router, rescore=True)["mismatches"] == 0


def test_a_policy_bound_to_the_scores_file_pairs_with_no_model(world, tmp_path):
    from hybridroute.scores import calibrate_scores, read_scores

    policy, report = calibrate_scores(
        read_scores(world["cal"]), target=0.85, delta=0.1, oos_label="out_of_scope"
    )
    assert report["model_binding"]["source"] == "scores_file"
    router = HybridRouter(
        rules=load_rules(EXAMPLE), classifier=world["adapter"], policy=policy, name="x"
    )
    with pytest.raises(ArtifactError, match="field 'model_fingerprint'"):
        save_router(router, tmp_path / "bundle")


def test_a_callable_adapter_bundle_loads_only_with_its_reference_trusted(
    world, tmp_path, monkeypatch
):
    """A vendor-API-style model: the bundle holds a name, the operator trusts it."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "byo_vendor.py").write_text(
        "model = None\n\ndef score(texts):\n    return model.predict_proba(texts)\n"
    )
    monkeypatch.syspath_prepend(str(pkg))
    sys.modules.pop("byo_vendor", None)
    import byo_vendor

    byo_vendor.model = world["model"]
    classes = [str(c) for c in world["model"].classes_]
    adapter = FunctionAdapter(
        byo_vendor.score, classes, model_id="vendor v1", probe_texts=TEXTS
    ).fit()
    from hybridroute.scores import calibrate_scores, read_scores

    policy, _ = calibrate_scores(
        read_scores(world["cal"], classes=classes),
        model_fingerprint=adapter.fingerprint(),
        oos_label="out_of_scope",
        target=0.85,
        delta=0.1,
    )
    router = HybridRouter(rules=load_rules(EXAMPLE), classifier=adapter, policy=policy, name="v")
    bundle = save_router(router, tmp_path / "bundle")
    monkeypatch.delenv(TRUSTED_CODE_ENV, raising=False)
    with pytest.raises(ArtifactError, match=f"does not trust.*{TRUSTED_CODE_ENV}=byo_vendor:score"):
        load_router(bundle)
    monkeypatch.setenv(TRUSTED_CODE_ENV, "byo_vendor:score")
    loaded = load_router(bundle)
    texts = world["ds"].split("test").texts[:20]
    decisions = [loaded.route({}, t) for t in texts]
    expected = [router.route({}, t) for t in texts]
    assert [d.snapshot_hash for d in decisions] == [d.snapshot_hash for d in expected]
    sys.modules.pop("byo_vendor", None)


def test_a_fresh_process_loads_an_adapter_bundle(world):
    code = (
        "import sys\nfrom hybridroute.router import load_router\n"
        f"print(type(load_router({str(world['bundle'])!r}).classifier).__name__)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "SklearnAdapter", out.stderr[-500:]


def test_predictions_agree_with_the_external_model(world):
    clf = load_router(world["bundle"]).classifier
    np.testing.assert_array_equal(clf.predict_proba(TEXTS), world["model"].predict_proba(TEXTS))


def test_the_calibrate_command_fits_from_a_scores_file(world, tmp_path, capsys):
    """`hybridroute calibrate --scores` is the same fit as the library function."""
    from hybridroute.cli import main

    out = tmp_path / "policy.json"
    args = [
        "calibrate", "--scores", str(world["cal"]), "--test-scores", str(world["test"]),
        "--model", str(world["root"] / "model"), "--target", "0.85", "--delta", "0.1",
        "--oos-label", "out_of_scope", "--out", str(out), "--json",
    ]  # fmt: skip
    assert main(args) == 0
    summary = json.loads(capsys.readouterr().out)
    assert (
        Policy.load(out).to_dict()["thresholds"]
        == (Policy.load(world["root"] / "policy.json").to_dict()["thresholds"])
    )
    assert summary  # the evaluation's report is printed
    # options of the other modes are refused, in one line
    for bad in (
        ["--dataset", "support-tickets"],
        ["--from-log", "sqlite:///x.sqlite"],
        ["--split", "test"],
    ):
        assert main([*args[:-3], *bad, "--out", str(tmp_path / "p2.json")]) == 2
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert main(["calibrate", "--test-scores", "x.csv", "--out", str(tmp_path / "p3.json")]) == 2
    assert "only goes with --scores" in capsys.readouterr().err
