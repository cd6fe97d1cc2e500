"""Classification statistics with uncertainty: bootstrap intervals, paired comparisons.

Every resampling step takes a seed, so the same inputs give the same intervals.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

__all__ = [
    "bootstrap_ci",
    "classification_summary",
    "confusion_matrix",
    "macro_f1",
    "mcnemar",
    "paired_bootstrap",
    "per_class_report",
]


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


def confusion_matrix(
    y_true: Sequence[str], y_pred: Sequence[str | None], labels: Sequence[str] | None = None
) -> tuple[np.ndarray, list[str]]:
    """Counts ``[gold, predicted]`` over ``labels`` (abstentions are left out of the matrix)."""
    t, p, labs = _codes(y_true, y_pred, labels)
    k = len(labs)
    keep = p >= 0
    cm = np.bincount(t[keep] * k + p[keep], minlength=k * k).reshape(k, k)
    return cm, labs


def _f1_from_codes(t: np.ndarray, p: np.ndarray, k: int) -> float:
    tp = np.bincount(t[t == p], minlength=k).astype(float)
    pred = np.bincount(p[p >= 0], minlength=k).astype(float)
    gold = np.bincount(t, minlength=k).astype(float)
    denom = pred + gold
    f1 = np.divide(2 * tp, denom, out=np.zeros(k), where=denom > 0)
    present = gold > 0
    return float(f1[present].mean()) if present.any() else 0.0


def macro_f1(
    y_true: Sequence[str], y_pred: Sequence[str | None], labels: Sequence[str] | None = None
) -> float:
    """Unweighted mean F1 over the classes present in the gold labels."""
    t, p, labs = _codes(y_true, y_pred, labels)
    return _f1_from_codes(t, p, len(labs))


def per_class_report(
    y_true: Sequence[str],
    y_pred: Sequence[str | None],
    labels: Sequence[str] | None = None,
    top_confusions: int = 3,
) -> dict[str, dict[str, Any]]:
    """Precision, recall, F1, support and the labels each class is most confused with."""
    cm, labs = confusion_matrix(y_true, y_pred, labels)
    t, _, _ = _codes(y_true, y_pred, labs)
    gold = np.bincount(t, minlength=len(labs))  # abstentions count in the support
    out: dict[str, dict[str, Any]] = {}
    for i, lab in enumerate(labs):
        tp = int(cm[i, i])
        support = int(gold[i])
        predicted = int(cm[:, i].sum())
        precision = tp / predicted if predicted else 0.0
        recall = tp / support if support else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        row = cm[i].copy()
        row[i] = 0
        order = np.argsort(-row, kind="stable")[:top_confusions]
        confused = [{"label": labs[j], "count": int(row[j])} for j in order if row[j] > 0]
        out[lab] = {
            "precision": round(precision, 6),
            "recall": round(recall, 6),
            "f1": round(f1, 6),
            "support": support,
            "confused_with": confused,
        }
    return out


def bootstrap_ci(
    statistic: Callable[[np.ndarray], float],
    n: int,
    *,
    n_boot: int = 1000,
    level: float = 0.95,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile bootstrap interval of ``statistic(indices)`` over ``n`` items."""
    if n == 0:
        return (float("nan"), float("nan"))
    rng = np.random.default_rng(seed)
    stats = np.empty(n_boot)
    for b in range(n_boot):
        stats[b] = statistic(rng.integers(0, n, size=n))
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
) -> dict[str, Any]:
    """n, accuracy and macro-F1, each with a bootstrap 95% interval."""
    t, p, labs = _codes(y_true, y_pred, labels)
    k = len(labs)
    correct = (t == p).astype(float)
    n = len(t)
    acc = float(correct.mean()) if n else float("nan")
    return {
        "n": n,
        "accuracy": round(acc, 6),
        "accuracy_ci": list(
            bootstrap_ci(lambda idx: float(correct[idx].mean()), n, n_boot=n_boot, seed=seed)
        ),
        "macro_f1": round(_f1_from_codes(t, p, k), 6),
        "macro_f1_ci": list(
            bootstrap_ci(
                lambda idx: _f1_from_codes(t[idx], p[idx], k),
                n,
                n_boot=max(200, n_boot // 5),
                seed=seed,
            )
        ),
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
    """Accuracy difference (a - b) with a paired bootstrap 95% interval."""
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
