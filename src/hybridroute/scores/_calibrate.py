"""Fit, certify and evaluate a policy on a model's scores from a file.

The fitting is :func:`hybridroute.calibration.fit_policy` -- the same procedure, objectives
and options as ``hybridroute calibrate`` -- and the evaluation is
:func:`hybridroute.evaluation.evaluate_classifier` -- the same metrics as ``hybridroute
evaluate`` -- over the scores looked up by row instead of computed by a classifier.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .._integrity import is_sha256_hex
from ..exceptions import DatasetError
from ._table import TOP_LABEL, ScoresTable

if TYPE_CHECKING:
    from ..calibration import Policy
    from ..classifiers import RankedLabels
    from ..evaluation import Evaluation

__all__ = ["calibrate_scores", "evaluate_scores"]

#: Evaluation keys left out of the report: they describe a classifier's run, not scores.
_NOT_REPORTED = ("items", "confusion", "latency", "usage", "mode", "classifier_kind")


class _ScoresLookup:
    """The classifier face :func:`evaluate_classifier` reads, over a table's rows.

    ``rank`` takes row ids (the table's ``ids``) in place of texts.
    """

    kind = "scores"

    def __init__(self, table: ScoresTable) -> None:
        self.table = table
        self.classes_ = np.array(table.classes, dtype=str)
        self._row = {item: i for i, item in enumerate(table.ids)}

    def rank(self, ids: Sequence[str], k: int = 2) -> list[RankedLabels]:
        from ..classifiers import RankedLabels

        out = []
        for item in ids:
            labels, scores = self.table.ranked(self._row[item])
            out.append(RankedLabels(labels=labels[:k], scores=scores[:k]))
        return out


def evaluate_scores(
    policy: Policy, table: ScoresTable, *, n_boot: int = 1000, seed: int = 0
) -> Evaluation:
    """Evaluate ``policy`` on the scores of ``table`` (rows it was not fitted on).

    Parameters
    ----------
    policy : Policy
        A policy over the table's classes, in the same order.
    table : ScoresTable
        Held-out scores with gold labels.
    n_boot, seed : int
        Bootstrap resamples of the intervals and their seed.

    Returns
    -------
    Evaluation
        As :func:`hybridroute.evaluation.evaluate_classifier` with the policy: accuracy and
        macro-F1 of the model's top label (with intervals), ECE and AURC of the policy's
        calibrated confidence, coverage, selective precision, deferrals by reason code.
        Each row's ``text`` is its id.

    Raises
    ------
    DatasetError
        The table's classes are not the policy's.
    """
    from ..evaluation import evaluate_classifier

    if tuple(policy.classes) != table.classes:
        raise DatasetError(
            f"the scores' classes are not the policy's ({len(table.classes)} vs "
            f"{len(policy.classes)} labels, or another order)",
            path=table.path,
        )
    return evaluate_classifier(
        _ScoresLookup(table),
        list(table.ids),
        list(table.gold),
        policy=policy,
        n_boot=n_boot,
        seed=seed,
        latency_samples=0,
    )


def _binding(table: ScoresTable, model_fingerprint: str | None) -> tuple[str, str]:
    """The fingerprint the policy is bound to, and where it comes from."""
    if model_fingerprint is not None:
        if not is_sha256_hex(model_fingerprint):
            raise ValueError(
                "model_fingerprint must be a model fingerprint (64 lowercase hex digits), "
                f"got {model_fingerprint!r}"
            )
        declared = table.model_fingerprint
        if declared is not None and declared != model_fingerprint:
            raise DatasetError(
                f"the file declares model {declared[:12]}…, not the model given "
                f"({model_fingerprint[:12]}…): its scores are another model's",
                path=table.path,
                column="model_fingerprint",
            )
        return model_fingerprint, "model"
    if table.model_fingerprint is not None:
        return table.model_fingerprint, "declared"
    return table.fingerprint, "scores_file"


def _split(
    table: ScoresTable, test: ScoresTable | None, test_fraction: float, seed: int
) -> tuple[ScoresTable, ScoresTable | None]:
    if test is not None:
        if test.fingerprint == table.fingerprint:
            raise DatasetError(
                "the test scores are the calibration scores (the same bytes); evaluate on "
                "rows the policy was not fitted on",
                path=test.path,
            )
        if test.classes != table.classes or test.layout != table.layout:
            raise DatasetError(
                "the test scores must have the calibration file's classes, in the same order, "
                "and the same layout",
                path=test.path,
            )
        return table, test
    if not isinstance(test_fraction, numbers.Real) or not 0.0 <= float(test_fraction) < 1.0:
        raise ValueError(f"test_fraction must be in [0, 1), got {test_fraction!r}")
    n_test = round(float(test_fraction) * len(table))
    if n_test == 0:
        return table, None
    order = np.random.default_rng([int(seed), 1]).permutation(len(table))
    return table.take(np.sort(order[n_test:])), table.take(np.sort(order[:n_test]))


def _check_layout_options(table: ScoresTable, options: dict[str, Any]) -> None:
    """A top-label file has no other class's score: refuse what needs one."""
    if table.layout != TOP_LABEL:
        return
    options.setdefault("calibrator", "isotonic")
    if options["calibrator"] == "temperature":
        raise DatasetError(
            "holds the top label and its confidence only; the temperature calibrator "
            "rescales every class's score, so use the isotonic calibrator (or none), or "
            "write one score:<label> column per class",
            path=table.path,
        )
    if options.get("margin"):
        raise DatasetError(
            "holds the top label and its confidence only; a margin gate needs the runner-up's "
            "score: write one score:<label> column per class",
            path=table.path,
        )


def calibrate_scores(
    table: ScoresTable,
    *,
    test: ScoresTable | None = None,
    test_fraction: float = 0.25,
    seed: int = 0,
    oos_label: str | None = None,
    model_fingerprint: str | None = None,
    n_boot: int = 1000,
    provenance: Mapping[str, Any] | None = None,
    **options: Any,
) -> tuple[Policy, dict[str, Any]]:
    """Fit and certify a policy on a scores file's rows, bind it, and evaluate it.

    Parameters
    ----------
    table : ScoresTable
        The calibration scores (:func:`read_scores`). The model must not have been trained
        on these rows.
    test : ScoresTable, optional
        Scores of other rows to evaluate on (same classes, order and layout; not the same
        file). Without it, ``test_fraction`` of ``table`` is held out.
    test_fraction : float in [0, 1), default 0.25
        Share of ``table`` held out for the evaluation when ``test`` is not given (rows
        chosen by a permutation seeded with ``seed``); 0 fits on every row and evaluates
        nothing. Ignored with ``test``.
    seed : int, default 0
        Seeds the hold-out, ``fit_policy``'s calibrator / threshold split and the bootstrap.
    oos_label : str, optional
        The gold label of out-of-scope rows (``fit_policy``'s ``oos_label``).
    model_fingerprint : str, optional
        The fingerprint of the model that produced the scores
        (``classifier.fingerprint()``, e.g. of a
        :class:`~hybridroute.classifiers.adapter.SklearnAdapter`): the policy is bound to
        it, so a router bundle pairs it with that model only. Without it the policy is
        bound to the model the file's header declares, else to the file itself
        (``table.fingerprint``): then no classifier's fingerprint matches, and a router
        refuses the policy until it is refitted with the model named.
    n_boot : int, default 1000
        Bootstrap resamples of the evaluation's intervals.
    provenance : mapping, optional
        More provenance (e.g. the command); the scores file, its fingerprint, layout and
        the hold-out are added.
    **options
        Passed to :func:`hybridroute.calibration.fit_policy`: ``objective``, ``target``,
        ``delta``, ``calibrator``, ``calibrator_fraction``, ``margin``, ``per_class``,
        ``ask_target``, ``precision_target``, ``costs``, ``fallback``,
        ``evidence_records``. For a top-label file the calibrator defaults to
        ``isotonic``; ``temperature`` and ``margin`` are refused there (both need every
        class's score).

    Returns
    -------
    policy : Policy
        The fitted policy (not saved), bound as above.
    report : dict
        JSON-able: ``scores_file``, ``scores_fingerprint``, ``layout``, ``classes``,
        ``rows``, ``calibration_rows``, ``test`` (source, file, fingerprint, rows),
        ``model_binding`` (``fingerprint`` and ``source``: ``model``, ``declared`` or
        ``scores_file``), ``certified``, ``guarantee``, ``thresholds``, ``evaluation``
        (:func:`evaluate_scores`' headline metrics, or ``None`` with no test rows).

    Raises
    ------
    DatasetError
        Naming the file: a top-label file with the temperature calibrator or a margin
        gate, test scores that are the calibration file or of other classes, a declared
        model that is not ``model_fingerprint``, and what ``fit_policy`` refuses about
        the rows (too few, no out-of-scope rows for ``oos``...).
    ValueError
        An option out of range (from ``fit_policy`` too).
    """
    from ..calibration import fit_policy

    options = dict(options)
    _check_layout_options(table, options)
    bound, source = _binding(table, model_fingerprint)
    cal, held = _split(table, test, test_fraction, seed)
    test_info: dict[str, Any] = {
        "source": "file" if test is not None else ("held_out" if held is not None else None),
        "file": test.path if test is not None else None,
        "fingerprint": test.fingerprint if test is not None else None,
        "rows": 0 if held is None else len(held),
        "fraction": None if test is not None else float(test_fraction),
    }
    extra = {
        "scores_file": table.path,
        "scores_fingerprint": table.fingerprint,
        "scores_layout": table.layout,
        "scores_rows": len(table),
        "scores_model_binding": source,
        "test_scores_file": test_info["file"],
        "test_scores_fingerprint": test_info["fingerprint"],
        "held_out_rows": test_info["rows"] if test is None else 0,
        **dict(provenance or {}),
    }
    try:
        policy = fit_policy(
            cal.proba(),
            list(cal.gold),
            list(cal.classes),
            seed=seed,
            oos_label=oos_label,
            model_fingerprint=bound,
            provenance=extra,
            **options,
        )
    except DatasetError as exc:
        if exc.path is not None:
            raise
        raise DatasetError(str(exc), path=table.path) from None
    evaluation = None
    if held is not None:
        summary = evaluate_scores(policy, held, n_boot=n_boot, seed=seed).summary()
        evaluation = {k: v for k, v in summary.items() if k not in _NOT_REPORTED}
    report = {
        "scores_file": table.path,
        "scores_fingerprint": table.fingerprint,
        "layout": table.layout,
        "classes": list(table.classes),
        "rows": len(table),
        "calibration_rows": len(cal),
        "test": test_info,
        "model_binding": {"fingerprint": bound, "source": source},
        "certified": policy.certified,
        "guarantee": policy.guarantee,
        "thresholds": policy.thresholds,
        "evaluation": evaluation,
    }
    return policy, report
