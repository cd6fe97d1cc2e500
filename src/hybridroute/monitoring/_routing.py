"""What monitoring reads of a router and its rules (protocols: monitoring does not import
the router or the rules; :class:`hybridroute.router.HybridRouter` and
:class:`hybridroute.rules.RuleSet` are ones).

The promotion gate, the recalibration from a log and the label checks replay logged
records through a router, evaluate it, compare two routers' policies, models and rules,
and read the labels and destinations a router version may name. Monitoring's view of a
router is therefore the evaluation's (:class:`~hybridroute.evaluation._routing.BatchRouter`)
and the records' (:class:`~hybridroute.records._vocabulary.RoutesByModel`) together, plus
what the gate compares.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, Self

from ..contracts import Decision
from ..evaluation._routing import BatchRouter, RulesWithSchema
from ..records._vocabulary import RoutesByModel, RoutesByRules

if TYPE_CHECKING:
    from ..calibration import Policy

__all__ = ["RouterLike", "RuleLike", "RuleSetLike"]


class RuleLike(Protocol):
    """One rule: the facts (and their paths) it reads."""

    def facts_read(self) -> Mapping[str, tuple[str, ...] | None]: ...


class RuleSetLike(RoutesByRules, RulesWithSchema, Protocol):
    """An ordered rule set, as monitoring reads it."""

    @property
    def rules(self) -> Sequence[RuleLike]: ...

    def to_dict(self) -> dict[str, Any]: ...

    def diff(self, new: Self, inputs: Iterable[Any], **options: Any) -> Any: ...


class RouterLike(RoutesByModel, BatchRouter, Protocol):
    """A router, as monitoring reads it (``HybridRouter`` is one)."""

    @property
    def policy(self) -> Policy: ...

    @property
    def classifier(self) -> object: ...

    @property
    def rules(self) -> RuleSetLike: ...

    @property
    def oos_destination(self) -> str: ...

    @property
    def fallback_destination(self) -> str: ...

    @property
    def redact_pii(self) -> object: ...

    def replay(self, record: Mapping[str, Any], *, rescore: bool = ...) -> Decision: ...
