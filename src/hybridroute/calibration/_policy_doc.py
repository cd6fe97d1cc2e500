"""A policy's document: written from its fitted parts, and read back into them.

The parts (:class:`Chain`) are what decides; the document is how they are written. Each
part writes its own record (``to_state``) and reads it back (``from_state``, which checks
the record's own arithmetic). Around them the document holds the envelope -- format,
classes, model binding, provenance, calibration data -- and the gate values a reader sees
first: ``thresholds`` (``auto``, ``ask``, ``per_class``, ``per_class_default``, ``margin``,
the out-of-scope ``cutoff``), each source's evidence ``threshold``, ``guarantee`` and
``expected``. Those are copies of fields of the records; :data:`copies` lists them, and the
one table serves writing them, checking them on load, and honouring an edit made in memory.

Reading comes in two strengths. :func:`read_parts` with ``strict=False`` (``Policy(doc)``,
for documents edited in memory) checks the fields' shapes and each record, and takes the
gate values as written, copied into the records. With ``strict=True`` (loading a file,
saving a policy built from a document) the gate values must also be what their records
give, in range, and the envelope must agree with itself.
"""

from __future__ import annotations

import copy
import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._integrity import is_sha256_hex
from .._version import __version__
from ..exceptions import ArtifactError
from . import _record as rec
from ._base import FALLBACKS
from ._evidence import EvidenceThresholds
from .calibrators import IsotonicCalibration, TemperatureScaling, read_calibrator
from .techniques import (
    OBJECTIVES,
    TECHNIQUES,
    OutOfScopeThreshold,
    PerClassThreshold,
    Technique,
    fits_objective,
    read_technique,
    unregistered,
)

__all__ = [
    "POLICY_FORMAT",
    "POLICY_FORMAT_VERSION",
    "POLICY_MAX_BYTES",
    "Chain",
    "OutOfScopeGate",
    "check_built",
    "read_parts",
    "write_document",
]

POLICY_FORMAT = "hybridroute.policy"
#: Version 3 is written from the fitted parts (each technique's ``to_state``) and read back
#: by each technique's ``from_state``; its fields are version 2's, so both are read.
#: Version 2 added ``model_fingerprint`` and the ``signature``.
POLICY_FORMAT_VERSION = 3
READ_VERSIONS = (2, 3)
#: Largest policy file read (isotonic knots and per-class fits make a policy grow with
#: the calibration set; this is far beyond any real one).
POLICY_MAX_BYTES = 64 * 1024 * 1024

OOS_SCORES = ("one_minus_confidence", "label_probability", "external")
# An out-of-scope cut-off certified on the negated score sits one step above a score of 1.
_ONE_UP = math.nextafter(1.0, 2.0)

Calibrator = TemperatureScaling | IsotonicCalibration


@dataclass(frozen=True, slots=True)
class OutOfScopeGate:
    """The out-of-scope part: its fitted cut-off and the score it is compared with.

    ``score`` is ``one_minus_confidence``, ``label_probability`` (the calibrated
    probability of ``label``) or ``external`` (a score the caller passes).
    """

    fit: OutOfScopeThreshold
    score: str = "one_minus_confidence"
    label: str | None = None


@dataclass(frozen=True, slots=True)
class Chain:
    """A policy's fitted parts, in the order an item meets them.

    ``calibrator`` rescales the scores; ``out_of_scope`` may flag the item; ``route`` (or
    ``per_class``, whose threshold replaces the route's) decides whether it is
    auto-routed, with the route's ask-the-user zone or ``fallback`` below; ``margin`` may
    then hold a close call back; ``evidence`` checks evidence completeness on request.
    """

    calibrator: Calibrator | None
    out_of_scope: OutOfScopeGate | None
    route: Technique
    per_class: PerClassThreshold | None
    margin: Technique | None
    fallback: str
    evidence: EvidenceThresholds | None


# --------------------------------------------------------------------------- writing


def write_document(
    chain: Chain,
    *,
    classes: Sequence[str],
    objective: str | None,
    calibration_data: Mapping[str, Any],
    provenance: Mapping[str, Any],
    model_fingerprint: str | None,
) -> dict[str, Any]:
    """The document of fitted parts (plain JSON values; no seal)."""
    route = chain.route.to_state()
    oos = chain.out_of_scope
    doc: dict[str, Any] = {
        "format": POLICY_FORMAT,
        "format_version": POLICY_FORMAT_VERSION,
        "library_version": __version__,
        "classes": [str(c) for c in classes],
        "calibrator": {"method": "none"}
        if chain.calibrator is None
        else chain.calibrator.to_state(),
        "objective": {"name": objective or route.get("method"), "fit": route},
        "thresholds": {
            "oos": None
            if oos is None
            else {"score": oos.score, "label": oos.label, "fit": oos.fit.to_state()},
            "fallback": chain.fallback,
        },
        "fits": {
            "per_class": None if chain.per_class is None else chain.per_class.to_state(),
            "margin": None if chain.margin is None else chain.margin.to_state(),
        },
        "evidence": None if chain.evidence is None else chain.evidence.to_state(),
        "calibration_data": dict(calibration_data),
        "provenance": dict(provenance),
        "model_fingerprint": model_fingerprint,
    }
    for view, source, key in copies(doc):
        _put(doc, view, _copy_of(doc, source, key))
    doc["guarantee"], doc["expected"] = _summary(route)
    return plain(doc)


