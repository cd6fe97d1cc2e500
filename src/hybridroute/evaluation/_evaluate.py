"""Evaluate a classifier or a whole router on a labelled set.

Both paths produce one :class:`Evaluation` (a JSON-able dict) with the headline metrics
and bootstrap 95% intervals, plus the per-item arrays the reports and plots need
(``items``: text, gold, predicted, confidence, reason code, ...).

* **Classifier** (optionally with a fitted policy): accuracy, macro-F1, per-class
  precision / recall / F1 with the labels each class is confused with, the confusion
  matrix, ECE (15 equal-width bins), AURC, latency, request / token / cost counts; with a
  policy also coverage, selective precision and the abstention rate by reason code.
* **Router**: the same intent metrics over the items the classifier saw (``n_classified``
  of the ``n`` routed: those no rule decided), plus next-step accuracy against the gold
  next step (over ``n_next_step``), decisions by stage, fallbacks by cause (the
  decision's ``detail["cause"]``: its reason code, with the exception's type when the
  classifier raised, e.g. ``classifier_error (TypeError)``), per-rule statistics (how
  often each rule fires and how often its decision matches the gold next step) and the rule
  coverage (``rule_coverage``: rules that never fired, rule outcomes and destinations no row
  reached -- :meth:`hybridroute.rules.RuleSet.coverage`).
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .._fallback import fallback_cause
from ._routing import BatchRouter
from ._stats import (
    DEFAULT_EXIT,
    DEFERRED_STAGES,
    bootstrap_ci,
    bootstrap_note,
    classification_summary,
    confusion_matrix,
    is_auto_routed,
    per_class_report,
    selective_summary,
    share,
)
from ._stats import round_metric as _r

if TYPE_CHECKING:
    from ..calibration import Policy

__all__ = ["Evaluation", "evaluate_classifier", "evaluate_router"]


class Evaluation(dict):
    """Evaluation results: headline metrics (JSON-able) and per-item rows under ``items``."""

    @property
    def rows(self) -> list[dict[str, Any]]:
        """One row per evaluated item (text, gold, predicted, confidence, reason code...)."""
        return self["items"]

    def metrics(self) -> dict[str, float]:
        """The scalar metrics, flattened (for MLflow)."""
        return dict(self._scalars())

    def _scalars(self) -> list[tuple[str, float]]:
        keys = (
            "n",
            "accuracy",
            "macro_f1",
            "ece",
            "aurc",
            "coverage",
            "selective_precision",
            "next_step_accuracy",
            "abstention_rate",
        )
        out = []
        for k in keys:
            v = self.get(k)
            if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
                out.append((k, float(v)))
        for k in ("accuracy_ci", "macro_f1_ci", "next_step_accuracy_ci"):
            ci = self.get(k)
            if ci and all(isinstance(x, (int, float)) and math.isfinite(x) for x in ci):
                out.append((f"{k}_low", float(ci[0])))
                out.append((f"{k}_high", float(ci[1])))
        lat = self.get("latency") or {}
        for k in ("per_item_ms", "single_p50_ms", "single_p95_ms", "items_per_s"):
            if isinstance(lat.get(k), (int, float)):
                out.append((f"latency_{k}", float(lat[k])))
        usage = self.get("usage") or {}
        for k in ("requests", "cost_usd", "prompt_tokens", "completion_tokens"):
            if isinstance(usage.get(k), (int, float)):
                out.append((f"usage_{k}", float(usage[k])))
        return out

    def summary(self) -> dict[str, Any]:
        """Everything but the per-item rows and the confusion matrix."""
        return {k: v for k, v in self.items() if k not in ("items", "confusion")}


def _usage_totals(usages: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    tot: Counter[str] = Counter()
    cost = 0.0
    for u in usages:
        for k, v in u.items():
            if k == "cost_usd" and isinstance(v, (int, float)):
                cost += float(v)
            elif isinstance(v, (int, float)) and not isinstance(v, bool):
                tot[k] += int(v)
            elif isinstance(v, bool) and v:
                tot[k] += 1
    out: dict[str, Any] = dict(tot)
    out["cost_usd"] = round(cost, 8)
    out.setdefault("requests", 0)
    return out


def _single_latency(fn: Any, texts: Sequence[str], n: int, seed: int) -> dict[str, float]:
    if not texts or n <= 0:
        return {}
    rng = np.random.default_rng(seed)
    pick = rng.choice(len(texts), size=min(n, len(texts)), replace=False)
    times = []
    for i in pick:
        t0 = time.perf_counter()
        fn([texts[int(i)]])
        times.append((time.perf_counter() - t0) * 1000.0)
    return {
        "single_p50_ms": round(float(np.percentile(times, 50)), 4),
        "single_p95_ms": round(float(np.percentile(times, 95)), 4),
        "single_n": len(times),
    }


def _intent_metrics(
    gold: Sequence[str],
    pred: Sequence[str | None],
    conf: np.ndarray,
    labels: Sequence[str],
    *,
    n_boot: int,
    seed: int,
) -> dict[str, Any]:
    from ..calibration import aurc, expected_calibration_error
    from ..calibration._metrics import DEFAULT_ECE_BINS

    out = classification_summary(gold, pred, labels, n_boot=n_boot, seed=seed)
    correct = np.array([g == p for g, p in zip(gold, pred, strict=True)], dtype=bool)
    answered = ~np.isnan(conf)
    out["ece"] = (
        _r(expected_calibration_error(conf[answered], correct[answered], DEFAULT_ECE_BINS))
        if answered.any()
        else None
    )
    out["aurc"] = _r(aurc(conf[answered], correct[answered])) if answered.any() else None
    out["n_with_confidence"] = int(answered.sum())  # the items ECE and AURC are over
    out["per_class"] = per_class_report(gold, pred, labels)
    cm, labs = confusion_matrix(gold, pred, labels)
    out["confusion"] = {"labels": labs, "matrix": cm.tolist()}
    return out


def evaluate_classifier(
    classifier: Any,
    texts: Sequence[str],
    gold: Sequence[str],
    *,
    policy: Policy | None = None,
    n_boot: int = 1000,
    seed: int = 0,
    latency_samples: int = 100,
    batch_size: int = 512,
) -> Evaluation:
    """Evaluate ``classifier`` (and, given one, a fitted ``policy``) on labelled texts.

    Parameters
    ----------
    classifier : IntentClassifier
        A fitted classifier; every text is ranked over its whole label set (``rank``).
    texts : sequence of str
        The texts to classify.
    gold : sequence of str
        Their gold labels (compared as strings), one per text. A gold label outside the
        classifier's label set counts in the label set of the metrics (it can only be
        missed).
    policy : Policy or None, default None
        A fitted policy (``apply(ranked)``). With one, ECE and AURC are over its
        calibrated confidence and the result adds coverage, selective precision and the
        deferrals by reason code; without, over the classifier's raw top score.
    n_boot : int, default 1000
        Bootstrap resamples of the accuracy and macro-F1 intervals (stated under
        ``bootstrap`` in the result).
    seed : int, default 0
        Seeds the bootstrap and the choice of texts timed one by one.
    latency_samples : int, default 100
        For a local classifier: how many texts (drawn without replacement) are also
        classified one at a time for the single-item p50 / p95 latency; 0 skips it.
    batch_size : int, default 512
        Texts per ``rank`` call (a positive integer).

    Returns
    -------
    Evaluation
        Headline metrics with 95% intervals, per-class report, confusion matrix, latency,
        usage, and one row per text under ``items``.

    Raises
    ------
    ValueError
        If ``texts`` and ``gold`` differ in length.
    """
    texts = list(texts)
    gold = [str(g) for g in gold]
    classes = [str(c) for c in classifier.classes_]
    k = len(classes)
    t0 = time.perf_counter()
    ranked = []
    for start in range(0, len(texts), batch_size):
        ranked.extend(classifier.rank(texts[start : start + batch_size], k=k))
    batch_s = time.perf_counter() - t0
    pred: list[str | None] = [r.top for r in ranked]
    raw_conf = np.array(
        [np.nan if r.confidence is None else r.confidence for r in ranked], dtype=float
    )
    labels = sorted(set(classes) | set(gold))
    conf = raw_conf
    outcomes = None
    if policy is not None:
        outcomes = [policy.apply(r) for r in ranked]
        conf = np.array(
            [np.nan if o.confidence is None else o.confidence for o in outcomes], dtype=float
        )
    result = _intent_metrics(gold, pred, conf, labels, n_boot=n_boot, seed=seed)
    reasons = Counter(r.abstain_reason for r in ranked if r.abstain_reason)
    n = len(texts)
    result["abstention_rate"] = _r(sum(reasons.values()) / n) if n else None
    result["abstentions_by_reason"] = dict(sorted(reasons.items()))
    items = []
    for i, (text, g, r) in enumerate(zip(texts, gold, ranked, strict=True)):
        row = {
            "text": text,
            "gold": g,
            "predicted": r.top,
            "confidence": None if math.isnan(conf[i]) else float(conf[i]),
            "correct": r.top == g,
            "reason_code": r.abstain_reason,
        }
        if outcomes is not None:
            row["action"] = outcomes[i].action
            row["reason_code"] = row["reason_code"] or outcomes[i].reason_code
        items.append(row)
    if outcomes is not None:
        result.update(_selective(items))
    lat = {
        "batch_seconds": round(batch_s, 4),
        "per_item_ms": round(batch_s / max(n, 1) * 1000.0, 4),
        "items_per_s": round(n / batch_s, 2) if batch_s > 0 else None,
    }
    if getattr(classifier, "kind", "") == "local":
        lat.update(_single_latency(classifier.predict_proba, texts, latency_samples, seed))
    result["latency"] = lat
    result["usage"] = _usage_totals([r.usage for r in ranked if r.usage])
    result["mode"] = "classifier"
    result["classifier_kind"] = getattr(classifier, "kind", type(classifier).__name__)
    result["items"] = items
    return Evaluation(result)


def _selective(items: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    auto = [it for it in items if it.get("action") == "auto_route"]
    n = len(items)
    by_reason = Counter(it.get("reason_code") for it in items if it.get("action") != "auto_route")
    return {
        **selective_summary(n, len(auto), sum(bool(it["correct"]) for it in auto)),
        "deferred_by_reason": dict(sorted((str(k), v) for k, v in by_reason.items())),
    }


def evaluate_router(
    router: BatchRouter,
    dataset: Any,
    *,
    n_boot: int = 1000,
    seed: int = 0,
    batch_size: int = 256,
) -> Evaluation:
    """Route every row of ``dataset`` (facts + text) and score the decisions.

    Intent metrics cover the rows the classifier saw (no rule fired); ``next_step_accuracy``
    compares the selected destination with the gold ``next_step`` where the set has one.

    Parameters
    ----------
    router : HybridRouter
        The router to evaluate. Each row is routed with the facts its rules declare
        (absent values left out, so the rule set's defaults apply) and its text.
    dataset : LabelledSet
        The labelled rows; an optional ``next_step`` annotation is the gold destination.
    n_boot : int, default 1000
        Bootstrap resamples of the intervals (stated under ``bootstrap``).
    seed : int, default 0
        Seeds the bootstrap.
    batch_size : int, default 256
        Rows per ``route_many`` call (a positive integer).

    Returns
    -------
    Evaluation
        ``n`` (rows routed) and ``n_classified`` (those the classifier saw), intent
        metrics over the classified rows, coverage and selective precision, next-step
        accuracy over ``n_next_step`` rows, decisions by stage and destination, fallbacks
        by cause, per-rule statistics, the rule coverage (``rule_coverage``), usage,
        latency, and one row per item under ``items``.

    Raises
    ------
    UserInputError
        A row the router refuses (facts that break its schema, a text it does not take).
    """
    texts = dataset.texts
    gold = [str(g) for g in dataset.y]
    frame = dataset.frame
    next_steps = list(frame["next_step"]) if "next_step" in frame.columns else [None] * len(texts)
    decisions, seconds = _route_all(router, dataset, batch_size)
    n = len(decisions)
    rows = _decision_rows(decisions, texts, gold, next_steps)
    labels = sorted(set(router.classes) | set(gold))
    result = _classified_metrics(rows, labels, n_boot=n_boot, seed=seed)
    result["n"] = n
    _add_next_step_metrics(result, rows, n_boot=n_boot, seed=seed)
    result["decisions_by_stage"] = dict(sorted(Counter(r["stage"] for r in rows).items()))
    result["decisions_by_destination"] = dict(
        sorted(Counter(r["destination"] for r in rows).items())
    )
    deferred = Counter(r["reason_code"] for r in rows if r["stage"] in DEFERRED_STAGES)
    result["abstention_rate"] = _r(sum(deferred.values()) / n) if n else None
    result["abstentions_by_reason"] = dict(sorted(deferred.items()))
    causes = Counter(r["cause"] for r in rows if r["cause"] is not None)
    result["fallbacks_by_cause"] = dict(sorted(causes.items()))
    result["rules"] = _rule_stats(rows)
    # which rules never fired and which destinations no row reached: the rule set's own
    # coverage (the one definition `hybridroute rules test` uses), over these decisions
    coverage = getattr(router.rules, "coverage", None)
    if callable(coverage):
        result["rule_coverage"] = coverage(
            decisions, model_destinations=getattr(router, "model_destinations", None)
        )
    usage = [dict(d.detail.get("usage") or {}) for d in decisions if d.detail.get("usage")]
    result["usage"] = _usage_totals(usage)
    result["latency"] = {
        "seconds": round(seconds, 4),
        "per_item_ms": round(seconds / max(n, 1) * 1000.0, 4),
        "items_per_s": round(n / seconds, 2) if seconds > 0 else None,
    }
    result["mode"] = "router"
    result["router"] = router.name
    result["router_version"] = router.version
    result["items"] = rows
    return Evaluation(result)


def _route_all(router: BatchRouter, dataset: Any, batch_size: int) -> tuple[list[Any], float]:
    """Route every row of ``dataset`` in batches of ``batch_size``: its text and the facts
    the router's rules declare (absent values left out, so the schema's defaults apply).

    Returns the decisions and the seconds the routing took.
    """
    fact_names = set(router.rules.schema.names)
    items_in = []
    for i, text in enumerate(dataset.texts):
        # null is the schema's to read: absent for a fact not declared nullable
        facts = {k: v for k, v in dataset.facts(i).items() if k in fact_names}
        items_in.append({"facts": facts, "text": text})
    t0 = time.perf_counter()
    decisions = []
    for start in range(0, len(items_in), batch_size):
        decisions.extend(router.route_many(items_in[start : start + batch_size]))
    return decisions, time.perf_counter() - t0


def _decision_rows(
    decisions: Sequence[Any],
    texts: Sequence[str],
    gold: Sequence[str],
    next_steps: Sequence[Any],
) -> list[dict[str, Any]]:
    """One report row per decision: its text, gold label and next step, what was decided,
    and whether it was right (intent: model stages only; next step: where there is one)."""
    rows = []
    for i, d in enumerate(decisions):
        gold_next = next_steps[i] if isinstance(next_steps[i], str) and next_steps[i] else None
        rows.append(
            {
                "text": texts[i],
                "gold": gold[i],
                "gold_next_step": gold_next,
                "predicted": d.label,
                "confidence": d.confidence,
                "destination": d.selected_destination,
                "stage": d.stage,
                "reason_code": d.reason_code,
                "rule_id": d.rule_id,
                "correct": d.label == gold[i] if d.stage != "rule" else None,
                "next_step_correct": (d.selected_destination == gold_next) if gold_next else None,
                "action": (d.detail.get("policy_action") if d.stage != "rule" else "rule"),
                "cause": fallback_cause(d),  # None unless a fallback
            }
        )
    return rows


def _classified_metrics(
    rows: Sequence[Mapping[str, Any]], labels: Sequence[str], *, n_boot: int, seed: int
) -> dict[str, Any]:
    """Intent metrics, coverage and selective precision over the rows no rule decided."""
    model_rows = [r for r in rows if r["stage"] != "rule"]
    if model_rows:
        conf = np.array(
            [np.nan if r["confidence"] is None else r["confidence"] for r in model_rows],
            dtype=float,
        )
        result = _intent_metrics(
            [r["gold"] for r in model_rows],
            [r["predicted"] for r in model_rows],
            conf,
            labels,
            n_boot=n_boot,
            seed=seed,
        )
        auto = [r for r in model_rows if is_auto_routed(r["stage"], r["reason_code"])]
        n_right = sum(bool(r["correct"]) for r in auto)
        result.update(selective_summary(len(model_rows), len(auto), n_right))
    else:
        result = {
            "n": 0,
            "accuracy": None,
            "macro_f1": None,
            "coverage": None,
            "selective_precision": None,
        }
    result["n_classified"] = len(model_rows)
    return result


def _add_next_step_metrics(
    result: dict[str, Any], rows: Sequence[Mapping[str, Any]], *, n_boot: int, seed: int
) -> None:
    """Add the next-step accuracy (with its bootstrap interval) over the rows with a gold
    next step to ``result``."""
    scored = [r for r in rows if r["next_step_correct"] is not None]
    if not scored:
        result["next_step_accuracy"] = None
        return
    ok = np.array([r["next_step_correct"] for r in scored], dtype=float)
    result["next_step_accuracy"] = share(int(ok.sum()), len(ok))
    result["next_step_accuracy_ci"] = list(
        bootstrap_ci(lambda idx: float(ok[idx].mean()), len(ok), n_boot=n_boot, seed=seed)
    )
    result["n_next_step"] = len(scored)
    result.setdefault("bootstrap", bootstrap_note("percentile", n_boot, seed, 0.95))


def _rule_stats(rows: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per rule (or the default exit): how often it fired, and how often its decision
    matched the gold next step where there is one."""
    rule_stats: dict[str, dict[str, Any]] = {}
    for r in rows:
        if r["stage"] != "rule":
            continue
        key = r["rule_id"] or DEFAULT_EXIT
        st = rule_stats.setdefault(key, {"fires": 0, "matches_gold": 0, "scored": 0})
        st["fires"] += 1
        if r["next_step_correct"] is not None:
            st["scored"] += 1
            st["matches_gold"] += int(r["next_step_correct"])
    for st in rule_stats.values():
        st["match_rate"] = _r(st["matches_gold"] / st["scored"]) if st["scored"] else None
    return dict(sorted(rule_stats.items()))
