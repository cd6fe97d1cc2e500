"""A small router bundle for the facts-schema tests of ``datasets validate`` and ``evaluate``."""

from __future__ import annotations

from pathlib import Path

from hybridroute.cli import main

from ..router.conftest import EXAMPLE, fitted_policy

#: A small CSV labelled set whose facts fit the example rules (empty cells: defaults).
HEADER = "text,label,split,has_permission,attempts,amount,action"
GOOD = [
    "where is my parcel,order_status,test,true,0,0,lookup_order",
    "refund me please,refund_request,test,false,1,12.5,issue_refund",
    "parcel late again,order_status,test,,,,",
    "refund the rest,refund_request,test,TRUE,2,3,",
]


def strict_rules(root: Path) -> Path:
    """The example rules with ``attempts`` capped at 0 (most support tickets break it)."""
    # without the example's own test cases: the cap makes one of them malformed
    text = EXAMPLE.read_text(encoding="utf-8").split("\ntests:\n")[0] + "\n"
    old = "attempts: {type: int, default: 0, min: 0,"
    assert old in text
    path = root / "strict_rules.yaml"
    path.write_text(text.replace(old, "attempts: {type: int, default: 0, min: 0, max: 0,"))
    return path


def build_bundles(root: Path) -> dict[str, Path]:
    """Bundles ``example`` (the example rules) and ``strict`` (:func:`strict_rules`)."""
    from hybridroute.calibration import CertifiedPrecisionThreshold
    from hybridroute.classifiers import LocalClassifier
    from hybridroute.classifiers._persistence import classifier_fingerprint
    from hybridroute.datasets import load_dataset

    ds = load_dataset("support-tickets")
    train = ds.split("train")
    clf = LocalClassifier(Cs=(10.0,)).fit(train.texts, train.y)
    clf.save(root / "model")
    policy = fitted_policy(clf, ds, CertifiedPrecisionThreshold(0.85, 0.1))
    policy.with_model_fingerprint(classifier_fingerprint(root / "model")).save(root / "policy.json")
    out = {}
    for name, rules in (("example", EXAMPLE), ("strict", strict_rules(root))):
        out[name] = root / f"bundle-{name}"
        argv = ["router", "build", "--rules", str(rules), "--model", str(root / "model")]
        argv += ["--policy", str(root / "policy.json"), "--name", "support", "--version", "1"]
        assert main([*argv, "--out", str(out[name])]) == 0
    return out
