"""Classification statistics with uncertainty: the one definition of each per-class metric,
bootstrap intervals, paired comparisons.

Every evaluation path -- :func:`~hybridroute.evaluation.evaluate_classifier`,
:func:`~hybridroute.evaluation.evaluate_router`, the streamed
:func:`~hybridroute.evaluation.evaluate_stream`, Spark's ``evaluate_scored`` and
``hybridroute train`` -- computes its per-class numbers here, from counts:

* :func:`class_scores` -- precision, recall and F1 of each class from its true positives,
  predictions and gold support;
* :func:`macro_f1_from_counts` -- **macro-F1**: the unweighted mean F1 over the labels that
  occur in the gold labels or in the answers (scikit-learn's ``f1_score(average="macro")``
  label set). An abstention (``None``) is not a label: it is a miss for its gold class
  (lowers that class's recall) and a prediction of no class;
* :func:`per_class_from_confusion` -- the per-class report from a confusion matrix;
* :func:`share` -- every reported rate (accuracy, coverage, selective precision...), with
  the one rounding every evaluation applies (:func:`round_metric`);
* :func:`selective_summary` / :func:`is_auto_routed` -- coverage and selective precision,
  and which router decisions count as auto-routed.

Every resampling step takes a seed, so the same inputs give the same intervals.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

__all__ = [
    "AUTO_REASON",
    "AUTO_STAGE",
    "DEFAULT_EXIT",
    "DEFERRED_STAGES",
    "RULE_STAGE",
    "bootstrap_ci",
    "bootstrap_note",
    "class_scores",
    "classification_summary",
    "confusion_matrix",
    "is_auto_routed",
    "macro_f1",
    "macro_f1_from_counts",
    "mcnemar",
    "paired_bootstrap",
    "per_class_from_confusion",
    "per_class_report",
    "percentile_interval",
    "round_metric",
    "selective_summary",
    "share",
]

#: The stage of a decision a rule made (no classifier saw it).
RULE_STAGE = "rule"
#: The stage of a decision the classifier made and the policy let through.
AUTO_STAGE = "model"
#: The reason code of a deferred decision that the evidence check then let through.
AUTO_REASON = "evidence_complete"
#: The stages of a decision that was deferred (not auto-routed).
DEFERRED_STAGES = ("policy", "fallback")
#: The rule name under which decisions of a rule set's default exit are counted.
DEFAULT_EXIT = "(default exit)"


# --------------------------------------------------------------------------- rounding and rates


def round_metric(x: float | None) -> float | None:
    """A metric as every evaluation reports it: rounded to 6 places; ``None`` for none, NaN
    or infinity."""
    return None if x is None or not math.isfinite(x) else round(float(x), 6)


def share(part: float, whole: float) -> float | None:
    """``part / whole`` rounded (:func:`round_metric`); ``None`` when ``whole`` is 0."""
    return round_metric(part / whole) if whole else None


def is_auto_routed(stage: str, reason_code: str | None) -> bool:
    """Whether a router decision went through without a person: the model stage, or a
    deferral the evidence check completed. Spark's aggregation uses the same constants."""
    return stage == AUTO_STAGE or reason_code == AUTO_REASON


def selective_summary(n: int, n_auto: int, n_auto_correct: int) -> dict[str, Any]:
    """Coverage (auto-routed share of the ``n`` items scored) and selective precision
    (correct share of the auto-routed)."""
    return {
        "coverage": share(n_auto, n),
        "selective_precision": share(n_auto_correct, n_auto),
        "n_auto_routed": int(n_auto),
    }


def bootstrap_note(method: str, n_boot: int, seed: int, level: float) -> dict[str, Any]:
    """How the intervals of an evaluation were made (written into its result)."""
    return {"method": method, "n_boot": int(n_boot), "seed": int(seed), "level": level}


# --------------------------------------------------------------------------- per-class metrics


