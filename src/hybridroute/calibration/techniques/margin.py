"""Certified margin: a certified-precision threshold on the top-1 minus top-2 score margin."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .certified_precision import CertifiedPrecisionThreshold

if TYPE_CHECKING:
    from .._options import FitOptions

__all__ = ["MarginThreshold"]


class MarginThreshold(CertifiedPrecisionThreshold):
    """Certified-precision threshold on the top-1 minus top-2 score margin.

    Same procedure and guarantee as :class:`CertifiedPrecisionThreshold`, fitted on
    ``(margins, correct)``: items whose two best labels are close are held back even
    when the best one's confidence is high. In a policy it is an extra gate on top of
    the confidence threshold; an item passing confidence but failing the margin is sent
    to the user to choose between the two best labels (``low_margin``). A gate that could
    not be certified (``threshold_`` is ``inf``) lets nothing through.
    """

    method = "certified_margin"
    score_name = "margin"
    objective = None
    objective_help = ""

    @classmethod
    def for_objective(cls, options: FitOptions) -> MarginThreshold:
        """The margin gate ``fit_policy(margin=True)`` fits: the precision the objective
        holds routed items to, at the whole ``delta``."""
        return cls(getattr(options, options.technique.precision_option), options.delta)
