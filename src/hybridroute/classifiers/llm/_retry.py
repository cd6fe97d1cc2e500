"""Retry and repair: one small typed loop driven by a frozen :class:`RetrySettings`
(the one settings value, :mod:`hybridroute._retry_settings`, shared with the HTTP client).

Asking a model for a label can fail in two unrelated ways, and each has its own budget:

* **transport** -- a 429 (its ``Retry-After`` honoured), a 5xx, a dropped connection, a
  truncated or empty response, a timeout. The same request is sent again after a seeded,
  exponentially growing delay; the failure is *never* shown to the model.
* **label** -- the model answered, but not with a label from the label set (out of set,
  unparsable JSON, no tool call). The request is re-asked with the model's answer and the
  validation error appended as feedback (see ``PromptTemplate.repair_messages``).

:func:`ask_with_budgets` runs one question until it has a valid label or a budget is
spent, and then ends in exactly one documented exception: :class:`~hybridroute.exceptions.
LLMTimeoutError` (``reason_code="timeout"``), :class:`~hybridroute.exceptions.
LLMTransportError` (``"provider_error"``) or :class:`~hybridroute.exceptions.LLMLabelError`
(``"invalid_label"``). The classifier turns that exception into an abstention; a batch is
never stopped by one item.

The budgets are per question and exact: at most ``1 + max_transport_retries +
max_label_repairs`` requests (:attr:`RetrySettings.max_requests`). A request rejected for
good (401, 403, 404, 400) is not retried at all, nor is an answer cut off at
``max_tokens`` (re-asking would run on again: ``invalid_label`` at once), nor a response
whose body the seam refused (``response_too_large``: over the response byte limit; ``bad_response`` in a
content coding that cannot be decoded within it), since the same endpoint would send the
same body again; both end the question at once with ``provider_error``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..._retry_settings import RetrySettings
from ...exceptions import LLMError, LLMLabelError, LLMTimeoutError, LLMTransportError

__all__ = [
    "Answered",
    "AskResult",
    "AttemptResult",
    "LabelFailure",
    "TransportFailure",
    "Usage",
    "ask_with_budgets",
]

Message = Mapping[str, Any]

#: Characters of a cut-off answer kept for diagnosis (it ran to ``max_tokens``).
_RAW_KEPT = 2000


# --------------------------------------------------------------------------- attempt outcomes


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens and cost of some requests. ``cost_usd`` is ``None`` when unknown."""

    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = 0.0

    def __add__(self, other: Usage) -> Usage:
        cost = (
            None
            if self.cost_usd is None or other.cost_usd is None
            else self.cost_usd + other.cost_usd
        )
        return Usage(
            self.requests + other.requests,
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            cost,
        )

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def to_dict(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.total_tokens,
            "cost_usd": self.cost_usd,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Answered:
    """One request that produced a label from the label set.

    ``label_logprob`` is the summed log-probability of the label's tokens and
    ``label_scores`` the distribution over the label set read from the tokens'
    alternatives (best first), when the provider returned token log-probabilities.
    """

    label: str
    verbalized: float | None = None
    label_logprob: float | None = None
    label_scores: tuple[tuple[str, float], ...] | None = None
    raw: str = ""
    usage: Usage = Usage(requests=1)


@dataclass(frozen=True, slots=True, kw_only=True)
class TransportFailure:
    """One request that did not produce an answer (never shown to the model).

    ``kind`` is one of ``rate_limit``, ``server_error``, ``connection``, ``timeout``,
    ``bad_response``, ``empty_response``, ``rejected``, ``response_too_large``;
    ``retryable`` is false for a request rejected for good (``rejected``:
    400/401/403/404...) and for a body refused by the response byte limit
    (``response_too_large``, or ``bad_response`` for an undecodable coding).
    """

    kind: str
    retryable: bool = True
    retry_after: float | None = None
    detail: str = ""
    usage: Usage = Usage(requests=1)


@dataclass(frozen=True, slots=True, kw_only=True)
class LabelFailure:
    """One request whose answer was not a valid label; ``error`` is the feedback.

    ``cut_off``: the answer stopped at ``max_tokens`` (``finish_reason="length"``). It
    is not re-asked -- the model would run on again, and the runaway text would have to
    go back into the conversation -- so the question ends at once (``invalid_label``).
    """

    error: str
    raw: str = ""
    usage: Usage = Usage(requests=1)
    cut_off: bool = False


AttemptResult = Answered | TransportFailure | LabelFailure


@dataclass(frozen=True, slots=True, kw_only=True)
class AskResult:
    """A valid answer with what it took to get it."""

    answer: Answered
    usage: Usage
    transport_failures: int
    repairs: int

    @property
    def requests(self) -> int:
        return self.usage.requests


def _give_up(failure: TransportFailure, message: str, usage: Usage, requests: int) -> LLMError:
    cls = LLMTimeoutError if failure.kind == "timeout" else LLMTransportError
    return cls(
        message,
        attempts=requests,
        last_response=f"{failure.kind}: {failure.detail}".strip(),
        usage=usage.to_dict(),
    )


async def ask_with_budgets(
    attempt: Callable[[Sequence[Message]], Awaitable[AttemptResult]],
    messages: Sequence[Message],
    settings: RetrySettings,
    *,
    reask: Callable[[LabelFailure], Sequence[Message]],
    key: str = "",
    sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
) -> AskResult:
    """Ask until a valid label comes back or a budget is spent.

    Parameters
    ----------
    attempt : async callable
        Sends one request with the given messages and classifies its outcome; it must
        not raise for transport or label problems (the seam maps them).
    messages : sequence of message dicts
        The question.
    settings : RetrySettings
        Budgets, backoff, timeout.
    reask : callable
        Messages appended after a :class:`LabelFailure` (the answer and its validation
        error). Only label failures extend the conversation.
    key : str
        Identifies the question for the seeded jitter.
    sleep : async callable
        Injected for tests.

    Returns
    -------
    AskResult

    Raises
    ------
    LLMTimeoutError, LLMTransportError
        The transport budget is spent (or the request was rejected for good, or the
        provider asked to wait longer than ``settings.max_retry_after``).
    LLMLabelError
        The repair budget is spent.
    """
    conversation = list(messages)
    usage = Usage(cost_usd=0.0)
    transport_failures = 0
    repairs = 0
    while True:
        result = await attempt(conversation)
        usage = usage + result.usage
        if isinstance(result, Answered):
            return AskResult(
                answer=result, usage=usage, transport_failures=transport_failures, repairs=repairs
            )
        if isinstance(result, TransportFailure):
            transport_failures += 1
            if not result.retryable:
                what = (
                    "request rejected"
                    if result.kind == "rejected"
                    else f"not retried ({result.kind})"
                )
                raise _give_up(result, f"{what}: {result.detail}", usage, usage.requests)
            if transport_failures > settings.max_transport_retries:
                raise _give_up(
                    result,
                    f"transport budget spent after {transport_failures} failure(s); "
                    f"last: {result.kind}",
                    usage,
                    usage.requests,
                )
            if result.retry_after is not None and result.retry_after > settings.max_retry_after:
                raise _give_up(
                    result,
                    f"provider asked to retry after {result.retry_after:g}s "
                    f"(> max_retry_after={settings.max_retry_after:g}s)",
                    usage,
                    usage.requests,
                )
            await sleep(settings.delay(transport_failures, key, result.retry_after))
            continue
        if result.cut_off:  # a runaway answer: bounded by max_tokens, never re-asked
            raise LLMLabelError(
                f"{result.error}; not re-asked",
                attempts=usage.requests,
                last_response=result.raw[:_RAW_KEPT],
                usage=usage.to_dict(),
            )
        # LabelFailure: re-ask with the validation error, never with a transport error.
        repairs += 1
        if repairs > settings.max_label_repairs:
            raise LLMLabelError(
                f"no valid label after {repairs} invalid answer(s): {result.error}",
                attempts=usage.requests,
                last_response=result.raw,
                usage=usage.to_dict(),
            )
        conversation = [*conversation, *reask(result)]
