"""What the LLM classifier returns: one item's result, a batch and its accounting.

:class:`LLMItemResult` is what the model said about one text (raw scores best first, or an
abstention with its reason code), with its tokens and cost; :class:`LLMBatch` holds a
batch's items in input order and its :class:`LLMBatchReport` (requests by outcome,
abstentions by reason, cache hits, tokens, cost, seconds). The helpers here turn the retry
loop's outcomes and errors into that accounting, and read answers back from the on-disk
cache (refusing a damaged or hand-edited entry).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ...exceptions import LLMError
from ._retry import AttemptResult, LabelFailure, Usage

__all__ = [
    "LLMBatch",
    "LLMBatchReport",
    "LLMItemResult",
    "batch_report",
    "cached_item",
    "outcome_name",
    "usage_from_error",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class LLMItemResult:
    """What the LLM classifier said about one text.

    ``scores`` are raw (uncalibrated) scores of the labels the model gave, best first;
    empty for an abstention, whose ``abstain_reason`` is set (``invalid_label``,
    ``provider_error``, ``timeout``) and ``detail`` says why.
    """

    scores: tuple[tuple[str, float], ...]
    abstain_reason: str | None = None
    detail: str | None = None
    confidence_source: str | None = None
    usage: Usage = field(default_factory=Usage)
    cached: bool = False

    @property
    def label(self) -> str | None:
        return self.scores[0][0] if self.scores else None

    @property
    def abstained(self) -> bool:
        return self.abstain_reason is not None

    def usage_dict(self) -> dict[str, Any]:
        out = self.usage.to_dict()
        out["cached"] = self.cached
        if self.confidence_source is not None:
            out["confidence_source"] = self.confidence_source
        if self.detail is not None:
            out["detail"] = self.detail
        return out

    def to_cache(self) -> dict[str, Any]:
        return {
            "scores": [[label, score] for label, score in self.scores],
            "confidence_source": self.confidence_source,
            "usage": self.usage.to_dict(),
        }

    def reused(self) -> LLMItemResult:
        """This answer given again (a repeated text in a batch): no request, no cost."""
        return LLMItemResult(
            scores=self.scores,
            abstain_reason=self.abstain_reason,
            detail=self.detail,
            confidence_source=self.confidence_source,
            usage=Usage(cost_usd=0.0),
            cached=True,
        )

    @classmethod
    def from_cache(cls, value: Mapping[str, Any]) -> LLMItemResult:
        return cls(
            scores=tuple((str(label), float(score)) for label, score in value["scores"]),
            confidence_source=value.get("confidence_source"),
            usage=Usage(cost_usd=0.0),
            cached=True,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class LLMBatchReport:
    """Accounting of one batch.

    ``requests`` counts HTTP requests actually made (0 on a fully cached rerun);
    ``request_outcomes`` counts them by outcome (``answered``, ``invalid_label``,
    ``cut_off`` -- an answer stopped at ``max_tokens`` --, ``rate_limit``,
    ``server_error``, ``timeout``, ...); ``abstentions`` counts abstained
    items by reason code. ``cost_usd`` is ``None`` when some answer had no known price
    (a model missing from litellm's cost map).
    """

    n_items: int
    n_unique: int
    n_answered: int
    n_abstained: int
    abstentions: dict[str, int]
    cache_hits: int
    requests: int
    request_outcomes: dict[str, int]
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float | None
    seconds: float

    @property
    def labels_per_second(self) -> float:
        return self.n_items / self.seconds if self.seconds > 0 else float("inf")

    def to_dict(self) -> dict[str, Any]:
        return {
            "n_items": self.n_items,
            "n_unique": self.n_unique,
            "n_answered": self.n_answered,
            "n_abstained": self.n_abstained,
            "abstentions": dict(sorted(self.abstentions.items())),
            "cache_hits": self.cache_hits,
            "requests": self.requests,
            "request_outcomes": dict(sorted(self.request_outcomes.items())),
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.prompt_tokens + self.completion_tokens,
            "cost_usd": self.cost_usd,
            "seconds": self.seconds,
        }


@dataclass(frozen=True, slots=True)
class LLMBatch:
    """The results of :meth:`LLMClassifier.classify`, in input order, and their report."""

    items: list[LLMItemResult]
    report: LLMBatchReport


def batch_report(
    items: Sequence[LLMItemResult],
    outcomes: Counter[str],
    n_unique: int,
    cache_hits: int,
    started: float,
) -> LLMBatchReport:
    """The accounting of a batch: ``items`` in input order, request ``outcomes`` counted by
    :func:`outcome_name`, and ``started`` from :func:`time.perf_counter`."""
    usage = Usage(cost_usd=0.0)
    for item in items:
        usage = usage + item.usage
    abstentions = Counter(i.abstain_reason for i in items if i.abstain_reason is not None)
    return LLMBatchReport(
        n_items=len(items),
        n_unique=n_unique,
        n_answered=sum(1 for i in items if not i.abstained),
        n_abstained=sum(abstentions.values()),
        abstentions=dict(abstentions),
        cache_hits=cache_hits,
        requests=usage.requests,
        request_outcomes=dict(outcomes),
        prompt_tokens=usage.prompt_tokens,
        completion_tokens=usage.completion_tokens,
        cost_usd=usage.cost_usd,
        seconds=time.perf_counter() - started,
    )


def usage_from_error(exc: LLMError) -> Usage:
    """The requests, tokens and cost an item spent before the retry loop gave up."""
    data = exc.usage or {}
    cost = data.get("cost_usd", 0.0)
    return Usage(
        requests=int(data.get("requests", exc.attempts) or 0),
        prompt_tokens=int(data.get("prompt_tokens", 0) or 0),
        completion_tokens=int(data.get("completion_tokens", 0) or 0),
        cost_usd=None if cost is None else float(cost),
    )


def outcome_name(result: AttemptResult) -> str:
    """How one request ended, as counted in :attr:`LLMBatchReport.request_outcomes`."""
    if isinstance(result, LabelFailure):
        return "cut_off" if result.cut_off else "invalid_label"
    kind = getattr(result, "kind", None)
    return str(kind) if kind is not None else "answered"


def cached_item(value: Any, classes: set[str]) -> LLMItemResult | None:
    """A cache entry as an item, or ``None`` when it is malformed or names a label outside
    the label set (a damaged or hand-edited cache must never route)."""
    try:
        item = LLMItemResult.from_cache(value)
    except (KeyError, TypeError, ValueError):
        return None
    if not item.scores or not isinstance(item.confidence_source, str | None):
        return None
    for label, score in item.scores:
        if label not in classes or not (0.0 <= score <= 1.0):  # also refuses NaN
            return None
    return item
