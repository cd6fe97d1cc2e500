"""The promotion gate (monitoring.promotion_gate) on small in-memory routers and real logs.

The world: a two-label classifier whose text carries its own top label and confidence, a
policy certified at 0.85 on calibration data where confident items (>= 0.8) are right 97%
of the time and the others 45%, live traffic where confident items (>= 0.7) are right 99% of
the time, and the example support rules (every tenth ticket lacks permission, every tenth
has a high amount). The incumbent's log is audited at rate 0.5; every audited decision has
an audit outcome, and every decision sent to human review a human_review outcome.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from scipy.stats import hypergeom

from hybridroute.calibration import CertifiedPrecisionThreshold, EmpiricalThreshold, Policy
from hybridroute.classifiers import IntentClassifier
from hybridroute.datasets import LabelledSet
from hybridroute.exceptions import InputError, UserInputError
from hybridroute.monitoring import PromotionReport, promotion_gate
from hybridroute.monitoring._promote_checks import hypergeometric_bounds
from hybridroute.records import AuditSampler, open_log
from hybridroute.router import HybridRouter
from hybridroute.rules import load_rules, parse_rules

from ..router.conftest import EXAMPLE

CLASSES = ("order_status", "refund_request")
N = 600


class ScoreClassifier(IntentClassifier):
    """Reads ``"i:label:confidence"``; with ``flip_every`` k, names the other label for every
    k-th item (a degraded model)."""

    kind = "score"

    def __init__(self, flip_every: int = 0) -> None:
        self.flip_every = flip_every
        self.classes_ = np.asarray(CLASSES)

    def predict_proba(self, texts):
        out = np.zeros((len(texts), 2))
        for r, text in enumerate(texts):
            i, label, conf = text.split(":")
            j = CLASSES.index(label)
            if self.flip_every and int(i) % self.flip_every == 0:
                j = 1 - j
            out[r, j], out[r, 1 - j] = float(conf), 1 - float(conf)
        return out


def _policy(fitter, **build) -> Policy:
    rng = np.random.default_rng(1)
    conf = rng.uniform(0.5, 1, 3000)
    correct = rng.uniform(size=3000) < np.where(conf >= 0.8, 0.97, 0.45)
    fitter.fit(conf, correct)
    return Policy.build(classes=list(CLASSES), threshold=fitter, objective=fitter.method, **build)


RULES = load_rules(EXAMPLE)
LOOSER_RULES = parse_rules(EXAMPLE.read_text().replace("amount_limit: 500", "amount_limit: 5000"))
CLF = ScoreClassifier()
A_POLICY = _policy(CertifiedPrecisionThreshold(0.85, 0.1))


def router(version="1", *, policy=A_POLICY, rules=RULES, clf=CLF, name="support"):
    return HybridRouter(rules=rules, classifier=clf, policy=policy, name=name, version=version)


A = router("1")


def traffic(n: int = N, seed: int = 0):
    """``n`` tickets and each one's gold intent."""
    rng = np.random.default_rng(seed)
    items, gold = [], []
    for i in range(n):
        conf = float(rng.uniform(0.5, 1))
        label = CLASSES[int(rng.integers(2))]
        right = rng.uniform() < (0.99 if conf >= 0.7 else 0.45)
        facts = {"has_permission": False} if i % 10 == 1 else {}
        if i % 10 == 2:
            facts["amount"] = 900  # the risk rule: human review
        items.append({"facts": facts, "text": f"{i}:{label}:{conf:.4f}"})
        gold.append(label if right else CLASSES[1 - CLASSES.index(label)])
    return items, gold


ITEMS, GOLD = traffic()


def make_log(
    tmp_path,
    *,
    routed_by=A,
    rate: float = 0.5,
    reviews: bool = True,
    shadow=None,
    name: str = "log.sqlite",
    **log_options,
) -> str:
    """The incumbent's log: ITEMS routed live by ``routed_by`` (and by ``shadow`` as a
    shadow), audit outcomes on audited decisions, human_review outcomes on reviews."""
    url = f"sqlite:///{tmp_path / name}"
    audit = AuditSampler(rate, "test-key") if rate else None
    with open_log(url, audit=audit, **log_options) as log:
        log.register_router(routed_by)
        live = log.log_many(
            [(d, f"r{i}", "live") for i, d in enumerate(routed_by.route_many(ITEMS))]
        )
        if shadow is not None:
            log.log_many([(d, f"r{i}", "shadow") for i, d in enumerate(shadow.route_many(ITEMS))])
        rows = {r["decision_id"]: r for r in log.rows(role="live")}
        outcomes = []
        for i, ld in enumerate(live):
            row = rows[ld.decision_id]
            if row["audited"] == 1:
                source = "audit"
            elif reviews and row["selected_destination"] == "human_review":
                source = "human_review"
            else:
                continue
            outcomes.append(
                {"decision_id": ld.decision_id, "gold_intent": GOLD[i], "source": source}
            )
        if outcomes:
            log.add_outcomes(outcomes)
    return url


