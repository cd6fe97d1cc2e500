"""The support-tickets router that integration tests share (tracking, Spark, the CLI)."""

from __future__ import annotations

from typing import Any

from .router.conftest import EXAMPLE, fitted_policy


def support_router(*, version: str = "1", **classifier_args: Any) -> tuple[Any, Any]:
    """(router, dataset): a local classifier on the support-tickets train split, a policy
    certified on its calibration split (precision 0.85 w.p. 0.9), the example rules."""
    from hybridroute.calibration import CertifiedPrecisionThreshold
    from hybridroute.classifiers import LocalClassifier
    from hybridroute.datasets import load_dataset
    from hybridroute.router import HybridRouter
    from hybridroute.rules import load_rules

    ds = load_dataset("support-tickets")
    train = ds.split("train")
    clf = LocalClassifier(**({"Cs": (10.0,)} | classifier_args)).fit(train.texts, train.y)
    router = HybridRouter(
        rules=load_rules(EXAMPLE),
        classifier=clf,
        policy=fitted_policy(clf, ds, CertifiedPrecisionThreshold(0.85, 0.1)),
        name="support",
        version=version,
    )
    return router, ds
