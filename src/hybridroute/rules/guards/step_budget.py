"""Step budget exceeded -> ``fail`` with its own reason code."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...contracts import FactSchema
from ...exceptions import RuleSetError
from ._base import Guard, Outcome, number_param


class StepBudgetGuard(Guard):
    """Fires when ``step > max_steps``."""

    name = "step_budget"
    params = {"step_fact": "step", "max_steps": Guard.REQUIRED}
    destinations = ("fail",)
    reason_codes = ("step_budget_exceeded",)
    fact_types = {"step_fact": ("int",)}

    def _setup(self, rule_id: str) -> None:
        number_param(self, "max_steps", rule_id, minimum=0, integer=True)

    def check_schema(self, schema: FactSchema) -> None:
        spec = schema[self.values["step_fact"]]
        if spec.max is not None and spec.max <= self.values["max_steps"]:
            raise RuleSetError(
                f"max_steps {self.values['max_steps']} can never be exceeded: fact "
                f"{spec.name!r} is declared with max {spec.max!r}",
                rule_id=self.rule_id,
            )

    def probe_values(self, schema: FactSchema) -> dict[str, tuple[Any, ...]]:
        return {self.values["step_fact"]: (self.values["max_steps"],)}

    def check(self, facts: Mapping[str, Any]) -> Outcome | None:
        step = facts.get(self.values["step_fact"])
        limit = self.values["max_steps"]
        if step is not None and step > limit:
            return Outcome("fail", "step_budget_exceeded", {"step": step, "max_steps": limit})
        return None
