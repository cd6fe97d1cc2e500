"""Conflicting labels are never settled by write order: one rule (monitoring._labels) for
the monitor, recalibration and the promotion gate; a disputed decision never counts as
correct until adjudicated; too many disputes refuse or flag a certificate; stored outcomes
that the log would refuse today are left out, never counted as wrong predictions."""

from __future__ import annotations

import itertools
import sqlite3

import numpy as np
import pytest

from hybridroute.monitoring import monitor_log, promotion_gate, recalibrate_from_log
from hybridroute.monitoring._labels import (
    DEFAULT_MAX_DISPUTED_SHARE,
    is_correct,
    settle_labels,
)
from hybridroute.records import AuditSampler, open_log
from hybridroute.records._vocabulary import RouterVocabulary

from . import test_promote as world
from .test_recalibrate import _decisions, incumbent  # noqa: F401  (a module fixture)

# --------------------------------------------------------------------------- the rule alone
VOCAB = RouterVocabulary.of(
    "r", "1", labels=("a", "b", "c"), oos_label="oos", destinations=("da", "db", "dc")
)
ROW = {"router": "r", "router_version": "1", "logged_at": "2026-01-01T00:00:00+00:00"}
DECISION = {"label": "a", "selected_destination": "da"}


def _outcome(gold, source="audit", at="2026-01-02T00:00:00+00:00"):
    intent, step = gold if isinstance(gold, tuple) else (gold, None)
    return {"decision_id": "d", "gold_intent": intent, "gold_next_step": step,
            "source": source, "observed_at": at, "recorded_at": at}  # fmt: skip


def _settle(outcomes):
    return settle_labels(
        outcomes, {"d": ROW}, sources=("audit",), vocabularies={("r", "1"): VOCAB}
    ).get("d")


ADJ = "adjudication"


@pytest.mark.parametrize(
    ("outcomes", "disputed", "gold", "adjudicated"),
    [
        ([("a", "audit")], False, ("a", None), False),
        ([("a", "audit"), ("a", "audit")], False, ("a", None), False),
        ([("a", "audit"), ("b", "audit")], True, None, False),
        ([("a", "audit"), ((None, "da"), "audit")], False, ("a", "da"), False),
        ([((None, "da"), "audit"), ((None, "db"), "audit")], True, None, False),
        ([(("a", "da"), "audit"), (("a", "db"), "audit")], True, None, False),
        ([("a", "audit"), ("b", "audit"), ("c", "audit")], True, None, False),
        ([("a", "audit"), ("b", "audit"), ("a", ADJ)], False, ("a", None), True),
        ([("a", "audit"), ("b", "audit"), ("b", ADJ)], False, ("b", None), True),
        ([("a", "audit"), ("b", ADJ)], False, ("b", None), True),  # adjudication decides
        ([("a", "audit"), ("b", "audit"), ("a", ADJ), ("b", ADJ)], True, None, False),
        ([("a", ADJ), ("a", ADJ)], False, ("a", None), True),
        ([("a", "audit"), ("b", "user_feedback"), ("c", "human_review")], False, ("a", None), False),
        ([("oos", "audit"), ("a", "audit")], True, None, False),
    ],
)  # fmt: skip
def test_the_rule_depends_on_the_outcomes_never_on_their_order(
    outcomes, disputed, gold, adjudicated
):
    seen = set()
    for order in itertools.permutations(outcomes):
        label = _settle([_outcome(g, s) for g, s in order])
        assert label is not None and label.disputed is disputed
        assert label.adjudicated is adjudicated
        if gold is not None:
            assert label.gold == gold
        seen.add((label.gold, label.disputed, label.adjudicated))
        # a disputed decision is never correct; as an upper bound the gate may count it right
        assert label.correct(DECISION) is (not disputed and is_correct(gold, DECISION))
        assert label.correct(DECISION, disputed_as=True) is (disputed or is_correct(gold, DECISION))
    assert len(seen) == 1


