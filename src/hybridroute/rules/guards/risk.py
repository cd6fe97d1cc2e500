"""High-risk requests -> ``human_review``: an amount over a declared limit, or a sensitive action."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...exceptions import RuleSetError
from ._base import Guard, Outcome, number_param, str_list_param


class RiskGuard(Guard):
    """Fires when ``amount > amount_limit`` or ``action`` is one of ``sensitive_actions``."""

    name = "risk"
    params = {
        "amount_fact": "amount",
        "amount_limit": None,
        "action_fact": "action",
        "sensitive_actions": [],
    }
    destinations = ("human_review",)
    reason_codes = ("high_risk_amount", "sensitive_action")
    fact_types = {"amount_fact": ("number", "int"), "action_fact": ("str",)}

    def _setup(self, rule_id: str) -> None:
        if self.values["amount_limit"] is not None:
            number_param(self, "amount_limit", rule_id)
        str_list_param(self, "sensitive_actions", rule_id)
        if self.values["amount_limit"] is None and not self.values["sensitive_actions"]:
            raise RuleSetError(
                "guard 'risk' needs 'amount_limit' or a non-empty 'sensitive_actions'",
                rule_id=rule_id,
            )

    def facts_read(self) -> dict[str, tuple[str, ...]]:
        out = {}
        if self.values["amount_limit"] is not None:
            out[self.values["amount_fact"]] = self.fact_types["amount_fact"]
        if self.values["sensitive_actions"]:
            out[self.values["action_fact"]] = self.fact_types["action_fact"]
        return out

    def check(self, facts: Mapping[str, Any]) -> Outcome | None:
        limit = self.values["amount_limit"]
        if limit is not None:
            amount = facts.get(self.values["amount_fact"])
            if amount is not None and amount > limit:
                return Outcome(
                    "human_review", "high_risk_amount", {"amount": amount, "amount_limit": limit}
                )
        sensitive = self.values["sensitive_actions"]
        if sensitive:
            action = facts.get(self.values["action_fact"])
            if action in sensitive:
                return Outcome("human_review", "sensitive_action", {"action": action})
        return None
