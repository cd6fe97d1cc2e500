"""Threshold control on real scores: coverage and violation rate, ours against MAPIE.

    python benchmarks/bench_calibration.py [--resplits 200] [--json] [--cache DIR]
    python benchmarks/bench_calibration.py --show [saved.json]   # tables of a --json run
    python benchmarks/bench_calibration.py --readme [saved.json] # the README's tables

``--show`` / ``--readme`` without a file read the committed run, ``bench_calibration.json``
beside this script (see its ``command`` field for how it was made).

For Banking77 and CLINC150 (with its out-of-scope rows, labelled ``oos``), the local
classifier is fitted once on the train split and scores the official test split. Two
synthetic sets of 4,000 rows are built the same way every time (:func:`synthetic`):
``synthetic-calibrated`` (``correct ~ Bernoulli(score)``) and ``synthetic-stress`` (the
same, with a cluster of confident mistakes at the top of the score range). Each set's
scored rows are resplit (seeded) into calibration and test halves; on every resplit and for
each target precision (0.90 / 0.95 / 0.98) every method picks an auto-route threshold on
the calibration half:

* ``fixed_0.8`` -- a literal 0.8 (what hybridroute forbids);
* ``empirical`` -- :class:`EmpiricalThreshold`, the lowest threshold whose calibration
  precision meets the target (no guarantee);
* ours (:data:`OURS`) -- ``certified`` is :class:`CertifiedPrecisionThreshold` (exact
  binomial p-values, three fixed sequences at delta / 3); the others are the round-two
  fitters of :mod:`hybridroute.calibration` (see ``OURS``);
* MAPIE 1.6's ``BinaryClassificationController`` with the precision risk, on the same scores,
  with each of its multiple-testing methods (:data:`MAPIE_METHODS`): ``mapie``
  (Bonferroni–Holm over its default grid, MAPIE's default), ``mapie-fs1`` / ``-fs3`` /
  ``-fs10`` (fixed-sequence testing with 1, 3 or 10 starts) and ``mapie-sfs`` (split fixed
  sequence: the order learned on a seeded 30% of the calibration half, the rest tests it).

Reported per method: mean test coverage, the violation rate (share of resplits whose
realised test-half precision is below target) and the population violation rate (a
calibration set drawn with replacement from the scored rows; precision measured on all of
them, which is what the guarantee is about; not run for ``mapie-sfs``, whose learning step
takes a third of a second per fit). The realised test-half precision carries sampling noise
of its own, so a method with a delta = 0.05 guarantee can show a few percent more violations
here than on an infinite test set.

At the same nominal delta a tighter procedure spends more of its error budget, so it shows
*more* violations than a looser one (still at most delta). To compare at an equal or lower
violation rate, each of ours is also fitted at every delta of a ladder fixed in advance
(``MATCH_DELTAS``), on the same resplits; a *match* takes the largest ladder delta whose
resplit violation rate is at most the MAPIE run's and reports the coverage ratio. MAPIE runs
at each delta of its own ladder (``MAPIE_DELTAS``). A **cell** is (set, target, MAPIE delta);
in each cell the *best MAPIE method* for one of ours is the MAPIE method against which that
match gives the lowest ratio (methods that route nothing are not candidates). Violations
are rare events, so one violating resplit more or less can move a match a whole ladder step:
each matched ratio comes with a 95% bootstrap interval over the resplits that redoes the
match. ``--sizes`` repeats the comparison with calibration sets of 250 / 500 / 1,000 /
2,000 rows (the rest of the scored rows are the test set).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from hybridroute.calibration import (
    CertifiedPrecisionThreshold,
    EmpiricalThreshold,
    ThresholdFitter,
    precision_p_value,
    required_calibration_size,
)
from hybridroute.calibration._base import check_fraction
from hybridroute.calibration.experimental import (
    FallbackPrecisionThreshold,
    LabelFreeStartThreshold,
)
from hybridroute.calibration.techniques import Curve as _Curve

TARGETS = (0.90, 0.95, 0.98)
DELTA = 0.05
SEED = 20250611
FIXED = 0.8  # the literal baseline, on purpose
#: The matched-violation ladder, largest first (fixed in advance, roughly geometric).
MATCH_DELTAS = (0.05, 0.03, 0.02, 0.01, 0.005, 0.003, 0.002, 0.001, 0.0005, 0.0003, 0.0002)
BOOTSTRAP = 1000  # resamples of the resplits behind each matched ratio's interval
#: MAPIE's own delta ladder (DELTA must be among them: the headline match is at DELTA).
MAPIE_DELTAS = (0.2, 0.1, 0.05, 0.02, 0.01)
#: MAPIE's multiple-testing methods compared; ``mapie`` is its default (Bonferroni–Holm).
MAPIE_METHODS = ("mapie", "mapie-fs1", "mapie-fs3", "mapie-fs10", "mapie-sfs")
#: Share of the calibration half on which ``mapie-sfs`` learns its order (fixed in advance).
SFS_LEARN_FRACTION = 0.3
#: The public sets and the synthetic ones (built by :func:`synthetic`).
PUBLIC_SETS = ("banking77", "clinc150")
SYNTHETIC_SETS = ("synthetic-calibrated", "synthetic-stress")
SYNTHETIC_ROWS = 4000
#: Calibration sizes of ``--sizes`` (the rest of the scored rows is the test set).
SIZES = (250, 500, 1000, 2000)
#: The committed run read by ``--show`` and ``--readme`` without a file.
COMMITTED = Path(__file__).with_name("bench_calibration.json")

# --------------------------------------------------------------------------- candidate C5


class SplitStartPrecisionThreshold(ThresholdFitter):
    """One fixed sequence at the whole ``delta``, started where a learning split says.

    The calibration rows are split once, seeded: on the learning share the candidate with
    the smallest p-value (the easiest to certify there) is found; on the other rows one
    fixed sequence starts at the highest candidate at or below that score and walks down,
    stopping at the first candidate it cannot certify. The threshold is the lowest
    certified candidate; every count, bound and coverage refers to the testing rows.

    Why the guarantee holds: the start depends on the learning rows (independent of the
    testing rows) and on the testing rows' scores, never on their labels, so on the
    testing rows this is the fixed-sequence procedure at level ``delta``; it can certify a
    wrong candidate only by certifying the first wrong one in its order, which happens
    with probability at most ``delta``.

    Candidate C5 of docs/decisions/calibration-default.md. It did not help on any development set, so it is
    not part of the package; it stays here so the development runs can be reproduced.

    Parameters
    ----------
    target : float, default 0.95
        Precision to certify, in (0, 1).
    delta : float, default 0.05
        Allowed probability that the certificate is wrong, in (0, 1).
    learn_fraction : float, default 0.3
        Share of the calibration rows that learns the start, in (0, 1).
    seed : int, default 0
        Seed of the split.
    grid : array-like or None, default None
        Candidate thresholds fixed in advance; ``None`` uses the testing rows' scores.
    """

    method = "split_start_precision"

    def __init__(
        self,
        target: float = 0.95,
        delta: float = 0.05,
        learn_fraction: float = 0.3,
        seed: int = 0,
        grid: Any = None,
    ) -> None:
        self.target = target
        self.delta = delta
        self.learn_fraction = learn_fraction
        self.seed = seed
        self.grid = grid

    def fit(self, scores: Any, correct: Any) -> SplitStartPrecisionThreshold:
        """Fit on calibration scores and correctness flags; returns ``self``."""
        target = check_fraction(self.target, "target")
        delta = check_fraction(self.delta, "delta")
        share = check_fraction(self.learn_fraction, "learn_fraction")
        s, c = self._validate(scores, correct)
        perm = np.random.default_rng(int(self.seed)).permutation(len(s))
        k = round(share * len(s))
        learn, test = np.sort(perm[:k]), np.sort(perm[k:])
        if len(test) == 0:
            raise ValueError("learn_fraction leaves no calibration rows to test on")
        start_score = math.inf
        if k:
            lc = _Curve.build(s[learn], c[learn])
            lp = np.asarray(precision_p_value(lc.errors, lc.accepted, target), dtype=float)
            start_score = float(lc.thresholds[int(np.argmin(lp))])
        st, ct = s[test], c[test]
        curve = _Curve.build(st, ct) if self.grid is None else _Curve.on_grid(st, ct, self.grid)
        pvals = np.asarray(precision_p_value(curve.errors, curve.accepted, target), dtype=float)
        # thresholds descend: the first candidate at or below the learned score
        i = int(np.searchsorted(-curve.thresholds, -start_score, side="left"))
        best: int | None = None
        while i < len(pvals) and pvals[i] <= delta:
            best = i
            i += 1
        self.start_score_ = start_score
        self.n_learn_ = k
        self.p_values_ = pvals
        n_min = required_calibration_size(target, delta)
        self._record_certificate(curve, best, delta, target, (delta, n_min))
        return self


#: Our threshold fitters, by the name used in the tables: ``(target, delta) -> unfitted``.
#: The candidates of docs/decisions/calibration-default.md (C0-C5), every setting fixed in advance.
OURS: dict[str, Callable[[float, float], ThresholdFitter]] = {
    "certified": lambda t, d: CertifiedPrecisionThreshold(t, d),  # C0: today's
    "labelfree": lambda t, d: LabelFreeStartThreshold(t, d),  # C1
    "fallback": lambda t, d: FallbackPrecisionThreshold(t, d),  # C2: 3 equal starts
    "fallback-half": lambda t, d: FallbackPrecisionThreshold(t, d, weights=(2, 1, 1)),  # C3
    "fallback-auto": lambda t, d: FallbackPrecisionThreshold(t, d, n_starts="auto"),  # C4
    "split-start": lambda t, d: SplitStartPrecisionThreshold(t, d),  # C5
}


def data_dir() -> Path:
    env = os.environ.get("HYBRIDROUTE_DATA_DIR")
    here = Path(__file__).resolve().parents[2] / "shared" / "datasets"
    for c in ([Path(env)] if env else []) + [here]:
        if (c / "banking77").is_dir():
            return c
    raise SystemExit("set HYBRIDROUTE_DATA_DIR to a directory holding banking77/ and clinc150/")


def synthetic(
    kind: str, seed: int = SEED, n: int = SYNTHETIC_ROWS
) -> tuple[np.ndarray, np.ndarray]:
    """Scored rows of a synthetic set: ``calibrated`` or ``stress`` (seeded; fixed in advance).

    ``calibrated``: top-label scores ``s ~ Beta(8, 1)`` and ``correct ~ Bernoulli(s)``.
    ``stress``: the same, then 1% of the rows get ``s ~ Uniform(0.999, 1)`` and are correct
    with probability 0.7 -- a cluster of confident mistakes at the top of the score range,
    where a fixed sequence starting from the top meets them first.
    """
    kinds = ("calibrated", "stress")
    if kind not in kinds:
        raise ValueError(f"synthetic kind must be one of {kinds}, got {kind!r}")
    rng = np.random.default_rng([seed, kinds.index(kind)])
    s = rng.beta(8.0, 1.0, n)
    correct = rng.random(n) < s
    if kind == "stress":
        m = round(0.01 * n)
        idx = rng.choice(n, m, replace=False)
        s[idx] = rng.uniform(0.999, 1.0, m)
        correct[idx] = rng.random(m) < 0.7
    return s, correct


def scores(name: str, cache: Path | None) -> tuple[np.ndarray, np.ndarray]:
    """Top-label confidence and correctness of the local classifier on the test split."""
    if name.startswith("synthetic-"):
        return synthetic(name.removeprefix("synthetic-"))
    if cache is not None:
        f = cache / f"{name}_scores.npz"
        if f.exists():
            d = np.load(f)
            return d["conf"], d["correct"]
    from hybridroute.classifiers import LocalClassifier
    from hybridroute.datasets import load_dataset

    ds = load_dataset(name, data_dir=data_dir(), download=False)
    train, test = ds.split("train"), ds.split("test")
    t0 = time.perf_counter()
    clf = LocalClassifier(Cs=(10.0,)).fit(train.texts, train.y)
    proba = clf.predict_proba(test.texts)
    classes = [str(c) for c in clf.classes_]
    index = {c: i for i, c in enumerate(classes)}
    y = np.array([index.get(str(v), -1) for v in test.y])
    conf, correct = proba.max(axis=1), proba.argmax(axis=1) == y
    print(
        f"# {name}: fitted and scored in {time.perf_counter() - t0:.0f}s; "
        f"test accuracy {correct.mean():.4f} on {len(y)} rows",
        file=sys.stderr,
    )
    if cache is not None:
        cache.mkdir(parents=True, exist_ok=True)
        np.savez(cache / f"{name}_scores.npz", conf=conf, correct=correct)
    return conf, correct


# --------------------------------------------------------------------------- MAPIE


def _two_columns(x: np.ndarray) -> np.ndarray:
    return np.column_stack([1.0 - x, x])


def _fwer(method: str) -> Any:
    """MAPIE's ``fwer_method`` argument for one of :data:`MAPIE_METHODS`."""
    from mapie.risk_control import FWERFixedSequenceTesting

    if method == "mapie":
        return "bonferroni_holm"
    if method == "mapie-sfs":
        return "split_fixed_sequence"
    if method == "mapie-fs1":
        return "fixed_sequence"
    if method.startswith("mapie-fs"):
        return FWERFixedSequenceTesting(n_starts=int(method.removeprefix("mapie-fs")))
    raise ValueError(f"unknown MAPIE method {method!r}")


