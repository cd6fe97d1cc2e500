"""Checks of a policy document on load: its structure, and that its fields agree.

:func:`validate_document` checks the shape of every field (raising
:class:`~hybridroute.exceptions.ArtifactError` naming the field); :func:`check_consistency`
refuses a document whose fields contradict each other: a threshold that is not the one its
recorded fit gives, a certificate whose recorded counts do not yield its Clopper–Pearson
bound, a probability outside [0, 1]. Kept apart from :mod:`._policy`, which builds and
applies policies.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
from scipy import stats

from .._integrity import is_sha256_hex
from ..exceptions import ArtifactError
from ._base import ASK_USER, HUMAN_REVIEW
from ._bounds import clopper_pearson_lower, precision_p_value, required_calibration_size
from ._precision_fallback import fallback_starts

__all__ = [
    "POLICY_FORMAT",
    "POLICY_FORMAT_VERSION",
    "POLICY_MAX_BYTES",
    "check_consistency",
    "validate_document",
]

POLICY_FORMAT = "hybridroute.policy"
#: Bumped whenever a reader of the previous version would misread a new document. Version 2
#: added ``model_fingerprint`` and the ``signature``, which a version-1 reader would ignore.
POLICY_FORMAT_VERSION = 2
#: Largest policy file read (isotonic knots and per-class fits make a policy grow with
#: the calibration set; this is far beyond any real one).
POLICY_MAX_BYTES = 64 * 1024 * 1024

OOS_SCORES = ("one_minus_confidence", "label_probability", "external")
FALLBACKS = (ASK_USER, HUMAN_REVIEW)


# --------------------------------------------------------------------------- validation


def _need(cond: bool, field: str, what: str, path: str | None) -> None:
    if not cond:
        raise ArtifactError(f"policy field {field!r}: {what}", path=path)


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _is_thr(v: Any) -> bool:
    return v is None or _is_num(v)


def validate_document(doc: dict[str, Any], path: str | None) -> None:
    """Structural checks of a policy document (raises ArtifactError naming the field)."""
    for key in (
        "format",
        "format_version",
        "classes",
        "calibrator",
        "objective",
        "thresholds",
        "fits",
        "evidence",
        "guarantee",
        "expected",
        "calibration_data",
        "provenance",
        "model_fingerprint",
    ):
        _need(key in doc, key, "missing", path)
    _need(doc["format"] == POLICY_FORMAT, "format", f"must be {POLICY_FORMAT!r}", path)
    _need(
        doc["format_version"] == POLICY_FORMAT_VERSION,
        "format_version",
        f"must be {POLICY_FORMAT_VERSION}",
        path,
    )
    classes = doc["classes"]
    _need(
        isinstance(classes, list)
        and len(classes) >= 1
        and all(isinstance(c, str) for c in classes),
        "classes",
        "must be a non-empty list of labels",
        path,
    )
    _need(len(set(classes)) == len(classes), "classes", "labels repeat", path)
    cal = doc["calibrator"]
    _need(isinstance(cal, dict) and "method" in cal, "calibrator", "must name a method", path)
    method = cal["method"]
    if method == "temperature":
        _need(
            _is_num(cal.get("temperature")) and cal["temperature"] > 0,
            "calibrator.temperature",
            "must be a positive number",
            path,
        )
    elif method == "isotonic":
        x, y = cal.get("x"), cal.get("y")
        _need(
            isinstance(x, list) and isinstance(y, list) and len(x) == len(y) >= 1,
            "calibrator.x/y",
            "must be lists of equal, non-zero length",
            path,
        )
        _need(all(_is_num(v) for v in x + y), "calibrator.x/y", "must hold numbers", path)
        _need(
            all(a <= b for a, b in itertools.pairwise(x)), "calibrator.x", "must not decrease", path
        )
    else:
        _need(method == "none", "calibrator.method", "must be none, temperature or isotonic", path)
    t = doc["thresholds"]
    _need(isinstance(t, dict), "thresholds", "must be an object", path)
    for key in ("auto", "ask", "per_class", "per_class_default", "margin", "oos", "fallback"):
        _need(key in t, f"thresholds.{key}", "missing", path)
    for key in ("auto", "ask", "margin", "per_class_default"):
        _need(_is_thr(t[key]), f"thresholds.{key}", "must be a number or null", path)
    if t["per_class"] is not None:
        _need(isinstance(t["per_class"], dict), "thresholds.per_class", "must be an object", path)
        for k, v in t["per_class"].items():
            _need(_is_thr(v), f"thresholds.per_class.{k}", "must be a number or null", path)
    if t["oos"] is not None:
        o = t["oos"]
        _need(isinstance(o, dict), "thresholds.oos", "must be an object", path)
        _need(
            o.get("score") in OOS_SCORES,
            "thresholds.oos.score",
            f"must be one of {OOS_SCORES}",
            path,
        )
        _need(_is_thr(o.get("cutoff")), "thresholds.oos.cutoff", "must be a number or null", path)
        if o.get("score") == "label_probability":
            _need(o.get("label") in classes, "thresholds.oos.label", "must be one of classes", path)
    _need(t["fallback"] in FALLBACKS, "thresholds.fallback", f"must be one of {FALLBACKS}", path)
    g = doc["guarantee"]
    _need(
        isinstance(g, dict) and isinstance(g.get("certified"), bool),
        "guarantee.certified",
        "must be true or false",
        path,
    )
    ev = doc.get("evidence")
    if ev is not None:
        _need(
            isinstance(ev, dict) and isinstance(ev.get("sources"), dict),
            "evidence.sources",
            "must be an object",
            path,
        )
        for k, v in ev["sources"].items():
            _need(
                isinstance(v, dict) and _is_thr(v.get("threshold")),
                f"evidence.sources.{k}.threshold",
                "must be a number or null",
                path,
            )
    _need(isinstance(doc["provenance"], dict), "provenance", "must be an object", path)
    _need(isinstance(doc["calibration_data"], dict), "calibration_data", "must be an object", path)
    obj = doc["objective"]
    _need(
        isinstance(obj, dict) and isinstance(obj.get("fit"), dict),
        "objective.fit",
        "must be an object (the main threshold's fit record)",
        path,
    )
    fits = doc["fits"]
    _need(
        isinstance(fits, dict)
        and set(fits) == {"per_class", "margin"}
        and all(v is None or isinstance(v, dict) for v in fits.values()),
        "fits",
        "must be an object with 'per_class' and 'margin' (each a fit record or null)",
        path,
    )
    _need(isinstance(doc["expected"], dict), "expected", "must be an object", path)
    fp = doc["model_fingerprint"]
    _need(
        fp is None or is_sha256_hex(fp),
        "model_fingerprint",
        "must be null or a model fingerprint (64 lowercase hex digits)",
        path,
    )


# --------------------------------------------------------------------------- consistency

# An out-of-scope cut-off certified on the negated score sits one step above a score of 1.
_ONE_UP = math.nextafter(1.0, 2.0)
# Tolerances: recorded floats come from the very computations re-run here, so they agree
# to the last bit on one machine; the slack only absorbs scipy versions.
_RATIO_TOL = 1e-12
_BOUND_TOL = 1e-9
# The name fit_policy writes for each objective -> the methods of the fit it may record
# (a precision objective fitted before round two records certified_precision).
_PRECISION_METHODS = ("certified_precision", "fallback_precision", "label_free_start")
_OBJECTIVE_METHODS = {
    "precision": _PRECISION_METHODS,
    "empirical": ("empirical",),
    "coverage": ("coverage",),
    "cost": ("cost",),
    "three-way": ("three_way",),
    "oos": _PRECISION_METHODS,
}
_CERTIFYING = ("certified_precision", "certified_margin")
# Fitters whose certificate is reached along a sequence with recorded starts and levels.
_SEQUENCES = ("fallback_precision", "label_free_start")
_LEVEL_TOL = 1e-12


class _Contradiction(Exception):
    def __init__(self, field: str, message: str) -> None:
        self.field = field
        self.message = message


def _ensure(cond: bool, field: str, message: str) -> None:
    if not cond:
        raise _Contradiction(field, message)


def check_consistency(
    doc: Any, path: str | None, *, error: type[Exception] = ArtifactError
) -> None:
    """Refuse a policy whose fields contradict each other (see the module notes).

    Raises ``error`` (an :class:`ArtifactError` naming ``path`` on load, a ``ValueError``
    when building or saving) naming the field.
    """
    try:
        _consistency(doc)
    except _Contradiction as exc:
        message = f"policy field {exc.field!r}: {exc.message}"
        if error is ArtifactError:
            raise ArtifactError(message, path=path) from None
        raise error(message) from None


def _thr(v: Any) -> float:
    """A recorded threshold as a number (``None`` never passes: +inf)."""
    return math.inf if v is None else float(v)


def _probability(v: Any, field: str, upper: float = 1.0) -> None:
    _ensure(
        v is None or (_is_num(v) and 0.0 <= v <= upper),
        field,
        f"{v!r} is not a probability in [0, 1]",
    )


def _same(a: Any, b: Any, field: str, source: str) -> None:
    _ensure(a == b, field, f"{a!r} is not what {source} records ({b!r})")


def _count(v: Any, field: str) -> int:
    _ensure(
        isinstance(v, int) and not isinstance(v, bool) and v >= 0,
        field,
        f"{v!r} is not a count",
    )
    return int(v)


def _accepted(fit: Any, field: str) -> tuple[int, int, int]:
    """(n, accepted, errors) from a fit's calibration size, coverage and precision."""
    n = _count(fit.get("calibration_size"), f"{field}.calibration_size")
    cov = fit.get("coverage")
    _ensure(_is_num(cov) and 0.0 <= cov <= 1.0, f"{field}.coverage", f"{cov!r} is not a share")
    accepted = round(cov * n)
    _ensure(
        (n > 0 and abs(accepted / n - cov) <= _RATIO_TOL) or (n == 0 and cov == 0.0),
        f"{field}.coverage",
        f"{cov!r} is not a share of {n} calibration items",
    )
    prec = fit.get("precision")
    if accepted == 0:
        _ensure(prec is None, f"{field}.precision", f"{prec!r} but no item is accepted")
        return n, 0, 0
    _ensure(_is_num(prec) and 0.0 <= prec <= 1.0, f"{field}.precision", f"{prec!r} is not a share")
    errors = round((1.0 - prec) * accepted)
    _ensure(
        abs((1.0 - errors / accepted) - prec) <= _RATIO_TOL,
        f"{field}.precision",
        f"{prec!r} is not a share of the {accepted} accepted items",
    )
    return n, accepted, errors


