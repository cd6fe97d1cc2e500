"""Evidence complete -> ``answer``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._base import Guard, Outcome

_ANSWER = Outcome("answer", "evidence_complete")


class EvidenceGuard(Guard):
    """Fires when the evidence-completeness fact is ``true``."""

    name = "evidence"
    params = {"fact": "evidence_complete"}
    destinations = ("answer",)
    reason_codes = ("evidence_complete",)
    fact_types = {"fact": ("bool",)}

    def check(self, facts: Mapping[str, Any]) -> Outcome | None:
        return _ANSWER if facts.get(self.values["fact"]) is True else None