@pytest.mark.parametrize(
    ("outcome", "reason"),
    [
        (_outcome("no_such_label"), "gold_intent is not a label"),
        (_outcome((None, "rm -rf /")), "gold_next_step is not a destination"),
        (_outcome(("a", "db ")), "gold_next_step is not a destination"),
        (_outcome("a", at="2025-12-31T23:59:59+00:00"), "observed before the decision"),
        (_outcome("a", at="2026-01-01T00:59:59+01:00"), "observed before the decision"),
    ],
)
def test_outcomes_the_log_would_refuse_are_left_out_and_reported(outcome, reason):
    labels = settle_labels(
        [outcome, _outcome("b")], {"d": ROW}, sources=("audit",), vocabularies={("r", "1"): VOCAB}
    )
    label = labels.get("d")
    assert label is not None and not label.disputed and label.gold == ("b", None)
    assert [x["reason"][: len(reason)] for x in labels.invalid] == [reason]
    assert labels.invalid_report()["count"] == 1
    alone = settle_labels(
        [outcome], {"d": ROW}, sources=("audit",), vocabularies={("r", "1"): VOCAB}
    )
    assert alone.get("d") is None  # left out: not a wrong prediction, just unlabelled


def test_disputes_count_against_the_stated_share():
    outcomes = []
    rows = {}
    for i in range(100):
        rows[f"d{i}"] = ROW
        outcomes.append({**_outcome("a"), "decision_id": f"d{i}"})
        if i < 6:
            outcomes.append({**_outcome("b"), "decision_id": f"d{i}"})
    labels = settle_labels(outcomes, rows, sources=("audit",), vocabularies={("r", "1"): VOCAB})
    d = labels.disputes()
    assert (d["labelled"], d["disputed"], d["share"]) == (100, 6, 0.06)
    assert d["max_share"] == DEFAULT_MAX_DISPUTED_SHARE == 0.05 and d["exceeded"]
    assert not labels.disputes(0.06)["exceeded"] and labels.disputes(0.0)["exceeded"]
    assert labels.disputes(decision_ids=["d0", "d50"])["share"] == 0.5
    with pytest.raises(ValueError, match=r"in \[0, 1\]"):
        labels.disputes(1.5)


# --------------------------------------------------------------------------- on a real log
def _other(router, label):
    classes = [c for c in router.classes if c in router.destinations]
    return classes[(classes.index(label) + 1) % len(classes)]


def _third(router, label):
    return _other(router, _other(router, label))


PATTERNS = {
    # each disputed decision's outcomes, by what they name (gold / another / a third label)
    "true-then-wrong": ("gold", "other"),
    "three-labels": ("gold", "other", "third"),
    "adjudicated": ("gold", "other", "adj:gold"),
    "adjudicated-wrong": ("gold", "other", "adj:other"),
    "conflicting-adjudications": ("gold", "adj:gold", "adj:other"),
}


def disputed_log(path, router, pattern, order, *, n=600, share=1.0, seed=0, rate=1.0):
    """``n`` auto-routed decisions of ``router``, audited at ``rate``; each audited one
    labelled with its gold intent, except a ``share`` of them labelled by ``pattern``
    (written in the permutation ``order`` of its outcomes: one call per round)."""
    path.mkdir(parents=True, exist_ok=True)
    url = f"sqlite:///{path / 'log.sqlite'}"
    pairs = _decisions(router, n, np.random.default_rng(seed))
    with open_log(url, audit=AuditSampler(rate, "test-key")) as log:
        log.register_router(router)
        logged = log.log_many([(d, f"q{i}", "live") for i, (d, _) in enumerate(pairs)])
        audited = {r["decision_id"] for r in log.rows() if r["audited"] == 1}
        rounds: list[list[dict]] = [[] for _ in PATTERNS[pattern]]
        for i, (ld, (_, gold)) in enumerate(zip(logged, pairs, strict=True)):
            if ld.decision_id not in audited:
                continue
            names = {"gold": gold, "other": _other(router, gold), "third": _third(router, gold)}
            disputed = i < share * n
            steps = [PATTERNS[pattern][k] for k in order] if disputed else ["gold"]
            for k, step in enumerate(steps):
                tag, _, what = step.rpartition(":")
                source = {"": "audit", "adj": "adjudication"}[tag]
                rounds[k].append({"decision_id": ld.decision_id, "gold_intent": names[what],
                                  "source": source})  # fmt: skip
        for outcomes in rounds:
            if outcomes:
                log.add_outcomes(outcomes)
    return url