def _check_fit(fit: Any, field: str) -> None:
    """Check one fit record (a threshold fitter's ``summary()``) against its own arithmetic."""
    _ensure(isinstance(fit, dict), field, "must be a fit record (an object)")
    method = fit.get("method")
    certified = fit.get("certified")
    _ensure(isinstance(certified, bool), f"{field}.certified", "must be true or false")
    if method in _CERTIFYING:
        _check_certified(fit, field)
    elif method in _SEQUENCES:
        _check_sequence(fit, field)
    elif method == "empirical":
        _ensure(not certified, f"{field}.certified", "an empirical threshold certifies nothing")
        target = fit.get("target")
        _same(fit.get("params", {}).get("target"), target, f"{field}.params.target", field)
        _, accepted, errors = _accepted(fit, field)
        _ensure(
            (fit.get("threshold") is None) == (accepted == 0),
            f"{field}.threshold",
            "must be null exactly when nothing is accepted",
        )
        if accepted:
            _ensure(
                1.0 - errors / accepted >= target,
                f"{field}.precision",
                f"{fit.get('precision')!r} is below the target {target!r} the threshold was "
                "chosen to meet",
            )
    elif method == "coverage":
        _check_coverage(fit, field)
    elif method == "cost":
        _ensure(not certified, f"{field}.certified", "a cost threshold certifies nothing")
        _accepted(fit, field)
        shares = fit.get("shares")
        _ensure(
            isinstance(shares, dict)
            and set(shares) == {"auto_route", "ask_user", "human_review"}
            and all(_is_num(v) and 0 <= v <= 1 for v in shares.values())
            and abs(sum(shares.values()) - 1.0) <= 1e-9,
            f"{field}.shares",
            "must be the three zone shares, summing to 1",
        )
        _same(fit.get("coverage"), shares["auto_route"], f"{field}.coverage", f"{field}.shares")
        params = fit.get("params") or {}
        if params.get("cost_ask_user") is None:
            _ensure(
                fit.get("ask_threshold") is None,
                f"{field}.ask_threshold",
                "must be null without an ask-the-user cost",
            )
        else:
            _ensure(
                _thr(fit.get("ask_threshold")) <= _thr(fit.get("threshold")),
                f"{field}.ask_threshold",
                "must not be above the auto-route threshold",
            )
    elif method == "three_way":
        _check_fit(fit.get("auto"), f"{field}.auto")
        _check_fit(fit.get("ask"), f"{field}.ask")
        auto, ask = fit["auto"], fit["ask"]
        _same(fit.get("threshold"), auto.get("threshold"), f"{field}.threshold", f"{field}.auto")
        low = min(_thr(ask.get("threshold")), _thr(auto.get("threshold")))
        _same(
            _thr(fit.get("ask_threshold")),
            low,
            f"{field}.ask_threshold",
            f"the lower of {field}.ask and {field}.auto",
        )
        for key in ("certified", "bound", "precision"):
            _same(fit.get(key), auto.get(key), f"{field}.{key}", f"{field}.auto")
        _ensure(
            _is_num(fit.get("coverage"))
            and abs(fit["coverage"] - auto.get("coverage", math.nan)) <= _RATIO_TOL,
            f"{field}.coverage",
            f"{fit.get('coverage')!r} is not what {field}.auto records",
        )
    elif method == "per_class":
        _check_per_class(fit, field)
    elif method == "out_of_scope":
        _check_oos_fit(fit, field)
    else:
        _ensure(
            not certified,
            f"{field}.certified",
            f"a certificate from method {method!r} cannot be checked; only the built-in "
            "fitters' certificates are accepted",
        )


