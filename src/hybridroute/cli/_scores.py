"""``hybridroute calibrate --scores FILE``: fit a policy on a model's scores read from a file.

The ``--scores`` mode of ``calibrate`` for a model hybridroute did not train (the scores
file's format is in :mod:`hybridroute.scores`). ``calibrate`` parses the options and calls
:func:`calibrate_from_scores`; the work is :func:`hybridroute.scores.calibrate_scores`
(:func:`~hybridroute.calibration.fit_policy`, then an evaluation on held-out rows or
``--test-scores``). This module prints the summary.

With ``--model DIR`` (a saved classifier, e.g. an adapter of the same model) the policy is
bound to that model's fingerprint, and the scores are put in its class order; without it,
to the model the file's header declares, else to the scores file itself.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import typer

from ._outputs import check_output, output_errors

__all__ = ["SCORES_ONLY_OPTIONS", "calibrate_from_scores"]

#: Options that go only with ``--scores`` (the lead's conflict check can use this).
SCORES_ONLY_OPTIONS = ("--test-scores", "--test-fraction", "--oos-label")


def calibrate_from_scores(
    *,
    scores: Path,
    out: Path,
    test_scores: Path | None = None,
    test_fraction: float = 0.25,
    model: Path | None = None,
    oos_label: str | None = None,
    seed: int = 0,
    evidence: Path | None = None,
    as_json: bool = False,
    **fit_options: Any,
) -> dict[str, Any]:
    """Read ``scores``, fit and evaluate a policy, write it to ``out``, print the summary.

    Parameters
    ----------
    scores : Path
        The scores file (``--scores``): CSV, JSONL or Parquet.
    out : Path
        Where to write the policy JSON (``--out``).
    test_scores : Path, optional
        Scores of other rows to evaluate on (``--test-scores``).
    test_fraction : float, default 0.25
        Without ``test_scores``: share of the file's rows held out for the evaluation
        (``--test-fraction``; 0 evaluates nothing).
    model : Path, optional
        A saved classifier directory (``--model``): the policy is bound to its
        fingerprint and uses its class order.
    oos_label : str, optional
        The gold label of out-of-scope rows (``--oos-label``).
    seed : int, default 0
        ``--seed``.
    evidence : Path, optional
        ``--evidence``: labelled evidence JSONL for per-source evidence thresholds.
    as_json : bool, default False
        ``--json``: print the report as JSON.
    **fit_options
        ``fit_policy``'s options as ``calibrate`` parsed them: ``objective``, ``target``,
        ``delta``, ``calibrator``, ``calibrator_fraction``, ``margin``, ``per_class``,
        ``ask_target``, ``precision_target``, ``costs``, ``fallback``. ``calibrator=None``
        takes the layout's default (temperature for per-class scores, isotonic for a
        top-label file).

    Returns
    -------
    dict
        The report printed (with ``out`` and the policy's ``content_sha256``).

    Raises
    ------
    UserInputError
        A scores-file row or column (:class:`~hybridroute.exceptions.DatasetError`), an
        unreadable model, an output that cannot be written.
    """
    from ..calibration import load_evidence_labels
    from ..scores import calibrate_scores, read_scores

    check_output(out, "--out", inputs=[scores, test_scores])
    classes = fingerprint = None
    if model is not None:
        from ..classifiers import load_classifier

        clf = load_classifier(model)
        classes = [str(c) for c in clf.classes_]  # type: ignore[attr-defined]
        fingerprint = clf.fingerprint()
    table = read_scores(scores, classes=classes, oos_label=oos_label)
    test = (
        None
        if test_scores is None
        else read_scores(test_scores, classes=table.classes, oos_label=oos_label)
    )
    if evidence is not None:
        fit_options["evidence_records"] = load_evidence_labels(evidence)
    if fit_options.get("calibrator", "") is None:
        del fit_options["calibrator"]  # the layout's default: temperature, or isotonic
    policy, report = calibrate_scores(
        table,
        test=test,
        test_fraction=test_fraction,
        seed=seed,
        oos_label=oos_label,
        model_fingerprint=fingerprint,
        provenance={"command": "hybridroute calibrate --scores", "model": _str(model)},
        **fit_options,
    )
    with output_errors(out, "--out"):
        policy.save(out)
    report = {"out": str(out), "content_sha256": policy.content_sha256, **report}
    if as_json:
        from .._scrub import Scrubber

        typer.echo(Scrubber().json(report, sort_keys=True, indent=2))
    else:
        typer.echo("\n".join(summary_lines(report)))
        sys.stdout.flush()
    return report


def _str(value: Path | None) -> str | None:
    return None if value is None else str(value)


def _fmt(value: Any) -> str:
    if value is None:
        return "none"
    return f"{value:.4f}" if isinstance(value, float) else str(value)


def summary_lines(report: Mapping[str, Any]) -> list[str]:
    """The human-readable summary of a :func:`calibrate_from_scores` report."""
    binding = report["model_binding"]
    bound_to = {
        "model": "the model given with --model",
        "declared": "the model the file's header declares",
        "scores_file": "the scores file itself: refit with --model DIR to route with it",
    }[binding["source"]]
    g, t = report["guarantee"], report["thresholds"]
    test = report["test"]
    lines = [
        f"policy written to {report['out']} (sha256 {report['content_sha256'][:12]})",
        f"scores           {report['scores_file']} ({report['layout']}, {report['rows']} rows, "
        f"sha256 {report['scores_fingerprint'][:12]})",
        f"model            {binding['fingerprint'][:12]} (bound to {bound_to})",
        f"calibration rows {report['calibration_rows']}",
        f"threshold        {_fmt(t['auto'])}",
        f"certified        {'yes' if report['certified'] else 'no'}"
        + (f" (precision lower bound {_fmt(g['bound'])})" if g.get("bound") is not None else ""),
    ]
    if g.get("reason"):
        lines.append(f"reason           {g['reason']}")
    ev = report["evaluation"]
    if ev is None:
        lines.append("evaluation       none (no test rows; give --test-scores or --test-fraction)")
        return lines
    where = test["file"] if test["source"] == "file" else f"{test['rows']} held-out rows"
    lines += [
        f"evaluated on     {where} (n {ev['n']})",
        f"accuracy         {_fmt(ev['accuracy'])} {_ci(ev.get('accuracy_ci'))}",
        f"coverage         {_fmt(ev.get('coverage'))}",
        f"sel. precision   {_fmt(ev.get('selective_precision'))}",
        f"ECE              {_fmt(ev.get('ece'))}",
    ]
    return lines


def _ci(ci: Any) -> str:
    if not ci or any(v is None for v in ci):
        return ""
    return f"(95% CI {ci[0]:.4f}-{ci[1]:.4f})"
