"""What a policy decided for one classified item (:class:`PolicyOutcome`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["PolicyOutcome"]


@dataclass(frozen=True, slots=True, kw_only=True)
class PolicyOutcome:
    """What the policy decided for one classified item.

    Attributes
    ----------
    action : str
        ``auto_route``, ``ask_user``, ``human_review`` or ``out_of_scope``.
    reason_code : str
        A :class:`~hybridroute.contracts.ReasonCode` value (or the classifier's abstention
        reason, e.g. ``invalid_label``).
    label : str or None
        The top label (``None`` for an abstention).
    confidence, margin, oos_score : float or None
        Calibrated top-label confidence, top-1 minus top-2, out-of-scope score.
    threshold : float or None
        The threshold value that decided (``None`` when none applied).
    threshold_name : str or None
        Which threshold decided: ``auto``, ``class:<label>``, ``ask``, ``margin``, ``oos``.
    """

    action: str
    reason_code: str
    label: str | None
    confidence: float | None
    margin: float | None
    oos_score: float | None
    threshold: float | None
    threshold_name: str | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "action": self.action,
            "reason_code": self.reason_code,
            "label": self.label,
            "confidence": self.confidence,
            "margin": self.margin,
            "oos_score": self.oos_score,
            "threshold": self.threshold,
            "threshold_name": self.threshold_name,
        }