def _check_certified(fit: Any, field: str) -> None:
    """A certified-precision (or margin) fit: the bound and the certificate from the counts."""
    target, delta, params = _target_delta(fit, field)
    n_starts = params.get("n_starts")
    _ensure(
        isinstance(n_starts, int) and not isinstance(n_starts, bool) and n_starts >= 1,
        f"{field}.params.n_starts",
        f"{n_starts!r} is not a positive integer",
    )
    level = delta / n_starts
    certified = fit["certified"]
    threshold = fit.get("threshold")
    _, accepted, errors = _accepted(fit, field)
    if not certified:
        _no_certificate(fit, field, accepted, ("threshold", "bound"))
        return
    _ensure(threshold is not None, f"{field}.threshold", "a certified threshold is a number")
    _ensure(accepted > 0, f"{field}.coverage", "a certified threshold accepts some items")
    _certificate(fit, field, target, level, accepted, errors)


def _no_certificate(fit: Any, field: str, accepted: int, empty: tuple[str, ...]) -> None:
    """An uncertified fit routes nothing and records no bound."""
    _ensure(accepted == 0, f"{field}.coverage", "must be 0 when not certified")
    for key in empty:
        _ensure(fit.get(key) is None, f"{field}.{key}", "must be null when not certified")


def _certificate(
    fit: Any, field: str, target: float, level: float, accepted: int, errors: int
) -> None:
    """The recorded counts certify ``target`` at ``level`` and give the recorded bound."""
    bound = fit.get("bound")
    p_value = float(precision_p_value(errors, accepted, target))
    _ensure(
        p_value <= level,
        f"{field}.certified",
        f"true, but {errors} errors among {accepted} accepted items do not certify precision "
        f"{target:g} at level {level:g} (p-value {p_value:.3g})",
    )
    expected = float(clopper_pearson_lower(accepted - errors, accepted, level))
    _ensure(
        _is_num(bound) and abs(bound - expected) <= _BOUND_TOL,
        f"{field}.bound",
        f"{bound!r} is not the Clopper-Pearson bound of {accepted - errors} correct among "
        f"{accepted} at level {level:g} ({expected!r})",
    )
    _ensure(
        bound >= target - _BOUND_TOL,
        f"{field}.bound",
        f"{bound!r} is below the target {target!r}, so the fit certifies nothing",
    )