def _codes(
    y_true: Sequence[str], y_pred: Sequence[str | None], labels: Sequence[str] | None
) -> tuple[np.ndarray, np.ndarray, list[str]]:
    if len(y_true) != len(y_pred):
        raise ValueError(f"{len(y_true)} gold labels but {len(y_pred)} predictions")
    if labels is None:
        labels = sorted({str(v) for v in y_true} | {str(v) for v in y_pred if v is not None})
    index = {lab: i for i, lab in enumerate(labels)}
    t = np.array([index[str(v)] for v in y_true], dtype=np.int64)
    # a prediction outside the label set (or an abstention, None) never matches
    p = np.array([index.get(str(v), -1) if v is not None else -1 for v in y_pred], dtype=np.int64)
    return t, p, list(labels)


def _counts(t: np.ndarray, p: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """True positives, predictions and gold support per class from label codes."""
    tp = np.bincount(t[t == p], minlength=k)
    n_pred = np.bincount(p[p >= 0], minlength=k)
    n_gold = np.bincount(t, minlength=k)  # abstentions count in the support
    return tp, n_pred, n_gold


def confusion_matrix(
    y_true: Sequence[str], y_pred: Sequence[str | None], labels: Sequence[str] | None = None
) -> tuple[np.ndarray, list[str]]:
    """Counts ``[gold, predicted]`` over ``labels`` (abstentions are left out of the matrix)."""
    t, p, labs = _codes(y_true, y_pred, labels)
    k = len(labs)
    keep = p >= 0
    cm = np.bincount(t[keep] * k + p[keep], minlength=k * k).reshape(k, k)
    return cm, labs


def class_scores(
    tp: np.ndarray, n_pred: np.ndarray, n_gold: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Precision, recall and F1 of each class (0 where undefined), along the last axis.

    ``tp`` are the true positives, ``n_pred`` the items predicted as the class and
    ``n_gold`` its gold support (abstentions included); each of shape ``(k,)``, or
    ``(replicates, k)`` for bootstrap counters. F1 is ``2 tp / (n_pred + n_gold)``, the
    harmonic mean of precision and recall.
    """
    tp = np.asarray(tp, dtype=float)
    n_pred = np.asarray(n_pred, dtype=float)
    n_gold = np.asarray(n_gold, dtype=float)
    zero = np.zeros(np.broadcast_shapes(tp.shape, n_pred.shape, n_gold.shape))
    precision = np.divide(tp, n_pred, out=zero.copy(), where=n_pred > 0)
    recall = np.divide(tp, n_gold, out=zero.copy(), where=n_gold > 0)
    denom = n_pred + n_gold
    f1 = np.divide(2.0 * tp, denom, out=zero.copy(), where=denom > 0)
    return precision, recall, f1


def macro_f1_from_counts(tp: Any, n_pred: Any, n_gold: Any) -> Any:
    """Macro-F1 from per-class counts: the mean F1 over the classes that occur in the gold
    labels or the answers (``n_gold + n_pred > 0``); 0 when none does.

    A class nobody predicted and no item holds is left out; a class predicted but absent
    from the gold labels counts with F1 0 (its predictions are all false positives). With
    counts of shape ``(replicates, k)``, one macro-F1 per replicate (an array).
    """
    n_pred = np.asarray(n_pred, dtype=float)
    n_gold = np.asarray(n_gold, dtype=float)
    _, _, f1 = class_scores(tp, n_pred, n_gold)
    present = (n_gold + n_pred) > 0
    counts = present.sum(axis=-1)
    sums = np.where(present, f1, 0.0).sum(axis=-1)
    out = np.divide(sums, counts, out=np.zeros(np.shape(counts)), where=counts > 0)
    return float(out) if out.ndim == 0 else out


def _f1_from_codes(t: np.ndarray, p: np.ndarray, k: int) -> float:
    return float(macro_f1_from_counts(*_counts(t, p, k)))


def macro_f1(
    y_true: Sequence[str], y_pred: Sequence[str | None], labels: Sequence[str] | None = None
) -> float:
    """Unweighted mean F1 over the classes present in the gold labels or the predictions.

    ``None`` in ``y_pred`` is an abstention: a miss for its gold class, a prediction of no
    class. Equal to scikit-learn's ``f1_score(y_true, y_pred, average="macro")`` once the
    abstentions are given a marker label that is left out of ``labels``. See
    :func:`macro_f1_from_counts`.

    Parameters
    ----------
    y_true : sequence of str
        Gold labels (compared as strings).
    y_pred : sequence of str or None
        One answer per gold label; ``None`` is an abstention, and a label outside
        ``labels`` a wrong answer that is no class.
    labels : sequence of str or None, default None
        The label set; ``None`` takes the sorted union of the gold and predicted labels.
        A label of it that neither the gold labels nor the answers hold is left out of the
        mean.

    Returns
    -------
    float
        In [0, 1]; 0 for no items.

    Raises
    ------
    ValueError
        If ``y_true`` and ``y_pred`` differ in length.
    KeyError
        If a gold label is not in ``labels``.
    """
    t, p, labs = _codes(y_true, y_pred, labels)
    return _f1_from_codes(t, p, len(labs))


def per_class_from_confusion(
    cm: np.ndarray,
    labels: Sequence[str],
    support: np.ndarray | None = None,
    top_confusions: int = 3,
) -> dict[str, dict[str, Any]]:
    """Precision, recall, F1, support and the labels each class is most confused with.

    ``cm[i, j]`` counts items of gold class ``i`` predicted as ``j``; ``support`` is the
    gold count of each class including the items it abstained on (default: the row sums
    of ``cm``, i.e. no abstentions).
    """
    cm = np.asarray(cm)
    support = cm.sum(axis=1) if support is None else np.asarray(support)
    tp = np.diag(cm)
    precision, recall, f1 = class_scores(tp, cm.sum(axis=0), support)
    out: dict[str, dict[str, Any]] = {}
    for i, lab in enumerate(labels):
        row = cm[i].copy()
        row[i] = 0
        order = np.argsort(-row, kind="stable")[:top_confusions]
        out[lab] = {
            "precision": round(float(precision[i]), 6),
            "recall": round(float(recall[i]), 6),
            "f1": round(float(f1[i]), 6),
            "support": int(support[i]),
            "confused_with": [
                {"label": labels[j], "count": int(row[j])} for j in order if row[j] > 0
            ],
        }
    return out


def per_class_report(
    y_true: Sequence[str],
    y_pred: Sequence[str | None],
    labels: Sequence[str] | None = None,
    top_confusions: int = 3,
) -> dict[str, dict[str, Any]]:
    """Precision, recall, F1, support and the labels each class is most confused with."""
    cm, labs = confusion_matrix(y_true, y_pred, labels)
    t, _, _ = _codes(y_true, y_pred, labs)
    support = np.bincount(t, minlength=len(labs))  # abstentions count in the support
    return per_class_from_confusion(cm, labs, support, top_confusions)


# --------------------------------------------------------------------------- intervals


def bootstrap_ci(
    statistic: Callable[[np.ndarray], float],
    n: int,
    *,
    n_boot: int = 1000,
    level: float = 0.95,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile bootstrap interval of ``statistic(indices)`` over ``n`` items.

    Parameters
    ----------
    statistic : callable
        Maps an integer array of ``n`` item positions, drawn with replacement, to the
        statistic of those items (e.g. ``lambda idx: correct[idx].mean()``).
    n : int
        Number of items.
    n_boot : int, default 1000
        Number of resamples, all used (callers state it in their result's ``bootstrap``
        note).
    level : float, default 0.95
        Coverage of the central interval, in (0, 1).
    seed : int, default 0
        Seeds the resampling (NumPy's ``default_rng``): the same inputs give the same
        interval.

    Returns
    -------
    tuple of float
        ``(low, high)`` rounded to 6 places; ``(nan, nan)`` when ``n`` or ``n_boot`` is 0.
    """
    if n == 0:
        return (float("nan"), float("nan"))
    rng = np.random.default_rng(seed)
    stats = np.empty(n_boot)
    for b in range(n_boot):
        stats[b] = statistic(rng.integers(0, n, size=n))
    return percentile_interval(stats, level)


def percentile_interval(stats: Any, level: float = 0.95) -> tuple[float, float]:
    """The central ``level`` interval of bootstrap replicate statistics (rounded as every
    evaluation reports it); ``(nan, nan)`` without replicates. The multinomial bootstrap
    of :func:`bootstrap_ci` and the streamed Poisson bootstrap both end here."""
    stats = np.asarray(stats, dtype=float)
    if len(stats) == 0:
        return (math.nan, math.nan)
    alpha = (1.0 - level) / 2.0
    lo, hi = np.quantile(stats, [alpha, 1.0 - alpha])
    return (round(float(lo), 6), round(float(hi), 6))


def classification_summary(
    y_true: Sequence[str],
    y_pred: Sequence[str | None],
    labels: Sequence[str] | None = None,
    *,
    n_boot: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> dict[str, Any]:
    """n, accuracy and macro-F1, each with a percentile bootstrap interval.

    Both intervals come from the same ``n_boot`` resamples (the same seed draws the same
    indices), stated in the result under ``bootstrap``.
    """
    t, p, labs = _codes(y_true, y_pred, labels)
    k = len(labs)
    correct = (t == p).astype(float)
    n = len(t)
    return {
        "n": n,
        "accuracy": share(int(np.count_nonzero(t == p)), n),
        "accuracy_ci": list(
            bootstrap_ci(
                lambda idx: float(correct[idx].mean()), n, n_boot=n_boot, level=level, seed=seed
            )
        ),
        "macro_f1": round_metric(_f1_from_codes(t, p, k)) if n else None,
        "macro_f1_ci": list(
            bootstrap_ci(
                lambda idx: _f1_from_codes(t[idx], p[idx], k),
                n,
                n_boot=n_boot,
                level=level,
                seed=seed,
            )
        ),
        "bootstrap": bootstrap_note("percentile", n_boot, seed, level),
    }


def mcnemar(correct_a: Sequence[bool], correct_b: Sequence[bool]) -> dict[str, Any]:
    """Exact McNemar test on paired correctness (two-sided binomial test on discordant pairs)."""
    from scipy.stats import binomtest

    a = np.asarray(correct_a, dtype=bool)
    b = np.asarray(correct_b, dtype=bool)
    if a.shape != b.shape:
        raise ValueError("the two systems were scored on different numbers of items")
    only_a = int(np.sum(a & ~b))
    only_b = int(np.sum(~a & b))
    discordant = only_a + only_b
    p = 1.0 if discordant == 0 else float(binomtest(only_a, discordant, 0.5).pvalue)
    return {"only_a_correct": only_a, "only_b_correct": only_b, "p_value": p}


def paired_bootstrap(
    correct_a: Sequence[bool], correct_b: Sequence[bool], *, n_boot: int = 2000, seed: int = 0
) -> dict[str, Any]:
    """Accuracy difference (a - b) with a paired bootstrap 95% interval.

    Parameters
    ----------
    correct_a, correct_b : sequence of bool
        Per-item correctness of two systems on the same items, in the same order.
    n_boot : int, default 2000
        Number of paired resamples (the same items are drawn for both systems).
    seed : int, default 0
        Seeds the resampling.

    Returns
    -------
    dict
        ``accuracy_difference`` (rounded to 6 places; ``nan`` for no items) and ``ci``,
        the 95% percentile interval ``[low, high]`` (see :func:`bootstrap_ci`).

    Raises
    ------
    ValueError
        If the two sequences differ in length.
    """
    a = np.asarray(correct_a, dtype=float)
    b = np.asarray(correct_b, dtype=float)
    if a.shape != b.shape:
        raise ValueError("the two systems were scored on different numbers of items")
    diff = a - b
    lo, hi = bootstrap_ci(lambda idx: float(diff[idx].mean()), len(diff), n_boot=n_boot, seed=seed)
    return {
        "accuracy_difference": round(float(diff.mean()), 6) if len(diff) else float("nan"),
        "ci": [lo, hi],
    }
