"""Live against shadow: disagreement on destination, stage and reason code, on both backends."""

from __future__ import annotations

import dataclasses
import json

import pytest

from hybridroute.contracts import Decision
from hybridroute.records import ShadowReport, open_log, shadow_disagreement


def decision(version: str, destination: str, reason: str, stage: str = "rule", i: int = 0):
    return Decision(
        router="r",
        router_version=version,
        stage=stage,
        input_snapshot={"facts": {"n": i}},
        allowed_destinations=("fail", "human_review", "ask_user"),
        selected_destination=destination,
        reason_code=reason,
    )


LIVE = {  # request id -> (destination, reason code, stage) of the live version 1
    "r0": ("fail", "step_budget_exceeded", "rule"),
    "r1": ("fail", "step_budget_exceeded", "rule"),
    "r2": ("human_review", "default_exit", "rule"),
    "r3": ("human_review", "default_exit", "rule"),
    "r4": ("ask_user", "low_confidence", "model"),
}
SHADOW = {  # ... of the shadow version 2 (r4: none)
    "r0": ("fail", "step_budget_exceeded", "rule"),  # agrees
    "r1": ("human_review", "step_budget_exceeded", "rule"),  # destination differs
    "r2": ("human_review", "risk_flag", "rule"),  # reason code differs
    "r3": ("ask_user", "low_confidence", "model"),  # all three differ
}


def fill(log) -> None:
    entries = [(decision("1", d, r, s), rid, "live") for rid, (d, r, s) in LIVE.items()]
    entries += [(decision("2", d, r, s), rid, "shadow") for rid, (d, r, s) in SHADOW.items()]
    entries += [
        (decision("3", "fail", "step_budget_exceeded"), "r0", "shadow"),  # a second shadow
        (decision("2", "fail", "default_exit"), "r9", "shadow"),  # no live decision
        (decision("2", "fail", "default_exit"), None, "shadow"),  # no request id
        (decision("1", "fail", "default_exit"), None, "live"),
    ]
    log.log_many(entries)


def test_disagreement_per_shadow_by_stage_and_reason(log_url):
    with open_log(log_url) as log:
        fill(log)
        report = shadow_disagreement(log)
    assert isinstance(report, ShadowReport)
    first, second = report.comparisons
    assert (first.live_version, first.shadow_version, first.n) == ("1", "2", 4)
    assert dict(first.disagree) == {"destination": 2, "stage": 1, "reason_code": 2}
    assert dict(first.by_stage["rule"]) == {"n": 4, "destination": 2, "stage": 1, "reason_code": 2}
    assert dict(first.by_reason_code["default_exit"]) == {
        "n": 2,
        "destination": 1,
        "stage": 1,
        "reason_code": 2,
    }
    assert dict(first.by_reason_code["step_budget_exceeded"])["destination"] == 1
    assert (second.shadow_version, second.n, dict(second.disagree)) == (
        "3",
        1,
        {"destination": 0, "stage": 0, "reason_code": 0},
    )
    assert report.unpaired == 1 and report.without_request_id == 1
    data = report.to_dict()
    json.dumps(data)  # plain JSON types
    assert data["comparisons"][0]["agree"] == {"destination": 2, "stage": 3, "reason_code": 2}
    assert data["comparisons"][0]["disagreement_rate"]["destination"] == 0.5
    assert data["unpaired_shadow_decisions"] == 1
    lines = report.summary_lines()
    assert lines[0].startswith(
        "shadow r 2 vs live r 1: 4 request(s) in both; destination differs on 2"
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        report.unpaired = 0  # type: ignore[misc]
    with pytest.raises(TypeError):
        first.disagree["destination"] = 0  # type: ignore[index]


def test_filters_and_an_empty_log(log_url):
    with open_log(log_url) as log:
        assert shadow_disagreement(log).comparisons == ()
        assert shadow_disagreement(log).summary_lines() == [
            "shadow decisions: none paired with a live decision"
        ]
        fill(log)
        only3 = shadow_disagreement(log, shadow_version="3")
        assert [c.shadow_version for c in only3.comparisons] == ["3"]
        assert only3.unpaired == 0 and only3.without_request_id == 0
        assert shadow_disagreement(log, live_version="7").comparisons == ()
        assert shadow_disagreement(log, live_version="1").to_dict()["live_version"] == "1"