@pytest.fixture(scope="module")
def log_url(tmp_path_factory):
    return make_log(tmp_path_factory.mktemp("promote"))


def gate(url, candidate, incumbent=A, **kw) -> PromotionReport:
    with open_log(url, create=False) as log:
        return promotion_gate(log, incumbent, candidate, **kw)


# ---------------------------------------------------------------- exact bounds


@pytest.mark.parametrize(
    ("successes", "sample", "population"),
    [(0, 0, 10), (0, 5, 5), (5, 5, 5), (3, 7, 20), (19, 20, 57), (40, 40, 300), (1, 30, 31)],
)
def test_hypergeometric_bounds_are_the_exact_ones(successes, sample, population):
    delta = 0.1
    ks = range(successes, population - (sample - successes) + 1)
    lower = min(k for k in ks if hypergeom.sf(successes - 1, population, k, sample) > delta)
    upper = max(k for k in ks if hypergeom.cdf(successes, population, k, sample) > delta)
    assert hypergeometric_bounds(successes, sample, population, delta) == (lower, upper)


def test_hypergeometric_bounds_cover_the_truth_at_1_minus_delta():
    rng = np.random.default_rng(7)
    population, correct, sample, delta, runs = 300, 250, 40, 0.1, 600
    low = high = 0
    for _ in range(runs):
        s = int(rng.hypergeometric(correct, population - correct, sample))
        lo, hi = hypergeometric_bounds(s, sample, population, delta)
        low += correct < lo
        high += correct > hi
    assert low / runs <= delta and high / runs <= delta


# ---------------------------------------------------------------- pass and fail


@pytest.mark.parametrize(
    "candidate",
    [router("2"), router("2", policy=_policy(CertifiedPrecisionThreshold(0.9, 0.1)))],
    ids=["same-policy", "stricter-policy"],
)
def test_an_equal_or_stricter_candidate_passes(log_url, candidate):
    report = gate(log_url, candidate)
    assert report.passed, report.summary_lines()
    assert report.reasons == ()
    p = report.check("precision").figures
    # the higher of the two targets: a stricter candidate is held to its own promise
    target = max(0.85, candidate.policy.guarantee["target"])
    assert p["lower"] >= p["target"] == target and p["delta"] == 0.1
    assert p["from_incumbent_deferred"]["n"] == 0  # it auto-routes nothing A deferred
    assert p["coverage"] <= p["incumbent"]["coverage"]
    assert report.decisions["from_replay"] == N and not report.decisions["rescored"]
    assert report.check("disagreement").figures["source"] == "replay"
    assert report.check("paired_test").status == "skipped"
    json.dumps(report.to_dict())  # plain JSON


def test_a_candidate_with_a_much_lower_threshold_fails_on_precision(log_url):
    low = router("2", policy=_policy(EmpiricalThreshold(0.6)))
    report = gate(log_url, low)
    assert not report.passed
    check = report.check("precision")
    assert check.status == "fail" and "below target" in check.reason
    f = check.figures
    assert f["upper"] < 0.85 and f["target"] == 0.85  # the incumbent's, not its own 0.6
    assert "incumbent's" in f["target_source"]
    # what it gains it auto-routes from A's deferrals, labelled by human review
    assert f["from_incumbent_deferred"]["n"] > 0 and f["from_incumbent_deferred"]["unlabelled"] == 0
    assert f["coverage"] > f["incumbent"]["coverage"]
    assert [r.split(":")[0] for r in report.reasons] == ["precision"]
    d = report.check("disagreement").figures
    assert d["by_stage"]["policy"]["destination"] > 0 and d["by_stage"]["rule"]["destination"] == 0


def test_unlabelled_deferrals_make_it_insufficient_not_a_guess(tmp_path):
    url = make_log(tmp_path, reviews=False)
    check = gate(url, router("2", policy=_policy(EmpiricalThreshold(0.6)))).check("precision")
    assert check.status == "insufficient" and not check.passed
    f = check.figures
    assert f["from_incumbent_deferred"]["unlabelled"] == f["from_incumbent_deferred"]["n"] > 0
    assert f["unlabelled"] >= f["from_incumbent_deferred"]["n"]
    assert f["lower"] < 0.85 <= f["upper"]
    assert "no human_review outcome" in check.reason


