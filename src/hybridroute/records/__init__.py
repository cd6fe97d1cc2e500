"""Decision records after the fact: the decision log, replay, drift and shadow disagreement.

* :func:`open_log` -- a decision log behind a URL: ``sqlite:///PATH`` or a path
  (:class:`DecisionLog`, an append-only SQLite (WAL) store) or ``postgresql://...`` (one
  log several replicas share). Batched writes, one decision per request id, salted hashes
  for declared sensitive facts, credential scrubbing; exports to JSONL and pandas.
  :meth:`DecisionLog.log_many` returns a :class:`LoggedDecision` per decision.
* Outcomes and audits -- :meth:`DecisionLog.add_outcomes` attaches what really happened
  (an :class:`OutcomeReport`; :class:`OutcomeError` names the row and field);
  :class:`AuditSampler` (``open_log(..., audit=...)``) selects a keyed random sample of
  auto-routed decisions, recording each one's inclusion probability;
  :meth:`DecisionLog.pending_audits` lists the audits still to label.
* :func:`replay` -- re-run a router (the same or another version) on logged inputs and
  report the mismatches.
* :func:`drift_report` -- distributions by window, PSI / chi-square shift tests, and
  same-snapshot conflicts within and across router versions.
* :func:`shadow_disagreement` -- live against shadow decisions for the same request ids.
"""

from __future__ import annotations

import importlib
from typing import Any

from .._redact import REDACTED, Redactor
from ._audit import AUDIT_KEY_ENV, AuditSampler
from ._log import DecisionLog
from ._logbase import SCHEMA_VERSION, LoggedDecision, record_to_decision
from ._outcomes import SOURCES as OUTCOME_SOURCES
from ._outcomes import OutcomeError, OutcomeReport
from ._url import open_log

_LAZY = {
    "drift_report": "._drift",
    "DriftReport": "._drift",
    "psi": "._drift",
    "replay": "._replay",
    "ReplayReport": "._replay",
    "shadow_disagreement": "._shadow",
    "ShadowReport": "._shadow",
}

__all__ = [
    "AUDIT_KEY_ENV",
    "OUTCOME_SOURCES",
    "REDACTED",
    "SCHEMA_VERSION",
    "AuditSampler",
    "DecisionLog",
    "LoggedDecision",
    "OutcomeError",
    "OutcomeReport",
    "Redactor",
    "open_log",
    "record_to_decision",
    *sorted(_LAZY),
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __package__), name)
    globals()[name] = value
    return value
