"""Recalibration from a decision log (recalibrate_from_log and `calibrate --from-log`)."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from hybridroute.calibration import Policy
from hybridroute.cli import main
from hybridroute.contracts import Decision
from hybridroute.monitoring import recalibrate_from_log
from hybridroute.records import AuditSampler, open_log
from hybridroute.router import load_router

from ..support_router import support_router


@pytest.fixture(scope="module")
def incumbent(tmp_path_factory):
    router, _ = support_router()
    path = tmp_path_factory.mktemp("recal") / "router"
    router.save(path)
    return load_router(path), str(path)


def _decisions(router, n: int, rng, *, drop_from: int | None = None):
    """``n`` auto-routed decisions of ``router`` at or above its threshold, each with its
    gold intent: right with a probability rising with confidence (lower after
    ``drop_from``)."""
    t_old = router.policy.thresholds["auto"]
    classes = [c for c in router.classes if c in router.destinations]
    out = []
    for i in range(n):
        conf = float(rng.uniform(t_old, 1.0))
        label = classes[i % len(classes)]
        p_right = 0.80 + 0.2 * (conf - t_old) / (1 - t_old)
        if drop_from is not None and i >= drop_from:
            p_right -= 0.3
        right = rng.uniform() < p_right
        gold = label if right else classes[(i + 1) % len(classes)]
        d = Decision(
            router=router.name,
            router_version=router.version,
            stage="model",
            input_snapshot={"facts": {}, "text": f"ticket {i}"},
            allowed_destinations=tuple(sorted(set(router.destinations.values()))),
            selected_destination=router.destinations[label],
            reason_code="confident_intent",
            label=label,
            confidence=conf,
        )
        out.append((d, gold))
    return out


def _log(path, router, n=1500, *, rates=(1.0,), seed=0, label_share=1.0, drop_from=None):
    url = f"sqlite:///{path / 'log.sqlite'}"
    rng = np.random.default_rng(seed)
    pairs = _decisions(router, n, rng, drop_from=drop_from)
    per = -(-n // len(rates))
    for k, rate in enumerate(rates):
        chunk = pairs[k * per : (k + 1) * per]
        with open_log(url, audit=AuditSampler(rate, "test-key")) as log:
            log.register_router(router)
            logged = log.log_many([(d, f"r{k}-{i}", "live") for i, (d, _) in enumerate(chunk)])
            audited = {r["decision_id"] for r in log.rows() if r["audited"] == 1}
            outcomes = [
                {"decision_id": ld.decision_id, "gold_intent": gold, "source": "audit"}
                for ld, (_, gold) in zip(logged, chunk, strict=True)
                if ld.decision_id in audited and rng.uniform() < label_share
            ]
            if outcomes:
                log.add_outcomes(outcomes)
    return url


def test_refits_above_the_old_threshold_with_its_provenance(incumbent, tmp_path):
    router, _ = incumbent
    url = _log(tmp_path, router, label_share=0.9)
    with open_log(url, create=False) as log:
        result = recalibrate_from_log(log, router)
    r, p = result.report, result.policy
    assert r["certified"] and r["threshold"] >= router.policy.thresholds["auto"]
    assert r["labelled"] < r["audited"] == 1500 and r["pending"] == r["audited"] - r["labelled"]
    assert r["calibration_size"] == r["labelled"] and r["thinned"] == 0
    assert r["bound"] >= r["target"] == router.policy.guarantee["target"]
    doc = p.to_dict()
    prov = doc["provenance"]
    assert prov["router_version"] == "1" and prov["data_fingerprint"] == r["data_fingerprint"]
    assert prov["window"]["first_seq"] <= prov["window"]["last_seq"]
    assert prov["incumbent_policy_sha256"] == router.policy.content_sha256
    # everything but the main fit is the incumbent's
    old = router.policy.to_dict()
    assert doc["calibrator"] == old["calibrator"] and doc["classes"] == old["classes"]
    assert doc["model_fingerprint"] == old["model_fingerprint"]
    assert sum(doc["calibration_data"]["label_counts"].values()) == r["calibration_size"]
    # it loads back (consistency checks) and is reproducible
    assert Policy.from_dict(json.loads(p.to_json())) == p
    with open_log(url, create=False) as log:
        assert recalibrate_from_log(log, router).policy.to_json() == p.to_json()


def test_a_degraded_stream_raises_the_threshold(incumbent, tmp_path):
    router, _ = incumbent
    with open_log(_log(tmp_path, router, drop_from=0), create=False) as log:
        worse = recalibrate_from_log(log, router).report
    (tmp_path / "b").mkdir()
    with open_log(_log(tmp_path / "b", router), create=False) as log:
        healthy = recalibrate_from_log(log, router).report
    assert not worse["certified"] or worse["threshold"] > healthy["threshold"]
    assert worse["retained_share"] is None or worse["retained_share"] < healthy["retained_share"]


def test_varying_audit_rates_are_thinned_to_one_and_the_seed_decides(incumbent, tmp_path):
    router, _ = incumbent
    url = _log(tmp_path, router, n=3000, rates=(1.0, 0.25))
    with open_log(url, create=False) as log:
        a = recalibrate_from_log(log, router, seed=1).report
        b = recalibrate_from_log(log, router, seed=2).report
    for r in (a, b):
        # roughly 3/4 of the rate-1.0 half is thinned away
        assert 0.65 * 1500 < r["thinned"] < 0.85 * 1500
        assert r["calibration_size"] == r["labelled"] - r["thinned"]
    assert a["data_fingerprint"] != b["data_fingerprint"]


def test_the_window_selects_rows_by_time(incumbent, tmp_path):
    router, _ = incumbent
    url = _log(tmp_path, router)
    with open_log(url, create=False) as log:
        times = sorted(r["logged_at"] for r in log.rows())
        full = recalibrate_from_log(log, router).report
        assert full["window"]["first_logged_at"] == times[0]
        assert full["window"]["last_logged_at"] == times[-1]
        # a window that ends before the first decision holds none of them
        with pytest.raises(ValueError, match="in the window"):
            recalibrate_from_log(log, router, until="2000-01-01T00:00:00Z")
        part = recalibrate_from_log(log, router, since=times[0], until="2999-01-01T00:00:00Z")
    assert part.report["window"]["until"].startswith("2999-01-01")
    assert part.report["calibration_size"] == full["calibration_size"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"router_version": "7"}, "the router is version '1'"),
        ({"since": "yesterday"}, "not an ISO 8601 time"),
        ({"since": "2026-01-01"}, "needs a UTC offset"),
        ({"since": "2026-01-02T00:00:00Z", "until": "2026-01-01T00:00:00Z"}, "must be before"),
        ({"since": "2999-01-01T00:00Z"}, "no audited decision of router 'support' version '1' in"),
    ],
)
def test_mistakes_raise_naming_the_cause(incumbent, tmp_path, kwargs, message):
    router, _ = incumbent
    url = _log(tmp_path, router, n=50)
    with open_log(url, create=False) as log, pytest.raises(ValueError, match=message):
        recalibrate_from_log(log, router, **kwargs)


def test_no_labelled_audit_is_an_error(incumbent, tmp_path):
    router, _ = incumbent
    url = _log(tmp_path, router, n=50, label_share=0.0)
    with open_log(url, create=False) as log, pytest.raises(ValueError, match="audits pending"):
        recalibrate_from_log(log, router)


def test_a_policy_with_another_fitter_is_refused(incumbent, tmp_path):
    from hybridroute.calibration import EmpiricalThreshold

    router, _ = incumbent
    clf = router.classifier
    fitter = EmpiricalThreshold(0.9).fit([0.5, 0.9, 0.95], [True, True, True])
    policy = Policy.build(classes=list(clf.classes_), threshold=fitter, objective="empirical")
    from hybridroute.router import HybridRouter

    other = HybridRouter(
        rules=router.rules,
        classifier=clf,
        policy=policy,
        destinations=router.destinations,
        oos_label=router.oos_label,
        name="support",
        version="1",
    )
    url = _log(tmp_path, router, n=50)
    with open_log(url, create=False) as log, pytest.raises(ValueError, match="'empirical'"):
        recalibrate_from_log(log, other)


def test_calibrate_from_log_writes_a_new_bundle(incumbent, tmp_path, capsys):
    router, path = incumbent
    url = _log(tmp_path, router)
    out = tmp_path / "candidate"
    code = main(["calibrate", "--from-log", url, "--router", path, "--out", str(out)])
    text = capsys.readouterr().out
    assert code == 0, text
    assert "certified        yes" in text and "never audited" in text
    new = load_router(out)
    assert new.version.startswith("1-log") and new.name == router.name
    assert new.policy.thresholds["auto"] >= router.policy.thresholds["auto"]
    assert new.policy.provenance["log"] == url
    # the same command again gives the same policy
    code = main(
        ["calibrate", "--from-log", url, "--router", path, "--out", str(tmp_path / "c2"), "--json"]
    )
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["version"] == new.version
    assert load_router(tmp_path / "c2").policy == new.policy


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--dataset", "support-tickets"], "--dataset apply to fitting from a dataset"),
        (["--objective", "coverage"], "--objective apply to fitting from a dataset"),
        (["--version", "1"], "is the incumbent's"),
        (["--router-version", "2"], "the router is version '1'"),
    ],
)
def test_calibrate_from_log_mistakes_are_one_line_exit_2(
    incumbent, tmp_path, capsys, extra, message
):
    router, path = incumbent
    url = _log(tmp_path, router, n=50)
    args = ["calibrate", "--from-log", url, "--router", path, "--out", str(tmp_path / "o"), *extra]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_calibrate_from_log_needs_a_router_and_a_fresh_out(incumbent, tmp_path, capsys):
    router, path = incumbent
    url = _log(tmp_path, router, n=50)
    assert main(["calibrate", "--from-log", url, "--out", str(tmp_path / "o")]) == 2
    assert "needs --router" in capsys.readouterr().err
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    assert (
        main(["calibrate", "--from-log", url, "--router", path, "--out", str(tmp_path / "full")])
        == 2
    )
    assert re.search("not (an )?empty", capsys.readouterr().err)
    assert main(["calibrate", "--model", path, "--out", str(tmp_path / "p.json")]) == 2
    assert "--dataset" in capsys.readouterr().err
    assert (
        main(["calibrate", "--dataset", "x", "--model", path, "--router", path, "--out", "p"]) == 2
    )
    assert "only goes with --from-log" in capsys.readouterr().err


@pytest.mark.slow
def test_the_refitted_certificate_holds_over_many_seeded_logs(incumbent, tmp_path):
    """Violation rate of the refitted threshold over seeded audit samples ≤ delta: the
    true precision above a threshold is known in closed form for the simulated stream."""
    router, _ = incumbent
    t_old = router.policy.thresholds["auto"]
    # precision above u0 is 0.9 + 0.1 u0: at least the target only for u0 >= 0.5
    target, delta = 0.95, 0.1
    violations = certified = 0
    reps = 100
    for rep in range(reps):
        sub = tmp_path / f"r{rep}"
        sub.mkdir()
        url = _log(sub, router, n=1600, rates=(0.5, 0.25), seed=rep)
        with open_log(url, create=False) as log:
            r = recalibrate_from_log(log, router, target=target, delta=delta, seed=rep).report
        if not r["certified"]:
            continue
        certified += 1
        # p_right(c) = 0.8 + 0.2 u, u uniform on [0, 1]: precision above u0 is 0.9 + 0.1 u0
        u0 = (r["threshold"] - t_old) / (1 - t_old)
        violations += (0.9 + 0.1 * u0) < target
    assert certified >= reps // 4, certified
    assert violations / reps <= delta, (violations, certified)
