"""Accumulating evaluation metrics batch by batch, in memory that does not grow with the rows.

The counters here are what :func:`~hybridroute.evaluation.evaluate_stream` keeps while it
reads a stream: their size depends on the label set, the number of bins and the number of
bootstrap replicates, never on the number of rows. The formulas applied to them at the end
are the ones every evaluation path uses: per-class scores and macro-F1 from
:mod:`._stats`, ECE and AURC from :mod:`hybridroute.calibration._metrics`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .._fallback import fallback_cause
from ..calibration._metrics import aurc_from_blocks, ece_from_bin_sums, width_bin_sums
from ..exceptions import DatasetError
from ._routing import BatchRouter
from ._stats import (
    DEFAULT_EXIT,
    DEFERRED_STAGES,
    RULE_STAGE,
    is_auto_routed,
    macro_f1_from_counts,
    per_class_from_confusion,
    percentile_interval,
    round_metric,
    selective_summary,
    share,
)

if TYPE_CHECKING:
    from ..calibration import Policy

__all__ = [
    "ClassifierCounts",
    "IntentCounts",
    "LabelIndex",
    "PoissonBootstrap",
    "RouterCounts",
]


class PoissonBootstrap:
    """Per-replicate weighted counters fed with seeded Poisson(1) weights per item."""

    def __init__(self, n_boot: int, seed: int) -> None:
        self.n_boot = int(n_boot)
        self.rng = np.random.default_rng(seed)

    def weights(self, m: int) -> np.ndarray:
        # Drawn row after row from one generator, so the weights of item i do not depend
        # on how the stream was cut into batches.
        return self.rng.poisson(1.0, size=(m, self.n_boot)).astype(np.float64)


class LabelIndex:
    """A growing label index (the model's classes first, then unseen gold labels)."""

    def __init__(self, initial: Sequence[str]) -> None:
        self.names: list[str] = []
        self.index: dict[str, int] = {}
        for x in initial:
            self.add(x)

    def add(self, label: str) -> int:
        i = self.index.get(label)
        if i is None:
            i = self.index[label] = len(self.names)
            self.names.append(label)
        return i


def _interval(num: np.ndarray, den: np.ndarray, level: float) -> list[float]:
    """The interval of a share whose replicates are ``num / den`` (empty ones left out)."""
    ok = den > 0
    return list(percentile_interval(num[ok] / den[ok], level))


class IntentCounts:
    """Intent metrics over the items a classifier answered, in constant memory.

    It holds the bootstrap whose weights every batch draws (:attr:`boot`) and the gold
    labels seen on any row (:attr:`gold_seen`, rule-decided rows included: the label list
    of the per-class report).
    """

    def __init__(self, labels: LabelIndex, boot: PoissonBootstrap, n_bins: int, rc_bins: int):
        self.labels = labels
        self.boot = boot
        self.gold_seen: set[str] = set()
        self.n = 0
        self.n_correct = 0
        self.confusion: Counter[tuple[int, int]] = Counter()
        self.gold = np.zeros(len(labels.names), dtype=np.int64)
        self.n_bins = n_bins
        self.ece_count = np.zeros(n_bins, dtype=np.int64)
        self.ece_conf = np.zeros(n_bins)
        self.ece_correct = np.zeros(n_bins)
        self.rc_bins = rc_bins
        self.rc_count = np.zeros(rc_bins, dtype=np.int64)
        self.rc_errors = np.zeros(rc_bins, dtype=np.int64)
        self.n_answered = 0
        # bootstrap replicate counters
        k = len(labels.names)
        n_boot = boot.n_boot
        self.b_n = np.zeros(n_boot)
        self.b_correct = np.zeros(n_boot)
        self.b_tp = np.zeros((n_boot, k))
        self.b_gold = np.zeros((n_boot, k))
        self.b_pred = np.zeros((n_boot, k))

    def _grow(self) -> None:
        k = len(self.labels.names)
        extra = k - len(self.gold)
        if extra > 0:
            self.gold = np.pad(self.gold, (0, extra))
            self.b_tp = np.pad(self.b_tp, ((0, 0), (0, extra)))
            self.b_gold = np.pad(self.b_gold, ((0, 0), (0, extra)))
            self.b_pred = np.pad(self.b_pred, ((0, 0), (0, extra)))

    def add(
        self,
        gold: Sequence[str],
        pred: Sequence[str | None],
        conf: np.ndarray,
        weights: np.ndarray,
    ) -> None:
        m = len(gold)
        if m == 0:
            return
        t = np.array([self.labels.add(g) for g in gold], dtype=np.int64)
        # a prediction outside the label set, or an abstention (None), never matches
        p = np.array(
            [-1 if x is None else self.labels.index.get(str(x), -1) for x in pred], dtype=np.int64
        )
        self._grow()
        k = len(self.labels.names)
        correct = t == p
        self.n += m
        self.n_correct += int(correct.sum())
        self.gold += np.bincount(t, minlength=k)
        keep = p >= 0
        self.confusion.update(zip(t[keep].tolist(), p[keep].tolist(), strict=True))
        answered = ~np.isnan(conf)
        if answered.any():
            s = conf[answered]
            c = correct[answered]
            self.n_answered += int(answered.sum())
            count, conf_sum, correct_sum = width_bin_sums(s, c, self.n_bins)
            self.ece_count += count
            self.ece_conf += conf_sum
            self.ece_correct += correct_sum
            ridx = np.clip(np.floor(s * self.rc_bins).astype(int), 0, self.rc_bins - 1)
            self.rc_count += np.bincount(ridx, minlength=self.rc_bins)
            self.rc_errors += np.bincount(ridx[~c], minlength=self.rc_bins)
        # replicates: W is (m, B)
        wt = weights.T
        self.b_n += weights.sum(axis=0)
        self.b_correct += wt @ correct.astype(float)
        onehot_t = np.zeros((m, k))
        onehot_t[np.arange(m), t] = 1.0
        self.b_gold += wt @ onehot_t
        self.b_tp += wt @ (onehot_t * correct[:, None])
        onehot_p = np.zeros((m, k))
        onehot_p[np.flatnonzero(keep), p[keep]] = 1.0
        self.b_pred += wt @ onehot_p

    def results(self, level: float, label_order: Sequence[str]) -> dict[str, Any]:
        self._grow()
        names = self.labels.names
        k = len(names)
        cm = np.zeros((k, k), dtype=np.int64)
        for (i, j), c in self.confusion.items():
            cm[i, j] = c
        out: dict[str, Any] = {"n": self.n}
        out["accuracy"] = share(self.n_correct, self.n)
        out["accuracy_ci"] = _interval(self.b_correct, self.b_n, level)
        out["macro_f1"] = (
            round_metric(macro_f1_from_counts(np.diag(cm), cm.sum(axis=0), self.gold))
            if self.n
            else None
        )
        boot_f1 = macro_f1_from_counts(self.b_tp, self.b_pred, self.b_gold)
        out["macro_f1_ci"] = list(percentile_interval(boot_f1[self.b_n > 0], level))
        if self.n_answered:
            out["ece"] = round_metric(
                ece_from_bin_sums(self.ece_count, self.ece_conf, self.ece_correct)
            )
            out["aurc"], out["risk_coverage"] = self._risk_coverage()
        else:
            out["ece"] = None
            out["aurc"] = None
            out["risk_coverage"] = []
        out["n_with_confidence"] = self.n_answered  # the items ECE and AURC are over
        out["ece_bins"] = self.n_bins
        out["aurc_binned"] = {"bins": self.rc_bins, "note": "items in one bin count as tied"}
        # per-class report and confusion, over the same label order as the in-memory path
        order = [self.labels.index[x] for x in label_order if x in self.labels.index]
        sub = cm[np.ix_(order, order)]
        ordered = [names[i] for i in order]
        out["per_class"] = per_class_from_confusion(sub, ordered, self.gold[order])
        out["confusion"] = {"labels": ordered, "matrix": sub.tolist()}
        return out

    def _risk_coverage(self) -> tuple[float | None, list[dict[str, float]]]:
        # most confident bins first; each bin is accepted as one tied block
        count = self.rc_count[::-1]
        errors = self.rc_errors[::-1]
        aurc = aurc_from_blocks(count, errors)
        nz = count > 0
        accepted = np.cumsum(count)[nz]
        risk = np.cumsum(errors)[nz] / accepted
        edges = (self.rc_bins - np.arange(self.rc_bins))[nz] - 1  # lower edge index per bin
        curve = []
        step = max(1, len(accepted) // 20)
        for j in [*range(0, len(accepted), step), len(accepted) - 1]:
            curve.append(
                {
                    "threshold": round(float(edges[j]) / self.rc_bins, 6),
                    "coverage": round(float(accepted[j]) / self.n_answered, 6),
                    "risk": round(float(risk[j]), 6),
                }
            )
        unique: dict[float, dict[str, float]] = {}
        for point in curve:
            unique.setdefault(point["threshold"], point)
        return round_metric(aurc), list(unique.values())


def _text_and_gold(row: Mapping[str, Any], pos: int) -> tuple[str, str]:
    try:
        text, gold = row["text"], row["label"]
    except KeyError as exc:
        raise DatasetError(f"row {pos}: missing {exc.args[0]!r}", column=str(exc.args[0])) from None
    return text, str(gold)


class ClassifierCounts:
    """The counts of a bare classifier's evaluation beyond the intent metrics (with a
    fitted ``policy``: coverage, selective precision, deferrals by reason)."""

    def __init__(self, policy: Policy | None = None) -> None:
        self.policy = policy
        self.n = 0
        self.abstentions: Counter[str] = Counter()
        self.policy_seen = False
        self.n_auto = 0
        self.n_auto_correct = 0
        self.deferred: Counter[str] = Counter()

    def results(self, intent: IntentCounts, level: float) -> dict[str, Any]:
        n = self.n
        out: dict[str, Any] = {
            "abstention_rate": share(sum(self.abstentions.values()), n),
            "abstentions_by_reason": dict(sorted(self.abstentions.items())),
        }
        if self.policy_seen:
            out.update(selective_summary(n, self.n_auto, self.n_auto_correct))
            out["deferred_by_reason"] = dict(sorted((str(k), v) for k, v in self.deferred.items()))
        return out

    def add(self, clf: Any, batch: Sequence[Mapping[str, Any]], intent: IntentCounts) -> None:
        """Classify one batch of rows and add it to the counters."""
        policy = self.policy
        pairs = [_text_and_gold(r, self.n + i + 1) for i, r in enumerate(batch)]
        texts = [p[0] for p in pairs]
        gold = [p[1] for p in pairs]
        intent.gold_seen.update(gold)
        ranked = clf.rank(texts, k=len(clf.classes_))
        pred = [r.top for r in ranked]
        if policy is not None:
            outcomes = [policy.apply(r) for r in ranked]
            conf = np.array(
                [np.nan if o.confidence is None else o.confidence for o in outcomes], dtype=float
            )
            self.policy_seen = True
            for g, r, o in zip(gold, ranked, outcomes, strict=True):
                if o.action == "auto_route":
                    self.n_auto += 1
                    self.n_auto_correct += int(r.top == g)
                else:
                    self.deferred[str(r.abstain_reason or o.reason_code)] += 1
        else:
            conf = np.array(
                [np.nan if r.confidence is None else r.confidence for r in ranked], dtype=float
            )
        for r in ranked:
            if r.abstain_reason:
                self.abstentions[r.abstain_reason] += 1
        intent.add(gold, pred, conf, intent.boot.weights(len(batch)))
        self.n += len(batch)


class RouterCounts:
    """The counts of a router's evaluation beyond the intent metrics (stages, destinations,
    deferrals, fallbacks by cause, rules, next steps); a row's facts are passed on when in
    ``fact_names``."""

    def __init__(self, n_boot: int, fact_names: set[str]) -> None:
        self.fact_names = fact_names
        self.n = 0
        self.by_stage: Counter[str] = Counter()
        self.by_destination: Counter[str] = Counter()
        self.deferred: Counter[str] = Counter()
        self.causes: Counter[str] = Counter()
        self.rules: dict[str, dict[str, int]] = {}
        self.n_auto = 0
        self.n_auto_correct = 0
        self.ns_n = 0
        self.ns_ok = 0
        self.b_ns_n = np.zeros(n_boot)
        self.b_ns_ok = np.zeros(n_boot)

    def results(self, intent: IntentCounts, level: float) -> dict[str, Any]:
        n = self.n
        out: dict[str, Any] = {}
        m = intent.n
        out["n_classified"] = m
        if m:
            out.update(selective_summary(m, self.n_auto, self.n_auto_correct))
        else:
            out["coverage"] = None
            out["selective_precision"] = None
        if self.ns_n:
            out["next_step_accuracy"] = share(self.ns_ok, self.ns_n)
            out["next_step_accuracy_ci"] = _interval(self.b_ns_ok, self.b_ns_n, level)
            out["n_next_step"] = self.ns_n
        else:
            out["next_step_accuracy"] = None
        out["decisions_by_stage"] = dict(sorted(self.by_stage.items()))
        out["decisions_by_destination"] = dict(sorted(self.by_destination.items()))
        out["abstention_rate"] = share(sum(self.deferred.values()), n)
        out["abstentions_by_reason"] = dict(sorted(self.deferred.items()))
        out["fallbacks_by_cause"] = dict(sorted(self.causes.items()))
        rules = {}
        for key, st in sorted(self.rules.items()):
            rules[key] = {**st, "match_rate": share(st["matches_gold"], st["scored"])}
        out["rules"] = rules
        return out

    def add(
        self, router: BatchRouter, batch: Sequence[Mapping[str, Any]], intent: IntentCounts
    ) -> None:
        """Route one batch of rows and add it to the counters."""
        fact_names = self.fact_names
        items = []
        gold = []
        next_steps = []
        for i, row in enumerate(batch):
            text, g = _text_and_gold(row, self.n + i + 1)
            facts = row.get("facts") or {}
            items.append(
                {
                    "facts": {k: v for k, v in facts.items() if v is not None and k in fact_names},
                    "text": text,
                }
            )
            gold.append(g)
            ns = row.get("next_step")
            next_steps.append(ns if isinstance(ns, str) and ns else None)
        decisions = router.route_many(items)
        weights = intent.boot.weights(len(batch))
        model_idx = []
        ns_ok = np.zeros(len(batch))
        ns_has = np.zeros(len(batch))
        for i, d in enumerate(decisions):
            stage = d.stage
            self.by_stage[stage] += 1
            self.by_destination[d.selected_destination] += 1
            gold_next = next_steps[i]
            ns_correct = (d.selected_destination == gold_next) if gold_next else None
            if ns_correct is not None:
                self.ns_n += 1
                self.ns_ok += int(ns_correct)
                ns_has[i] = 1.0
                ns_ok[i] = float(ns_correct)
            if stage == RULE_STAGE:
                key = d.rule_id or DEFAULT_EXIT
                st = self.rules.setdefault(key, {"fires": 0, "matches_gold": 0, "scored": 0})
                st["fires"] += 1
                if ns_correct is not None:
                    st["scored"] += 1
                    st["matches_gold"] += int(ns_correct)
                continue
            model_idx.append(i)
            if stage in DEFERRED_STAGES:
                self.deferred[d.reason_code] += 1
            cause = fallback_cause(d)
            if cause is not None:
                self.causes[cause] += 1
            if is_auto_routed(stage, d.reason_code):
                self.n_auto += 1
                self.n_auto_correct += int(d.label == gold[i])
        wt = weights.T
        self.b_ns_n += wt @ ns_has
        self.b_ns_ok += wt @ ns_ok
        intent.gold_seen.update(gold)  # every gold label, as in evaluate_router's label list
        for g in gold:  # rule-decided rows count too: per-class rows exist for their labels
            intent.labels.add(g)
        if model_idx:
            intent.add(
                [gold[i] for i in model_idx],
                [decisions[i].label for i in model_idx],
                np.array(
                    [
                        np.nan if decisions[i].confidence is None else decisions[i].confidence
                        for i in model_idx
                    ],
                    dtype=float,
                ),
                weights[model_idx],
            )
        self.n += len(batch)
