"""Fit a whole routing policy from a classifier's scores on labelled calibration rows.

:func:`fit_policy` is the one procedure behind ``hybridroute calibrate`` and every other
place that needs a policy from Python (the demo, the experiment runner, router tests). It
takes arrays -- the probability matrix and the gold labels -- never a classifier or a
dataset, so this package keeps to its imports (contracts and exceptions; numpy, scipy,
scikit-learn).

The calibration rows are divided once, seeded: a share (``calibrator_fraction``) fits the
probability calibrator, the rest fits the thresholds, so a certificate is computed on rows
the calibrator never saw. Same inputs give a byte-identical policy.
"""

from __future__ import annotations

import json
import math
import numbers
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from .._integrity import is_sha256_hex
from ..exceptions import DatasetError
from ._base import ASK_USER, HUMAN_REVIEW, as_proba, check_fraction, check_nonnegative
from ._cost import CostThreshold
from ._coverage import CoverageThreshold
from ._evidence import EvidenceThresholds
from ._isotonic import IsotonicCalibration
from ._oos import OutOfScopeThreshold
from ._per_class import PerClassThreshold
from ._policy import Policy
from ._precision import (
    CertifiedPrecisionThreshold,
    EmpiricalThreshold,
    MarginThreshold,
)
from ._temperature import TemperatureScaling
from ._three_way import ThreeWayThreshold

__all__ = ["fit_policy"]

#: The objectives :func:`fit_policy` knows, by the name written into the policy.
OBJECTIVES = ("precision", "empirical", "coverage", "cost", "three-way", "oos")
CALIBRATORS = ("temperature", "isotonic", "none")
FALLBACKS = (HUMAN_REVIEW, ASK_USER)
COST_KEYS = ("misroute", "ask_user", "human_review")
#: Keys :func:`fit_policy` writes into the provenance itself.
PROVENANCE_KEYS = (
    "split_seed",
    "calibrator_fraction",
    "calibrator_size",
    "threshold_size",
    "objective_args",
)

# An empirical base has no (target, delta) to derive a class size from; below this many
# items a class's empirical precision is too noisy to set its own threshold, so it pools.
_EMPIRICAL_MIN_CLASS_SIZE = 50


