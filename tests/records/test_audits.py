"""Audit sampling: keyed, reproducible selection close to the rate; the inclusion
probability recorded on each live decision (both backends); pending audits listed."""

from __future__ import annotations

import random

import pytest
from scipy.stats import binom

from hybridroute.contracts import Decision
from hybridroute.exceptions import UserInputError
from hybridroute.records import AUDIT_KEY_ENV, AuditSampler, open_log


def decision(i: int, stage: str = "model", version: str = "1", text: str | None = None):
    model = stage in ("model", "policy")
    return Decision(
        router="r",
        router_version=version,
        stage=stage,
        input_snapshot={"facts": {"n": i}, "text": text or f"ticket {i}"},
        allowed_destinations=("billing", "human_review"),
        selected_destination="billing" if stage == "model" else "human_review",
        reason_code="confident_intent" if stage == "model" else "low_confidence",
        label="billing" if model else None,
        confidence=0.9 if model else None,
    )


def seeded_ids(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [f"{rng.getrandbits(128):032x}" for _ in range(n)]


# --------------------------------------------------------------------------- selection
@pytest.mark.parametrize(("rate", "seed"), [(0.02, 0), (0.05, 1), (0.2, 2), (0.5, 3)])
def test_selection_is_close_to_the_rate(rate, seed):
    n = 20_000
    sampler = AuditSampler(rate, f"key-{seed}")
    k = sum(sampler.mark(i, "model")[1] for i in seeded_ids(n, seed))
    # a two-sided binomial bound that a fair selection leaves with probability 1e-6
    low, high = binom.ppf(0.5e-6, n, rate), binom.isf(0.5e-6, n, rate)
    assert low <= k <= high, (k, low, high)


def test_selection_is_reproducible_and_depends_on_the_key():
    ids = seeded_ids(5000, 7)
    a, again, other = AuditSampler(0.3, "k1"), AuditSampler(0.3, b"k1"), AuditSampler(0.3, "k2")
    picks = [a.mark(i, "model")[1] for i in ids]
    assert picks == [again.mark(i, "model")[1] for i in ids]  # the same on replay
    assert picks != [other.mark(i, "model")[1] for i in ids]  # another key, another sample
    assert all(0.0 <= a.score(i) < 1.0 for i in ids)
    # a larger rate selects a superset: one keyed number per decision, compared to the rate
    wider = AuditSampler(0.6, "k1")
    assert all(wider.mark(i, "model")[1] for i, p in zip(ids, picks, strict=True) if p)


@pytest.mark.parametrize("stage", ["rule", "policy", "fallback"])
def test_only_auto_routed_decisions_can_be_selected(stage):
    sampler = AuditSampler(1.0, "k")
    assert sampler.mark("abc", stage) == (0.0, False)
    assert sampler.mark("abc", "model") == (1.0, True)


def test_the_key_is_never_shown():
    sampler = AuditSampler(0.1, "s3cret-key")
    assert "s3cret" not in repr(sampler) and "s3cret" not in str(sampler)


@pytest.mark.parametrize("value", ["", None])
def test_a_rate_without_its_key_is_a_clear_error(monkeypatch, value):
    if value is None:
        monkeypatch.delenv(AUDIT_KEY_ENV, raising=False)
    else:
        monkeypatch.setenv(AUDIT_KEY_ENV, value)
    with pytest.raises(UserInputError, match=f"audit rate 0.02 needs .* set {AUDIT_KEY_ENV}"):
        AuditSampler.from_env(0.02)
    assert AuditSampler.from_env(0) is None  # no audit, no key needed
    with pytest.raises(UserInputError, match=AUDIT_KEY_ENV):
        AuditSampler(0.5, "")


def test_the_key_is_read_from_the_environment(monkeypatch):
    monkeypatch.setenv(AUDIT_KEY_ENV, "from-env")
    sampler = AuditSampler.from_env(0.25)
    assert sampler is not None and sampler.rate == 0.25
    assert sampler.score("x") == AuditSampler(0.25, "from-env").score("x")


@pytest.mark.parametrize("rate", [-0.1, 1.5, float("nan"), "0.1", True])
def test_a_bad_rate_is_refused(rate):
    with pytest.raises(UserInputError, match="audit rate must be"):
        AuditSampler(rate, "k")


# --------------------------------------------------------------------------- the log
def test_the_inclusion_probability_is_recorded_with_each_live_decision(log_url):
    sampler = AuditSampler(0.5, "k")
    entries = [(decision(i), f"q{i}", "live") for i in range(40)]
    entries += [(decision(100, "rule"), "r0", "live"), (decision(101, "policy"), "p0", "live")]
    entries += [(decision(i), f"q{i}", "shadow") for i in range(200, 203)]
    with open_log(log_url, audit=sampler) as log:
        log.log_many(entries)
        log.append(decision(300), item_id="a0")  # the buffered path marks alike
        log.flush()
        rows = {r["item_id"] + r["role"]: r for r in log.rows()}
    auto = [rows[f"q{i}live"] for i in range(40)] + [rows["a0live"]]
    assert all(r["audit_p"] == 0.5 for r in auto)
    # reproducible on replay: the stored decision id and the key give the same selection
    assert [bool(r["audited"]) for r in auto] == [sampler.mark(r["decision_id"], "model")[1]
                                                  for r in auto]  # fmt: skip
    assert 5 < sum(r["audited"] for r in auto) < 36
    for key in ("r0live", "p0live"):
        assert (rows[key]["audit_p"], rows[key]["audited"]) == (0.0, 0)
    for i in range(200, 203):  # shadow decisions are never audited: no probability recorded
        assert (rows[f"q{i}shadow"]["audit_p"], rows[f"q{i}shadow"]["audited"]) == (None, None)


def test_a_duplicate_keeps_the_stored_rows_audit(log_url):
    with open_log(log_url, audit=AuditSampler(1.0, "k")) as log:
        (first,) = log.log_many([(decision(0), "q0", "live")])
    with open_log(log_url, audit=AuditSampler(0.0, b"")) as log:
        (again,) = log.log_many([(decision(0), "q0", "live")])
        (row,) = log.rows()
    assert again.duplicate and again.decision_id == first.decision_id
    assert (row["audit_p"], row["audited"]) == (1.0, 1)


def test_pending_audits_lists_audited_decisions_without_an_audit_outcome(log_url):
    secret = "sk-" + "a1B2c3D4" * 5
    with open_log(log_url, audit=AuditSampler(1.0, "k")) as log:
        logged = log.log_many(
            [(decision(0, text=f"my key is {secret}"), "q0", "live"),
             (decision(1, version="2"), "q1", "live"),
             (decision(2, "rule"), "q2", "live"),
             (decision(3), None, "live")]
        )  # fmt: skip
        for version in ("1", "2"):  # the labels their outcomes may name
            log.register_router(name="r", version=version, labels=["billing", "x"],
                                destinations=["billing", "human_review"])  # fmt: skip
        pending = log.pending_audits()
        assert [p["decision_id"] for p in pending] == [logged[i].decision_id for i in (0, 1, 3)]
        first = pending[0]
        assert first["request_id"] == "q0" and first["router_version"] == "1"
        assert first["audit_p"] == 1.0 and first["selected_destination"] == "billing"
        assert secret not in first["text"] and "my key is" in first["text"]  # as stored
        assert pending[2]["request_id"] is None
        assert [p["request_id"] for p in log.pending_audits(router_version="2")] == ["q1"]
        assert len(log.pending_audits(limit=1)) == 1
        # another source's outcome does not close an audit; an audit outcome does
        log.add_outcomes(
            [{"decision_id": logged[0].decision_id, "gold_intent": "x", "source": "user_feedback"},
             {"decision_id": logged[1].decision_id, "gold_intent": "x", "source": "audit"}]
        )  # fmt: skip
        assert [p["request_id"] for p in log.pending_audits()] == ["q0", None]


def test_a_log_without_audit_has_nothing_pending(log_url):
    with open_log(log_url) as log:
        log.log_many([(decision(i), f"q{i}", "live") for i in range(5)])
        assert log.pending_audits() == []
    with pytest.raises(TypeError, match="AuditSampler"):
        open_log(log_url, audit=0.1)
