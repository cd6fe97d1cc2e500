"""Classifier benchmark: accuracy, training time, latency and throughput, one table.

Run from the repository root (the public sets are read from ``HYBRIDROUTE_DATA_DIR``)::

    HYBRIDROUTE_DATA_DIR=../shared/datasets .venv/bin/python benchmarks/bench_classifiers.py
    ... bench_classifiers.py --families local --datasets banking77 --json

For every (classifier family, dataset) it prints test accuracy and macro-F1 on the
official test split, training time (hyper-parameter search included), single-text
``predict_proba`` latency (p50 / p95 over ``--latency-texts`` test texts, one call per
text) and batch throughput (texts per second, one ``predict_proba`` call over the whole
test split, best of ``--repeats``). Everything runs on one core: the process is pinned to
one CPU where the OS allows it, and BLAS / OpenMP pools are limited to one thread.

Datasets: ``banking77`` (77 intents; C chosen on a seeded validation share carved from
train) and ``clinc150`` in scope (the 150 intents; out-of-scope rows dropped; C chosen on
the official validation split).

Adding a classifier family: write ``bench_<family>(dataset, args) -> Row`` that fits (or
configures) the classifier on ``dataset.train`` and calls :func:`measure`, then add it to
:data:`FAMILIES`. A family whose answers do not come from a real model (a stand-in
server) must say so in ``Row.notes``.
"""

from __future__ import annotations

import os

# Thread pools read these when numpy / scipy load, so they are set before any import.
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable, Sequence  # noqa: E402
from dataclasses import asdict, dataclass, field  # noqa: E402
from typing import Any  # noqa: E402


@dataclass
class Split:
    texts: list[str]
    labels: list[str]


@dataclass
class Dataset:
    """One benchmark dataset: train, optional validation, test."""

    name: str
    train: Split
    test: Split
    validation: Split | None = None
    fingerprint: str = ""


@dataclass
class Row:
    """One line of the table."""

    classifier: str
    dataset: str
    n_train: int
    n_test: int
    accuracy: float
    macro_f1: float
    train_seconds: float
    p50_ms: float
    p95_ms: float
    texts_per_second: float
    notes: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


# --------------------------------------------------------------------------- data


def load(name: str, data_dir: str | None) -> Dataset:
    """Load a benchmark dataset through :func:`hybridroute.datasets.load_dataset`."""
    from hybridroute.datasets import load_dataset

    options: dict[str, Any] = {"download": False}
    if data_dir:
        options["data_dir"] = data_dir
    if name == "clinc150":
        ds = load_dataset("clinc150", oos="drop", **options)
        label = "clinc150 (in scope)"
    elif name == "banking77":
        ds = load_dataset("banking77", **options)
        label = "banking77"
    else:
        raise SystemExit(f"unknown benchmark dataset {name!r} (banking77, clinc150)")

    def part(split: str) -> Split:
        s = ds.split(split)
        return Split(list(s.texts), [str(v) for v in s.y])

    return Dataset(
        name=label,
        train=part("train"),
        test=part("test"),
        validation=part("validation") if "validation" in ds.splits else None,
        fingerprint=ds.fingerprint,
    )


# --------------------------------------------------------------------------- measuring


