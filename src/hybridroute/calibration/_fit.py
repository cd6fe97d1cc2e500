"""Fit a whole routing policy from a classifier's scores on labelled calibration rows.

:func:`fit_policy` is the one procedure behind ``hybridroute calibrate`` and every other
place that needs a policy from Python (the demo, the experiment runner, router tests). It
takes arrays -- the probability matrix and the gold labels -- never a classifier or a
dataset, so this package keeps to its imports (contracts and exceptions; numpy, scipy,
scikit-learn).

The calibration rows are divided once, seeded: a share (``calibrator_fraction``) fits the
probability calibrator, the rest fits the thresholds, so a certificate is computed on rows
the calibrator never saw. The thresholds are fitted by :func:`policy_from_scores` from the
calibrated scores of those rows (:class:`ThresholdScores`): the registry of techniques says
which technique an objective fits, so nothing here branches on a technique. Same inputs give
a byte-identical policy.
"""

from __future__ import annotations

import json
import math
import numbers
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._integrity import is_sha256_hex
from ..exceptions import DatasetError
from ._base import HUMAN_REVIEW, as_proba
from ._evidence import EvidenceThresholds
from ._options import FitOptions
from ._policy import Policy
from .calibrators import CALIBRATORS, IsotonicCalibration, TemperatureScaling
from .techniques import MarginThreshold, PerClassThreshold

__all__ = ["ThresholdScores", "check_leakage", "fit_policy", "policy_from_scores"]

#: Keys :func:`fit_policy` writes into the provenance itself.
PROVENANCE_KEYS = (
    "split_seed",
    "calibrator_fraction",
    "calibrator_size",
    "threshold_size",
    "objective_args",
)

#: The defaults (one place: the command line shows these too).
DEFAULTS = FitOptions()

# An empirical base has no (target, delta) to derive a class size from; below this many
# items a class's empirical precision is too noisy to set its own threshold, so it pools.
_EMPIRICAL_MIN_CLASS_SIZE = 50