def _controller(target: float, delta: float, method: str) -> Any:
    from mapie.risk_control import BinaryClassificationController

    return BinaryClassificationController(
        predict_function=_two_columns,
        risk="precision",
        target_level=target,
        confidence_level=1.0 - delta,
        fwer_method=_fwer(method),
    )


def _best_param(ctrl: Any) -> float:
    best = ctrl.best_predict_param
    return np.inf if best is None else float(best)


def sfs_split(n: int, seed: Any) -> tuple[np.ndarray, np.ndarray]:
    """The seeded learn / calibrate split of ``mapie-sfs`` (learn share fixed in advance)."""
    perm = np.random.default_rng(seed).permutation(n)
    k = round(SFS_LEARN_FRACTION * n)
    return perm[:k], perm[k:]


def mapie_thresholds(
    conf: np.ndarray,
    correct: np.ndarray,
    target: float,
    *,
    methods: Sequence[str] = MAPIE_METHODS,
    deltas: Sequence[float] = MAPIE_DELTAS,
    seed: Any = SEED,
) -> dict[str, float]:
    """MAPIE's threshold for every method and delta on one calibration sample.

    ``mapie-sfs`` learns its order once per sample with ``learn_fixed_sequence_order`` and
    reuses it at every delta: the learned order depends on the target and the learning
    rows, not on delta (MAPIE 1.6 keeps it in ``_learned_fixed_sequence``; a test checks
    that reuse against a fresh learn at each delta).
    """
    y = correct.astype(int)
    out: dict[str, float] = {}
    with warnings.catch_warnings():
        # MAPIE warns when no (or every) grid value controls the risk and when a fixed
        # sequence meets a non-monotone risk; the table shows what came of it
        warnings.simplefilter("ignore", UserWarning)
        learned = None
        for method in methods:
            for d in deltas:
                ctrl = _controller(target, d, method)
                if method == "mapie-sfs":
                    learn, cal = sfs_split(len(conf), seed)
                    if learned is None:
                        ctrl.learn_fixed_sequence_order(conf[learn], y[learn])
                        learned = ctrl._learned_fixed_sequence
                    else:
                        ctrl._learned_fixed_sequence = learned
                    ctrl.calibrate(conf[cal], y[cal])
                else:
                    ctrl.calibrate(conf, y)
                out[_name(method, d)] = _best_param(ctrl)
    return out