def _target_delta(fit: Any, field: str) -> tuple[float, float, Any]:
    params = fit.get("params")
    _ensure(isinstance(params, dict), f"{field}.params", "must be an object")
    target, delta = fit.get("target"), fit.get("delta")
    for key, value in (("target", target), ("delta", delta)):
        _ensure(
            _is_num(value) and 0.0 < value < 1.0, f"{field}.{key}", f"{value!r} is not in (0, 1)"
        )
        _same(params.get(key), value, f"{field}.params.{key}", field)
    return float(target), float(delta), params


def _check_sequence(fit: Any, field: str) -> None:
    """A label-free-start or fallback fit: starts, weights and level from the record.

    The starts are recomputed from ``(target, delta, calibration_size)`` and the recorded
    settings (no labels enter them); the level must be one the procedure can reach at the
    threshold's accepted count -- ``delta`` times the weights of a run of consecutive starts
    ending at the last start at or below that count -- and the counts must certify there.
    """
    target, delta, params = _target_delta(fit, field)
    n, accepted, errors = _accepted(fit, field)
    weights, counts = fit.get("weights"), fit.get("start_counts")
    _ensure(
        isinstance(weights, list) and len(weights) >= 1 and all(_is_num(w) for w in weights),
        f"{field}.weights",
        "must be a non-empty list of numbers",
    )
    _ensure(
        isinstance(counts, list) and all(isinstance(c, int) for c in counts),
        f"{field}.start_counts",
        "must be a list of counts",
    )
    if fit["method"] == "label_free_start":
        want_w, want_c = [1.0], [required_calibration_size(target, delta)]
    else:
        n_starts = params.get("n_starts")
        _ensure(
            n_starts == "auto"
            or (isinstance(n_starts, int) and not isinstance(n_starts, bool) and n_starts >= 1),
            f"{field}.params.n_starts",
            f"{n_starts!r} is neither a positive integer nor 'auto'",
        )
        # weights=None is recorded in params (equal weights); custom weights are not plain
        # values, so the record's own list stands for them, checked to be a split of delta
        custom = None if "weights" in params and params["weights"] is None else weights
        if custom is not None:
            _ensure(
                all(w > 0 for w in weights) and abs(math.fsum(weights) - 1.0) <= _LEVEL_TOL,
                f"{field}.weights",
                f"{weights!r} are not positive shares of delta summing to 1",
            )
        try:
            want_w, want_c = fallback_starts(target, delta, n, n_starts, custom)
        except ValueError as exc:
            raise _Contradiction(f"{field}.weights", str(exc)) from None
    _ensure(
        len(weights) == len(want_w)
        and all(abs(a - b) <= _LEVEL_TOL for a, b in zip(weights, want_w, strict=True)),
        f"{field}.weights",
        f"{weights!r} are not the weights its settings give ({want_w!r})",
    )
    _same(counts, want_c, f"{field}.start_counts", f"{field}'s settings")
    certified = fit["certified"]
    threshold, level = fit.get("threshold"), fit.get("level")
    if not certified:
        _no_certificate(fit, field, accepted, ("threshold", "bound", "level"))
        return
    _ensure(threshold is not None, f"{field}.threshold", "a certified threshold is a number")
    _ensure(
        accepted >= counts[0],
        f"{field}.coverage",
        f"{accepted} accepted items are fewer than the first start's {counts[0]}",
    )
    last = sum(1 for c in counts if c <= accepted) - 1
    reachable = []
    for first in range(last + 1):
        lv = 0.0
        for w in weights[first : last + 1]:
            lv += w * delta
        reachable.append(lv)
    _ensure(
        _is_num(level) and any(abs(level - lv) <= _LEVEL_TOL * delta for lv in reachable),
        f"{field}.level",
        f"{level!r} is not a level the sequence reaches at {accepted} accepted items "
        f"({', '.join(f'{lv:.6g}' for lv in reachable)})",
    )
    _certificate(fit, field, target, level, accepted, errors)