def fit_policy(
    proba: Any,
    gold: Iterable[Any],
    classes: Sequence[Any],
    *,
    objective: str = DEFAULTS.objective,
    target: float | None = None,
    delta: float = DEFAULTS.delta,
    calibrator: str = DEFAULTS.calibrator,
    calibrator_fraction: float = DEFAULTS.calibrator_fraction,
    seed: int = DEFAULTS.seed,
    oos_label: str | None = None,
    margin: bool = False,
    per_class: bool = False,
    ask_target: float = DEFAULTS.ask_target,
    precision_target: float = DEFAULTS.precision_target,
    costs: Mapping[str, float | None] | None = None,
    fallback: str = HUMAN_REVIEW,
    evidence_records: Iterable[Mapping[str, Any]] | None = None,
    provenance: Mapping[str, Any] | None = None,
    model_fingerprint: str | None = None,
    training_fingerprint: str | None = None,
    calibration_fingerprints: Mapping[str, str] | None = None,
) -> Policy:
    """Fit a calibrator and thresholds on labelled calibration rows and build the policy.

    The rows are permuted with ``seed``; the first ``round(calibrator_fraction * n)`` fit
    the probability calibrator (in-scope rows only), the others fit the thresholds on the
    calibrated confidence of the *raw* top label, the top-1 minus top-2 margin and
    correctness (:func:`policy_from_scores`). ``hybridroute calibrate`` is this function
    plus dataset and model loading: both give byte-identical policies for the same inputs.

    Parameters
    ----------
    proba : array-like of shape (n_rows, n_classes)
        The classifier's probabilities on the calibration rows, columns in ``classes``
        order. The classifier must not have been trained on these rows (give
        ``training_fingerprint`` and ``calibration_fingerprints`` to have it checked).
    gold : iterable of str
        True label of every row (``str``-converted). A row labelled ``oos_label`` is out of
        scope (a correct route only if ``oos_label`` is a class the model predicted); any
        other label must be one of ``classes``.
    classes : sequence of str
        The classifier's label set, in the column order of ``proba`` (unique).
    objective : {"precision", "empirical", "coverage", "cost", "three-way", "oos"}
        The registry's (:data:`.techniques.OBJECTIVES`): certified precision >= ``target``
        at 1 - ``delta``; calibration precision >= ``target``; auto-route a ``target``
        share; minimise ``costs``; auto-route at ``target`` and ask the user at
        ``ask_target``; out-of-scope recall >= ``target`` with ``precision_target`` on the
        rows let through (the last two: two certificates at ``delta / 2``).
    target : float in (0, 1), optional
        The objective's target; default 0.8 for ``coverage``, else 0.95.
    delta : float in (0, 1), default 0.05
        Allowed probability that a certificate is wrong.
    calibrator : {"temperature", "isotonic", "none"}
        Probability calibrator; ``none`` only renormalises the rows (all fit thresholds).
    calibrator_fraction, seed : float in [0, 1), int; default 0.3, 0
        Share of rows that fit the calibrator; seed of that split (``split_seed``).
    oos_label : str, optional
        The gold label of out-of-scope rows (needed by ``oos``). Among ``classes``, its
        calibrated probability is the out-of-scope score, else one minus the confidence.
    margin : bool, default False
        Also certify a top-1/top-2 margin gate (at ``target``, or ``precision_target``
        for ``oos``, and ``delta``); each gate keeps its own certificate.
    per_class : bool, default False
        Per-class thresholds, small classes pooled (not with ``cost``).
    ask_target, precision_target : float in (0, 1), default 0.8, 0.95
        ``three-way``: precision of the ask-the-user zone; ``oos``: of routed rows.
    costs : mapping, optional
        ``cost``: ``{"misroute": ..., "ask_user": ... or None, "human_review": ...}``;
        missing keys take :class:`CostThreshold`'s defaults, ``ask_user=None`` drops the
        ask-the-user zone.
    fallback : {"human_review", "ask_user"}
        Action below the threshold when there is no ask zone.
    evidence_records : iterable of mapping, optional
        Labelled evidence rows (``source``, ``score``, ``covered``; e.g. from
        :func:`load_evidence_labels`) to fit per-source evidence thresholds.
    provenance : mapping, optional
        What the caller knows (dataset fingerprint, model, command...), plain JSON values;
        ``fit_policy`` adds (and refuses another value of) ``split_seed``,
        ``calibrator_fraction``, ``calibrator_size``, ``threshold_size``, ``objective_args``.
    model_fingerprint : str, optional
        ``classifier.fingerprint()`` of the model that produced ``proba``, recorded as the
        policy's ``model_fingerprint``: a router bundle holds only a policy bound to its
        model (:func:`hybridroute.router.save_router` binds an unbound one).
    training_fingerprint : str, optional
        Fingerprint of the rows the classifier was trained on (a saved classifier's
        ``training_fingerprint_``, or the training split's ``fingerprint``).
    calibration_fingerprints : mapping of str to str, optional
        The fingerprints of the calibration rows and of every set that holds them, by a
        name for the message; a classifier trained on one of them is refused
        (:func:`check_leakage`).

    Returns
    -------
    Policy
        The built policy, its fitted parts kept (not saved; call :meth:`Policy.save`).

    Raises
    ------
    ValueError
        An argument out of range or of the wrong shape (naming it; see
        :meth:`FitOptions.check`), or a ``model_fingerprint`` that is not one.
    DatasetError
        Gold labels outside ``classes`` (other than ``oos_label``), too few rows for the
        calibrator or the thresholds, no out-of-scope rows for ``oos``, an evidence record
        missing a field, or a classifier trained on the calibration rows.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> proba = rng.dirichlet([0.3, 0.3, 0.3], size=400)
    >>> gold = [("a", "b", "c")[i] for i in proba.argmax(axis=1)]
    >>> policy = fit_policy(proba, gold, ["a", "b", "c"], target=0.9, delta=0.1)
    >>> policy.certified
    True
    """
    given = locals()  # the options, as the caller gave them (checked in one place)
    options = FitOptions.check(**{k: given[k] for k in FitOptions.check_parameters()})
    extra_provenance = _arguments(options, provenance, model_fingerprint)
    check_leakage(training_fingerprint, calibration_fingerprints)
    labels = [str(c) for c in classes]
    raw = _proba(proba, labels)
    gold = [str(g) for g in gold]
    if len(gold) != raw.shape[0]:
        raise ValueError(f"gold has {len(gold)} labels but proba has {raw.shape[0]} rows")
    y = _class_index(gold, labels, options.oos_label)
    cal_idx, thr_idx = _split(len(gold), options)
    is_oos = np.array([g == options.oos_label for g in gold], dtype=bool)
    fitted = _fit_calibrator(raw, y, cal_idx[~is_oos[cal_idx]], len(cal_idx), options)
    own = {
        "split_seed": options.seed,
        "calibrator_fraction": options.calibrator_fraction if fitted is not None else 0.0,
        "calibrator_size": len(cal_idx),
        "threshold_size": len(thr_idx),
        "objective_args": options.objective_args(),
    }
    scores = ThresholdScores.of(raw[thr_idx], [gold[i] for i in thr_idx], labels, fitted, options)
    return policy_from_scores(
        scores,
        labels,
        options,
        calibrator=fitted,
        evidence_records=evidence_records,
        provenance=_merged(extra_provenance, own),
        model_fingerprint=model_fingerprint,
    )