def mapie_threshold(
    conf: np.ndarray,
    correct: np.ndarray,
    target: float,
    delta: float = DELTA,
    method: str = "mapie",
    seed: Any = SEED,
) -> float:
    """One MAPIE threshold (``inf`` when nothing controls the risk)."""
    name = _name(method, delta)
    return mapie_thresholds(conf, correct, target, methods=[method], deltas=[delta], seed=seed)[
        name
    ]


# --------------------------------------------------------------------------- names


def _name(base: str, d: float) -> str:
    return base if d == DELTA else f"{base}@{d:g}"


def _ladder(d: float, ours: str = "certified") -> str:
    return _name(ours, d)


def _mapie(d: float, method: str = "mapie") -> str:
    return _name(method, d)


def method_names(
    ours: Sequence[str] = tuple(OURS), mapie_methods: Sequence[str] = MAPIE_METHODS
) -> list[str]:
    """Every column :func:`evaluate` fills: baselines, our ladders, MAPIE's ladders."""
    out = ["fixed_0.8", "empirical"]
    out += [_ladder(d, o) for o in ours for d in MATCH_DELTAS]
    out += [_mapie(d, m) for m in mapie_methods for d in MAPIE_DELTAS]
    return out


def _thresholds(
    conf: np.ndarray,
    correct: np.ndarray,
    t: float,
    *,
    ours: Mapping[str, Callable[[float, float], ThresholdFitter]],
    mapie_methods: Sequence[str],
    seed: Any,
) -> dict[str, float]:
    out = {
        "fixed_0.8": FIXED,
        "empirical": EmpiricalThreshold(t).fit(conf, correct).threshold_,
    }
    for name, make in ours.items():
        for d in MATCH_DELTAS:
            out[_ladder(d, name)] = make(t, d).fit(conf, correct).threshold_
    if mapie_methods:
        out.update(mapie_thresholds(conf, correct, t, methods=mapie_methods, seed=seed))
    return out