def _state(url, router, **kw):
    target = router.policy.guarantee["target"]
    with open_log(url, create=False) as log:
        state = monitor_log(log, target=target, delta=0.05, **kw)
    breach = state["breach"] and state["breach"]["labels"]  # its time differs between logs
    keep = ("status", "labels", "precision", "pending", "disputes")
    return {**{k: state[k] for k in keep}, "breach_labels": breach}


def _orders(pattern):
    return list(itertools.permutations(range(len(PATTERNS[pattern]))))


@pytest.mark.parametrize("pattern", sorted(PATTERNS))
def test_the_monitor_gives_one_answer_whatever_the_write_order(incumbent, tmp_path, pattern):  # noqa: F811
    router, _ = incumbent
    states = [
        _state(disputed_log(tmp_path / f"o{k}", router, pattern, order), router)
        for k, order in enumerate(_orders(pattern))
    ]
    assert all(s == states[0] for s in states), pattern
    s = states[0]
    settled = pattern in ("adjudicated", "adjudicated-wrong")
    assert s["disputes"]["disputed"] == (0 if settled else s["labels"])
    if pattern == "adjudicated":  # settled to the true labels: as if never disputed
        clean = _state(disputed_log(tmp_path / "clean", router, pattern, (0,), share=0.0), router)
        assert s["disputes"]["adjudicated"] == 600
        assert (s["status"], s["precision"]) == (clean["status"], clean["precision"])
    else:  # every label disputed or adjudicated wrong: every one counts as wrong
        assert s["precision"]["estimate"] == 0.0 and s["status"] == "breach"


def _certificate(report):
    keys = ("threshold", "bound", "certified", "calibration_size", "retained_share", "disputes")
    return {k: report[k] for k in keys}


def test_recalibration_refuses_disputed_labels_in_either_order(incumbent, tmp_path):  # noqa: F811
    router, _ = incumbent
    reports = []
    for k, order in enumerate(_orders("true-then-wrong")):
        url = disputed_log(tmp_path / f"o{k}", router, "true-then-wrong", order)
        with open_log(url, create=False) as log:
            # the log: before, one order certified a new threshold (bound 0.86)
            with pytest.raises(ValueError, match=r"600 of the 600 .* are disputed"):
                recalibrate_from_log(log, router)
            reports.append(recalibrate_from_log(log, router, max_disputed_share=1.0).report)
    a, b = reports  # (decision ids, and so the data fingerprint, differ between the logs)
    assert _certificate(a) == _certificate(b)
    assert not a["certified"] and a["disputes"]["disputed"] == 600  # all wrong: nothing certified


@pytest.mark.parametrize("share", [0.02, 0.1])
def test_a_few_disputes_count_as_wrong_and_too_many_are_refused(incumbent, tmp_path, share):  # noqa: F811
    router, _ = incumbent
    results = []
    for k, order in enumerate(_orders("true-then-wrong")):
        url = disputed_log(
            tmp_path / f"o{k}", router, "true-then-wrong", order, n=1500, share=share
        )
        with open_log(url, create=False) as log:
            if share > DEFAULT_MAX_DISPUTED_SHARE:
                with pytest.raises(ValueError, match="adjudication"):
                    recalibrate_from_log(log, router)
                results.append(recalibrate_from_log(log, router, max_disputed_share=0.2).report)
            else:
                results.append(recalibrate_from_log(log, router).report)
    a, b = results
    assert _certificate(a) == _certificate(b)
    assert a["disputes"]["disputed"] == round(share * 1500)
    with open_log(disputed_log(tmp_path / "clean", router, "true-then-wrong", (0, 1), n=1500,
                               share=0.0), create=False) as log:  # fmt: skip
        clean = recalibrate_from_log(log, router).report
    # the disputed rows count as wrong: never a lower threshold (or a weaker certificate)
    assert clean["certified"] and (not a["certified"] or a["threshold"] >= clean["threshold"])
    assert a["certified"] is (share < DEFAULT_MAX_DISPUTED_SHARE)  # 10% wrong more: not at all


