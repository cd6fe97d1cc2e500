"""Evaluation on labelled sets: metrics with bootstrap intervals, paired comparisons, reports.

* :func:`evaluate_classifier` / :func:`evaluate_router` -- one :class:`Evaluation` each.
* :func:`compare` -- a paired comparison of two evaluations of the same set (McNemar's
  exact test and a paired bootstrap of the accuracy difference).
* :func:`write_report` -- JSON, Markdown, a self-contained HTML page with plots, and an
  errors file, all rendered from one scrubbed copy of the evaluation (no credential, no
  declared sensitive fact, no spreadsheet formula in the errors file).
* :func:`evaluate_stream` -- the same metrics in constant memory over rows streamed from
  disk (:class:`LabelledStream` reads JSONL / CSV row by row); :class:`StreamEvaluation`.

Every path (these, Spark's ``evaluate_scored`` and ``hybridroute train``) computes each
number with one function: :func:`macro_f1` is the unweighted mean F1 over the labels in
the gold labels or the answers (scikit-learn's ``f1_score(average="macro")``), an
abstention a wrong answer that is no label. The intervals say how they were made under
``bootstrap`` (method, ``n_boot`` resamples, seed, level).
"""

from __future__ import annotations

from typing import Any

from ._evaluate import Evaluation, evaluate_classifier, evaluate_router
from ._report import write_report
from ._stats import bootstrap_ci, macro_f1, mcnemar, paired_bootstrap
from ._stream_reader import LabelledStream
from ._streaming import StreamEvaluation, evaluate_stream

__all__ = [
    "Evaluation",
    "LabelledStream",
    "StreamEvaluation",
    "bootstrap_ci",
    "compare",
    "evaluate_classifier",
    "evaluate_router",
    "evaluate_stream",
    "macro_f1",
    "mcnemar",
    "paired_bootstrap",
    "write_report",
]


def compare(a: Evaluation, b: Evaluation, *, key: str = "correct", seed: int = 0) -> dict[str, Any]:
    """Paired comparison of two evaluations of the same items (in the same order).

    Parameters
    ----------
    a, b : Evaluation
        Two evaluations of the same items in the same order (their rows' texts must
        agree), e.g. two classifiers, or a router before and after a change.
    key : str, default "correct"
        The per-item correctness to compare: ``correct`` (intent label) or
        ``next_step_correct`` (router evaluations). Items either evaluation did not score
        (``None``, or no such key) are left out, so a key no row holds gives ``n`` 0.
    seed : int, default 0
        Seeds the paired bootstrap.

    Returns
    -------
    dict
        ``n`` (pairs compared), ``key``, ``accuracy_a`` / ``accuracy_b`` (``None`` for no
        pairs), ``mcnemar`` (:func:`mcnemar`) and ``paired_bootstrap``
        (:func:`paired_bootstrap`, a - b).

    Raises
    ------
    ValueError
        If the evaluations are not of the same items in the same order.
    """
    ra, rb = a.rows, b.rows
    if len(ra) != len(rb) or any(x["text"] != y["text"] for x, y in zip(ra, rb, strict=True)):
        raise ValueError("the two evaluations are not of the same items in the same order")
    pairs = [
        (x[key], y[key])
        for x, y in zip(ra, rb, strict=True)
        if x.get(key) is not None and y.get(key) is not None
    ]
    ca = [bool(p[0]) for p in pairs]
    cb = [bool(p[1]) for p in pairs]
    return {
        "n": len(pairs),
        "key": key,
        "accuracy_a": sum(ca) / len(ca) if ca else None,
        "accuracy_b": sum(cb) / len(cb) if cb else None,
        "mcnemar": mcnemar(ca, cb),
        "paired_bootstrap": paired_bootstrap(ca, cb, seed=seed),
    }