# --------------------------------------------------------------------------- matching


def _matched(row: dict, mapie: str = "mapie", ours: str = "certified") -> dict:
    """The largest ladder delta of ``ours`` whose violation rate is at most MAPIE's, and its coverage.

    ``mapie`` names the MAPIE run to match (its default method and delta unless told otherwise).
    """
    limit = row[mapie]["violation_rate"]
    mc = row[mapie]["coverage"]
    for d in MATCH_DELTAS:  # largest first
        r = row[_ladder(d, ours)]
        if r["violation_rate"] <= limit:
            return {
                "delta": d,
                "coverage": r["coverage"],
                "violation_rate": r["violation_rate"],
                "population_violation_rate": r.get("population_violation_rate"),
                "mapie_violation_rate": limit,
                "over_mapie": (r["coverage"] / mc) if mc > 0 else None,
            }
    return {"delta": None, "mapie_violation_rate": limit, "over_mapie": None}


def _matched_interval(
    cov: dict,
    viol: dict,
    t: float,
    resplits: int,
    mapie: str = "mapie",
    ours: str = "certified",
) -> list[float] | None:
    """Percentile interval (95%) of the matched ratio over bootstrap resamples of the resplits.

    Each resample redoes the whole match -- MAPIE's violation rate, the ladder delta that
    meets it, both coverages -- so the interval carries the noise of the violation counts
    that decide the match, not just of the coverages. Resamples where no ladder delta
    matches (or MAPIE routes nothing) are left out of the interval.
    """
    rng = np.random.default_rng(SEED + 7)
    idx = rng.integers(0, resplits, (BOOTSTRAP, resplits))
    mc = np.asarray(cov[(mapie, t)], dtype=float)[idx].mean(axis=1)
    mv = np.asarray(viol[(mapie, t)], dtype=float)[idx].mean(axis=1)
    names = [_ladder(d, ours) for d in MATCH_DELTAS]
    c = np.stack([np.asarray(cov[(m, t)], dtype=float)[idx].mean(axis=1) for m in names], 1)
    v = np.stack([np.asarray(viol[(m, t)], dtype=float)[idx].mean(axis=1) for m in names], 1)
    ok = v <= mv[:, None]
    first = ok.argmax(axis=1)
    keep = ok.any(axis=1) & (mc > 0)
    if not keep.any():
        return None
    ratios = c[np.arange(BOOTSTRAP), first][keep] / mc[keep]
    lo, hi = np.percentile(ratios, [2.5, 97.5])
    return [float(lo), float(hi)]


