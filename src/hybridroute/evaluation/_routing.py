"""What the evaluation reads of a router (a protocol: evaluation does not import the router).

:class:`hybridroute.router.HybridRouter` is one; so is any object that routes a batch of
``{"facts", "text"}`` items to :class:`~hybridroute.contracts.Decision` values and names
its label set and the facts schema of its rules.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from ..contracts import Decision, FactSchema

__all__ = ["BatchRouter", "RulesWithSchema"]


class RulesWithSchema(Protocol):
    """A rule set, as far as the evaluation reads it: its facts schema."""

    @property
    def schema(self) -> FactSchema: ...


class BatchRouter(Protocol):
    """A router, as far as the evaluation reads it (``HybridRouter`` is one)."""

    @property
    def name(self) -> str: ...

    @property
    def version(self) -> str: ...

    @property
    def classes(self) -> Sequence[str]: ...

    @property
    def rules(self) -> RulesWithSchema: ...

    def route_many(self, items: Iterable[Mapping[str, Any]]) -> list[Decision]: ...
