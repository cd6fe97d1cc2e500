"""The whole loop on a real service (uvicorn on a port, HTTP in between, a SQLite log):

route with audits -> outcomes for the audited decisions -> the monitor -> a breach on an
injected shift -> recalibrate from the log -> serve the candidate as a shadow -> the
promotion gate passes it and fails a deliberately worse one.

The injected shift: after the healthy phase, the traffic the model is least sure of turns
out wrong more often (gold intents change for decisions below the median confidence), so
the incumbent's auto-route precision falls below its target, and a higher threshold -- the
one recalibration finds on the shifted window -- restores it.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from hybridroute.cli import main
from hybridroute.records import AUDIT_KEY_ENV

from .conftest import uvicorn_thread

pytestmark = pytest.mark.service

TOKEN = "l00p-" + "z" * 30
AUTH = {"authorization": f"Bearer {TOKEN}"}
#: Decisions at or below this confidence are wrong with probability SHIFT_ERROR after the
#: shift (about the median confidence of the support router's auto-routed decisions).
SHIFT_BELOW = 0.89
SHIFT_ERROR = 0.7


def _texts() -> list[str]:
    from hybridroute.datasets import load_dataset

    ds = load_dataset("support-tickets")
    return [t for s in ("test", "calibration", "train") for t in ds.split(s).texts]


def _serve(bundle: Path, log_url: str, shadows: tuple[Path, ...] = ()) -> Any:
    from hybridroute.service import ServiceConfig, create_app

    config = ServiceConfig(
        router=bundle, shadows=shadows, log=log_url, audit_rate=1.0, commit_window_s=0.0
    )
    return uvicorn_thread(create_app(config))


def _route(url: str, texts: list[str], start: int) -> dict[str, dict[str, Any]]:
    """Route ``texts`` in batches; request id -> the result (decision id and decision)."""
    out: dict[str, dict[str, Any]] = {}
    with httpx.Client(base_url=url, timeout=30) as client:
        for b in range(0, len(texts), 100):
            items = [
                {"text": t, "facts": {"amount": 20}, "request_id": f"q{start + b + i}"}
                for i, t in enumerate(texts[b : b + 100])
            ]
            r = client.post("/v1/route/batch", json={"items": items})
            assert r.status_code == 200, r.text
            for item, res in zip(items, r.json()["results"], strict=True):
                out[item["request_id"]] = res
    return out


def _label_audits(
    url: str, routed: dict[str, dict[str, Any]], rng: np.random.Generator, *, shifted: bool
) -> int:
    """Give every pending audit its outcome: right, unless the shift makes it wrong."""
    by_id = {r["decision_id"]: r["decision"] for r in routed.values()}
    with httpx.Client(base_url=url, timeout=30, headers=AUTH) as client:
        pending = client.get("/v1/audits", params={"limit": 5000}).json()["pending"]
        outcomes = []
        for a in pending:
            d = by_id.get(a["decision_id"])
            if d is None:
                continue
            wrong = shifted and d["confidence"] <= SHIFT_BELOW and rng.uniform() < SHIFT_ERROR
            outcomes.append(
                {
                    "decision_id": a["decision_id"],
                    # wrong: the ticket was out of scope after all
                    "gold_intent": "out_of_scope" if wrong else d["label"],
                    "source": "audit",
                }
            )
        if outcomes:
            r = client.post("/v1/outcomes", json={"outcomes": outcomes})
            assert r.status_code == 200, r.text
    return len(outcomes)


def _monitor(url: str) -> dict[str, Any]:
    with httpx.Client(base_url=url, timeout=30) as client:
        return client.get("/v1/monitor").json()


def _worse_bundle(incumbent: Path, out: Path) -> Path:
    """The incumbent with an uncertified, much lower threshold (empirical at 0.5)."""
    from hybridroute.calibration import EmpiricalThreshold, Policy
    from hybridroute.datasets import load_dataset
    from hybridroute.router import load_router, save_router

    inc = load_router(incumbent)
    cal = load_dataset("support-tickets").split("calibration")
    conf = inc.policy.calibrate(inc.classifier.predict_proba(list(cal.texts)))
    top = conf.argmax(axis=1)
    correct = np.asarray(inc.classes)[top] == np.asarray(cal.y)
    fitter = EmpiricalThreshold(0.5).fit(conf[np.arange(len(top)), top], correct)
    policy = Policy.build(
        classes=list(inc.classes),
        threshold=fitter,
        calibrator=None,
        calibration_labels=cal.y,
        out_of_scope_label=inc.oos_label,
        objective="empirical",
        model_fingerprint=inc.classifier.fingerprint(),
    )
    worse = inc.with_policy(policy, version="worse")
    return save_router(worse, out)


def test_route_audit_monitor_breach_recalibrate_shadow_promote(
    bundles, tmp_path, monkeypatch, capsys
):
    from hybridroute.service import _monitor as service_monitor

    monkeypatch.setenv(AUDIT_KEY_ENV, "loop-audit-key")
    monkeypatch.setenv("HYBRIDROUTE_ADMIN_TOKEN", TOKEN)
    monkeypatch.setattr(service_monitor, "REFRESH_S", 0.0)  # recompute on every look
    rng = np.random.default_rng(7)
    texts = _texts()
    log_url = f"sqlite:///{tmp_path / 'decisions.sqlite'}"
    incumbent = bundles["v1"]

    # 1. healthy traffic: audits come back right; the guarantee holds
    with _serve(incumbent, log_url) as url:
        routed = _route(url, texts[:600], 0)
        assert _label_audits(url, routed, rng, shifted=False) > 200
        healthy = _monitor(url)
        assert healthy["status"] in ("holding", "certified_online"), healthy
        assert healthy["precision"]["lower"] > 0.8

        # 2. the shift: low-confidence decisions turn wrong; the monitor finds a breach
        shift_at = datetime.now(UTC).isoformat()
        labelled_before = healthy["labels"]
        for round_ in range(4):
            batch = texts[(round_ * 300) % len(texts) :][:300]
            routed = _route(url, batch, 1000 + round_ * 300)
            _label_audits(url, routed, rng, shifted=True)
            state = _monitor(url)
            if state["status"] == "breach":
                break
        assert state["status"] == "breach", state
        breach = state["breach"]
        assert breach["labels"] > labelled_before and breach["at"] is not None
        assert state["precision"]["upper"] >= state["precision"]["lower"]

    # 3. recalibrate from the shifted window: a higher threshold, certified, a new bundle
    candidate = tmp_path / "candidate"
    code = main(
        [
            "calibrate", "--from-log", log_url, "--router", str(incumbent),
            "--out", str(candidate), "--since", shift_at, "--version", "1-recal", "--json",
        ]
    )  # fmt: skip
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["certified"], report
    assert report["threshold"] > report["incumbent_threshold"]
    assert report["window"]["first_logged_at"] >= shift_at

    # 4. serve the candidate as a shadow on shifted traffic; audits keep coming back
    worse = _worse_bundle(incumbent, tmp_path / "worse")
    with _serve(incumbent, log_url, shadows=(candidate, worse)) as url:
        routed = _route(url, texts[:600], 5000)
        _label_audits(url, routed, rng, shifted=True)
        with httpx.Client(base_url=url, timeout=30) as client:
            shadow = client.get("/v1/shadow").json()
        assert any(
            c["shadow"]["version"] == "1-recal" and c["n"] > 0 for c in shadow["comparisons"]
        )

    # 5. the gate: the recalibrated candidate passes, the worse one fails
    gate = ["promote", "--incumbent", str(incumbent), "--log", log_url, "--no-track", "--json"]
    code = main([*gate, "--candidate", str(candidate)])
    passed = json.loads(capsys.readouterr().out)
    assert code == 0 and passed["passed"], passed
    code = main([*gate, "--candidate", str(worse)])
    failed = json.loads(capsys.readouterr().out)
    assert code == 1 and not failed["passed"], (code, failed)
