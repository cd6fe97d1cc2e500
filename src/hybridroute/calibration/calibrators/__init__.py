"""Probability calibrators, one file each, resolved through one name -> class mapping.

==================  =====================  ===============================================
name                class                  what it rescales
==================  =====================  ===============================================
``temperature``     TemperatureScaling     every class's log-probability, by one fitted T
``isotonic``        IsotonicCalibration    the top label's confidence, by a monotone map
==================  =====================  ===============================================

Each class fits on ``(proba, y)``, rescales rows (``transform``; ``calibrate_rows`` as a
policy applies it), writes its state (``to_state``) and reads a record back, checking it
(``from_state``). ``none`` (no calibrator: rows are only normalised) is a policy's choice,
not a class.
"""

from __future__ import annotations

from typing import Any

from .. import _record as rec
from .isotonic import IsotonicCalibration
from .temperature import TemperatureScaling

#: record name (``method``) -> class; the one place a calibrator's name is resolved.
CALIBRATORS: dict[str, type[TemperatureScaling] | type[IsotonicCalibration]] = {
    c.method: c for c in (TemperatureScaling, IsotonicCalibration)
}
#: The policy's choice of no calibrator.
NONE = "none"


def read_calibrator(state: Any, field: str) -> TemperatureScaling | IsotonicCalibration | None:
    """The fitted calibrator a record names (``None`` for ``{"method": "none"}``)."""
    rec.ensure(isinstance(state, dict) and "method" in state, field, "must name a method")
    if state["method"] == NONE:
        return None
    cls = CALIBRATORS.get(state["method"])
    rec.ensure(
        cls is not None,
        f"{field}.method",
        f"must be {NONE}, {' or '.join(CALIBRATORS)}",
    )
    assert cls is not None
    return cls.from_state(state, field)


__all__ = ["CALIBRATORS", "NONE", "IsotonicCalibration", "TemperatureScaling", "read_calibrator"]