def _check_coverage(fit: Any, field: str) -> None:
    """A coverage fit: the accepted count meets the quantile (or its guarantee)."""
    _ensure(
        not fit["certified"], f"{field}.certified", "a coverage threshold certifies no precision"
    )
    params = fit.get("params") or {}
    cov, delta = fit.get("target_coverage"), fit.get("delta")
    _ensure(
        _is_num(cov) and 0.0 < cov <= 1.0,
        f"{field}.target_coverage",
        f"{cov!r} is not in (0, 1]",
    )
    _same(params.get("coverage"), cov, f"{field}.params.coverage", field)
    _same(params.get("delta"), delta, f"{field}.params.delta", field)
    n, accepted, errors = _accepted(fit, field)
    _ensure(fit.get("threshold") is not None, f"{field}.threshold", "must be a number")
    if delta is None:
        need = max(1, math.ceil(cov * n - 1e-9))
        _ensure(fit.get("bound") is None, f"{field}.bound", "must be null without delta")
    else:
        _ensure(
            _is_num(delta) and 0.0 < delta < 1.0, f"{field}.delta", f"{delta!r} is not in (0, 1)"
        )
        ks = np.arange(1, n + 1)
        ok = np.flatnonzero(stats.beta.sf(cov, ks, n - ks + 1) >= 1 - delta)
        need = int(ok[0]) + 1 if ok.size else n
        expected = float(clopper_pearson_lower(accepted - errors, accepted, delta))
        bound = fit.get("bound")
        _ensure(
            _is_num(bound) and abs(bound - expected) <= _BOUND_TOL,
            f"{field}.bound",
            f"{bound!r} is not the Clopper-Pearson bound of its counts ({expected!r})",
        )
    _ensure(
        accepted >= need,
        f"{field}.coverage",
        f"{accepted} accepted of {n} falls short of the {need} the coverage target {cov:g} needs",
    )


