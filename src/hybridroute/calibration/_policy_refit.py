"""A policy document with its main threshold refitted (:meth:`Policy.with_refit_threshold`).

Everything but the main fit is kept: the calibrator (so the new threshold is on the same
calibrated-confidence scale the old policy's router logged), the margin, out-of-scope and
evidence gates, the label set and the model binding. What changes is the main fit and what
derives from it (``thresholds.auto``, ``guarantee``, ``expected``), the recorded
calibration data and the provenance.
"""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from .._version import __version__
from ._base import jsonable_threshold

__all__ = ["refit_document"]


def refit_document(
    doc: Mapping[str, Any],
    threshold: Any,
    *,
    calibration_labels: Iterable[str] | None = None,
    calibration_data: Mapping[str, Any] | None = None,
    provenance: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The document ``doc`` with its main fit replaced by the fitted ``threshold``."""
    if not hasattr(threshold, "threshold_"):
        raise ValueError("threshold must be a fitted threshold fitter")
    t = doc["thresholds"]
    if t["ask"] is not None or t["per_class"] is not None:
        raise ValueError(
            "only a policy with one auto-route threshold (no ask-the-user zone, no "
            "per-class thresholds) can have its threshold refitted"
        )
    new = copy.deepcopy(dict(doc))
    summary = threshold.summary()
    new["objective"]["fit"] = summary
    new["thresholds"]["auto"] = jsonable_threshold(threshold.threshold_)
    new["guarantee"] = {
        "certified": bool(summary.get("certified", False)),
        "target": summary.get("target"),
        "delta": summary.get("delta"),
        "bound": summary.get("bound"),
        "reason": summary.get("reason"),
        "required_calibration_size": summary.get("required_calibration_size"),
    }
    new["expected"] = {"coverage": summary.get("coverage"), "precision": summary.get("precision")}
    oos_label = doc["calibration_data"].get("out_of_scope_label")
    data: dict[str, Any] = {"size": summary.get("calibration_size")}
    if calibration_labels is not None:
        counts = Counter(str(x) for x in calibration_labels)
        n = sum(counts.values())
        data.update(
            size=n,
            label_counts=dict(sorted(counts.items())),
            out_of_scope_label=oos_label,
            out_of_scope_share=counts.get(oos_label, 0) / n if oos_label is not None and n else 0.0,
        )
    data.update(calibration_data or {})
    new["calibration_data"] = data
    new["provenance"] = dict(provenance or {})
    new["library_version"] = __version__
    return new