def best_mapie(
    row: dict,
    cov: dict,
    viol: dict,
    t: float,
    resplits: int,
    ours: Sequence[str],
    mapie_methods: Sequence[str],
) -> list[dict]:
    """Per MAPIE delta: each of ours matched against its toughest MAPIE method.

    For every MAPIE delta and each of ours, the match against every MAPIE method that
    routes something; the *best* MAPIE method is the one giving the lowest ratio. A
    method that no ladder delta of ours can match (it violates more rarely than ours ever
    does, e.g. zero violations while routing almost nothing) has no ratio: it is listed
    under ``unmatched`` beside the best one, and when every method is unmatched the
    point's ratio is ``None``. The bootstrap interval is computed for the best pairing only.
    """
    out = []
    for d in MAPIE_DELTAS:
        point: dict[str, Any] = {"mapie_delta": d, "ours": {}, "by_method": {}}
        for m in mapie_methods:
            name = _mapie(d, m)
            point["by_method"][m] = {
                "coverage": row[name]["coverage"],
                "violation_rate": row[name]["violation_rate"],
                "over": {o: _matched(row, name, o)["over_mapie"] for o in ours},
            }
        for o in ours:
            live = [m for m in mapie_methods if row[_mapie(d, m)]["coverage"] > 0]
            over = {m: point["by_method"][m]["over"][o] for m in live}
            unmatched = [m for m in live if over[m] is None]
            matchable = [m for m in live if over[m] is not None]
            if not matchable:
                point["ours"][o] = {
                    "mapie_method": unmatched[0] if unmatched else None,
                    "mapie_coverage": row[_mapie(d, unmatched[0])]["coverage"]
                    if unmatched
                    else None,
                    "mapie_violation_rate": row[_mapie(d, unmatched[0])]["violation_rate"]
                    if unmatched
                    else None,
                    "delta": None,
                    "over_mapie": None,
                    "unmatched": unmatched,
                }
                continue
            worst = min(matchable, key=lambda m: over[m])
            name = _mapie(d, worst)
            point["ours"][o] = {
                "mapie_method": worst,
                "mapie_coverage": row[name]["coverage"],
                **_matched(row, name, o),
                "interval": _matched_interval(cov, viol, t, resplits, name, o),
                "unmatched": unmatched,
            }
        out.append(point)
    return out


# --------------------------------------------------------------------------- evaluation


def evaluate(
    conf: np.ndarray,
    correct: np.ndarray,
    resplits: int,
    *,
    n_cal: int | None = None,
    ours: Mapping[str, Callable[[float, float], ThresholdFitter]] | None = None,
    mapie_methods: Sequence[str] = MAPIE_METHODS,
) -> dict:
    """Resplit violations (realised test-half precision) and population violations.

    Each resplit puts ``n_cal`` rows (default: half) in the calibration set and the rest in
    the test set. Population violations check the guarantee itself: a calibration set of
    the same size is drawn with replacement from the scored rows, and the fitted threshold's
    precision is measured on all scored rows (the population), free of test-half noise.
    """
    ours = dict(OURS if ours is None else ours)
    n = len(conf)
    n_cal = n // 2 if n_cal is None else int(n_cal)
    if not 0 < n_cal < n:
        raise ValueError(f"n_cal must be between 1 and {n - 1}, got {n_cal}")
    rng = np.random.default_rng(SEED)
    methods = method_names(tuple(ours), mapie_methods)
    # the population draws skip the split method: its learning step is slow, and its
    # population figure is not used by any match
    pop_mapie = [m for m in mapie_methods if m != "mapie-sfs"]
    cov: dict[tuple[str, float], list[float]] = {(m, t): [] for m in methods for t in TARGETS}
    viol: dict[tuple[str, float], list[bool]] = {(m, t): [] for m in methods for t in TARGETS}
    pop: dict[tuple[str, float], int | None] = {(m, t): 0 for m in methods for t in TARGETS}
    for r in range(resplits):
        perm = rng.permutation(n)
        cal, test = perm[:n_cal], perm[n_cal:]
        draw = rng.integers(0, n, n_cal)
        for t in TARGETS:
            split_seed = (SEED, r, round(t * 100))
            fitted = _thresholds(
                conf[cal], correct[cal], t, ours=ours, mapie_methods=mapie_methods, seed=split_seed
            )
            for m, thr in fitted.items():
                passed = conf[test] >= thr
                cov[(m, t)].append(passed.mean())
                viol[(m, t)].append(bool(passed.any() and correct[test][passed].mean() < t))
            fitted = _thresholds(
                conf[draw], correct[draw], t, ours=ours, mapie_methods=pop_mapie, seed=split_seed
            )
            for m in methods:
                if m not in fitted:
                    pop[(m, t)] = None
                    continue
                passed = conf >= fitted[m]
                if passed.any() and correct[passed].mean() < t:
                    pop[(m, t)] = int(pop[(m, t)] or 0) + 1
    out: dict[str, Any] = {"rows": n, "calibration_size": n_cal}
    for t in TARGETS:
        row: dict[str, Any] = {
            m: {
                "coverage": float(np.mean(cov[(m, t)])),
                "violation_rate": float(np.mean(viol[(m, t)])),
                "population_violation_rate": None
                if pop[(m, t)] is None
                else int(pop[(m, t)] or 0) / resplits,
            }
            for m in methods
        }
        if "certified" in ours and "mapie" in mapie_methods:
            mc = row["mapie"]["coverage"]
            row["certified_over_mapie"] = (row["certified"]["coverage"] / mc) if mc > 0 else None
            row["frontier"] = [
                {
                    "mapie_delta": d,
                    "mapie_coverage": row[_mapie(d)]["coverage"],
                    **_matched(row, _mapie(d)),
                    "interval": _matched_interval(cov, viol, t, resplits, _mapie(d)),
                }
                for d in MAPIE_DELTAS
            ]
            # the headline match is the frontier's point at MAPIE's default delta
            row["matched"] = next(p for p in row["frontier"] if p["mapie_delta"] == DELTA)
        row["best"] = best_mapie(row, cov, viol, t, resplits, tuple(ours), mapie_methods)
        out[f"{t:.2f}"] = row
    return out