# --------------------------------------------------------------------------- the promotion gate
def gate_logs(path, *, share):
    """test_promote's world (the incumbent A's log, audited at 0.5) copied twice, the same
    decisions in each, with a ``share`` of the audited ones given two audit labels (the
    gold one and the other): gold first in one copy, other first in the other."""
    path.mkdir(parents=True, exist_ok=True)
    url = world.make_log(path, reviews=True)
    with open_log(url) as log:
        rows = [r for r in log.rows() if r["audited"] == 1]
        gold = {
            o["decision_id"]: o["gold_intent"] for o in log.outcomes() if o["source"] == "audit"
        }
        reviews = [{"decision_id": o["decision_id"], "gold_intent": o["gold_intent"],
                    "source": "human_review"} for o in log.outcomes()
                   if o["source"] == "human_review"]  # fmt: skip
    src = sqlite3.connect(url.removeprefix("sqlite:///"))
    cols = [r[1] for r in src.execute("PRAGMA table_info(decisions)")]
    decisions = src.execute(f"SELECT {', '.join(cols)} FROM decisions ORDER BY seq").fetchall()
    src.close()
    urls = []
    for order in ((0, 1), (1, 0)):
        copy = path / f"order-{order[0]}{order[1]}"
        copy.mkdir()
        url2 = f"sqlite:///{copy / 'log.sqlite'}"
        with open_log(url2) as log:
            log.register_router(world.A)
        dst = sqlite3.connect(url2.removeprefix("sqlite:///"))  # the decisions, ids kept
        dst.executemany(
            f"INSERT INTO decisions ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
            decisions,
        )
        dst.commit()
        dst.close()
        rounds: list[list[dict]] = [[], []]
        for i, r in enumerate(rows):
            g = gold[r["decision_id"]]
            labels = [g, world.CLASSES[1 - world.CLASSES.index(g)]]
            labels = [labels[k] for k in order] if i < share * len(rows) else [g]
            for k, label in enumerate(labels):
                rounds[k].append(
                    {"decision_id": r["decision_id"], "gold_intent": label, "source": "audit"}
                )
        with open_log(url2) as log:
            for outcomes in (reviews, *rounds):
                if outcomes:
                    log.add_outcomes(outcomes)
        urls.append(url2)
    return urls


@pytest.mark.parametrize("share", [0.0, 0.3])
def test_the_gate_gives_one_answer_whatever_the_write_order(tmp_path, share):
    checks = []
    for url in gate_logs(tmp_path, share=share):
        with open_log(url, create=False) as log:
            checks.append(promotion_gate(log, world.A, world.router("2")).check("precision"))
    a, b = checks
    assert (a.status, a.reason) == (b.status, b.reason)
    fa, fb = dict(a.figures), dict(b.figures)
    fa.pop("invalid_outcomes"), fb.pop("invalid_outcomes")
    assert fa == fb
    if share:
        assert a.status == "fail" and "disputed" in a.reason and "adjudication" in a.reason
        assert a.figures["disputes"]["exceeded"] and a.figures["from_incumbent_auto"]["disputed"]
        with open_log(url, create=False) as log:  # allowed: counted wrong for the lower bound
            allowed = promotion_gate(log, world.A, world.router("2"), max_disputed_share=1.0).check(
                "precision"
            )
        assert "more than the" not in allowed.reason
        assert allowed.figures["lower"] < a.figures["upper"]
    else:
        assert a.status == "pass" and a.figures["disputes"]["disputed"] == 0


