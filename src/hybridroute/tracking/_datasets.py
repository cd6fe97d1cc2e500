"""What a run's page shows about its data and its purpose: dataset inputs and a description.

MLflow's run page lists the datasets a run used ("Datasets used") and shows the run's
description (the ``mlflow.note.content`` tag). hybridroute fills both:

* each labelled set (or split) a run fitted or evaluated on becomes a dataset input: its
  name (``support-tickets/test``), its **digest** -- the set's content fingerprint (the
  first 36 hex digits, the longest digest MLflow stores; the whole fingerprint is in the
  profile) --, its **source** (the file it was read from), its **schema** (the columns:
  ``text``, ``label``, ``split``, ``id`` and every fact with its type) and a **profile**
  (rows, labels, label counts, out-of-scope label, the full fingerprint), with the context
  the run used it in: ``training``, ``calibration`` or ``evaluation``;
* :func:`describe_evaluation` writes one paragraph saying what was evaluated, on what, with
  the headline figures and the policy's promise.

Only the metadata is logged; the rows never leave the machine. Everything passes through the
tracker's scrubber first.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["CONTEXTS", "DIGEST_CHARS", "dataset_record", "describe_evaluation"]

#: The contexts a run uses a labelled set in (MLflow's ``mlflow.data.context`` tag).
CONTEXTS = ("training", "calibration", "evaluation")
#: MLflow stores at most 36 characters of a dataset digest.
DIGEST_CHARS = 36

#: A fact type's column type in MLflow's schema (lists and objects are written as JSON).
_COLUMN_TYPES = {"bool": "boolean", "int": "long", "number": "double", "str": "string"}


def dataset_record(ds: Any, *, split: str | None = None) -> dict[str, str]:
    """The dataset input of a :class:`~hybridroute.datasets.LabelledSet` (or one split).

    Parameters
    ----------
    ds : LabelledSet
        The rows the run used (a split of a set is a set of its own, with its own
        fingerprint).
    split : str, optional
        The split's name, shown in the dataset's name (``banking77/test``).

    Returns
    -------
    dict of str to str
        ``name``, ``digest``, ``source_type``, ``source``, ``schema`` and ``profile``, as
        MLflow's dataset entity takes them (the last three are JSON text).
    """
    fingerprint = str(ds.fingerprint)
    columns = [("text", "string"), ("label", "string")]
    frame_columns = set(ds.frame.columns)
    columns += [(c, "string") for c in ("split", "id") if c in frame_columns]
    for fact in ds.fact_columns:
        columns.append((fact, _COLUMN_TYPES.get(ds.fact_types.get(fact, ""), "string")))
    schema = {
        "mlflow_colspec": [
            {"type": t, "name": n, "required": n in ("text", "label")} for n, t in columns
        ]
    }
    counts = ds.label_counts()
    profile = {
        "num_rows": len(ds),
        "num_labels": len(counts),
        "label_counts": counts,
        "oos_label": ds.oos_label,
        "fingerprint": fingerprint,
        "splits": dict(ds.splits),
    }
    name = ds.name if split is None else f"{ds.name}/{split}"
    source = str(ds.source)
    if source and os.path.exists(source):  # a file given by a relative path: where it is
        source = os.path.abspath(source)
    return {
        "name": name,
        "digest": fingerprint[:DIGEST_CHARS],
        "source_type": "local",
        "source": json.dumps({"uri": source}),
        "schema": json.dumps(schema),
        "profile": json.dumps(profile, sort_keys=True, default=str),
    }


def _pct(v: Any) -> str | None:
    return None if not isinstance(v, (int, float)) else f"{100 * float(v):.1f}%"


def describe_evaluation(
    evaluation: Mapping[str, Any],
    *,
    run_name: str,
    params: Mapping[str, Any] | None = None,
    datasets: Sequence[tuple[str, str, Any]] = (),
) -> str:
    """One paragraph for a run's description: what was evaluated, on what, and how it did.

    Parameters
    ----------
    evaluation : mapping
        The evaluation (:func:`hybridroute.evaluation.evaluate_router` or
        ``evaluate_classifier``); its ``policy`` summary is used when present.
    run_name : str
        The run's name (says what was evaluated).
    params : mapping, optional
        The run's parameters (``objective``, ``target``, ``delta``, ``classifier``...).
    datasets : sequence of (context, name, set)
        The labelled sets the run used, by context.

    Returns
    -------
    str
        Markdown (MLflow renders a description as Markdown).
    """
    params = dict(params or {})
    lines = [f"**{run_name}**."]
    used = [f"{context} on `{name}` ({len(ds):,} rows)" for context, name, ds in datasets]
    if used:
        lines.append("Used: " + "; ".join(used) + ".")
    what = "router" if evaluation.get("mode") == "router" else "classifier"
    figures = []
    if evaluation.get("n") is not None:
        figures.append(f"{evaluation['n']:,} items")
    for key, label in (
        ("accuracy", "intent accuracy"),
        ("coverage", "coverage"),
        ("selective_precision", "selective precision"),
        ("next_step_accuracy", "next-step accuracy"),
    ):
        value = _pct(evaluation.get(key))
        if value is not None:
            figures.append(f"{label} {value}")
    if figures:
        lines.append(f"Evaluated the {what}: " + ", ".join(figures) + ".")
    lines += _policy_sentences(evaluation, params)
    lines.append(
        "Metrics: the run's metrics; report, plots, errors and policy: its artifacts; the "
        "labelled sets: Datasets (digest = the set's fingerprint)."
    )
    return " ".join(lines)


def _policy_sentences(evaluation: Mapping[str, Any], params: Mapping[str, Any]) -> list[str]:
    """What the policy promised (objective, target, δ, threshold, certified or not) and
    whether the evaluated set is like the data the promise was made on."""
    policy = evaluation.get("policy") or {}
    target = policy.get("target", params.get("target"))
    delta = policy.get("delta", params.get("delta"))
    objective = policy.get("objective", params.get("objective"))
    out: list[str] = []
    if target is not None and delta is not None:
        threshold = policy.get("threshold")
        at = "" if not isinstance(threshold, (int, float)) else f", threshold {threshold:.4f}"
        certified = policy.get("certified")
        if certified is None:
            state = ""
        elif certified:
            state = " (certified)"
        else:
            why = policy.get("reason")
            state = " (not certified" + (f": {why}" if why else "") + ")"
        out.append(
            f"Policy: {objective or 'precision'} target {target} at δ {delta}{at}{state}; a "
            "certified target holds for traffic like the calibration data."
        )
    mix = evaluation.get("label_mix") or {}
    if mix:
        tv = mix.get("total_variation")
        how = f" (total variation {tv:.3f})" if isinstance(tv, (int, float)) else ""
        out.append(
            "Label mix of the evaluated set: departs markedly from the calibration data"
            f"{how}, so the certificate may not hold here."
            if mix.get("departs")
            else f"Label mix of the evaluated set: like the calibration data{how}."
        )
    return out
