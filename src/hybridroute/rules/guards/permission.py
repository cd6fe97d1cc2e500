"""Permission denied -> ``reject``. Always first in a rule set; nothing outranks it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._base import Guard, Outcome

_REJECT = Outcome("reject", "permission_denied")


class PermissionGuard(Guard):
    """Fires when the permission fact is ``false`` (a missing permission never passes)."""

    name = "permission"
    params = {"fact": "has_permission"}
    destinations = ("reject",)
    reason_codes = ("permission_denied",)
    fact_types = {"fact": ("bool",)}

    def check(self, facts: Mapping[str, Any]) -> Outcome | None:
        # Only an explicit true passes: null (unknown) permission is a denial.
        return None if facts.get(self.values["fact"]) is True else _REJECT
