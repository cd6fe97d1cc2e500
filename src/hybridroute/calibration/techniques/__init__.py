"""Threshold techniques, one file each, resolved through one name -> class mapping.

===========================  ==============================  ===============================
technique (record ``method``)  class                           objective (``fit_policy``)
===========================  ==============================  ===============================
``certified_precision``      CertifiedPrecisionThreshold     ``precision``
``empirical``                EmpiricalThreshold              ``empirical``
``coverage``                 CoverageThreshold               ``coverage``
``cost``                     CostThreshold                   ``cost``
``three_way``                ThreeWayThreshold               ``three-way``
``out_of_scope``             OutOfScopeThreshold             ``oos`` (a gate before the
                                                             auto-route threshold)
``per_class``                PerClassThreshold               ``per_class=True``
``certified_margin``         MarginThreshold                 ``margin=True``
``fallback_precision``       FallbackPrecisionThreshold      (research; fits ``precision``)
``label_free_start``         LabelFreeStartThreshold         (research; fits ``precision``)
===========================  ==============================  ===============================

Each class fits, decides for one item, writes its state (``to_state``) and reads a record
back, checking its own certificate (``from_state``); see :mod:`._base`. A new technique is
one file here and one line in :data:`TECHNIQUES` (and one in :data:`OBJECTIVES` when
``fit_policy`` and ``hybridroute calibrate`` should offer it).
"""

from __future__ import annotations

from typing import Any

from .. import _record as rec
from ._base import Curve, Technique, ThresholdFitter, Verdict
from .certified_precision import CertifiedPrecisionThreshold
from .cost import CostThreshold
from .coverage import CoverageThreshold
from .empirical import EmpiricalThreshold
from .fallback_precision import FallbackPrecisionThreshold
from .label_free_start import LabelFreeStartThreshold
from .margin import MarginThreshold
from .out_of_scope import OutOfScopeThreshold
from .per_class import PerClassThreshold
from .three_way import ThreeWayThreshold

#: record name (``method``) -> class; the one place a technique's name is resolved.
TECHNIQUES: dict[str, type[Technique]] = {
    t.method: t
    for t in (
        CertifiedPrecisionThreshold,
        EmpiricalThreshold,
        CoverageThreshold,
        CostThreshold,
        ThreeWayThreshold,
        OutOfScopeThreshold,
        PerClassThreshold,
        MarginThreshold,
        FallbackPrecisionThreshold,
        LabelFreeStartThreshold,
    )
}

#: ``fit_policy`` objective -> the class that builds its auto-route threshold (and gate):
#: the techniques that offer an objective (they say what it does: ``objective_help``).
OBJECTIVES: dict[str, type[Technique]] = {
    t.objective: t for t in TECHNIQUES.values() if t.objective is not None and t.objective_help
}


def fits_objective(objective: str) -> tuple[str, ...]:
    """The techniques whose record an ``objective`` may hold as its auto-route fit."""
    cls = OBJECTIVES[objective]
    routes = cls.route_objective or objective
    return tuple(name for name, t in TECHNIQUES.items() if t.objective == routes)


def read_technique(state: Any, field: str) -> Technique:
    """The fitted technique a fit record names, its record checked (see ``from_state``)."""
    rec.ensure(isinstance(state, dict), field, "must be a fit record (an object)")
    cls = TECHNIQUES.get(state.get("method"))  # type: ignore[arg-type]
    rec.ensure(cls is not None, f"{field}.method", unregistered(state.get("method")))
    assert cls is not None
    return cls.from_state(state, field)


def unregistered(method: Any) -> str:
    return (
        f"a fit from method {method!r} cannot be checked; only registered techniques "
        f"({', '.join(TECHNIQUES)}) are read"
    )


__all__ = [
    "OBJECTIVES",
    "TECHNIQUES",
    "CertifiedPrecisionThreshold",
    "CostThreshold",
    "CoverageThreshold",
    "Curve",
    "EmpiricalThreshold",
    "FallbackPrecisionThreshold",
    "LabelFreeStartThreshold",
    "MarginThreshold",
    "OutOfScopeThreshold",
    "PerClassThreshold",
    "Technique",
    "ThreeWayThreshold",
    "ThresholdFitter",
    "Verdict",
    "fits_objective",
    "read_technique",
    "unregistered",
]
