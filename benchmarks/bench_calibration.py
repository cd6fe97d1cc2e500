"""Threshold control on real scores: coverage and violation rate, ours against MAPIE.

    python benchmarks/bench_calibration.py [--resplits 200] [--json] [--cache DIR]
    python benchmarks/bench_calibration.py --show saved.json  # tables of a --json run

For Banking77 and CLINC150 (with its out-of-scope rows, labelled ``oos``), the local
classifier is fitted once on the train split and scores the official test split. Those
scored rows are resplit (seeded) into calibration and test halves; on every resplit and
for each target precision (0.90 / 0.95 / 0.98, delta = 0.05) four methods pick an
auto-route threshold on the calibration half:

* ``fixed_0.8`` -- a literal 0.8 (what hybridroute forbids);
* ``empirical`` -- :class:`EmpiricalThreshold`, the lowest threshold whose calibration
  precision meets the target (no guarantee);
* ``certified`` -- :class:`CertifiedPrecisionThreshold` (Clopper–Pearson, fixed-sequence);
* ``mapie`` -- MAPIE's ``BinaryClassificationController`` with the precision risk
  (Learn-then-Test, its default grid and Bonferroni–Holm), on the same scores.

Reported per method: mean test coverage, the violation rate (share of resplits whose
realised test-half precision is below target), the population violation rate (a
calibration set drawn with replacement from the scored rows; precision measured on all of
them, which is what the guarantee is about), plus certified coverage ÷ MAPIE coverage. The
goal is a ratio >= 1.0 at an equal or lower violation rate. MAPIE is a benchmark-only
dependency (``pip install mapie``). The realised test-half precision carries sampling
noise of its own, so a method with a delta = 0.05 guarantee can show a few percent more
violations here than on an infinite test set.

At the same nominal delta a tighter bound spends more of its error budget, so it shows
*more* violations than a looser one (still at most delta). To compare the two at an equal
or lower violation rate, the certified threshold is also fitted at every delta of a
ladder fixed in advance (``MATCH_DELTAS``), on the same resplits; the *matched* table
takes, per cell, the largest ladder delta whose resplit violation rate is at most MAPIE's
(at delta = 0.05) and reports its coverage ÷ MAPIE's. This reads one point off each
method's violation-rate/coverage frontier; it is a comparison, not a way to pick delta.
The *frontier* table repeats the match for MAPIE run at each delta of its own ladder
(``MAPIE_DELTAS``), so the comparison covers a range of violation rates, not one point.
Violations are rare events (a handful per thousand resplits at MAPIE's level), so one
violating resplit more or less can move the match a whole ladder step: the table gives a
95% bootstrap interval over the resplits for the matched ratio. The default 200 resplits
take a few minutes; the README's table comes from ``--resplits 1000``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np

from hybridroute.calibration import CertifiedPrecisionThreshold, EmpiricalThreshold

TARGETS = (0.90, 0.95, 0.98)
DELTA = 0.05
SEED = 20250611
FIXED = 0.8  # the literal baseline, on purpose
#: The matched-violation ladder, largest first (fixed in advance, roughly geometric).
MATCH_DELTAS = (0.05, 0.03, 0.02, 0.01, 0.005, 0.003, 0.002, 0.001, 0.0005, 0.0003, 0.0002)
BOOTSTRAP = 1000  # resamples of the resplits behind the matched ratio's interval
#: MAPIE's own delta ladder for the frontier table (DELTA must be among them: the headline
#: matched row is the frontier's point at DELTA).
MAPIE_DELTAS = (0.2, 0.1, 0.05, 0.02, 0.01)


def data_dir() -> Path:
    env = os.environ.get("HYBRIDROUTE_DATA_DIR")
    here = Path(__file__).resolve().parents[2] / "shared" / "datasets"
    for c in ([Path(env)] if env else []) + [here]:
        if (c / "banking77").is_dir():
            return c
    raise SystemExit("set HYBRIDROUTE_DATA_DIR to a directory holding banking77/ and clinc150/")


def scores(name: str, cache: Path | None) -> tuple[np.ndarray, np.ndarray]:
    """Top-label confidence and correctness of the local classifier on the test split."""
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


def mapie_threshold(
    conf: np.ndarray, correct: np.ndarray, target: float, delta: float = DELTA
) -> float:
    from mapie.risk_control import BinaryClassificationController

    ctrl = BinaryClassificationController(
        predict_function=lambda x: np.column_stack([1.0 - x, x]),
        risk="precision",
        target_level=target,
        confidence_level=1.0 - delta,
    )
    with warnings.catch_warnings():
        # MAPIE warns when no (or every) grid value controls the risk; the table shows it
        warnings.simplefilter("ignore", UserWarning)
        ctrl.calibrate(conf, correct.astype(int))
    best = ctrl.best_predict_param
    return np.inf if best is None else float(best)


def _thresholds(conf: np.ndarray, correct: np.ndarray, t: float) -> dict[str, float]:
    out = {
        "fixed_0.8": FIXED,
        "empirical": EmpiricalThreshold(t).fit(conf, correct).threshold_,
        "certified": CertifiedPrecisionThreshold(t, DELTA).fit(conf, correct).threshold_,
        "mapie": mapie_threshold(conf, correct, t),
    }
    for d in MATCH_DELTAS:
        if d != DELTA:
            out[_ladder(d)] = CertifiedPrecisionThreshold(t, d).fit(conf, correct).threshold_
    for d in MAPIE_DELTAS:
        if d != DELTA:
            out[_mapie(d)] = mapie_threshold(conf, correct, t, d)
    return out


def _ladder(d: float) -> str:
    return "certified" if d == DELTA else f"certified@{d:g}"


def _mapie(d: float) -> str:
    return "mapie" if d == DELTA else f"mapie@{d:g}"


def _matched(row: dict, mapie: str = "mapie") -> dict:
    """The largest ladder delta whose violation rate is at most MAPIE's, and its coverage.

    ``mapie`` names the MAPIE run to match (its default delta unless told otherwise).
    """
    limit = row[mapie]["violation_rate"]
    mc = row[mapie]["coverage"]
    for d in MATCH_DELTAS:  # largest first
        r = row[_ladder(d)]
        if r["violation_rate"] <= limit:
            return {
                "delta": d,
                **r,
                "mapie_violation_rate": limit,
                "over_mapie": (r["coverage"] / mc) if mc > 0 else None,
            }
    return {"delta": None, "mapie_violation_rate": limit, "over_mapie": None}


def _matched_interval(
    cov: dict, viol: dict, t: float, resplits: int, mapie: str = "mapie"
) -> list[float] | None:
    """Percentile interval (95%) of the matched ratio over bootstrap resamples of the resplits.

    Each resample redoes the whole match -- MAPIE's violation rate, the ladder delta that
    meets it, both coverages -- so the interval carries the noise of the violation counts
    that decide the match, not just of the coverages. Resamples where no ladder delta
    matches are left out of the interval (the match itself says so when that happens).
    """
    rng = np.random.default_rng(SEED + 7)
    names = [mapie, *(_ladder(d) for d in MATCH_DELTAS)]
    c = {m: np.asarray(cov[(m, t)]) for m in names}
    v = {m: np.asarray(viol[(m, t)], dtype=float) for m in names}
    ratios = []
    for _ in range(BOOTSTRAP):
        idx = rng.integers(0, resplits, resplits)
        row = {m: {"coverage": c[m][idx].mean(), "violation_rate": v[m][idx].mean()} for m in names}
        r = _matched(row, mapie)["over_mapie"]
        if r is not None:
            ratios.append(r)
    if not ratios:
        return None
    lo, hi = np.percentile(ratios, [2.5, 97.5])
    return [float(lo), float(hi)]


def evaluate(conf: np.ndarray, correct: np.ndarray, resplits: int) -> dict:
    """Resplit violations (realised test-half precision) and population violations.

    Population violations check the guarantee itself: a calibration set of the same size is
    drawn with replacement from the scored rows, and the fitted threshold's precision is
    measured on all scored rows (the population), free of test-half sampling noise.
    """
    n = len(conf)
    rng = np.random.default_rng(SEED)
    ladder = [_ladder(d) for d in MATCH_DELTAS if d != DELTA]
    mapie_ladder = [_mapie(d) for d in MAPIE_DELTAS if d != DELTA]
    methods = ("fixed_0.8", "empirical", "certified", "mapie", *ladder, *mapie_ladder)
    cov: dict[tuple[str, float], list[float]] = {(m, t): [] for m in methods for t in TARGETS}
    viol: dict[tuple[str, float], list[bool]] = {(m, t): [] for m in methods for t in TARGETS}
    pop = {(m, t): 0 for m in methods for t in TARGETS}
    for _ in range(resplits):
        perm = rng.permutation(n)
        cal, test = perm[: n // 2], perm[n // 2 :]
        draw = rng.integers(0, n, n // 2)
        for t in TARGETS:
            for m, thr in _thresholds(conf[cal], correct[cal], t).items():
                passed = conf[test] >= thr
                cov[(m, t)].append(passed.mean())
                viol[(m, t)].append(bool(passed.any() and correct[test][passed].mean() < t))
            for m, thr in _thresholds(conf[draw], correct[draw], t).items():
                passed = conf >= thr
                if passed.any() and correct[passed].mean() < t:
                    pop[(m, t)] += 1
    out = {}
    for t in TARGETS:
        row = {
            m: {
                "coverage": float(np.mean(cov[(m, t)])),
                "violation_rate": float(np.mean(viol[(m, t)])),
                "population_violation_rate": pop[(m, t)] / resplits,
            }
            for m in methods
        }
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
        out[f"{t:.2f}"] = row
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--resplits", type=int, default=200)
    ap.add_argument("--json", action="store_true", help="print results as JSON")
    ap.add_argument("--cache", type=Path, default=None, help="cache the scores here")
    ap.add_argument(
        "--show", type=Path, default=None, help="print the tables of a saved --json run and exit"
    )
    args = ap.parse_args()
    if args.show is not None:
        print_tables(json.loads(args.show.read_text()))
        return
    import mapie

    results = {"mapie_version": mapie.__version__, "delta": DELTA, "resplits": args.resplits}
    for name in ("banking77", "clinc150"):
        conf, correct = scores(name, args.cache)
        t0 = time.perf_counter()
        results[name] = evaluate(conf, correct, args.resplits)
        results[name]["seconds"] = round(time.perf_counter() - t0, 1)
    if args.json:
        print(json.dumps(results, indent=2, sort_keys=True))
        return
    print_tables(results)


def print_tables(results: dict) -> None:
    """The three tables (per method, matched, frontier) of one run's results."""
    print(
        f"MAPIE {results['mapie_version']}; delta={DELTA}; {results['resplits']} resplits (50/50)"
    )
    print("cells: mean test coverage / resplit violation rate / population violation rate")
    methods = ("fixed_0.8", "empirical", "certified", "mapie")
    print(f"{'set':10s} {'target':>6s} " + " ".join(f"{m:>22s}" for m in methods) + "  cert/mapie")
    for name in ("banking77", "clinc150"):
        for t in TARGETS:
            row = results[name][f"{t:.2f}"]
            cells = " ".join(
                f"{row[m]['coverage']:8.3f} /{row[m]['violation_rate']:6.3f} /"
                f"{row[m]['population_violation_rate']:6.3f}"
                for m in methods
            )
            ratio = row["certified_over_mapie"]
            print(f"{name:10s} {t:6.2f} {cells} {('n/a' if ratio is None else f'{ratio:10.3f}')}")
    print()
    print("matched: certified at the largest ladder delta whose violation rate <= MAPIE's")
    print(
        f"{'set':10s} {'target':>6s} {'delta':>6s} {'coverage':>9s} {'viol':>6s} "
        f"{'mapie cov':>9s} {'mapie viol':>10s}  cert/mapie  95% interval"
    )
    for name in ("banking77", "clinc150"):
        for t in TARGETS:
            row = results[name][f"{t:.2f}"]
            m = row["matched"]
            if m["delta"] is None:
                print(f"{name:10s} {t:6.2f}  no ladder delta matches MAPIE's violation rate")
                continue
            ratio = "n/a" if m["over_mapie"] is None else f"{m['over_mapie']:10.3f}"
            print(
                f"{name:10s} {t:6.2f} {m['delta']:6g} {m['coverage']:9.3f} "
                f"{m['violation_rate']:6.3f} {row['mapie']['coverage']:9.3f} "
                f"{m['mapie_violation_rate']:10.3f}  {ratio}  {_band(m.get('interval'))}"
            )
    print()
    print("frontier: MAPIE on its own delta ladder, each point matched as above")
    print(
        f"{'set':10s} {'target':>6s} {'mapie d':>7s} {'mapie cov':>9s} {'mapie viol':>10s} "
        f"{'delta':>6s} {'coverage':>9s} {'viol':>6s}  cert/mapie  95% interval"
    )
    for name in ("banking77", "clinc150"):
        for t in TARGETS:
            for m in results[name][f"{t:.2f}"]["frontier"]:
                head = (
                    f"{name:10s} {t:6.2f} {m['mapie_delta']:7g} {m['mapie_coverage']:9.3f} "
                    f"{m['mapie_violation_rate']:10.3f}"
                )
                if m["delta"] is None or m["over_mapie"] is None:
                    print(f"{head}  no ladder delta matches")
                    continue
                print(
                    f"{head} {m['delta']:6g} {m['coverage']:9.3f} {m['violation_rate']:6.3f}"
                    f"  {m['over_mapie']:10.3f}  {_band(m['interval'])}"
                )


def _band(interval: list[float] | None) -> str:
    return "n/a" if interval is None else f"[{interval[0]:.3f}, {interval[1]:.3f}]"


if __name__ == "__main__":
    main()