def _split(n: int, options: FitOptions) -> tuple[np.ndarray, np.ndarray]:
    """The rows that fit the calibrator and those that fit the thresholds (seeded, once)."""
    order = np.random.default_rng(options.seed).permutation(n)
    n_cal = 0 if options.calibrator == "none" else round(options.calibrator_fraction * n)
    cal_idx, thr_idx = np.sort(order[:n_cal]), np.sort(order[n_cal:])
    if len(thr_idx) == 0:
        raise DatasetError(
            f"no calibration rows are left to fit thresholds ({n} rows, "
            f"calibrator_fraction {options.calibrator_fraction})",
            column="label",
        )
    return cal_idx, thr_idx


def _merged(extra: dict[str, Any], own: dict[str, Any]) -> dict[str, Any]:
    """The caller's provenance and fit_policy's own (which the caller may not contradict)."""
    clash = sorted(k for k in PROVENANCE_KEYS if k in extra and extra[k] != own[k])
    if clash:
        raise ValueError(
            f"provenance sets {', '.join(clash)}, which fit_policy records itself "
            f"(as {', '.join(repr(own[k]) for k in clash)})"
        )
    return {**extra, **own}


@dataclass(frozen=True, slots=True)
class ThresholdScores:
    """What a policy's thresholds are fitted on: one entry per row that fits them.

    ``confidence`` is the calibrated confidence of the model's (raw) top label, ``labels``
    that label, ``correct`` whether it is the gold label; ``margin`` is the calibrated top
    label's lead over the runner-up (``None`` when only a top label was scored: then no
    margin gate); ``gold`` the gold labels (for the recorded label mix) and ``is_oos``
    which of them are out of scope; ``oos_score`` the out-of-scope score an ``oos``
    objective's gate is fitted on, of kind ``oos_score_kind`` (``one_minus_confidence`` or
    ``label_probability``).

    A scores file read without a model (``hybridroute calibrate --scores``) gives these
    directly, to :func:`policy_from_scores`.
    """

    confidence: np.ndarray
    correct: np.ndarray
    labels: list[str]
    gold: list[str]
    is_oos: np.ndarray
    margin: np.ndarray | None = None
    oos_score: np.ndarray | None = None
    oos_score_kind: str = "one_minus_confidence"

    @classmethod
    def of(
        cls,
        raw: np.ndarray,
        gold: list[str],
        classes: list[str],
        calibrator: TemperatureScaling | IsotonicCalibration | None,
        options: FitOptions,
    ) -> ThresholdScores:
        """The scores of the rows ``raw`` (probabilities over ``classes``) once calibrated."""
        p = (
            raw / raw.sum(axis=1, keepdims=True)
            if calibrator is None
            else calibrator.transform(raw)
        )
        top = raw.argmax(axis=1)
        rows = np.arange(len(raw))
        conf = p[rows, top]
        rest = p.copy()
        rest[rows, top] = -np.inf
        index = {c: i for i, c in enumerate(classes)}
        y = _class_index(gold, classes, options.oos_label)
        kind, oos = "one_minus_confidence", 1.0 - conf
        # With the out-of-scope label among the model's classes its probability is the
        # out-of-scope score; otherwise one minus the top-label confidence.
        if options.oos_label in index:
            kind, oos = "label_probability", p[:, index[options.oos_label]]
        return cls(
            confidence=conf,
            correct=top == y,
            labels=[classes[i] for i in top],
            gold=gold,
            is_oos=np.array([g == options.oos_label for g in gold], dtype=bool),
            margin=conf - rest.max(axis=1),
            oos_score=oos,
            oos_score_kind=kind,
        )


