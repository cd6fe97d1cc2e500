"""Decision records after the fact: the decision log, replay and drift.

* :class:`DecisionLog` -- an append-only SQLite (WAL) store of decision records with
  batched writes, salted hashes for declared sensitive facts and credential scrubbing;
  exports to JSONL and pandas.
* :func:`replay` -- re-run a router (the same or another version) on logged inputs and
  report the mismatches.
* :func:`drift_report` -- distributions by window, PSI / chi-square shift tests, and
  same-snapshot conflicts within and across router versions.
"""

from __future__ import annotations

import importlib
from typing import Any

from .._redact import REDACTED, Redactor
from ._log import SCHEMA_VERSION, DecisionLog, record_to_decision

_LAZY = {
    "drift_report": "._drift",
    "DriftReport": "._drift",
    "psi": "._drift",
    "replay": "._replay",
    "ReplayReport": "._replay",
}

__all__ = [
    "REDACTED",
    "SCHEMA_VERSION",
    "DecisionLog",
    "Redactor",
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
