"""Tool errors: retry a retryable one while attempts remain, else fail."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...contracts import FactSchema
from ...exceptions import RuleSetError
from ._base import Guard, Outcome, number_param, show_values, str_list_param


class ToolErrorGuard(Guard):
    """Retryable error kind -> ``retry_tool`` while ``attempts < retry_budget``, then ``fail``;
    any other error kind -> ``fail``.

    Attempts are a fact (persisted with the state), so a process restored from a checkpoint
    cannot earn an extra retry.
    """

    name = "tool_error"
    params = {
        "kind_fact": "tool_error_kind",
        "attempts_fact": "attempts",
        "retryable_kinds": ["retryable"],
        "retry_budget": 1,
    }
    destinations = ("retry_tool", "fail")
    reason_codes = ("tool_error_retry", "retry_budget_exhausted", "tool_error_fatal")
    fact_types = {"kind_fact": ("str",), "attempts_fact": ("int",)}

    def _setup(self, rule_id: str) -> None:
        str_list_param(self, "retryable_kinds", rule_id)
        number_param(self, "retry_budget", rule_id, minimum=0, integer=True)

    def check_schema(self, schema: FactSchema) -> None:
        spec = schema[self.values["kind_fact"]]
        if spec.enum is None:
            return
        for kind in sorted(self.values["retryable_kinds"]):
            if kind not in spec.enum:
                raise RuleSetError(
                    f"retryable kind {kind!r} is not an allowed value of fact {spec.name!r} "
                    f"(its enum: {show_values(spec.enum)}), so it could never match",
                    rule_id=self.rule_id,
                )

    def reachable_reason_codes(self) -> tuple[str, ...]:
        if not self.values["retryable_kinds"]:
            return ("tool_error_fatal",)
        if self.values["retry_budget"] == 0:  # attempts < 0 never holds: no retry
            return ("retry_budget_exhausted", "tool_error_fatal")
        return self.reason_codes

    def probe_values(self, schema: FactSchema) -> dict[str, tuple[Any, ...]]:
        return {
            self.values["kind_fact"]: tuple(sorted(self.values["retryable_kinds"])),
            self.values["attempts_fact"]: (self.values["retry_budget"],),
        }

    def check(self, facts: Mapping[str, Any]) -> Outcome | None:
        kind = facts.get(self.values["kind_fact"])
        if kind is None:
            return None
        budget = self.values["retry_budget"]
        if kind in self.values["retryable_kinds"]:
            attempts = facts.get(self.values["attempts_fact"]) or 0
            detail = {"tool_error_kind": kind, "attempts": attempts, "retry_budget": budget}
            if attempts < budget:
                return Outcome("retry_tool", "tool_error_retry", detail)
            return Outcome("fail", "retry_budget_exhausted", detail)
        return Outcome("fail", "tool_error_fatal", {"tool_error_kind": kind})