def test_stored_outcomes_an_older_version_accepted_are_left_out(incumbent, tmp_path, capsys):  # noqa: F811
    """A log written before the checks: a typo, a junk next step, a label observed before
    its decision, outcomes of shadow and of unaudited decisions -- reported and left out,
    never counted as wrong predictions (monitor, recalibration)."""
    router, _ = incumbent
    url = disputed_log(tmp_path, router, "true-then-wrong", (0, 1), n=400, share=0.0)
    with open_log(url, create=False) as log:
        clean = monitor_log(log, target=0.85, delta=0.05)
        clean_recal = recalibrate_from_log(log, router).report
        rows = [r for r in log.rows() if r["audited"] == 1][:32]
    extra = [d for d, _ in _decisions(router, 3, np.random.default_rng(9))]
    with open_log(url, audit=AuditSampler(0.0, "test-key")) as log:  # never audited
        unaudited = log.log_many([(d, f"u{i}", "live") for i, d in enumerate(extra[:2])])
        (shadow,) = log.log_many([(extra[2], "s0", "shadow")])
    old = [  # what an older version stored (it checked none of this): bypass the API
        (r["decision_id"], "no_such_label", None, "audit", r["logged_at"]) if i % 2 else
        (r["decision_id"], None, "rm -rf /", "audit", r["logged_at"])
        for i, r in enumerate(rows[:30])
    ] + [(r["decision_id"], "billing_dispute", None, "audit", "2000-01-01T00:00:00+00:00")
         for r in rows[30:]] + [(u.decision_id, "order_status", None, "audit",
                                 "2999-01-01T00:00:00+00:00") for u in unaudited] + [
        (shadow.decision_id, "order_status", None, "human_review", "2999-01-01T00:00:00+00:00")
    ]  # fmt: skip
    conn = sqlite3.connect(url.removeprefix("sqlite:///"))
    conn.executemany(
        "INSERT INTO outcomes (outcome_id, decision_id, gold_intent, gold_next_step, source, "
        "observed_at, recorded_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
        [(f"old{i}", *o, o[-1]) for i, o in enumerate(old)],
    )
    conn.commit()
    conn.close()
    with open_log(url, create=False) as log:
        state = monitor_log(log, target=0.85, delta=0.05)
        recal = recalibrate_from_log(log, router).report
    invalid = state["invalid_outcomes"]
    assert (invalid["count"], invalid["shadow"], invalid["audit_not_audited"]) == (32, 1, 2)
    assert invalid["by_reason"] == {
        "gold_intent is not a label of the router version": 15,
        "gold_next_step is not a destination of the router version": 15,
        "observed before the decision was logged": 2,
    }
    assert len(invalid["examples"]) == 20  # the first ones in full
    # nothing of them counted: the same precision, no dispute, the same certificate
    assert state["precision"] == clean["precision"] and state["disputes"]["disputed"] == 0
    assert state["labels"] == clean["labels"]
    assert recal["invalid_outcomes"]["count"] == 32 and recal["disputes"]["disputed"] == 0
    assert recal["threshold"] == clean_recal["threshold"]
    from hybridroute.cli import main

    main(["monitor", "--log", url, "--target", "0.85", "--delta", "0.05"])
    out = capsys.readouterr().out
    assert "left out        stored outcomes the log would refuse today: 32 audit label(s)" in out
    assert "1 outcome(s) of shadow decisions, 2 audit outcome(s) of unaudited decisions" in out


def test_a_version_the_log_knows_no_labels_of_needs_its_router(tmp_path):
    url = f"sqlite:///{tmp_path / 'log.sqlite'}"
    with open_log(url, audit=AuditSampler(1.0, "k")) as log:
        decided = world.A.route_many(world.ITEMS[:30])
        log.log_many([(d, f"q{i}", "live") for i, d in enumerate(decided)])
    with open_log(url) as log, pytest.raises(ValueError, match="knows no labels of router"):
        monitor_log(log, target=0.85, delta=0.05)
    with open_log(url) as log:  # the router given: its vocabulary checks the outcomes
        state = monitor_log(log, target=0.85, delta=0.05, routers=[world.A])
    assert state["labels"] == 0 and state["audited"] > 0
