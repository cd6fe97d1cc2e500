"""The report says what the policy promised and whether this set kept the promise: target,
δ, threshold, certified or not (and why), the selective precision against the target, and
the calibration-vs-test label-mix check (issue 29, item 7)."""

from __future__ import annotations

import json

import pytest

from hybridroute.calibration import CertifiedPrecisionThreshold
from hybridroute.evaluation import evaluate_router, write_report

from ..router.conftest import fitted_policy
from ..support_router import support_router


@pytest.fixture(scope="module")
def router_and_set():
    return support_router(version="r")


def _page(path) -> str:
    return (path / "report.html").read_text(encoding="utf-8")


def test_a_certified_policy_shows_its_promise_and_the_check(router_and_set, tmp_path):
    router, ds = router_and_set
    test = ds.split("test")
    ev = evaluate_router(router, test, n_boot=20, seed=0)
    files = write_report(ev, tmp_path, title="support r", policy=router.policy)
    html = _page(tmp_path)
    md = files["markdown"].read_text(encoding="utf-8")
    g = router.policy.guarantee
    for text in (html, md):
        assert "Policy and its guarantee" in text
        assert "precision" in text  # the objective
        assert f"{g['target']:.4f}" in text and f"{g['delta']:.4f}" in text
        assert f"{router.policy.thresholds['auto']:.4f}" in text
        assert f"lower bound {g['bound']:.4f}" in text
        assert "selective precision here" in text
        assert "label mix" in text and "like the calibration data" in text
    # the JSON carries the same, for tools
    doc = json.loads(files["json"].read_text(encoding="utf-8"))
    assert doc["policy"]["certified"] is True and doc["policy"]["target"] == g["target"]
    assert doc["label_mix"]["departs"] is False
    assert doc["label_mix"]["n_observed"] == len(test)


def test_a_set_whose_label_mix_departs_says_so(router_and_set, tmp_path):
    router, ds = router_and_set
    test = ds.split("test")
    keep = [i for i, y in enumerate(test.y) if y in ("refund_request", "order_status")]
    subset = ds.from_frame(test.frame.iloc[keep], name="two-labels")
    ev = evaluate_router(router, subset, n_boot=20, seed=0)
    write_report(ev, tmp_path, policy=router.policy)
    html = _page(tmp_path)
    assert "departs markedly" in html
    # the labels that moved most, with both shares
    assert "calibration share" in html and "refund_request" in html


@pytest.mark.parametrize(("target", "delta"), [(0.999, 0.01), (0.9999, 0.05)])
def test_an_uncertified_policy_says_why_and_what_it_would_need(
    router_and_set, tmp_path, target, delta
):
    router, ds = router_and_set
    policy = fitted_policy(router.classifier, ds, CertifiedPrecisionThreshold(target, delta))
    assert not policy.guarantee["certified"]
    uncertified = router.with_policy(policy, version="u")
    ev = evaluate_router(uncertified, ds.split("test"), n_boot=20, seed=0)
    files = write_report(ev, tmp_path, policy=uncertified.policy)
    md = files["markdown"].read_text(encoding="utf-8")
    assert "| certified | no" in md
    need = policy.guarantee["required_calibration_size"]
    if need:
        assert f"about {need:,} calibration items would be needed" in md


def test_without_a_policy_there_is_no_policy_section(router_and_set, tmp_path):
    router, ds = router_and_set
    ev = evaluate_router(router, ds.split("test"), n_boot=20, seed=0)
    write_report(ev, tmp_path)
    assert "Policy and its guarantee" not in _page(tmp_path)
