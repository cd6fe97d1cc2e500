"""Drift: PSI, chi-square flags, segments, histograms, same-snapshot conflicts."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from hybridroute.contracts import Decision
from hybridroute.exceptions import UserInputError
from hybridroute.records import DecisionLog, drift_report, psi


def dec(
    version: str,
    dest: str,
    facts: dict,
    conf: float | None = None,
    reason: str = "confident_intent",
):
    return Decision(
        router="r",
        router_version=version,
        stage="model" if conf is not None else "rule",
        input_snapshot={"facts": facts, "text": "t"},
        allowed_destinations=(dest,),
        selected_destination=dest,
        reason_code=reason,
        confidence=conf,
    )


def test_psi_properties():
    assert psi([10, 20, 30], [10, 20, 30]) == pytest.approx(0.0)
    assert psi([10, 20, 30], [30, 20, 10]) > 0.3
    assert math.isfinite(psi([10, 0], [0, 10]))
    assert math.isnan(psi([0, 0], [1, 1]))
    with pytest.raises(ValueError, match="same categories"):
        psi([1, 2], [1, 2, 3])


def build_log(tmp_path: Path, shift: bool) -> DecisionLog:
    rng = np.random.default_rng(0)
    log = DecisionLog(tmp_path / "log.sqlite", batch_size=1000)
    for version, p_review in (("1", 0.1), ("2", 0.5 if shift else 0.1)):
        for i in range(600):
            review = rng.random() < p_review
            dest = "human_review" if review else "refund_request"
            log.append(
                dec(
                    version,
                    dest,
                    {"tier": "gold" if i % 3 == 0 else "basic", "i": i},
                    conf=float(rng.uniform(0.2, 1.0)),
                )
            )
    log.flush()
    return log


@pytest.mark.parametrize("shift", [True, False])
def test_shift_is_flagged_only_when_real(tmp_path, shift):
    with build_log(tmp_path, shift) as log:
        report = drift_report(log.to_frame(), by="router_version")
    assert report["baseline"] == "1"
    (w,) = report["shifts"]
    assert w["window"] == "2" and w["n"] == 600
    assert w["flagged"] is shift
    if shift:
        assert w["destination_p"] < 1e-6 and w["destination_psi"] > 0.1
    hist = report["confidence_histograms"]["1"]
    assert sum(hist["counts"]) == 600 and len(hist["edges"]) == 11
    assert report.summary_lines()[0].startswith("1200 decisions")


def test_segments_by_fact_and_bad_baseline(tmp_path):
    with build_log(tmp_path, True) as log:
        frame = log.to_frame()
    report = drift_report(frame, by="router_version", segment="tier")
    seg = report["segments"]["values"]
    assert set(seg) == {"gold", "basic"} and seg["gold"]["n"] == 400
    assert 0 < seg["gold"]["human_review_rate"] < 1
    by_tier = drift_report(frame, by="tier")
    assert set(by_tier["windows"]) == {"gold", "basic"}
    with pytest.raises(UserInputError, match="baseline window '9' is not in the log"):
        drift_report(frame, baseline="9")


def test_same_snapshot_conflicts_within_and_across_versions(tmp_path):
    with DecisionLog(tmp_path / "log.sqlite") as log:
        log.append(dec("1", "answer", {"a": 1}))
        log.append(dec("1", "ask_user", {"a": 1}))  # nondeterminism inside version 1
        log.append(dec("1", "answer", {"b": 2}))
        log.append(dec("2", "fail", {"b": 2}))  # intended change across versions
        log.append(dec("2", "fail", {"c": 3}))
        log.flush()
        rm = drift_report(log.to_frame())["replay_mismatch"]
    assert rm["within_version_conflicts"] == 1
    assert rm["across_version_changes"] == 1
    assert rm["examples"][0]["kind"] == "nondeterminism"


def test_empty_log(tmp_path):
    with DecisionLog(tmp_path / "log.sqlite") as log:
        assert drift_report(log.to_frame())["n"] == 0


def fallback(version: str, reason: str, cause: str | None, i: int) -> Decision:
    detail: dict = {"classifier": {"labels": [], "scores": []}}
    if cause is not None:
        detail["cause"] = cause
        if "(" in cause:
            detail["error"] = {"type": cause.split("(")[1].rstrip(")"), "message": "boom"}
    return Decision(
        router="r",
        router_version=version,
        stage="fallback",
        input_snapshot={"facts": {"i": i}, "text": "t"},
        allowed_destinations=("human_review",),
        selected_destination="human_review",
        reason_code=reason,
        detail=detail,
    )


FALLBACKS = [
    pytest.param(
        {"1": [("classifier_error", "classifier_error (TypeError)")] * 3},
        {"classifier_error (TypeError)": 3},
        id="one-cause",
    ),
    pytest.param(
        {
            "1": [("classifier_error", "classifier_error (TypeError)")] * 2
            + [("timeout", "timeout")],
            "2": [("classifier_error", "classifier_error (ValueError)")] * 4
            + [("classifier_error", "classifier_error (TypeError)")],
        },
        {"classifier_error (TypeError)": 3, "classifier_error (ValueError)": 4, "timeout": 1},
        id="causes-by-version",
    ),
    pytest.param(
        {"1": [("provider_error", None)] * 2, "2": [("classifier_error", None)]},
        {"classifier_error": 1, "provider_error": 2},
        id="records-without-a-cause",
    ),
]


@pytest.mark.parametrize(("spec", "expected"), FALLBACKS)
def test_fallbacks_are_counted_by_cause_overall_and_by_window(tmp_path, spec, expected):
    with DecisionLog(tmp_path / "log.sqlite") as log:
        i = 0
        for version, entries in spec.items():
            for _ in range(5):  # ordinary traffic around the fallbacks
                log.append(dec(version, "refund_request", {"i": (i := i + 1)}, conf=0.9))
            for reason, cause in entries:
                log.append(fallback(version, reason, cause, i := i + 1))
        log.flush()
        report = drift_report(log.to_frame())
    assert report["fallbacks_by_cause"] == expected
    for version, entries in spec.items():
        per = report["windows"][version]["fallbacks_by_cause"]
        assert sum(per.values()) == len(entries)
    lines = report.summary_lines()
    total = sum(expected.values())
    line = next(x for x in lines if x.startswith("fallback decisions"))
    assert f": {total} -- by cause: " in line
    for cause, n in expected.items():
        assert f"{cause} {n}" in line
    if len(spec) > 1:  # and by window
        for version in spec:
            assert any(x.startswith(f"  {version}: ") for x in lines[lines.index(line) :])


def test_a_log_of_a_failing_router_is_counted_by_exception_type(tmp_path):
    from hybridroute.calibration import EmpiricalThreshold, Policy
    from hybridroute.classifiers import IntentClassifier
    from hybridroute.router import HybridRouter
    from hybridroute.rules import load_rules

    from ..router.conftest import EXAMPLE

    class Failing(IntentClassifier):
        classes_ = np.asarray(["order_status", "refund_request"])

        def predict_proba(self, texts):
            if "refund" in texts[0]:
                raise TypeError("unsupported operand")
            raise ValueError("bad shape")

    rng = np.random.default_rng(0)
    scores = rng.uniform(0, 1, 500)
    policy = Policy.build(
        classes=["order_status", "refund_request"],
        threshold=EmpiricalThreshold(0.9).fit(scores, rng.uniform(0, 1, 500) < scores),
        objective="empirical",
    )
    router = HybridRouter(rules=load_rules(EXAMPLE), classifier=Failing(), policy=policy)
    texts = ["refund please", "where is it", "refund now", "refund?", "hello"]
    with DecisionLog(tmp_path / "log.sqlite") as log:
        for t in texts:
            log.append(router.route({}, t))
        log.flush()
        report = drift_report(log.to_frame())
    assert report["fallbacks_by_cause"] == {
        "classifier_error (TypeError)": 3,
        "classifier_error (ValueError)": 2,
    }


def test_no_fallbacks_say_none(tmp_path):
    with build_log(tmp_path, False) as log:
        report = drift_report(log.to_frame())
    assert report["fallbacks_by_cause"] == {}
    assert "fallback decisions (the classifier failed or abstained): none" in report.summary_lines()
