"""Missing user fields -> ``ask_user``, naming the fields."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._base import Guard, Outcome


class MissingFieldsGuard(Guard):
    """Fires when the list of missing user fields is non-empty."""

    name = "missing_user_fields"
    params = {"fact": "missing_user_fields"}
    destinations = ("ask_user",)
    reason_codes = ("missing_user_fields",)
    fact_types = {"fact": ("list[str]",)}

    def check(self, facts: Mapping[str, Any]) -> Outcome | None:
        missing = facts.get(self.values["fact"])
        if missing:
            return Outcome(
                "ask_user", "missing_user_fields", {"missing_user_fields": list(missing)}
            )
        return None