def test_pending_audits_count_against_the_lower_bound(tmp_path):
    url = make_log(tmp_path, reviews=False)
    with open_log(url, create=False) as log:
        audited = sum(1 for r in log.rows() if r["audited"] == 1)
    full = gate(url, router("2")).check("precision").figures
    url2 = f"sqlite:///{tmp_path / 'pending.sqlite'}"
    with open_log(url2, audit=AuditSampler(0.5, "test-key")) as log:
        log.log_many([(d, f"r{i}", "live") for i, d in enumerate(A.route_many(ITEMS))])
    check = gate(url2, router("2")).check("precision")
    assert check.status == "insufficient"
    f = check.figures
    assert f["from_incumbent_auto"]["pending"] == f["from_incumbent_auto"]["audited"] > 0
    assert f["estimate"] is None and f["lower"] == 0.0 and f["upper"] == 1.0
    assert audited and full["from_incumbent_auto"]["pending"] == 0


def test_a_degraded_classifier_is_rescored_and_fails(log_url):
    report = gate(log_url, router("3", clf=ScoreClassifier(flip_every=2)))
    assert report.decisions["rescored"] is True
    assert report.check("precision").status == "fail"
    assert report.check("disagreement").figures["by_stage"]["model"]["destination"] > 0


def test_max_disagreement_is_judged_only_when_asked(log_url):
    low = router("2", policy=_policy(EmpiricalThreshold(0.6)))
    assert gate(log_url, low).check("disagreement").passed
    check = gate(log_url, low, max_disagreement=0.1).check("disagreement")
    assert check.status == "fail" and "more than the 0.1 allowed" in check.reason


# ---------------------------------------------------------------- rules


def test_changed_rules_are_listed_and_fail_unless_allowed(log_url):
    looser = router("2", rules=LOOSER_RULES)
    report = gate(log_url, looser, max_listed=3)
    check = report.check("rules")
    assert check.status == "fail"
    f = check.figures
    high_amount = sum(1 for it in ITEMS if it["facts"] == {"amount": 900})
    assert f["rules_changed"] and f["incumbent_rules_sha256"] != f["candidate_rules_sha256"]
    assert f["changed"] == f["changed_by_kind"]["incumbent_rule_overturned"] == high_amount
    assert f"rules changed: {high_amount} decisions differ" in check.reason
    assert len(f["examples"]) == 3  # bounded list, full count
    ex = f["examples"][0]
    assert (
        ex["incumbent"]["reason_code"] == "high_risk_amount" and ex["candidate"]["stage"] != "rule"
    )
    assert any("... and" in line for line in report.summary_lines())
    allowed = gate(log_url, looser, allow_rule_changes=True).check("rules")
    assert allowed.status == "pass" and "accepted" in allowed.reason


def test_identical_rules_that_decide_otherwise_are_a_defect(tmp_path):
    # the log was written by a router that called itself "support 1" but had looser rules
    url = make_log(tmp_path, routed_by=router("1", rules=LOOSER_RULES))
    check = gate(url, router("2")).check("rules")
    assert check.status == "fail" and "rules are unchanged, yet" in check.reason
    assert check.figures["changed_by_kind"]["candidate_rule_added"] > 0


def test_hashed_sensitive_facts_cannot_be_replayed(tmp_path):
    url = make_log(tmp_path, sensitive_fields=("amount",), salt="s")
    same = gate(url, router("2"))
    assert same.decisions["unreplayable"] == N and same.decisions["errors"]
    rules = same.check("rules")
    assert rules.status == "pass" and "could not be replayed" in rules.reason
    assert same.check("precision").status == "insufficient"
    assert gate(url, router("2", rules=LOOSER_RULES)).check("rules").status == "insufficient"


# ---------------------------------------------------------------- shadow


def test_shadow_decisions_are_used_and_must_be_the_candidates(tmp_path):
    url = make_log(tmp_path, shadow=router("2"))
    report = gate(url, router("2"))
    assert report.passed, report.summary_lines()
    d = report.check("disagreement").figures
    assert report.decisions["from_shadow"] == N and d["source"] == "shadow"
    assert d["shadow"]["n"] == N and d["shadow_reproduced"]["checked"] == N
    # another bundle under the shadowed version does not reproduce those decisions
    impostor = router("2", policy=_policy(EmpiricalThreshold(0.6)))
    check = gate(url, impostor).check("disagreement")
    assert check.status == "fail" and "not the bundle that ran as shadow" in check.reason
    assert check.figures["shadow_reproduced"]["mismatches"] > 0


# ---------------------------------------------------------------- calibration window