def policy_from_scores(
    scores: ThresholdScores,
    classes: Sequence[str],
    options: FitOptions,
    *,
    calibrator: TemperatureScaling | IsotonicCalibration | None = None,
    evidence_records: Iterable[Mapping[str, Any]] | None = None,
    provenance: Mapping[str, Any] | None = None,
    model_fingerprint: str | None = None,
) -> Policy:
    """Fit the thresholds ``options`` ask for on ``scores`` and build the policy.

    The objective's technique (:data:`~hybridroute.calibration.techniques.OBJECTIVES`)
    builds the auto-route threshold and, for ``oos``, the out-of-scope gate fitted first;
    the margin and per-class techniques follow when asked for. The fitted techniques are
    the policy's parts, kept as they are.

    Parameters
    ----------
    scores : ThresholdScores
        The rows that fit the thresholds.
    classes : sequence of str
        The model's label set.
    options : FitOptions
        Checked options (:meth:`FitOptions.check`).
    calibrator : fitted calibrator, optional
        The calibrator ``scores`` went through (recorded in the policy).
    evidence_records, provenance, model_fingerprint
        As :func:`fit_policy` takes them (the provenance is recorded as given).

    Returns
    -------
    Policy
    """
    technique = options.technique
    route = technique.for_objective(options)
    gate = technique.gate_for(options)
    conf, correct = scores.confidence, scores.correct
    if gate is None:
        route.fit(conf, correct)  # type: ignore[attr-defined]
    else:
        if not scores.is_oos.any():
            raise DatasetError(
                f"no out-of-scope rows (gold label {options.oos_label!r}) among the "
                f"{len(conf)} rows that fit the thresholds; the {options.objective} objective "
                "needs some",
                column="label",
            )
        oos_score = 1.0 - conf if scores.oos_score is None else scores.oos_score
        gate.fit(oos_score, scores.is_oos)  # type: ignore[attr-defined]
        # jointly: precision is certified on the rows the out-of-scope gate lets through
        passed = ~gate.predict(oos_score)  # type: ignore[attr-defined]
        if not passed.any():
            passed[:] = True
        route.fit(conf[passed], correct[passed])  # type: ignore[attr-defined]
    margin_fit = None
    if options.margin:
        if scores.margin is None:
            raise DatasetError("a margin gate needs the runner-up's score, which these scores lack")
        margin_fit = MarginThreshold.for_objective(options).fit(scores.margin, correct)
    per_class_fit = None
    if options.per_class:
        base = route.per_class_base()
        # A certifying base derives its smallest class from (target, delta).
        params = base.get_params(deep=False)
        min_size = None if "target" in params and "delta" in params else _EMPIRICAL_MIN_CLASS_SIZE
        per_class_fit = PerClassThreshold(base, min_class_size=min_size).fit(
            conf, correct, scores.labels
        )
    evidence_fit = None
    if evidence_records is not None:
        evidence_fit = EvidenceThresholds().fit_records(_evidence_rows(evidence_records))
    kind = scores.oos_score_kind
    return Policy.build(
        classes=list(classes),
        threshold=route,
        calibrator=calibrator,
        per_class=per_class_fit,
        margin=margin_fit,
        oos=gate,
        oos_score=kind,
        oos_label=options.oos_label if kind == "label_probability" else None,
        evidence=evidence_fit,
        fallback=options.fallback,
        calibration_labels=scores.gold,
        out_of_scope_label=options.oos_label,
        objective=options.objective,
        provenance=provenance,
        model_fingerprint=model_fingerprint,
    )


def check_leakage(
    training_fingerprint: str | None, calibration_fingerprints: Mapping[str, str] | None
) -> None:
    """Refuse calibration rows the classifier was trained on.

    Parameters
    ----------
    training_fingerprint : str or None
        Fingerprint of the classifier's training rows (``None``: unknown, nothing checked).
    calibration_fingerprints : mapping of str to str, or None
        Name -> fingerprint of the calibration rows and of every set that holds them.

    Raises
    ------
    DatasetError
        When the training fingerprint is one of them, naming which.
    ValueError
        Arguments of the wrong type.
    """
    if training_fingerprint is None or not calibration_fingerprints:
        return
    if not isinstance(training_fingerprint, str):
        raise ValueError(f"training_fingerprint must be a string, got {training_fingerprint!r}")
    if not isinstance(calibration_fingerprints, Mapping):
        raise ValueError("calibration_fingerprints must map names to fingerprints")
    for name, fingerprint in calibration_fingerprints.items():
        if fingerprint == training_fingerprint:
            raise DatasetError(
                f"the model was trained on {name}, which holds the calibration rows: a "
                "certificate computed on rows the model has seen does not hold for new "
                "traffic; fit the policy on rows the model was not trained on",
                column="split",
            )