# --------------------------------------------------------------------------- main


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--resplits", type=int, default=200)
    ap.add_argument("--json", action="store_true", help="print results as JSON")
    ap.add_argument("--cache", type=Path, default=None, help="cache the scores here")
    ap.add_argument(
        "--sets",
        default=",".join(PUBLIC_SETS + SYNTHETIC_SETS),
        help="comma-separated sets (default: %(default)s)",
    )
    ap.add_argument(
        "--ours", default=",".join(OURS), help="comma-separated fitters of ours (default: all)"
    )
    ap.add_argument(
        "--sizes",
        default="",
        help="comma-separated sets to rerun at calibration sizes "
        + "/".join(map(str, SIZES))
        + " (e.g. banking77,clinc150)",
    )
    ap.add_argument(
        "--synthetic-resplits",
        type=int,
        default=None,
        help="resplits of the synthetic sets (default: --resplits)",
    )
    ap.add_argument("--size-resplits", type=int, default=200, help="resplits per size")
    ap.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="run the sets (and sizes) in this many processes; the results do not change",
    )
    ap.add_argument(
        "--show",
        type=Path,
        nargs="?",
        const=COMMITTED,
        default=None,
        help="print the tables of a saved --json run and exit (default: the committed run)",
    )
    ap.add_argument(
        "--readme",
        type=Path,
        nargs="?",
        const=COMMITTED,
        default=None,
        help="print the README's tables (markdown) of a saved run and exit",
    )
    args = ap.parse_args()
    if args.show is not None:
        print_tables(json.loads(args.show.read_text()))
        return
    if args.readme is not None:
        print(readme_tables(json.loads(args.readme.read_text())))
        return
    import mapie

    ours = {o: OURS[o] for o in _csv(args.ours)}
    results: dict[str, Any] = {
        "mapie_version": mapie.__version__,
        "delta": DELTA,
        "resplits": args.resplits,
        "synthetic_resplits": args.synthetic_resplits or args.resplits,
        "ours": list(ours),
        "mapie_methods": list(MAPIE_METHODS),
        "command": " ".join(["bench_calibration.py", *sys.argv[1:]]),
    }
    synthetic_resplits = args.synthetic_resplits or args.resplits
    tasks = [
        (name, synthetic_resplits if name in SYNTHETIC_SETS else args.resplits, None)
        for name in _csv(args.sets)
    ]
    sized = _csv(args.sizes)
    tasks += [(name, args.size_resplits, size) for name in sized for size in SIZES]
    for name in dict.fromkeys(t[0] for t in tasks):
        scores(name, args.cache)  # fit (or read) each set's scores once, before the workers
    done = _run_tasks(tasks, list(ours), args.cache, args.jobs)
    if sized:
        results["sizes"] = {"resplits": args.size_resplits, **{name: {} for name in sized}}
    for (name, _, size), res in zip(tasks, done, strict=True):
        if size is None:
            results[name] = res
        else:
            results["sizes"][name][str(size)] = res
    if args.json:
        # one line, keys sorted: a full run (every set, ladder and size) stays under 1 MiB
        print(json.dumps(results, sort_keys=True))
        return
    print_tables(results)


def _task(name: str, resplits: int, n_cal: int | None, ours: list[str], cache: Any) -> dict:
    """One set (at one calibration size): the evaluation, timed."""
    conf, correct = scores(name, cache)
    t0 = time.perf_counter()
    res = evaluate(conf, correct, resplits, n_cal=n_cal, ours={o: OURS[o] for o in ours})
    res["seconds"] = round(time.perf_counter() - t0, 1)
    size = "" if n_cal is None else f" n={n_cal}"
    print(f"# {name}{size}: {res['seconds']}s", file=sys.stderr, flush=True)
    return res


