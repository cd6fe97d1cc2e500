"""``oos``: out-of-scope thresholds for recall targets, over resplits.

The classifier is trained (seeded) on the in-scope rows of the ``train`` role only: it
has no out-of-scope class, so an out-of-scope item can only be caught by its score. The
``pool`` role (e.g. CLINC150 validation + test) is scored once. Each resplit divides the
pool into a calibration half and an evaluation half (stratified by label, the
out-of-scope label included, so both halves hold the same out-of-scope share); on the
calibration half the probability calibrator (in-scope rows of a ``calibrator.fraction``
share) and an :class:`~hybridroute.calibration.OutOfScopeThreshold` for each recall
target are fitted; on the evaluation half the table measures the realised out-of-scope
recall, the in-scope false-alarm rate, and the in-scope accuracy of what passes.

Spec fields::

    targets: [0.8, 0.9, 0.95]     # out-of-scope recall targets (certified at 1 - delta)
    delta: 0.05
    resplits: 100
    calibration_fraction: 0.5
    calibrator: {method: temperature, fraction: 0.3}
    scores: [one_minus_confidence]   # which out-of-scope scores to compare
    oos_label: oos                # default: the dataset's own out-of-scope label

Out-of-scope scores (higher = more likely out of scope):

* ``one_minus_confidence`` -- 1 minus the calibrated top-label probability: the score a
  fitted policy uses when the model has no out-of-scope class;
* ``one_minus_raw_confidence`` -- the same on the classifier's uncalibrated probability;
* ``entropy`` -- entropy of the calibrated probabilities, divided by log(n_classes).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from ...calibration import OutOfScopeThreshold
from .._resplit import (
    auroc,
    calibrate,
    divide,
    mean_or_none,
    pool_halves,
    rate,
    resplit_seed,
    rounded,
)
from ._base import Column, ExperimentKind, KindOutput, Progress, label_index, parse_resplit_fields

if TYPE_CHECKING:  # pragma: no cover
    from .._spec import SpecReader

__all__ = ["SCORES", "OutOfScopeExperiment"]


def _one_minus_confidence(calibrated: np.ndarray, raw: np.ndarray, top: np.ndarray) -> np.ndarray:
    return 1.0 - calibrated[np.arange(len(top)), top]


def _one_minus_raw_confidence(
    calibrated: np.ndarray, raw: np.ndarray, top: np.ndarray
) -> np.ndarray:
    return 1.0 - raw[np.arange(len(top)), top]


def _entropy(calibrated: np.ndarray, raw: np.ndarray, top: np.ndarray) -> np.ndarray:
    p = np.clip(calibrated, 1e-300, 1.0)
    return -(calibrated * np.log(p)).sum(axis=1) / math.log(calibrated.shape[1])


#: score name -> function(calibrated proba, raw proba, raw top index); the one place an
#: out-of-scope score name is resolved.
SCORES: dict[str, Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]] = {
    "one_minus_confidence": _one_minus_confidence,
    "one_minus_raw_confidence": _one_minus_raw_confidence,
    "entropy": _entropy,
}


def _expected_violation(oos_scores: np.ndarray, cutoff: float, n_eval: int, target: float) -> float:
    """Probability that the realised recall on ``n_eval`` fresh out-of-scope items is below ``target``.

    The cut-off is the ``k``-th lowest of ``m`` exchangeable out-of-scope scores, so the
    number of fresh items scoring below it (missed) is beta-binomial ``(n_eval, k,
    m - k + 1)`` (continuous scores). A cut-off of ``-inf`` misses nothing.
    """
    from scipy.stats import betabinom

    if not math.isfinite(cutoff) or n_eval == 0:
        return 0.0
    m = len(oos_scores)
    k = int(np.sum(oos_scores < cutoff)) + 1  # the cut-off's rank among the calibration scores
    # fewest misses that make the realised recall fall below the target
    j = max(0, math.floor(n_eval * (1.0 - target)) - 1)
    while (n_eval - j) / n_eval >= target:
        j += 1
    return float(betabinom.sf(j - 1, n_eval, k, m - k + 1))


class OutOfScopeExperiment(ExperimentKind):
    """Realised out-of-scope recall, false alarms and accuracy of what passes, over resplits."""

    name = "oos"
    description = (
        "out-of-scope thresholds for recall targets: realised recall and false alarms over resplits"
    )
    split_roles: ClassVar[dict[str, tuple[str, ...]]] = {
        "train": ("train",),
        "pool": ("validation", "test"),
    }
    fields = (
        "targets",
        "delta",
        "resplits",
        "calibration_fraction",
        "calibrator",
        "scores",
        "oos_label",
    )
    has_resplits = True
    columns = (
        Column("score", "score", "config", "str", "the out-of-scope score"),
        Column("target", "recall target", "config", "float", "out-of-scope recall target"),
        Column(
            "cutoff", "cut-off", "metric", "float", "mean fitted cut-off (resplits that certified)"
        ),
        Column(
            "oos_recall", "OOS recall", "metric", "pct", "mean share of out-of-scope items flagged"
        ),
        Column(
            "violation_rate",
            "violations",
            "metric",
            "pct",
            "share of resplits with realised recall < target",
        ),
        Column(
            "expected_violation_rate",
            "expected viol.",
            "metric",
            "pct",
            "violation rate an exact certificate shows on evaluation halves of this size",
        ),
        Column(
            "false_alarm_rate",
            "false alarms",
            "metric",
            "pct",
            "mean share of in-scope items flagged",
        ),
        Column(
            "in_scope_accuracy",
            "in-scope acc. passed",
            "metric",
            "float",
            "mean accuracy on the in-scope items that pass",
        ),
        Column(
            "passed_precision",
            "precision passed",
            "metric",
            "float",
            "mean share of passed items that are in scope and correctly labelled",
        ),
        Column(
            "pass_rate", "passes", "metric", "pct", "mean share of all evaluation items that pass"
        ),
        Column("auroc", "AUROC", "metric", "float", "mean ROC area of the score for out-of-scope"),
        Column(
            "certified_rate",
            "certified",
            "metric",
            "pct",
            "share of resplits where the recall was certified",
        ),
    )

    @classmethod
    def parse_settings(cls, doc: Mapping[str, Any], reader: SpecReader) -> dict[str, Any]:
        out = parse_resplit_fields(doc, reader)
        scores = reader.names(doc.get("scores", ["one_minus_confidence"]), "scores")
        for i, s in enumerate(scores):
            if s not in SCORES:
                raise reader.error(f"must be one of {', '.join(SCORES)}; got {s!r}", f"scores[{i}]")
        out["scores"] = scores
        out["oos_label"] = (
            None if doc.get("oos_label") is None else reader.string(doc["oos_label"], "oos_label")
        )
        return out

    def run(self, progress: Progress | None = None) -> KindOutput:
        st = self.spec.settings
        ds = self.load_dataset()
        oos_label = st["oos_label"] or ds.oos_label
        if oos_label is None:
            raise self.error(
                f"{ds.name} declares no out-of-scope label; name the one its rows use", "oos_label"
            )
        train = self.role(ds, "train")
        pool = self.role(ds, "pool")
        keep = [i for i, g in enumerate(train.y) if g != oos_label]
        texts = [train.texts[i] for i in keep]
        labels = [train.y[i] for i in keep]
        is_oos = np.array([g == oos_label for g in pool.y], dtype=bool)
        if not is_oos.any():
            raise self.error(f"the pool has no rows labelled {oos_label!r}", "dataset.splits.pool")
        if progress:
            progress("training the classifier (in scope only)", 0, 1)
        clf = self.train_classifier(texts, labels)
        if progress:
            progress("training the classifier (in scope only)", 1, 1)
        proba = np.asarray(clf.predict_proba(pool.texts), dtype=float)
        y = label_index(clf.classes_, pool.y)  # -1 for out-of-scope rows
        top = proba.argmax(axis=1)
        correct = top == y
        cal = st["calibrator"]
        targets, names, n_resplits = st["targets"], st["scores"], st["resplits"]
        keys = (
            "cutoff",
            "oos_recall",
            "violated",
            "expected_violation",
            "false_alarm_rate",
            "in_scope_accuracy",
            "passed_precision",
            "pass_rate",
            "auroc",
            "certified",
        )
        rec: dict[tuple[str, float], dict[str, list[Any]]] = {
            (s, t): {k: [] for k in keys} for s in names for t in targets
        }
        sizes: dict[str, int] = {}
        for r in range(n_resplits):
            seed = resplit_seed(self.spec.seed, r)
            cal_half, ev = pool_halves(pool.y, pool.texts, st["calibration_fraction"], seed)
            cal_rows, thr_rows = divide(cal_half, cal["fraction"], seed)
            calibrated, _ = calibrate(cal["method"], proba, y, cal_rows)
            sizes = {
                "calibration": len(cal_half),
                "evaluation": len(ev),
                "oos_threshold_rows": int(is_oos[thr_rows].sum()),
                "oos_evaluation": int(is_oos[ev].sum()),
            }
            ev_oos = is_oos[ev]
            for name in names:
                score = SCORES[name](calibrated, proba, top)
                area = auroc(score[ev], ev_oos)
                for t in targets:
                    fit = OutOfScopeThreshold(recall=t, delta=st["delta"]).fit(
                        score[thr_rows], is_oos[thr_rows]
                    )
                    flagged = fit.predict(score[ev])
                    passed = ~flagged
                    in_passed = passed & ~ev_oos
                    recall = float(flagged[ev_oos].mean())
                    v = rec[(name, t)]
                    v["cutoff"].append(float(fit.cutoff_))
                    v["oos_recall"].append(recall)
                    v["violated"].append(recall < t)
                    v["expected_violation"].append(
                        _expected_violation(
                            score[thr_rows][is_oos[thr_rows]], fit.cutoff_, int(ev_oos.sum()), t
                        )
                    )
                    v["false_alarm_rate"].append(
                        float(flagged[~ev_oos].mean()) if (~ev_oos).any() else math.nan
                    )
                    v["in_scope_accuracy"].append(
                        float(correct[ev][in_passed].mean()) if in_passed.any() else math.nan
                    )
                    v["passed_precision"].append(
                        float(correct[ev][passed].mean()) if passed.any() else math.nan
                    )
                    v["pass_rate"].append(float(passed.mean()))
                    v["auroc"].append(math.nan if area is None else area)
                    v["certified"].append(bool(fit.certified_))
            if progress:
                progress("resplits", r + 1, n_resplits)

        rows, labels_out, details = [], [], []
        for name in names:
            for t in targets:
                v = rec[(name, t)]
                row = {
                    "score": name,
                    "target": t,
                    "cutoff": mean_or_none([c for c in v["cutoff"] if math.isfinite(c)]),
                    "oos_recall": mean_or_none(v["oos_recall"]),
                    "violation_rate": rate(v["violated"]),
                    "expected_violation_rate": mean_or_none(v["expected_violation"]),
                    "false_alarm_rate": mean_or_none(v["false_alarm_rate"]),
                    "in_scope_accuracy": mean_or_none(v["in_scope_accuracy"]),
                    "passed_precision": mean_or_none(v["passed_precision"]),
                    "pass_rate": mean_or_none(v["pass_rate"]),
                    "auroc": mean_or_none(v["auroc"]),
                    "certified_rate": rate(v["certified"]),
                }
                rows.append({k: rounded(x) for k, x in row.items()})
                labels_out.append(f"{name} @ recall {t:g}")
                details.append(
                    {
                        "score": name,
                        "target": t,
                        **{k: [rounded(x) for x in vals] for k, vals in v.items()},
                    }
                )

        notes = [
            f"{n_resplits} resplits of {len(pool)} pool rows ({'+'.join(self.spec.splits['pool'])}) into "
            f"{sizes.get('calibration')} calibration / {sizes.get('evaluation')} evaluation rows; "
            f"about {sizes.get('oos_threshold_rows')} out-of-scope rows fit each cut-off.",
            f"The classifier was trained on in-scope rows only ({len(keep)} of {len(train)} training rows).",
            f"Certified cut-offs promise population recall below target with probability at most "
            f"delta = {st['delta']:g}. A violation is measured on the finite evaluation half, whose sampling "
            "noise adds violations even when the certificate holds; 'expected viol.' is the exact rate an "
            "order-statistic certificate shows at these sizes (beta-binomial), the figure to compare with.",
            *self._share_notes(ds, oos_label),
        ]
        in_scope = ~is_oos
        summary = {
            "in_scope_accuracy_all": rounded(float(correct[in_scope].mean())),
            "oos_share_pool": rounded(float(is_oos.mean())),
            "n_train_in_scope": len(keep),
            "n_pool": len(pool),
            "resplits": n_resplits,
        }
        info = {
            "dataset": ds.name,
            "dataset_fingerprint": ds.fingerprint,
            "oos_label": oos_label,
            "classifier": {
                "kind": "local",
                "C": float(getattr(clf, "C_", math.nan)),
                "classes": len(clf.classes_),
            },
        }
        return KindOutput(
            rows=rows, labels=labels_out, details=details, summary=summary, notes=notes, info=info
        )

    def _share_notes(self, ds: Any, oos_label: str) -> list[str]:
        """The out-of-scope share of each pooled split, and the caution when they differ."""
        shares = {}
        for split in self.spec.splits["pool"]:
            y = ds.split(split).y
            shares[split] = (sum(g == oos_label for g in y), len(y))
        parts = ", ".join(f"{s} {k / n:.1%} ({k} of {n})" for s, (k, n) in shares.items())
        total_k = sum(k for k, _ in shares.values())
        total_n = sum(n for _, n in shares.values())
        out = [f"Out-of-scope share by pooled split: {parts}; pooled {total_k / total_n:.1%}."]
        values = [k / n for k, n in shares.values() if n]
        if len(values) > 1 and min(values) > 0 and max(values) / min(values) > 1.5:
            smallest = min(shares.items(), key=lambda kv: kv[1][0])
            out.append(
                "Caution: the pooled splits differ in out-of-scope share, so each half carries the pooled "
                "mix. Recall and false-alarm rate are per-class rates and carry over to another mix; the "
                "precision of what passes does not: it holds only for traffic with this out-of-scope share. "
                f"A cut-off fitted on {smallest[0]} alone would rest on only {smallest[1][0]} out-of-scope items."
            )
        return out