def refitted(log_name: str, first_seq: int, last_seq: int) -> HybridRouter:
    """A candidate whose policy says it was refitted on ``log_name``'s audits in a window."""
    provenance = {
        "log": log_name,
        "router": "support",
        "router_version": "1",
        "window": {"first_seq": first_seq, "last_seq": last_seq},
    }
    fitter = CertifiedPrecisionThreshold(0.85, 0.1)
    return router("2", policy=_policy(fitter, provenance=provenance))


@pytest.mark.parametrize("named", ["url", "path"])
def test_the_audits_a_candidate_was_refitted_on_are_left_out(log_url, named):
    with open_log(log_url, create=False) as log:
        seqs = [r["seq"] for r in log.rows(role="live")]
    name = log_url if named == "url" else log_url.removeprefix("sqlite:///")
    refit = refitted(name, seqs[0], seqs[N // 2 - 1])
    f = gate(log_url, refit).check("precision").figures
    assert f["inputs"] == N - N // 2 and f["calibration_window"]["excluded"] == N // 2
    assert f["calibration_window"]["this_log"] is True
    again = gate(log_url, refit, include_calibration_audits=True).check("precision")
    assert again.figures["inputs"] == N
    check = gate(log_url, refitted(name, seqs[0], seqs[-1])).check("precision")
    assert check.status == "insufficient" and "calibrated on" in check.reason


def test_a_window_of_another_log_is_not_applied(log_url):
    f = gate(log_url, refitted("sqlite:///elsewhere.sqlite", 1, 10**9)).check("precision").figures
    assert f["inputs"] == N and f["calibration_window"]["this_log"] is False


# ---------------------------------------------------------------- paired test


def labelled(n: int = 300) -> LabelledSet:
    items, gold = traffic(n, seed=5)
    frame = pd.DataFrame(
        {
            "text": [it["text"] for it in items],
            "label": gold,
            "amount": [it["facts"].get("amount") for it in items],
        }
    )
    return LabelledSet.from_frame(frame, name="tickets")


def test_the_paired_test_fails_a_significantly_worse_candidate(log_url):
    data = labelled()
    same = gate(log_url, router("2"), dataset=data, n_boot=200).check("paired_test")
    assert same.status == "pass" and same.figures["mcnemar"]["p_value"] == 1.0
    assert same.figures["key"] == "correct" and same.figures["n"] > 0
    worse = gate(log_url, router("3", clf=ScoreClassifier(flip_every=2)), dataset=data, n_boot=200)
    check = worse.check("paired_test")
    assert check.status == "fail" and "significantly worse" in check.reason
    f = check.figures
    assert f["mcnemar"]["p_value"] < 0.05 and f["accuracy_candidate"] < f["accuracy_incumbent"]
    assert f["paired_bootstrap"]["ci"][0] > 0  # incumbent - candidate
    assert worse.metrics()["mcnemar_p_value"] < 0.05


# ---------------------------------------------------------------- mistakes


def test_report_metrics_and_lines(log_url):
    report = gate(log_url, router("2"))
    m = report.metrics()
    assert m["passed"] == 1.0 and 0.85 <= m["precision_lower"] <= m["precision_upper"] <= 1
    assert m["disagreement_destination_rate"] == 0.0 and m["rule_decisions_changed"] == 0
    assert all(isinstance(v, float) for v in m.values())
    lines = report.summary_lines()
    assert lines[0].startswith("promotion gate: PASS") and any("[pass] rules" in x for x in lines)
    with pytest.raises(KeyError):
        report.check("nonsense")


@pytest.mark.parametrize(
    ("candidate", "options", "error", "message"),
    [
        (A, {}, UserInputError, "same router version"),
        (router("2"), {"target": 1.5}, UserInputError, "target must be a number in"),
        (router("2"), {"alpha": 0}, UserInputError, "alpha must be a number in"),
        (router("2"), {"max_disagreement": 2}, UserInputError, "largest disagreement"),
    ],
)
def test_bad_arguments_are_user_errors(log_url, candidate, options, error, message):
    with pytest.raises(error, match=message):
        gate(log_url, candidate, **options)


def test_a_log_without_the_incumbent_or_without_audits_is_refused(tmp_path, log_url):
    with pytest.raises(InputError, match="no live decision of the incumbent other 1"):
        gate(log_url, router("2", name="other"), incumbent=router("1", name="other"))
    with pytest.raises(InputError, match="no audited decision of the incumbent support 1"):
        gate(make_log(tmp_path, rate=0), router("2"))
    no_target = router("2", policy=_policy(EmpiricalThreshold(0.6)))
    no_target.policy._doc["guarantee"]["target"] = None  # a policy that promises nothing
    a = router("1", policy=no_target.policy)
    with pytest.raises(InputError, match="neither router's policy promises"):
        gate(log_url, no_target, incumbent=a)