def _percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    pos = (len(ordered) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def _macro_f1(gold: Sequence[str], predicted: Sequence[str | None]) -> float:
    labels = sorted(set(gold) | {p for p in predicted if p is not None})
    scores = []
    for label in labels:
        tp = sum(1 for g, p in zip(gold, predicted, strict=True) if g == label and p == label)
        fp = sum(1 for g, p in zip(gold, predicted, strict=True) if g != label and p == label)
        fn = sum(1 for g, p in zip(gold, predicted, strict=True) if g == label and p != label)
        scores.append(0.0 if tp == 0 else 2 * tp / (2 * tp + fp + fn))
    return statistics.fmean(scores) if scores else 0.0


def measure(
    clf: Any,
    dataset: Dataset,
    *,
    family: str,
    train_seconds: float,
    args: argparse.Namespace,
    notes: str = "",
    extra: dict[str, Any] | None = None,
) -> Row:
    """Score ``clf`` on the test split and time single-text and batch ``predict_proba``."""
    test = dataset.test
    predicted = clf.predict(test.texts)
    accuracy = sum(p == g for p, g in zip(predicted, test.labels, strict=True)) / len(test.labels)

    sample = test.texts[: args.latency_texts]
    for text in sample[:50]:  # warm up caches and lazy imports
        clf.predict_proba([text])
    latencies = []
    for text in sample:
        started = time.perf_counter()
        clf.predict_proba([text])
        latencies.append(time.perf_counter() - started)

    best = float("inf")
    for _ in range(args.repeats):
        started = time.perf_counter()
        clf.predict_proba(test.texts)
        best = min(best, time.perf_counter() - started)

    return Row(
        classifier=family,
        dataset=dataset.name,
        n_train=len(dataset.train.texts),
        n_test=len(test.texts),
        accuracy=accuracy,
        macro_f1=_macro_f1(test.labels, predicted),
        train_seconds=train_seconds,
        p50_ms=1e3 * _percentile(latencies, 0.5),
        p95_ms=1e3 * _percentile(latencies, 0.95),
        texts_per_second=len(test.texts) / best,
        notes=notes,
        extra=dict(extra or {}),
    )


# --------------------------------------------------------------------------- families


def bench_local(dataset: Dataset, args: argparse.Namespace) -> Row:
    """TF-IDF (word 1-2 + char 2-5) -> logistic regression, C chosen on validation data."""
    from hybridroute.classifiers import LocalClassifier

    clf = LocalClassifier(random_state=args.seed)
    started = time.perf_counter()
    if dataset.validation is not None:
        clf.fit(
            dataset.train.texts,
            dataset.train.labels,
            validation=(dataset.validation.texts, dataset.validation.labels),
        )
    else:
        clf.fit(dataset.train.texts, dataset.train.labels)
    train_seconds = time.perf_counter() - started
    cv = clf.cv_results_
    source = {"given": "validation split", "carved": "carved from train"}.get(
        cv["validation_source"], "no search"
    )
    notes = f"C={clf.C_:g} ({source}, {cv['n_validation']:,} rows); {clf.n_features_:,} features"
    return measure(
        clf,
        dataset,
        family="local",
        train_seconds=train_seconds,
        args=args,
        notes=notes,
        extra={"C": clf.C_, "cv_results": cv, "n_features": clf.n_features_},
    )


#: Classifier family -> benchmark function. Other families add their entry here.
FAMILIES: dict[str, Callable[[Dataset, argparse.Namespace], Row]] = {
    "local": bench_local,
}


# --------------------------------------------------------------------------- output


def _one_core(cores: int) -> str:
    """Limit the process to ``cores`` CPUs (where the OS allows) and pools to one thread."""
    pinned = "not pinned"
    if hasattr(os, "sched_setaffinity"):
        allowed = sorted(os.sched_getaffinity(0))
        chosen = set(allowed[:cores])
        os.sched_setaffinity(0, chosen)
        pinned = f"pinned to CPU {','.join(map(str, sorted(chosen)))}"
    return pinned


def print_table(rows: Sequence[Row]) -> None:
    header = (
        f"{'classifier':<11}{'dataset':<21}{'train':>8}{'test':>7}{'accuracy':>10}"
        f"{'macro-F1':>10}{'train s':>9}{'p50 ms':>8}{'p95 ms':>8}{'texts/s':>10}  notes"
    )
    print(header)
    print("-" * len(header))
    for r in rows:
        print(
            f"{r.classifier:<11}{r.dataset:<21}{r.n_train:>8,}{r.n_test:>7,}{r.accuracy:>10.4f}"
            f"{r.macro_f1:>10.4f}{r.train_seconds:>9.1f}{r.p50_ms:>8.3f}{r.p95_ms:>8.3f}"
            f"{r.texts_per_second:>10,.0f}  {r.notes}"
        )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--families",
        default=",".join(FAMILIES),
        help=f"comma-separated classifier families (default: all of {', '.join(FAMILIES)})",
    )
    parser.add_argument(
        "--datasets", default="banking77,clinc150", help="comma-separated: banking77, clinc150"
    )
    parser.add_argument("--data-dir", default=None, help="default: HYBRIDROUTE_DATA_DIR")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--latency-texts", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--cores", type=int, default=1, help="CPUs to pin the process to")
    parser.add_argument("--json", action="store_true", help="print a JSON array of rows")
    args = parser.parse_args(argv)

    families = [f.strip() for f in args.families.split(",") if f.strip()]
    unknown = [f for f in families if f not in FAMILIES]
    if unknown:
        parser.error(f"unknown families {unknown}; known: {', '.join(FAMILIES)}")
    pinned = _one_core(args.cores)

    from threadpoolctl import threadpool_limits

    rows = []
    with threadpool_limits(limits=1):
        for name in [d.strip() for d in args.datasets.split(",") if d.strip()]:
            dataset = load(name, args.data_dir)
            for family in families:
                print(f"# {family} on {dataset.name} ...", file=sys.stderr, flush=True)
                rows.append(FAMILIES[family](dataset, args))
    if args.json:
        print(json.dumps([asdict(r) for r in rows], indent=2))
    else:
        print(f"# one thread per pool; {pinned}; seed {args.seed}")
        print_table(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