def _run_tasks(
    tasks: Sequence[tuple[str, int, int | None]], ours: list[str], cache: Any, jobs: int
) -> list[dict]:
    """Every task's result, in task order; each is seeded on its own, so ``jobs`` changes
    only how long the run takes."""
    if jobs <= 1:
        return [_task(name, r, size, ours, cache) for name, r, size in tasks]
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(max_workers=jobs) as pool:
        futures = [pool.submit(_task, name, r, size, ours, cache) for name, r, size in tasks]
        return [f.result() for f in futures]


def _csv(text: str) -> list[str]:
    return [p.strip() for p in text.split(",") if p.strip()]


# --------------------------------------------------------------------------- tables


def _sets(results: Mapping[str, Any]) -> list[str]:
    known = PUBLIC_SETS + SYNTHETIC_SETS
    return [s for s in known if s in results]


def _cell(r: Mapping[str, Any] | None) -> str:
    if r is None:
        return f"{'-':>22s}"
    pop = r.get("population_violation_rate")
    pop_s = "     -" if pop is None else f"{pop:6.3f}"
    return f"{r['coverage']:8.3f} /{r['violation_rate']:6.3f} /{pop_s}"


def _ratio(x: float | None) -> str:
    return "   n/a" if x is None else f"{x:6.3f}"


def _band(interval: Sequence[float] | None) -> str:
    return "n/a" if interval is None else f"[{interval[0]:.3f}, {interval[1]:.3f}]"


def print_tables(results: Mapping[str, Any]) -> None:
    """The tables of one run's results: per method at delta 0.05, best-MAPIE matches, sizes."""
    ours = list(results.get("ours", ["certified"]))
    mapie_methods = list(results.get("mapie_methods", ["mapie"]))
    print(
        f"MAPIE {results['mapie_version']}; delta={DELTA}; {results['resplits']} resplits"
        + (
            f" ({results['synthetic_resplits']} for the synthetic sets)"
            if results.get("synthetic_resplits", results["resplits"]) != results["resplits"]
            else ""
        )
        + (f"; command: {results['command']}" if results.get("command") else "")
    )
    print()
    print("per method at delta 0.05: mean test coverage / resplit violations / population")
    print(f"{'set':21s} {'target':>6s} {'method':>12s} {'cov / viol / pop':>22s}")
    for name in _sets(results):
        for t in TARGETS:
            row = results[name][f"{t:.2f}"]
            for m in ["fixed_0.8", "empirical", *ours, *mapie_methods]:
                if m in row:
                    print(f"{name:21s} {t:6.2f} {m:>12s} {_cell(row[m])}")
    print()
    _print_best(results, ours)
    sizes = results.get("sizes")
    if sizes:
        print()
        print(
            f"calibration sizes ({sizes['resplits']} resplits each): coverage / resplit "
            "violations at delta 0.05, and the worst matched ratio over MAPIE's deltas"
        )
        head = " ".join(f"{o:>22s}" for o in ours)
        print(f"{'set':21s} {'size':>5s} {'target':>6s} {head} {'mapie':>12s}")
        for name, size, t, cells, mp in _size_rows(sizes, ours):
            print(
                f"{name:21s} {size:>5d} {t:6.2f} "
                + " ".join(f"{f'{c:6.3f}/{v:5.3f} {w:>9s}':>22s}" for c, v, w in cells)
                + f" {mp[0]:6.3f}/{mp[1]:5.3f}"
            )


def _size_rows(sizes: Mapping[str, Any], ours: Sequence[str]) -> Any:
    """(set, size, target, [(coverage, violations, worst ratio) per fitter], MAPIE's pair)."""
    for name, by_size in sizes.items():
        if name == "resplits":
            continue
        for size, res in sorted(by_size.items(), key=lambda kv: int(kv[0])):
            for t in TARGETS:
                row = res[f"{t:.2f}"]
                cells = [
                    (row[o]["coverage"], row[o]["violation_rate"], _worst(row, o)) for o in ours
                ]
                mp = (row["mapie"]["coverage"], row["mapie"]["violation_rate"])
                yield name, int(size), t, cells, mp


def _worst(row: Mapping[str, Any], ours: str) -> str:
    """The lowest matched ratio over MAPIE's deltas, as text.

    ``-``: no MAPIE method routes anything at any delta (nothing to compare with);
    ``unmatched``: at some delta no ladder delta of ours violates as rarely as MAPIE's best.
    """
    points = [p["ours"][ours] for p in row["best"] if p["ours"][ours]["mapie_method"]]
    if not points:
        return "-"
    if any(m["over_mapie"] is None for m in points):
        return "unmatched"
    return f"{min(m['over_mapie'] for m in points):.3f}"