def calibration_data(
    size: Any, labels: Iterable[str] | None, oos_label: str | None
) -> dict[str, Any]:
    """What a policy records of its calibration rows: their number and label mix."""
    data: dict[str, Any] = {"size": size}
    if labels is not None:
        counts = Counter(str(x) for x in labels)
        n = sum(counts.values())
        data.update(
            size=n,
            label_counts=dict(sorted(counts.items())),
            out_of_scope_label=oos_label,
            out_of_scope_share=counts.get(oos_label, 0) / n if oos_label is not None and n else 0.0,
        )
    return data


def plain(obj: Any, where: str = "policy") -> Any:
    """Plain JSON types only: numpy scalars unwrapped, tuples to lists, no NaN or inf."""
    if obj is None or isinstance(obj, (bool, str)):
        return obj
    if isinstance(obj, (int, np.integer)) and not isinstance(obj, bool):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        v = float(obj)
        if not math.isfinite(v):
            raise ValueError(f"{where}: non-finite number {v!r} cannot go into a policy")
        return v
    if isinstance(obj, np.bool_):
        return bool(obj)
    if isinstance(obj, Mapping):
        return {str(k): plain(v, f"{where}.{k}") for k, v in obj.items()}
    if isinstance(obj, (list, tuple, np.ndarray)):
        return [plain(v, f"{where}[]") for v in list(obj)]
    raise ValueError(f"{where}: value of type {type(obj).__name__} cannot go into a policy")


def copies(doc: Mapping[str, Any]) -> list[tuple[tuple[str, ...], tuple[str, ...], str]]:
    """Every gate value a document copies from a record: ``(where, record, key)``."""
    out: list[tuple[tuple[str, ...], tuple[str, ...], str]] = [
        (("thresholds", "auto"), ("objective", "fit"), "threshold"),
        (("thresholds", "ask"), ("objective", "fit"), "ask_threshold"),
        (("thresholds", "per_class"), ("fits", "per_class"), "thresholds"),
        (("thresholds", "per_class_default"), ("fits", "per_class"), "pool_threshold"),
        (("thresholds", "margin"), ("fits", "margin"), "threshold"),
    ]
    if doc["thresholds"].get("oos") is not None:
        out.append((("thresholds", "oos", "cutoff"), ("thresholds", "oos", "fit"), "cutoff"))
    for name in (doc.get("evidence") or {}).get("sources", {}):
        where = ("evidence", "sources", name)
        out.append(((*where, "threshold"), (*where, "fit"), "threshold"))
    return out


