"""High-risk requests -> ``human_review``: an amount over a declared limit, or a sensitive action."""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from ...contracts import FactSchema
from ...exceptions import RuleSetError
from ._base import (
    Guard,
    Outcome,
    normalize_token,
    number_param,
    show_values,
    str_list_param,
)

# Actions repeat (a few dozen kinds in practice): remember their normal forms. Bounded, so
# hostile unique strings cost only the normalisation itself.
_normal = lru_cache(maxsize=4096)(normalize_token)


class RiskGuard(Guard):
    """Fires when ``abs(amount) > amount_limit`` or ``action`` is one of ``sensitive_actions``.

    **Amounts are compared by magnitude.** A refund of −100,000 moves as much money as a
    charge of +100,000, so ``amount_limit`` (a finite number, at least 0) bounds
    ``abs(amount)``: both go to ``human_review`` (``high_risk_amount``). To refuse
    negative amounts outright, declare ``min: 0`` on the amount fact.

    **Actions are compared normalised** (:func:`~hybridroute.rules.guards._base.normalize_token`),
    on both sides: NFKC, case folded, accents and control / format characters (NUL,
    zero-width space) dropped, surrounding whitespace stripped, runs of spaces, hyphens and
    underscores as one ``_``. With ``sensitive_actions: [delete_account_data]``, the
    actions ``DELETE_ACCOUNT_DATA``, ``" delete_account_data"``, ``delete-account-data``,
    ``delete_account_data\\x00`` and a fullwidth spelling all fire. Normalising errs on the
    side of firing (it can only make more actions sensitive); it cannot catch letters that
    merely look alike in another script, which is what an ``enum`` on the action fact is
    for: then any undeclared spelling is refused before a rule runs. When the action fact
    declares an ``enum``, every sensitive action must normalise to one of its values (the
    rule set is refused otherwise: a typo would make that part of the guard dead), and
    when the amount fact's ``min`` / ``max`` keep ``abs(amount)`` at or under the limit,
    the amount check can never fire and the rule set is refused too.
    """

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
            number_param(self, "amount_limit", rule_id, minimum=0)
        str_list_param(self, "sensitive_actions", rule_id)
        if self.values["amount_limit"] is None and not self.values["sensitive_actions"]:
            raise RuleSetError(
                "guard 'risk' needs 'amount_limit' or a non-empty 'sensitive_actions'",
                rule_id=rule_id,
            )
        normalised = {}
        for action in sorted(self.values["sensitive_actions"]):
            key = normalize_token(action)
            if not key:
                raise RuleSetError(
                    f"sensitive action {action!r} is empty once normalised", rule_id=rule_id
                )
            normalised[key] = action
        self._sensitive = frozenset(normalised)

    def facts_read(self) -> dict[str, tuple[str, ...]]:
        out = {}
        if self.values["amount_limit"] is not None:
            out[self.values["amount_fact"]] = self.fact_types["amount_fact"]
        if self.values["sensitive_actions"]:
            out[self.values["action_fact"]] = self.fact_types["action_fact"]
        return out

    def check_schema(self, schema: FactSchema) -> None:
        limit = self.values["amount_limit"]
        if limit is not None:
            amount = schema[self.values["amount_fact"]]
            lo, hi = amount.min, amount.max
            if lo is not None and hi is not None and lo >= -limit and hi <= limit:
                raise RuleSetError(
                    f"amount_limit {limit!r} can never be exceeded: fact {amount.name!r} is "
                    f"declared between {lo!r} and {hi!r}",
                    rule_id=self.rule_id,
                )
        if not self.values["sensitive_actions"]:
            return
        action = schema[self.values["action_fact"]]
        if action.enum is None:
            return
        allowed = {normalize_token(v) for v in action.enum}
        for name in sorted(self.values["sensitive_actions"]):
            if normalize_token(name) not in allowed:
                raise RuleSetError(
                    f"sensitive action {name!r} is not an allowed value of fact "
                    f"{action.name!r} (its enum: {show_values(action.enum)}), so it could "
                    "never match",
                    rule_id=self.rule_id,
                )

    def reachable_reason_codes(self) -> tuple[str, ...]:
        out = []
        if self.values["amount_limit"] is not None:
            out.append("high_risk_amount")
        if self.values["sensitive_actions"]:
            out.append("sensitive_action")
        return tuple(out)

    def probe_values(self, schema: FactSchema) -> dict[str, tuple[Any, ...]]:
        out: dict[str, tuple[Any, ...]] = {}
        limit = self.values["amount_limit"]
        if limit is not None:
            out[self.values["amount_fact"]] = (limit, -limit)
        actions = sorted(self.values["sensitive_actions"])
        if actions:
            # each action as declared, and a spelling that is only equal once normalised
            out[self.values["action_fact"]] = tuple(actions) + tuple(
                a.upper().replace("_", "-") for a in actions
            )
        return out

    def check(self, facts: Mapping[str, Any]) -> Outcome | None:
        limit = self.values["amount_limit"]
        if limit is not None:
            amount = facts.get(self.values["amount_fact"])
            if amount is not None and abs(amount) > limit:
                return Outcome(
                    "human_review", "high_risk_amount", {"amount": amount, "amount_limit": limit}
                )
        sensitive = self._sensitive
        if sensitive:
            action = facts.get(self.values["action_fact"])
            if isinstance(action, str) and _normal(action) in sensitive:
                return Outcome("human_review", "sensitive_action", {"action": action})
        return None