def fit_policy(
    proba: Any,
    gold: Iterable[Any],
    classes: Sequence[Any],
    *,
    objective: str = "precision",
    target: float | None = None,
    delta: float = 0.05,
    calibrator: str = "temperature",
    calibrator_fraction: float = 0.3,
    seed: int = 0,
    oos_label: str | None = None,
    margin: bool = False,
    per_class: bool = False,
    ask_target: float = 0.8,
    precision_target: float = 0.95,
    costs: Mapping[str, float | None] | None = None,
    fallback: str = HUMAN_REVIEW,
    evidence_records: Iterable[Mapping[str, Any]] | None = None,
    provenance: Mapping[str, Any] | None = None,
    model_fingerprint: str | None = None,
) -> Policy:
    """Fit a calibrator and thresholds on labelled calibration rows and build the policy.

    The rows are permuted with ``seed``; the first ``round(calibrator_fraction * n)``
    fit the probability calibrator (in-scope rows only), the others fit the thresholds on
    calibrated confidence of the *raw* top label, top-1 minus top-2 margin and
    correctness. ``hybridroute calibrate`` is this function plus dataset and model
    loading, so both give byte-identical policies for the same inputs.

    Parameters
    ----------
    proba : array-like of shape (n_rows, n_classes)
        The classifier's probabilities on the calibration rows, columns in ``classes``
        order. Rows must not have been used to train the classifier.
    gold : iterable of str
        True label of every row (values are converted with ``str``). A row whose label
        is ``oos_label`` is out of scope: never a correct route unless ``oos_label`` is
        itself one of ``classes`` and the model predicted it. Any other label must be
        one of ``classes``.
    classes : sequence of str
        The classifier's label set, in the column order of ``proba`` (unique).
    objective : {"precision", "empirical", "coverage", "cost", "three-way", "oos"}
        ``precision``: certified precision >= ``target`` with probability 1 - ``delta``;
        ``empirical``: calibration precision >= ``target``, no guarantee; ``coverage``:
        auto-route a ``target`` share (guaranteed at 1 - ``delta``); ``cost``: minimise
        the declared ``costs``; ``three-way``: auto-route at ``target``, ask the user at
        ``ask_target`` (both certified, ``delta`` split in two); ``oos``: out-of-scope
        recall >= ``target`` and certified ``precision_target`` on the rows the
        out-of-scope gate lets through (``delta`` split in two).
    target : float in (0, 1), optional
        The objective's target; default 0.8 for ``coverage``, else 0.95. Recorded (but
        unused) for ``cost``.
    delta : float in (0, 1), default 0.05
        Allowed probability that a certificate is wrong.
    calibrator : {"temperature", "isotonic", "none"}
        Probability calibrator. ``none`` only renormalises the rows, and uses every row
        for the thresholds.
    calibrator_fraction : float in [0, 1), default 0.3
        Share of rows that fit the calibrator (ignored with ``calibrator="none"``).
    seed : int, default 0
        Seed of the calibrator / threshold split, recorded as ``split_seed``.
    oos_label : str, optional
        The gold label of out-of-scope rows; needed by the ``oos`` objective. When it is
        among ``classes`` its calibrated probability is the out-of-scope score, otherwise
        one minus the top-label confidence is.
    margin : bool, default False
        Also certify a top-1/top-2 margin gate (``target``, or ``precision_target`` for
        ``oos``, at ``delta``). Each gate keeps its own certificate; the rows passing
        both are a subset of each certified set, and that intersection carries no
        certificate of its own.
    per_class : bool, default False
        Per-class thresholds, small classes pooled (not with the ``cost`` objective).
    ask_target : float in (0, 1), default 0.8
        ``three-way``: precision certified for the ask-the-user zone.
    precision_target : float in (0, 1), default 0.95
        ``oos``: precision certified for routed rows.
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
        What the caller knows (dataset fingerprint, model, command...), plain JSON
        values. ``fit_policy`` adds ``split_seed``, ``calibrator_fraction``,
        ``calibrator_size``, ``threshold_size`` and ``objective_args``; a provenance
        that sets one of those to another value is refused.
    model_fingerprint : str, optional
        Fingerprint of the classifier that produced ``proba``
        (``classifier.fingerprint()``, or ``manifest.json``'s ``fingerprint`` of a saved
        one), recorded as the policy's ``model_fingerprint``. ``hybridroute calibrate``
        always records it. A policy without one works with a router built in memory, but
        ``hybridroute router build`` refuses it and a bundle holds only a bound policy
        (:func:`hybridroute.router.save_router` binds an unbound one to the classifier it
        saves with it); a policy bound to another model is refused wherever both sides
        carry a fingerprint.

    Returns
    -------
    Policy
        The built policy (not saved; call :meth:`Policy.save`).

    Raises
    ------
    ValueError
        An argument out of range or of the wrong shape, an unknown objective, calibrator
        or fallback, ``per_class`` with ``cost``, ``oos`` without ``oos_label``, or a
        ``model_fingerprint`` that is not 64 lowercase hex digits.
    DatasetError
        Gold labels outside ``classes`` (other than ``oos_label``), too few rows for the
        calibrator or the thresholds, no out-of-scope rows for ``oos``, or an evidence
        record missing a field.

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
    objective = _choice(objective, OBJECTIVES, "objective")
    calibrator = _choice(calibrator, CALIBRATORS, "calibrator")
    fallback = _choice(fallback, FALLBACKS, "fallback")
    if target is None:
        target = 0.8 if objective == "coverage" else 0.95
    target = check_fraction(target, "target")
    delta = check_fraction(delta, "delta")
    ask_target = check_fraction(ask_target, "ask_target")
    precision_target = check_fraction(precision_target, "precision_target")
    calibrator_fraction = check_fraction(calibrator_fraction, "calibrator_fraction", open_low=False)
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    seed = int(seed)
    for name, flag in (("margin", margin), ("per_class", per_class)):
        if not isinstance(flag, bool | np.bool_):
            raise ValueError(f"{name} must be True or False, got {flag!r}")
    if per_class and objective == "cost":
        raise ValueError(
            "per_class works with the precision, empirical, coverage, three-way and oos "
            "objectives, not cost"
        )
    cost_args = _costs(costs)
    if oos_label is not None and not isinstance(oos_label, str):
        raise ValueError(f"oos_label must be a string or None, got {oos_label!r}")
    if objective == "oos" and oos_label is None:
        raise ValueError("the oos objective needs oos_label, the gold label of out-of-scope rows")
    extra_provenance = _provenance(provenance)
    if model_fingerprint is not None and not is_sha256_hex(model_fingerprint):
        raise ValueError(
            "model_fingerprint must be a model fingerprint (64 lowercase hex digits, "
            f"classifier.fingerprint()), got {model_fingerprint!r}"
        )

    labels = [str(c) for c in classes]
    proba = _proba(proba, labels)
    gold = [str(g) for g in gold]
    if len(gold) != proba.shape[0]:
        raise ValueError(f"gold has {len(gold)} labels but proba has {proba.shape[0]} rows")
    index = {c: i for i, c in enumerate(labels)}
    unknown = sorted({g for g in gold if g not in index and g != oos_label})
    if unknown:
        raise DatasetError(
            f"calibration labels not in the model's label set: {', '.join(unknown[:5])}"
            + (f" (and {len(unknown) - 5} more)" if len(unknown) > 5 else ""),
            column="label",
        )
    is_oos = np.array([g == oos_label for g in gold], dtype=bool)
    # An out-of-scope row is right only when the model has the out-of-scope label as a
    # class and predicted it; otherwise (y = -1) any label is a misroute.
    y = np.array([index.get(g, -1) for g in gold], dtype=int)

    n = len(gold)
    order = np.random.default_rng(seed).permutation(n)
    n_cal = 0 if calibrator == "none" else round(calibrator_fraction * n)
    cal_idx, thr_idx = np.sort(order[:n_cal]), np.sort(order[n_cal:])
    if len(thr_idx) == 0:
        raise DatasetError(
            f"no calibration rows are left to fit thresholds ({n} rows, "
            f"calibrator_fraction {calibrator_fraction})",
            column="label",
        )

    fitted_cal: TemperatureScaling | IsotonicCalibration | None = None
    if calibrator != "none":
        in_scope = cal_idx[~is_oos[cal_idx]]
        if len(in_scope) < 2:
            raise DatasetError(
                f"too few in-scope calibration rows to fit a calibrator: {len(in_scope)} of "
                f"the {len(cal_idx)} rows calibrator_fraction {calibrator_fraction} gives "
                f"(of {n}); it needs at least 2 (or use calibrator 'none')",
                column="label",
            )
        est = TemperatureScaling() if calibrator == "temperature" else IsotonicCalibration()
        fitted_cal = est.fit(proba[in_scope], y[in_scope])
        p = fitted_cal.transform(proba[thr_idx])
    else:
        p = proba[thr_idx] / proba[thr_idx].sum(axis=1, keepdims=True)
    raw_top = proba[thr_idx].argmax(axis=1)
    rows = np.arange(len(thr_idx))
    conf = p[rows, raw_top]
    rest = p.copy()
    rest[rows, raw_top] = -np.inf
    margins = conf - rest.max(axis=1)
    correct = raw_top == y[thr_idx]
    pred_labels = [labels[i] for i in raw_top]

    oos_fit: OutOfScopeThreshold | None = None
    oos_score_kind = "one_minus_confidence"
    fitter: Any
    if objective == "precision":
        fitter = CertifiedPrecisionThreshold(target, delta)
    elif objective == "empirical":
        fitter = EmpiricalThreshold(target)
    elif objective == "coverage":
        fitter = CoverageThreshold(target, delta)
    elif objective == "cost":
        fitter = CostThreshold(
            cost_args["cost_misroute"], cost_args["cost_ask_user"], cost_args["cost_human_review"]
        )
    elif objective == "three-way":
        fitter = ThreeWayThreshold.certified(target, ask_target, delta)
    else:
        if not is_oos[thr_idx].any():
            raise DatasetError(
                f"no out-of-scope rows (gold label {oos_label!r}) among the {len(thr_idx)} "
                "rows that fit the thresholds; the oos objective needs some",
                column="label",
            )
        # With the out-of-scope label among the model's classes its probability is the
        # out-of-scope score; otherwise one minus the top-label confidence.
        if oos_label in index:
            oos_score_kind = "label_probability"
            oos_scores = p[:, index[oos_label]]
        else:
            oos_scores = 1.0 - conf
        oos_fit = OutOfScopeThreshold(recall=target, delta=delta / 2).fit(
            oos_scores, is_oos[thr_idx]
        )
        fitter = CertifiedPrecisionThreshold(precision_target, delta / 2)
    if oos_fit is not None:
        # jointly: precision is certified on the rows the out-of-scope gate lets through
        passed = ~oos_fit.predict(oos_scores)
        if not passed.any():
            passed[:] = True
        fitter.fit(conf[passed], correct[passed])
    else:
        fitter.fit(conf, correct)

    margin_fit = None
    if margin:
        margin_target = precision_target if objective == "oos" else target
        margin_fit = MarginThreshold(margin_target, delta).fit(margins, correct)
    per_class_fit = None
    if per_class:
        base = fitter.auto if isinstance(fitter, ThreeWayThreshold) else fitter
        params = base.get_params(deep=False)
        # A certifying base derives its smallest class from (target, delta).
        min_size = None if "target" in params and "delta" in params else _EMPIRICAL_MIN_CLASS_SIZE
        per_class_fit = PerClassThreshold(base, min_class_size=min_size).fit(
            conf, correct, pred_labels
        )
    evidence_fit = None
    if evidence_records is not None:
        evidence_fit = EvidenceThresholds().fit_records(_evidence_rows(evidence_records))

    objective_args: dict[str, Any] = {"objective": objective, "target": target, "delta": delta}
    if objective == "three-way":
        objective_args["ask_target"] = ask_target
    if objective == "oos":
        objective_args["precision_target"] = precision_target
    if objective == "cost":
        objective_args.update(cost_args)
    own = {
        "split_seed": seed,
        "calibrator_fraction": calibrator_fraction if fitted_cal is not None else 0.0,
        "calibrator_size": len(cal_idx),
        "threshold_size": len(thr_idx),
        "objective_args": objective_args,
    }
    clash = sorted(
        k for k in PROVENANCE_KEYS if k in extra_provenance and extra_provenance[k] != own[k]
    )
    if clash:
        raise ValueError(
            f"provenance sets {', '.join(clash)}, which fit_policy records itself "
            f"(as {', '.join(repr(own[k]) for k in clash)})"
        )
    return Policy.build(
        classes=labels,
        threshold=fitter,
        calibrator=fitted_cal,
        per_class=per_class_fit,
        margin=margin_fit,
        oos=oos_fit,
        oos_score=oos_score_kind,
        oos_label=oos_label if oos_score_kind == "label_probability" else None,
        evidence=evidence_fit,
        fallback=fallback,
        calibration_labels=[gold[i] for i in thr_idx],
        out_of_scope_label=oos_label,
        objective=objective,
        provenance={**extra_provenance, **own},
        model_fingerprint=model_fingerprint,
    )


# --------------------------------------------------------------------------- checks


def _choice(value: Any, allowed: tuple[str, ...], name: str) -> str:
    # str() turns a StrEnum member into its value (the CLI passes those).
    v = str(value) if isinstance(value, str) else value
    if v not in allowed:
        raise ValueError(f"{name} must be one of {', '.join(allowed)}; got {value!r}")
    return str(v)


def _costs(costs: Mapping[str, float | None] | None) -> dict[str, float | None]:
    """``cost_misroute`` / ``cost_ask_user`` / ``cost_human_review`` as plain floats."""
    defaults = CostThreshold().get_params(deep=False)
    given: Mapping[str, float | None] = {} if costs is None else costs
    if not isinstance(given, Mapping):
        raise ValueError(f"costs must be a mapping with keys {', '.join(COST_KEYS)}")
    unknown = sorted(set(given) - set(COST_KEYS))
    if unknown:
        raise ValueError(
            f"unknown cost {', '.join(map(repr, unknown))}; the costs are {', '.join(COST_KEYS)}"
        )
    out: dict[str, float | None] = {}
    for key in COST_KEYS:
        name = f"cost_{key}"
        value = given.get(key, defaults[name])
        if value is None and key == "ask_user":
            out[name] = None
        else:
            out[name] = check_nonnegative(value, f"costs[{key!r}]")
    return out


def _provenance(provenance: Mapping[str, Any] | None) -> dict[str, Any]:
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