def _get(doc: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        doc = doc.get(key) if isinstance(doc, dict) else None
    return doc


def _put(doc: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    for key in path[:-1]:
        doc = doc[key]
    doc[path[-1]] = value


def _copy_of(doc: Any, source: tuple[str, ...], key: str) -> Any:
    record = _get(doc, source)
    return record.get(key) if isinstance(record, dict) else None


def _summary(fit: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``guarantee`` and ``expected``: copies of the auto-route fit (a three-way's ``auto``)."""
    src = fit.get("auto", fit)
    guarantee = {
        "certified": bool(fit.get("certified", False)),
        "target": src.get("target"),
        "delta": src.get("delta"),
        "bound": src.get("bound"),
        "reason": src.get("reason"),
        "required_calibration_size": src.get("required_calibration_size"),
    }
    return guarantee, {"coverage": fit.get("coverage"), "precision": fit.get("precision")}


# --------------------------------------------------------------------------- reading


def read_parts(doc: dict[str, Any], path: str | None, *, strict: bool) -> Chain:
    """The fitted parts of a document, every record checked (see the module notes).

    Raises
    ------
    ArtifactError
        Naming ``path`` and the field at fault.
    """
    check_structure(doc, path)
    try:
        if not strict:
            doc = _with_gate_values(doc)
        chain = _chain(doc)
        if strict:
            _check_copies(doc)
            check_gate_values(doc)
            _check_envelope(doc)
    except rec.Contradiction as exc:
        raise ArtifactError(str(exc), path=path) from None
    return chain


def _with_gate_values(doc: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``doc`` whose records hold its gate values (an edit made in memory)."""
    out: dict[str, Any] = {}
    changed = False
    for view, source, key in copies(doc):
        value, record = _get(doc, view), _get(doc, source)
        if isinstance(record, dict) and record.get(key) != value:
            if not changed:
                out, changed = copy.deepcopy(doc), True
            _get(out, source)[key] = value
    return out if changed else doc


def _chain(doc: dict[str, Any]) -> Chain:
    t = doc["thresholds"]
    oos = t["oos"]
    gate = None
    if oos is not None:
        fit = read_technique(oos.get("fit"), "thresholds.oos.fit")
        rec.ensure(
            isinstance(fit, OutOfScopeThreshold),
            "thresholds.oos.fit.method",
            f"must be {OutOfScopeThreshold.method!r}",
        )
        gate = OutOfScopeGate(fit, oos["score"], oos.get("label"))  # type: ignore[arg-type]
    fits = doc["fits"]
    per_class = None
    if fits["per_class"] is not None:
        per_class = read_technique(fits["per_class"], "fits.per_class")
        rec.ensure(
            isinstance(per_class, PerClassThreshold),
            "fits.per_class.method",
            f"must be {PerClassThreshold.method!r}",
        )
    ev = doc["evidence"]
    return Chain(
        calibrator=read_calibrator(doc["calibrator"], "calibrator"),
        out_of_scope=gate,
        route=read_technique(doc["objective"]["fit"], "objective.fit"),
        per_class=per_class,  # type: ignore[arg-type]
        margin=None if fits["margin"] is None else read_technique(fits["margin"], "fits.margin"),
        fallback=t["fallback"],
        evidence=None if ev is None else EvidenceThresholds.from_state(ev, "evidence"),
    )


def check_gate_values(doc: Mapping[str, Any]) -> None:
    """Gate values in range: confidences in [0, 1], a margin in [-1, 1]."""
    t = doc["thresholds"]
    # calibrated confidences lie in [0, 1]; a margin (top-1 minus top-2 of calibrated
    # probabilities) in [-1, 1] (isotonic rescaling can put the raw top label below another)
    for key in ("auto", "ask", "per_class_default"):
        rec.probability(t[key], f"thresholds.{key}")
    rec.ensure(
        t["margin"] is None or (rec.is_num(t["margin"]) and -1.0 <= t["margin"] <= 1.0),
        "thresholds.margin",
        f"{t['margin']!r} is not a margin of probabilities in [-1, 1]",
    )
    for label, value in (t["per_class"] or {}).items():
        rec.probability(value, f"thresholds.per_class.{label}")
    oos = t["oos"]
    if oos is not None and oos["score"] != "external":
        rec.probability(oos["cutoff"], "thresholds.oos.cutoff", high=_ONE_UP)


def check_built(doc: Mapping[str, Any]) -> None:
    """What building a policy from fitted parts checks: no record is read back, but the
    gate values are in range, the objective's name fits its technique, and every technique
    is a registered one (loading would refuse the others)."""
    try:
        check_gate_values(doc)
        _check_objective(doc)
        for field, record in _records(doc):
            _checkable(record, field)
    except rec.Contradiction as exc:
        raise ValueError(str(exc)) from None


def _records(doc: Mapping[str, Any]) -> list[tuple[str, Any]]:
    t, fits = doc["thresholds"], doc["fits"]
    out = [("objective.fit", doc["objective"]["fit"])]
    out += [(f"fits.{k}", v) for k, v in fits.items() if v is not None]
    if t["oos"] is not None:
        out.append(("thresholds.oos.fit", t["oos"]["fit"]))
    for name, entry in ((doc.get("evidence") or {}).get("sources") or {}).items():
        out.append((f"evidence.sources.{name}.fit", entry["fit"]))
    return out


def _checkable(record: Mapping[str, Any], field: str) -> None:
    rec.ensure(
        record.get("method") in TECHNIQUES, f"{field}.method", unregistered(record.get("method"))
    )
    for key in ("auto", "ask"):
        if isinstance(record.get(key), dict):
            _checkable(record[key], f"{field}.{key}")
    for name, group in (record.get("groups") or {}).items():
        _checkable(group, f"{field}.groups.{name}")


def _check_objective(doc: Mapping[str, Any]) -> None:
    name, fit = doc["objective"].get("name"), doc["objective"]["fit"]
    if not (isinstance(name, str) and name in OBJECTIVES):
        return
    methods = fits_objective(name)
    rec.ensure(
        fit.get("method") in methods,
        "objective.fit.method",
        f"{fit.get('method')!r} is not a method objective {name!r} fits with "
        f"({', '.join(methods)})",
    )
    if OBJECTIVES[name].needs_oos_label:
        rec.ensure(
            doc["thresholds"]["oos"] is not None,
            "thresholds.oos",
            f"the {name} objective fits an out-of-scope cut-off",
        )


def _check_copies(doc: Mapping[str, Any]) -> None:
    """Every gate value is what its record gives; so are ``guarantee`` and ``expected``."""
    _check_objective(doc)
    for view, source, key in copies(doc):
        rec.same(
            _get(doc, view), _copy_of(doc, source, key), ".".join(view), ".".join((*source, key))
        )
    guarantee, expected = _summary(doc["objective"]["fit"])
    g = doc["guarantee"]
    rec.ensure(set(g) == set(guarantee), "guarantee", f"must hold exactly {sorted(guarantee)}")
    for key, value in guarantee.items():
        rec.same(g[key], value, f"guarantee.{key}", "objective.fit")
    rec.same(doc["expected"], expected, "expected", "objective.fit (coverage, precision)")


def _check_envelope(doc: Mapping[str, Any]) -> None:
    """The recorded label mix agrees with itself."""
    data = doc["calibration_data"]
    counts = data.get("label_counts")
    if counts is None:
        return
    rec.ensure(
        isinstance(counts, dict)
        and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in counts.values()),
        "calibration_data.label_counts",
        "must map labels to counts",
    )
    n = sum(counts.values())
    rec.same(data.get("size"), n, "calibration_data.size", "calibration_data.label_counts")
    label = data.get("out_of_scope_label")
    share = counts.get(label, 0) / n if label is not None and n else 0.0
    rec.ensure(
        rec.is_num(data.get("out_of_scope_share"))
        and abs(data["out_of_scope_share"] - share) <= rec.RATIO_TOL,
        "calibration_data.out_of_scope_share",
        f"{data.get('out_of_scope_share')!r} is not the share of {label!r} in label_counts",
    )


def check_envelope(doc: Mapping[str, Any]) -> None:
    """:func:`_check_envelope` raising ``ValueError`` (for a policy built in memory)."""
    try:
        _check_envelope(doc)
    except rec.Contradiction as exc:
        raise ValueError(str(exc)) from None


# --------------------------------------------------------------------------- structure

_KEYS = (
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
)
_THRESHOLDS = ("auto", "ask", "per_class", "per_class_default", "margin", "oos", "fallback")


def _need(cond: bool, field: str, what: str, path: str | None) -> None:
    if not cond:
        raise ArtifactError(f"policy field {field!r}: {what}", path=path)


def check_structure(doc: Mapping[str, Any], path: str | None) -> None:
    """The shape of the envelope, and of what the records do not hold (a gate value's
    type is its record's: copied into it, or compared with it, it is checked there)."""
    for key in _KEYS:
        _need(key in doc, key, "missing", path)
    _need(doc["format"] == POLICY_FORMAT, "format", f"must be {POLICY_FORMAT!r}", path)
    _need(doc["format_version"] in READ_VERSIONS, "format_version", f"not in {READ_VERSIONS}", path)
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
    t = doc["thresholds"]
    _need(
        isinstance(t, dict) and all(k in t for k in _THRESHOLDS), "thresholds", "lacks a key", path
    )
    o = t["oos"]
    if o is not None:
        _need(isinstance(o, dict), "thresholds.oos", "must be an object", path)
        _need(
            o.get("score") in OOS_SCORES,
            "thresholds.oos.score",
            f"must be one of {OOS_SCORES}",
            path,
        )
        if o.get("score") == "label_probability":
            _need(o.get("label") in classes, "thresholds.oos.label", "must be one of classes", path)
    _need(t["fallback"] in FALLBACKS, "thresholds.fallback", f"must be one of {FALLBACKS}", path)
    for key in ("provenance", "calibration_data", "expected", "guarantee"):
        _need(isinstance(doc[key], dict), key, "must be an object", path)
    _need(
        isinstance(doc["guarantee"].get("certified"), bool),
        "guarantee.certified",
        "must be true or false",
        path,
    )
    ev = doc["evidence"]
    _need(
        ev is None or (isinstance(ev, dict) and isinstance(ev.get("sources"), dict)),
        "evidence.sources",
        "must be an object",
        path,
    )
    _need(
        isinstance(doc["objective"], dict) and isinstance(doc["objective"].get("fit"), dict),
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
    fp = doc["model_fingerprint"]
    _need(
        fp is None or is_sha256_hex(fp),
        "model_fingerprint",
        "must be null or a model fingerprint (64 lowercase hex digits)",
        path,
    )
