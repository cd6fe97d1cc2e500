"""Constant-memory evaluation of a labelled set streamed row by row.

Three modules: this one holds :func:`evaluate_stream` and its result; reading a labelled
file row by row is :mod:`._stream_reader` (:class:`LabelledStream`); the counters kept
while the rows go by are :mod:`._stream_metrics`.

:func:`evaluate_stream` scores a router (or a bare classifier) on an iterable of labelled
rows without keeping the rows, the decisions or any per-item array: everything it reports
is accumulated in counters whose size depends on the label set, the number of bins and the
number of bootstrap replicates, never on the number of rows. :class:`LabelledStream` reads
such rows from a JSONL or CSV file (optionally gzip-compressed) one line at a time.

What is exact and what is approximated
--------------------------------------
* **Exact** (equal to :func:`~hybridroute.evaluation.evaluate_router` /
  :func:`~hybridroute.evaluation.evaluate_classifier` on the same rows): counts, accuracy,
  macro-F1, per-class precision / recall / F1 / support, the confusion matrix, coverage,
  selective precision, abstentions by reason code, fallbacks by cause, next-step
  accuracy, decisions by stage and destination, per-rule statistics, the items with a
  confidence (``n_with_confidence``), and ECE (the same 15 equal-width bins, accumulated
  as per-bin sums). Each comes from the formula the in-memory path uses
  (:mod:`._stats`, :mod:`hybridroute.calibration._metrics`) applied to counts.
* **Binned**: the risk-coverage curve and AURC come from a histogram of the confidences
  (``rc_bins`` equal-width bins, items in one bin treated as tied), so AURC is within
  about one bin width of the exact value.
* **Online bootstrap**: confidence intervals use the Poisson bootstrap -- each item gets
  ``n_boot`` seeded Poisson(1) weights, and each replicate keeps weighted counters. The
  intervals are seeded and reproducible (the same seed and row order give the same
  intervals, whatever the batch size) but are not numerically equal to the multinomial
  bootstrap of the in-memory evaluation; they estimate the same sampling spread.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ..calibration._metrics import DEFAULT_ECE_BINS
from ._evaluate import Evaluation
from ._stats import bootstrap_note
from ._stream_metrics import (
    ClassifierCounts,
    IntentCounts,
    LabelIndex,
    PoissonBootstrap,
    RouterCounts,
)

if TYPE_CHECKING:
    from ..calibration import Policy

__all__ = ["StreamEvaluation", "evaluate_stream"]


class StreamEvaluation(Evaluation):
    """The result of :func:`evaluate_stream`: headline metrics, no per-item rows."""

    @property
    def rows(self) -> list[dict[str, Any]]:
        """A streamed evaluation keeps no per-item rows (that is the point of it)."""
        raise AttributeError(
            "a streamed evaluation keeps no per-item rows; use evaluate_router / "
            "evaluate_classifier on a set that fits in memory for item-level reports"
        )


def evaluate_stream(
    model: Any,
    rows: Iterable[Mapping[str, Any]],
    *,
    policy: Policy | None = None,
    batch_size: int = 1024,
    n_boot: int = 200,
    seed: int = 0,
    n_bins: int = DEFAULT_ECE_BINS,
    rc_bins: int = 10_000,
    level: float = 0.95,
) -> StreamEvaluation:
    """Evaluate a router or a classifier on labelled rows, in constant memory.

    Parameters
    ----------
    model : HybridRouter or IntentClassifier
        A router (anything with ``route_many`` and ``rules``) is scored like
        :func:`evaluate_router`; a fitted classifier (``rank`` and ``classes_``) like
        :func:`evaluate_classifier`.
    rows : iterable of mappings
        Each with ``text`` and ``label``, and optionally ``facts`` (a mapping) and
        ``next_step``; e.g. a :class:`LabelledStream`. Only ``batch_size`` rows are held
        at a time.
    policy : hybridroute.calibration.Policy, optional
        For a classifier: score coverage and selective precision under this fitted policy.
    batch_size : int
        Rows routed / classified per call.
    n_boot : int
        Poisson-bootstrap replicates for the confidence intervals.
    seed : int
        Seeds the bootstrap weights.
    n_bins : int
        Equal-width bins of the ECE (15, as in the in-memory evaluation).
    rc_bins : int
        Equal-width confidence bins of the risk-coverage curve and AURC.
    level : float
        Confidence level of the intervals.

    Returns
    -------
    StreamEvaluation
        The same headline keys as the in-memory evaluation (``accuracy``,
        ``accuracy_ci``, ``macro_f1``, ``ece``, ``aurc``, ``per_class``, ``confusion``,
        ``coverage``, ``next_step_accuracy``, ``decisions_by_stage``, ``rules``...), plus
        ``bootstrap`` and ``skipped_rows`` (when ``rows`` reports them); no ``items``.
    """
    if int(batch_size) < 1:
        raise ValueError("batch_size must be at least 1")
    if int(n_boot) < 1:
        raise ValueError("n_boot must be at least 1")
    if not 0 < level < 1:
        raise ValueError("level must be between 0 and 1")
    is_router = callable(getattr(model, "route_many", None)) and hasattr(model, "rules")
    if is_router and policy is not None:
        raise ValueError("a router carries its own policy; give policy= only with a classifier")
    classes = [str(c) for c in (model.classes if is_router else model.classes_)]
    labels = LabelIndex(classes)
    boot = PoissonBootstrap(n_boot, seed)
    intent = IntentCounts(labels, boot, n_bins, rc_bins)
    acc: RouterCounts | ClassifierCounts
    if is_router:
        acc = RouterCounts(n_boot, set(model.rules.schema.names))
    else:
        acc = ClassifierCounts(policy)

    t0 = time.perf_counter()
    batch: list[Mapping[str, Any]] = []
    for row in rows:
        batch.append(row)
        if len(batch) >= batch_size:
            acc.add(model, batch, intent)
            batch = []
    if batch:
        acc.add(model, batch, intent)
    seconds = time.perf_counter() - t0

    label_order = sorted(set(classes) | intent.gold_seen)
    result: dict[str, Any]
    if intent.n:
        result = intent.results(level, label_order)
    else:
        result = {"n": 0, "accuracy": None, "macro_f1": None}
    result.update(acc.results(intent, level))
    n = acc.n
    result["n"] = n
    result["latency"] = {
        "seconds": round(seconds, 4),
        "per_item_ms": round(seconds / max(n, 1) * 1000.0, 4),
        "items_per_s": round(n / seconds, 2) if seconds > 0 else None,
    }
    result["bootstrap"] = bootstrap_note("poisson", n_boot, seed, level)
    skipped = getattr(rows, "n_skipped", None)
    if skipped is not None:
        result["skipped_rows"] = int(skipped)
    result["streamed"] = True
    if is_router:
        result["mode"] = "router"
        result["router"] = model.name
        result["router_version"] = model.version
    else:
        result["mode"] = "classifier"
        result["classifier_kind"] = getattr(model, "kind", type(model).__name__)
    return StreamEvaluation(result)