def _check_per_class(fit: Any, field: str) -> None:
    groups = fit.get("groups")
    _ensure(
        isinstance(groups, dict) and bool(groups), f"{field}.groups", "must be a non-empty object"
    )
    for name, group in groups.items():
        _check_fit(group, f"{field}.groups.{name}")
        _same(
            group.get("method"), fit.get("base"), f"{field}.groups.{name}.method", f"{field}.base"
        )
    thresholds = fit.get("thresholds")
    pooled = fit.get("pooled_classes")
    _ensure(isinstance(thresholds, dict), f"{field}.thresholds", "must be an object")
    _ensure(
        isinstance(pooled, list) and all(isinstance(c, str) for c in pooled),
        f"{field}.pooled_classes",
        "must be a list of labels",
    )
    pool = groups.get("__pooled__")
    _same(
        fit.get("pool_threshold"),
        None if pool is None else pool.get("threshold"),
        f"{field}.pool_threshold",
        f"{field}.groups.__pooled__",
    )
    _ensure((pool is None) == (not pooled), f"{field}.pooled_classes", "do not match the groups")
    for label, value in thresholds.items():
        source = "__pooled__" if label in pooled else label
        _ensure(source in groups, f"{field}.thresholds.{label}", "has no fitted group")
        _same(
            value,
            groups[source].get("threshold"),
            f"{field}.thresholds.{label}",
            f"{field}.groups.{source}",
        )
    _same(
        fit["certified"],
        all(bool(g.get("certified")) for g in groups.values()),
        f"{field}.certified",
        "its groups",
    )


def _check_oos_fit(fit: Any, field: str) -> None:
    cutoff = fit.get("cutoff")
    _ensure(_is_thr(cutoff), f"{field}.cutoff", "must be a number or null")
    _same(
        fit["certified"],
        cutoff is not None,
        f"{field}.certified",
        f"{field}.cutoff (null: not certified)",
    )
    delta = fit.get("delta")
    _ensure(_is_num(delta) and 0.0 < delta < 1.0, f"{field}.delta", f"{delta!r} is not in (0, 1)")
    recall, precision = fit.get("recall_target"), fit.get("precision_target")
    _ensure(
        recall is not None or precision is not None,
        f"{field}.recall_target",
        "a cut-off fits a recall target, a precision target or both",
    )
    level = delta / ((recall is not None) + (precision is not None))
    m = _count(fit.get("out_of_scope_items"), f"{field}.out_of_scope_items")
    if recall is not None and fit["certified"]:
        _ensure(_is_num(recall) and 0.0 < recall < 1.0, f"{field}.recall_target", "not in (0, 1)")
        # the most lenient order statistic (the lowest score) certifies recall r with m
        # items only if r ** m <= level
        _ensure(
            m >= 1 and recall**m <= level,
            f"{field}.certified",
            f"true, but {m} out-of-scope items cannot certify recall {recall:g} at level {level:g}",
        )


