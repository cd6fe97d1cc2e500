"""Built-in guards, one file each, resolved through one name -> class mapping.

=====================  =========================================  ===========================
guard                  fires when                                 destination (reason code)
=====================  =========================================  ===========================
``permission``         ``has_permission`` is not true             reject (permission_denied)
``tool_error``         a tool error kind is set                   retry_tool (tool_error_retry)
                                                                  while attempts < budget, else
                                                                  fail (retry_budget_exhausted);
                                                                  other kinds fail
                                                                  (tool_error_fatal)
``risk``               abs(amount) > limit, or a sensitive        human_review
                       action (compared normalised)               (high_risk_amount /
                                                                  sensitive_action)
``step_budget``        step > max_steps                           fail (step_budget_exceeded)
``oscillation``        a route cycle repeats > max_repeats times  fail (route_oscillation)
``evidence``           ``evidence_complete`` is true              answer (evidence_complete)
``missing_user_fields``  the list of missing fields is non-empty  ask_user (missing_user_fields)
=====================  =========================================  ===========================
"""

from __future__ import annotations

from ._base import Guard, Outcome
from .evidence import EvidenceGuard
from .missing_fields import MissingFieldsGuard
from .oscillation import OscillationGuard, find_oscillation
from .permission import PermissionGuard
from .risk import RiskGuard
from .step_budget import StepBudgetGuard
from .tool_error import ToolErrorGuard

#: guard name -> class; the one place a guard name is resolved.
GUARDS: dict[str, type[Guard]] = {
    g.name: g
    for g in (
        PermissionGuard,
        ToolErrorGuard,
        RiskGuard,
        StepBudgetGuard,
        OscillationGuard,
        EvidenceGuard,
        MissingFieldsGuard,
    )
}

__all__ = ["GUARDS", "Guard", "Outcome", "find_oscillation"]