def _print_best(results: Mapping[str, Any], ours: Sequence[str]) -> None:
    print(
        "matched against the best MAPIE method per cell: ours at the largest ladder delta "
        "whose violation rate <= that method's; ratio = our coverage / its coverage"
    )
    print(
        f"{'set':21s} {'target':>6s} {'mapie d':>7s} {'ours':>12s} {'best mapie':>10s} "
        f"{'its cov':>7s} {'its viol':>8s} {'delta':>6s} {'cov':>6s} {'viol':>6s} "
        f"{'ratio':>6s}  95% interval"
    )
    for name in _sets(results):
        for t in TARGETS:
            for p in results[name][f"{t:.2f}"]["best"]:
                for o in ours:
                    m = p["ours"][o]
                    head = f"{name:21s} {t:6.2f} {p['mapie_delta']:7g} {o:>12s}"
                    if m["mapie_method"] is None:
                        print(f"{head}  no MAPIE method routes anything")
                        continue
                    mine = (
                        "  no ladder delta matches"
                        if m["delta"] is None
                        else f" {m['delta']:6g} {m['coverage']:6.3f} {m['violation_rate']:6.3f}"
                        f" {_ratio(m['over_mapie'])}  {_band(m.get('interval'))}"
                    )
                    others = [u for u in m.get("unmatched", []) if u != m["mapie_method"]]
                    if others:
                        mine += "  unmatched: " + ", ".join(others)
                    print(
                        f"{head} {m['mapie_method']:>10s} {m['mapie_coverage']:7.3f} "
                        f"{m['mapie_violation_rate']:8.3f}{mine}"
                    )


#: The fitters of ours the README's tables show (those in the run, in this order): all three
#: in the first table; the matched and sizes tables show the first two, and the matched one
#: the public sets and the stress case only (``--show`` prints everything).
README_OURS = ("certified", "fallback", "labelfree")
README_MATCHED_SETS = ("banking77", "clinc150", "synthetic-stress")


def _short(method: str | None) -> str:
    """A MAPIE method's name in the README: ``holm``, ``fs1``, ``fs3``, ``fs10``, ``sfs``."""
    if method is None:
        return "-"
    return "holm" if method == "mapie" else method.removeprefix("mapie-")


def readme_tables(results: Mapping[str, Any]) -> str:
    """The README's calibration tables (markdown) from one saved run.

    1. Coverage / resplit violation rate at delta 0.05: ours, MAPIE's default (Holm) and
       MAPIE's highest-coverage method at delta 0.05.
    2. The matched ratio against the best MAPIE method per cell (MAPIE's delta ladder), with
       the method's short name (``holm``, ``fs1``/``fs3``/``fs10``, ``sfs``); ``unmatched``
       where no MAPIE method can be matched, ``-`` where none routes anything.
    3. Calibration sizes, when the run has them: coverage / violations at delta 0.05 and the
       worst matched ratio over MAPIE's deltas.
    """
    ours = [o for o in README_OURS if o in results.get("ours", ["certified"])]
    names = {"banking77": "Banking77", "clinc150": "CLINC150"}
    names.update({k: k.removeprefix("synthetic-") + " (synthetic)" for k in SYNTHETIC_SETS})
    mapie_methods = list(results.get("mapie_methods", ["mapie"]))

    def table(head: list[str], rows: list[list[str]]) -> list[str]:
        return [
            "| " + " | ".join(head) + " |",
            "|" + "---|" * len(head),
            *("| " + " | ".join(r) + " |" for r in rows),
        ]

    def pair(r: Mapping[str, Any]) -> str:
        return f"{r['coverage']:.3f} / {r['violation_rate']:.3f}"

    rows = []
    for name in _sets(results):
        for t in TARGETS:
            row = results[name][f"{t:.2f}"]
            top = max(mapie_methods, key=lambda m: row[m]["coverage"])
            rows.append(
                [f"{names[name]}, {t:.2f}"]
                + [pair(row[o]) for o in ours]
                + [pair(row["mapie"]), f"{_short(top)}: {pair(row[top])}"]
            )
    lines = table(["set, target", *ours, "MAPIE (Holm)", "MAPIE, best coverage"], rows)
    lines.append("")
    rows = []
    for name in (n for n in _sets(results) if n in README_MATCHED_SETS):
        for t in TARGETS:
            row = results[name][f"{t:.2f}"]
            for o in ours[:2]:
                cells = []
                for p in row["best"]:
                    m = p["ours"][o]
                    if m["mapie_method"] is None:
                        cells.append("-")
                    elif m["over_mapie"] is None:
                        cells.append(f"unmatched ({_short(m['mapie_method'])})")
                    else:
                        cells.append(f"{m['over_mapie']:.3f} ({_short(m['mapie_method'])})")
                rows.append([f"{names[name]}, {t:.2f}", o, *cells])
    lines += table(["set, target", "ours", *(f"MAPIE δ {d:g}" for d in MAPIE_DELTAS)], rows)
    sizes = results.get("sizes")
    if sizes:
        lines.append("")
        rows = []
        for name, size, t, cells, mp in _size_rows(sizes, ours[:2]):
            rows.append(
                [f"{names.get(name, name)}, {size}, {t:.2f}"]
                + [f"{c:.3f} / {v:.3f}; {w}" for c, v, w in cells]
                + [f"{mp[0]:.3f} / {mp[1]:.3f}"]
            )
        lines += table(["set, size, target", *ours[:2], "MAPIE (Holm)"], rows)
    return "\n".join(lines)


if __name__ == "__main__":
    main()