def _consistency(doc: Any) -> None:
    t = doc["thresholds"]
    fit = doc["objective"]["fit"]
    # probability thresholds: calibrated confidences lie in [0, 1]; a margin (top-1 minus
    # top-2 of calibrated probabilities) in [-1, 1] (isotonic rescaling can put the raw top
    # label below another)
    for key in ("auto", "ask", "per_class_default"):
        _probability(t[key], f"thresholds.{key}")
    _ensure(
        t["margin"] is None or -1.0 <= t["margin"] <= 1.0,
        "thresholds.margin",
        f"{t['margin']!r} is not a margin of probabilities in [-1, 1]",
    )
    for label, value in (t["per_class"] or {}).items():
        _probability(value, f"thresholds.per_class.{label}")
    cal = doc["calibrator"]
    if cal["method"] == "isotonic":
        for axis in ("x", "y"):
            for v in cal[axis]:
                _probability(v, f"calibrator.{axis}")
        _ensure(
            all(a <= b for a, b in itertools.pairwise(cal["y"])),
            "calibrator.y",
            "must not decrease (an isotonic map)",
        )
    # the main fit and what is derived from it
    _check_fit(fit, "objective.fit")
    name = doc["objective"].get("name")
    if name in _OBJECTIVE_METHODS:
        _ensure(
            fit.get("method") in _OBJECTIVE_METHODS[name],
            "objective.fit.method",
            f"{fit.get('method')!r} is not a method objective {name!r} fits with "
            f"({', '.join(_OBJECTIVE_METHODS[name])})",
        )
    if name == "oos":
        _ensure(
            t["oos"] is not None, "thresholds.oos", "the oos objective fits an out-of-scope cut-off"
        )
    _same(t["auto"], fit.get("threshold"), "thresholds.auto", "objective.fit.threshold")
    _same(t["ask"], fit.get("ask_threshold"), "thresholds.ask", "objective.fit.ask_threshold")
    src = fit.get("auto", fit)
    guarantee = {
        "certified": bool(fit.get("certified", False)),
        "target": src.get("target"),
        "delta": src.get("delta"),
        "bound": src.get("bound"),
        "reason": src.get("reason"),
        "required_calibration_size": src.get("required_calibration_size"),
    }
    g = doc["guarantee"]
    _ensure(set(g) == set(guarantee), "guarantee", f"must hold exactly {sorted(guarantee)}")
    for key, value in guarantee.items():
        _same(g[key], value, f"guarantee.{key}", "objective.fit")
    expected = {"coverage": fit.get("coverage"), "precision": fit.get("precision")}
    _same(doc["expected"], expected, "expected", "objective.fit (coverage, precision)")
    # the further gates
    per_class = doc["fits"]["per_class"]
    if per_class is None:
        _ensure(t["per_class"] is None, "thresholds.per_class", "has no fit in fits.per_class")
        _ensure(t["per_class_default"] is None, "thresholds.per_class_default", "has no fit")
    else:
        _check_fit(per_class, "fits.per_class")
        _same(t["per_class"], per_class.get("thresholds"), "thresholds.per_class", "fits.per_class")
        _same(
            t["per_class_default"],
            per_class.get("pool_threshold"),
            "thresholds.per_class_default",
            "fits.per_class.pool_threshold",
        )
    margin = doc["fits"]["margin"]
    if margin is None:
        _ensure(t["margin"] is None, "thresholds.margin", "has no fit in fits.margin")
    else:
        _check_fit(margin, "fits.margin")
        _same(t["margin"], margin.get("threshold"), "thresholds.margin", "fits.margin.threshold")
    oos = t["oos"]
    if oos is not None:
        _check_fit(oos.get("fit"), "thresholds.oos.fit")
        _same(
            oos.get("cutoff"),
            oos["fit"].get("cutoff"),
            "thresholds.oos.cutoff",
            "thresholds.oos.fit",
        )
        if oos["score"] != "external":
            _probability(oos["cutoff"], "thresholds.oos.cutoff", upper=_ONE_UP)
    ev = doc["evidence"]
    if ev is not None:
        for source, entry in ev["sources"].items():
            _check_fit(entry.get("fit"), f"evidence.sources.{source}.fit")
            _same(
                entry["threshold"],
                entry["fit"].get("threshold"),
                f"evidence.sources.{source}.threshold",
                f"evidence.sources.{source}.fit",
            )
    # the recorded label mix
    data = doc["calibration_data"]
    counts = data.get("label_counts")
    if counts is not None:
        _ensure(
            isinstance(counts, dict)
            and all(
                isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in counts.values()
            ),
            "calibration_data.label_counts",
            "must map labels to counts",
        )
        n = sum(counts.values())
        _same(data.get("size"), n, "calibration_data.size", "calibration_data.label_counts")
        label = data.get("out_of_scope_label")
        share = counts.get(label, 0) / n if label is not None and n else 0.0
        _ensure(
            _is_num(data.get("out_of_scope_share"))
            and abs(data["out_of_scope_share"] - share) <= _RATIO_TOL,
            "calibration_data.out_of_scope_share",
            f"{data.get('out_of_scope_share')!r} is not the share of {label!r} in label_counts",
        )
