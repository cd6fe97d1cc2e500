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