# --------------------------------------------------------------------------- checks


def _fit_calibrator(
    raw: np.ndarray, y: np.ndarray, in_scope: np.ndarray, n_cal: int, options: FitOptions
) -> TemperatureScaling | IsotonicCalibration | None:
    """The calibrator fitted on the in-scope rows of its share (``None`` for ``none``)."""
    if options.calibrator not in CALIBRATORS:
        return None
    if len(in_scope) < 2:
        raise DatasetError(
            f"too few in-scope calibration rows to fit a calibrator: {len(in_scope)} of "
            f"the {n_cal} rows calibrator_fraction {options.calibrator_fraction} gives "
            f"(of {len(y)}); it needs at least 2 (or use calibrator 'none')",
            column="label",
        )
    return CALIBRATORS[options.calibrator]().fit(raw[in_scope], y[in_scope])


def _class_index(gold: list[str], labels: list[str], oos_label: str | None) -> np.ndarray:
    """Each row's class column; an out-of-scope row (never a right route unless its label
    is a class the model predicted) is -1. A label outside both is a ``DatasetError``."""
    index = {c: i for i, c in enumerate(labels)}
    unknown = sorted({g for g in gold if g not in index and g != oos_label})
    if unknown:
        raise DatasetError(
            f"calibration labels not in the model's label set: {', '.join(unknown[:5])}"
            + (f" (and {len(unknown) - 5} more)" if len(unknown) > 5 else ""),
            column="label",
        )
    return np.array([index.get(g, -1) for g in gold], dtype=int)


def _arguments(
    options: FitOptions, provenance: Mapping[str, Any] | None, model_fingerprint: str | None
) -> dict[str, Any]:
    """The caller's provenance, once the arguments options do not cover are checked."""
    if options.technique.needs_oos_label and options.oos_label is None:
        raise ValueError(
            f"the {options.objective} objective needs oos_label, the gold label of "
            "out-of-scope rows"
        )
    if model_fingerprint is not None and not is_sha256_hex(model_fingerprint):
        raise ValueError(
            "model_fingerprint must be a model fingerprint (64 lowercase hex digits, "
            f"classifier.fingerprint()), got {model_fingerprint!r}"
        )
    if provenance is None:
        return {}
    if not isinstance(provenance, Mapping):
        raise ValueError(f"provenance must be a mapping, got {type(provenance).__name__}")
    out = dict(provenance)
    try:
        json.dumps(out, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"provenance must hold plain JSON values: {exc}") from None
    return out


def _proba(proba: Any, labels: list[str]) -> np.ndarray:
    if len(labels) < 2:
        raise ValueError(f"classes must hold at least two labels, got {labels!r}")
    if len(set(labels)) != len(labels):
        dup = sorted({c for c in labels if labels.count(c) > 1})
        raise ValueError(f"classes must be unique; repeated: {', '.join(dup)}")
    arr = as_proba(proba)
    if arr.shape[1] != len(labels):
        raise ValueError(f"proba has {arr.shape[1]} columns but there are {len(labels)} classes")
    sums = arr.sum(axis=1)
    if np.any(sums <= 0):
        raise ValueError(f"proba row {int(np.flatnonzero(sums <= 0)[0])} sums to zero")
    return arr


def _evidence_rows(records: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    rows = list(records)
    if not rows:
        raise DatasetError("evidence_records is empty")
    for i, r in enumerate(rows, start=1):
        if not isinstance(r, Mapping):
            raise DatasetError("an evidence record must be a mapping", row=i)
        for key in ("source", "score", "covered"):
            if key not in r:
                raise DatasetError("evidence record lacks this field", row=i, column=key)
        if not isinstance(r["score"], numbers.Real) or not math.isfinite(float(r["score"])):
            raise DatasetError(
                f"score must be a finite number, got {r['score']!r}", row=i, column="score"
            )
    return rows
