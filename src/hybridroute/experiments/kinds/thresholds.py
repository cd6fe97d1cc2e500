"""``thresholds``: a fixed threshold vs empirical vs certified thresholds, over resplits.

The classifier is trained once (seeded) on the ``train`` role and scores the ``pool``
role once. Each resplit then divides the pool into a calibration half and an evaluation
half (stratified, seeded); on the calibration half the probability calibrator and every
threshold method are fitted (as ``hybridroute calibrate`` does: a ``calibrator.fraction``
share fits the calibrator, the rest the thresholds); on the evaluation half the realised
precision and coverage of what each threshold auto-routes are measured.

Per (method, target) the table reports the mean coverage, the mean realised precision,
the violation rate (share of resplits whose realised precision is below the target) and
the oracle coverage: the largest coverage any threshold reaches on the evaluation half
while keeping precision at or above the target (known only in hindsight).

Spec fields::

    methods:                       # required; each a name or a mapping
      - {method: fixed, threshold: 0.8}     # the baseline: a threshold typed in
      - empirical                  # lowest threshold whose calibration precision >= target
      - {method: certified, delta: 0.05}    # Clopper-Pearson certified (default: spec delta)
    targets: [0.9, 0.95]           # precision targets
    delta: 0.05                    # allowed probability that a certificate is wrong
    resplits: 100
    calibration_fraction: 0.5      # share of the pool in the calibration half
    calibrator: {method: temperature, fraction: 0.3}   # or isotonic / none

Every method also takes ``label`` (its row name) and ``score`` (``calibrated``, the
default, or ``raw``: the classifier's own top probability).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from ...calibration import CertifiedPrecisionThreshold, EmpiricalThreshold
from .._resplit import calibrate, divide, mean_or_none, pool_halves, rate, resplit_seed, rounded
from ._base import Column, ExperimentKind, KindOutput, Progress, label_index, parse_resplit_fields

if TYPE_CHECKING:  # pragma: no cover
    from .._spec import SpecReader

__all__ = ["FixedThreshold", "ThresholdsExperiment"]

SCORES = ("calibrated", "raw")


class FixedThreshold:
    """The baseline: a threshold given in the spec, not fitted to anything.

    Parameters
    ----------
    threshold : float
        Items whose score is at least this are auto-routed.
    """

    method = "fixed"

    def __init__(self, threshold: float) -> None:
        self.threshold = threshold

    def fit(self, scores: Any, correct: Any) -> FixedThreshold:
        """Nothing to learn; sets ``threshold_`` and returns ``self``."""
        self.threshold_ = float(self.threshold)
        self.certified_ = False
        return self

    def predict(self, scores: Any) -> np.ndarray:
        """Which items pass."""
        return np.asarray(scores, dtype=float) >= self.threshold_


def _fixed(entry: Mapping[str, Any], target: float, delta: float) -> FixedThreshold:
    return FixedThreshold(entry["threshold"])


def _empirical(entry: Mapping[str, Any], target: float, delta: float) -> EmpiricalThreshold:
    return EmpiricalThreshold(target)


def _certified(
    entry: Mapping[str, Any], target: float, delta: float
) -> CertifiedPrecisionThreshold:
    return CertifiedPrecisionThreshold(
        target, entry.get("delta", delta), n_starts=entry.get("n_starts", 3)
    )


#: method name -> (extra spec keys, factory(entry, target, delta)); the one place a
#: threshold method name is resolved.
METHODS: dict[str, tuple[tuple[str, ...], Any]] = {
    "fixed": (("threshold",), _fixed),
    "empirical": ((), _empirical),
    "certified": (("delta", "n_starts"), _certified),
}


class ThresholdsExperiment(ExperimentKind):
    """Realised precision and coverage of threshold methods over seeded resplits."""

    name = "thresholds"
    description = (
        "fixed vs empirical vs certified thresholds: realised precision and coverage over resplits"
    )
    split_roles: ClassVar[dict[str, tuple[str, ...]]] = {"train": ("train",), "pool": ("test",)}
    fields = ("methods", "targets", "delta", "resplits", "calibration_fraction", "calibrator")
    has_resplits = True
    columns = (
        Column("method", "method", "config", "str", "the threshold method (its label)"),
        Column("target", "target", "config", "float", "precision target"),
        Column(
            "threshold",
            "threshold",
            "metric",
            "float",
            "mean fitted threshold (resplits that route something)",
        ),
        Column(
            "coverage", "coverage", "metric", "pct", "mean share of the evaluation half auto-routed"
        ),
        Column(
            "precision",
            "realised precision",
            "metric",
            "float",
            "mean precision of what was auto-routed",
        ),
        Column(
            "violation_rate",
            "violations",
            "metric",
            "pct",
            "share of resplits with realised precision < target",
        ),
        Column(
            "oracle_coverage",
            "oracle coverage",
            "metric",
            "pct",
            "largest coverage at precision >= target, in hindsight",
        ),
        Column(
            "certified_rate",
            "certified",
            "metric",
            "pct",
            "share of resplits where the target was certified",
        ),
        Column(
            "empty_rate",
            "routes none",
            "metric",
            "pct",
            "share of resplits that auto-route nothing",
        ),
    )

    @classmethod
    def parse_settings(cls, doc: Mapping[str, Any], reader: SpecReader) -> dict[str, Any]:
        out = parse_resplit_fields(doc, reader)
        if "methods" not in doc:
            raise reader.error(
                f"missing: a list of threshold methods ({', '.join(METHODS)})", "methods"
            )
        methods = []
        labels: set[str] = set()
        for i, item in enumerate(reader.sequence(doc["methods"], "methods")):
            where = f"methods[{i}]"
            if isinstance(item, str):
                item = {"method": item}
            entry = reader.mapping(item, where)
            if "method" not in entry:
                raise reader.error(f"missing: one of {', '.join(METHODS)}", f"{where}.method")
            name = reader.string(entry["method"], f"{where}.method", choices=tuple(METHODS))
            extra, _ = METHODS[name]
            reader.mapping(entry, where, keys=("method", "label", "score", *extra))
            m: dict[str, Any] = {"method": name}
            m["score"] = reader.string(
                entry.get("score", "calibrated"), f"{where}.score", choices=SCORES
            )
            if name == "fixed":
                if "threshold" not in entry:
                    raise reader.error(
                        "missing: the fixed baseline's threshold", f"{where}.threshold"
                    )
                m["threshold"] = reader.fraction(
                    entry["threshold"], f"{where}.threshold", closed_high=True
                )
            if "delta" in entry:
                m["delta"] = reader.fraction(entry["delta"], f"{where}.delta")
            if "n_starts" in entry:
                m["n_starts"] = reader.integer(
                    entry["n_starts"], f"{where}.n_starts", low=1, high=20
                )
            default = name if name != "fixed" else f"fixed {m['threshold']:g}"
            if m["score"] == "raw":
                default += " (raw)"
            m["label"] = reader.string(entry.get("label", default), f"{where}.label")
            if m["label"] in labels:
                raise reader.error(
                    f"label {m['label']!r} is used twice; give each method its own label",
                    f"{where}.label",
                )
            labels.add(m["label"])
            methods.append(m)
        out["methods"] = tuple(methods)
        return out

    def run(self, progress: Progress | None = None) -> KindOutput:
        st = self.spec.settings
        ds = self.load_dataset()
        train = self.role(ds, "train")
        pool = self.role(ds, "pool")
        if progress:
            progress("training the classifier", 0, 1)
        clf = self.train_classifier(train.texts, train.y)
        if progress:
            progress("training the classifier", 1, 1)
        proba = np.asarray(clf.predict_proba(pool.texts), dtype=float)
        y = label_index(clf.classes_, pool.y)
        top = proba.argmax(axis=1)
        idx = np.arange(len(top))
        correct = top == y
        raw_conf = proba[idx, top]
        cal = st["calibrator"]
        targets = st["targets"]
        methods = st["methods"]
        n_resplits = st["resplits"]

        # per (method label, target): per-resplit values
        rec: dict[tuple[str, float], dict[str, list[Any]]] = {
            (m["label"], t): {
                "threshold": [],
                "coverage": [],
                "precision": [],
                "violated": [],
                "certified": [],
                "oracle_coverage": [],
            }
            for m in methods
            for t in targets
        }
        temperatures: list[float] = []
        sizes = {"calibration": 0, "evaluation": 0}
        for r in range(n_resplits):
            seed = resplit_seed(self.spec.seed, r)
            cal_half, ev = pool_halves(pool.y, pool.texts, st["calibration_fraction"], seed)
            cal_rows, thr_rows = divide(cal_half, cal["fraction"], seed)
            calibrated, csum = calibrate(cal["method"], proba, y, cal_rows)
            if "temperature" in csum:
                temperatures.append(float(csum["temperature"]))
            scores = {"calibrated": calibrated[idx, top], "raw": raw_conf}
            sizes = {"calibration": len(cal_half), "evaluation": len(ev)}
            oracle: dict[tuple[str, float], float] = {}
            for t in targets:
                for m in methods:
                    s = scores[m["score"]]
                    key = (m["score"], t)
                    if key not in oracle:
                        oracle[key] = EmpiricalThreshold(t).fit(s[ev], correct[ev]).coverage_
                    _, make = METHODS[m["method"]]
                    fitted = make(m, t, st["delta"]).fit(s[thr_rows], correct[thr_rows])
                    passed = fitted.predict(s[ev])
                    n_pass = int(passed.sum())
                    precision = float(correct[ev][passed].mean()) if n_pass else math.nan
                    out = rec[(m["label"], t)]
                    out["threshold"].append(float(fitted.threshold_))
                    out["coverage"].append(n_pass / len(ev))
                    out["precision"].append(precision)
                    # nothing routed: no precision to fall short, so no violation
                    out["violated"].append(bool(n_pass and precision < t))
                    out["certified"].append(bool(getattr(fitted, "certified_", False)))
                    out["oracle_coverage"].append(oracle[key])
            if progress:
                progress("resplits", r + 1, n_resplits)

        rows, labels, details = [], [], []
        for m in methods:
            for t in targets:
                v = rec[(m["label"], t)]
                finite = [x for x in v["threshold"] if math.isfinite(x)]
                row = {
                    "method": m["label"],
                    "target": t,
                    "threshold": mean_or_none(finite),
                    "coverage": mean_or_none(v["coverage"]),
                    "precision": mean_or_none(v["precision"]),
                    "violation_rate": rate(v["violated"]),
                    "oracle_coverage": mean_or_none(v["oracle_coverage"]),
                    "certified_rate": rate(v["certified"]) if m["method"] == "certified" else None,
                    "empty_rate": rate([c == 0 for c in v["coverage"]]),
                }
                rows.append({k: rounded(x) for k, x in row.items()})
                labels.append(f"{m['label']} @ {t:g}")
                details.append(
                    {
                        "method": dict(m),
                        "target": t,
                        "resplit_seeds": [
                            resplit_seed(self.spec.seed, r) for r in range(n_resplits)
                        ],
                        **{k: [rounded(x) for x in vals] for k, vals in v.items()},
                    }
                )
        delta = st["delta"]
        notes = [
            f"{n_resplits} resplits of {len(pool)} pool rows ({'+'.join(self.spec.splits['pool'])}) into "
            f"{sizes['calibration']} calibration / {sizes['evaluation']} evaluation rows.",
            f"Certified thresholds promise a violation rate of at most delta = {delta:g} per target; "
            "empirical and fixed thresholds promise nothing.",
        ]
        if any(m["method"] == "fixed" for m in methods):
            notes.append(
                "A fixed threshold ignores the target: its coverage and precision are the same "
                "in every target's row, only the violation rate is measured against that target."
            )
        summary = {
            "pool_accuracy": rounded(float(correct.mean())),
            "n_train": len(train),
            "n_pool": len(pool),
            "resplits": n_resplits,
        }
        if temperatures:
            summary["temperature_mean"] = rounded(float(np.mean(temperatures)))
        info = {
            "dataset": ds.name,
            "dataset_fingerprint": ds.fingerprint,
            "classifier": {
                "kind": "local",
                "C": float(getattr(clf, "C_", math.nan)),
                "n_features": int(getattr(clf, "n_features_", 0)),
                "classes": len(clf.classes_),
            },
        }
        return KindOutput(
            rows=rows, labels=labels, details=details, summary=summary, notes=notes, info=info
        )
