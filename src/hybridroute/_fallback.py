"""The one reader of a fallback decision's cause (what "fallbacks by cause" counts).

The router records on every fallback decision (the classifier failed or abstained) the
cause in its detail, ``detail["cause"]``: the reason code, with the exception's type when
the classifier raised (``classifier_error (TypeError)``). A record written before causes
were recorded has none and is counted under its reason code.

:func:`hybridroute.evaluation.evaluate_router`, the streamed evaluation, Spark's
``evaluate_scored`` and :func:`hybridroute.records.drift_report` all count fallbacks with
:func:`fallback_cause`. A neutral leaf: it imports nothing internal, so every part may
import it (the evaluation package may not import the router).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["CAUSE_KEY", "FALLBACK_STAGE", "fallback_cause"]

#: The stage of a decision the router fell back on (the classifier failed or abstained).
FALLBACK_STAGE = "fallback"
#: The key of a fallback decision's ``detail`` that holds its cause.
CAUSE_KEY = "cause"


def fallback_cause(record: Any) -> str | None:
    """What a fallback decision is counted under; ``None`` for a decision of another stage.

    Parameters
    ----------
    record : Decision or mapping
        A :class:`~hybridroute.contracts.Decision` (read through its ``stage``,
        ``reason_code`` and ``detail`` attributes) or a decision record as the decision
        log stores it (the same keys).

    Returns
    -------
    str or None
        The cause the router recorded in ``detail["cause"]``, else the reason code (a
        record written before causes were recorded); ``None`` when the decision is not a
        fallback.
    """
    if type(record) is dict or isinstance(record, Mapping):  # a dict: no ABC check
        stage, reason, detail = record.get("stage"), record.get("reason_code"), record.get("detail")
    else:
        stage, reason, detail = record.stage, record.reason_code, record.detail
    if stage != FALLBACK_STAGE:
        return None
    cause = detail.get(CAUSE_KEY) if isinstance(detail, Mapping) else None
    return str(cause) if cause else str(reason)
