"""Retry and repair: one small typed loop driven by a frozen :class:`RetrySettings`.

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
good (401, 403, 404, 400) is not retried at all, nor is a response whose body the seam
refused (``response_too_large``: over the response byte limit; ``bad_response`` in a
content coding that cannot be decoded within it), since the same endpoint would send the
same body again; both end the question at once with ``provider_error``.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any

from ..exceptions import LLMError, LLMLabelError, LLMTimeoutError, LLMTransportError

__all__ = [
    "Answered",
    "AskResult",
    "AttemptResult",
    "LabelFailure",
    "RetrySettings",
    "TransportFailure",
    "Usage",
    "ask_with_budgets",
]

Message = Mapping[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class RetrySettings:
    """Budgets, backoff and timeout of the LLM seam (a frozen value).

    Parameters
    ----------
    max_transport_retries : int
        Transport failures (429, 5xx, connection, truncated/empty response, timeout)
        tolerated per question; the next one ends it (``provider_error`` or ``timeout``).
    max_label_repairs : int
        Re-asks with feedback after an invalid answer; the next invalid answer ends the
        question (``invalid_label``). The default, 1, is "repair once".
    timeout : float
        Seconds one request may take.
    backoff_initial, backoff_multiplier, backoff_max : float
        Delay before transport retry ``n`` (1-based) is
        ``min(backoff_max, backoff_initial * backoff_multiplier ** (n - 1))``, shrunk by
        jitter.
    jitter : float
        Fraction in [0, 1]: the delay is multiplied by ``1 - jitter * u`` with ``u`` a
        seeded uniform draw keyed by the question and the retry number, so runs repeat
        exactly whatever the scheduling order.
    max_retry_after : float
        A ``Retry-After`` longer than this ends the question at once (``provider_error``)
        rather than stalling a batch. A shorter one is honoured: the retry waits at least
        that long.
    seed : int
        Seeds the jitter.
    """

    max_transport_retries: int = 3
    max_label_repairs: int = 1
    timeout: float = 30.0
    backoff_initial: float = 0.5
    backoff_multiplier: float = 2.0
    backoff_max: float = 20.0
    jitter: float = 0.5
    max_retry_after: float = 60.0
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("max_transport_retries", "max_label_repairs", "seed"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"RetrySettings.{name} must be an integer, got {value!r}")
            if name != "seed" and value < 0:
                raise ValueError(f"RetrySettings.{name} must be >= 0, got {value}")
        for name in (
            "timeout",
            "backoff_initial",
            "backoff_multiplier",
            "backoff_max",
            "jitter",
            "max_retry_after",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ValueError(f"RetrySettings.{name} must be a number, got {value!r}")
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"RetrySettings.{name} must be finite and >= 0, got {value}")
            object.__setattr__(self, name, float(value))
        if self.timeout <= 0:
            raise ValueError("RetrySettings.timeout must be > 0")
        if self.backoff_multiplier < 1:
            raise ValueError("RetrySettings.backoff_multiplier must be >= 1")
        if self.jitter > 1:
            raise ValueError("RetrySettings.jitter must be in [0, 1]")

    @property
    def max_requests(self) -> int:
        """The most requests one question can make."""
        return 1 + self.max_transport_retries + self.max_label_repairs

    def backoff(self, retry_number: int, key: str = "") -> float:
        """Seconds to wait before transport retry ``retry_number`` (1-based), jittered."""
        base = min(
            self.backoff_max,
            self.backoff_initial * self.backoff_multiplier ** max(0, retry_number - 1),
        )
        digest = hashlib.sha256(f"{self.seed}\x1f{key}\x1f{retry_number}".encode()).digest()
        u = int.from_bytes(digest[:8], "big") / 2.0**64
        return base * (1.0 - self.jitter * u)

    def delay(self, retry_number: int, key: str = "", retry_after: float | None = None) -> float:
        """The wait before a transport retry: the backoff, or at least ``retry_after``.

        Parameters
        ----------
        retry_number : int
            Which transport retry of the question this is, 1-based (values below 1 get
            the first retry's backoff).
        key : str, default ""
            Identifies the question; with the seed and ``retry_number`` it fixes the
            jitter draw, so a rerun waits the same.
        retry_after : float or None, default None
            Seconds the provider asked to wait (``Retry-After``); the wait is at least
            this. Not capped here: the caller ends a question whose ``retry_after``
            exceeds ``max_retry_after`` before asking.

        Returns
        -------
        float
            Seconds to wait.
        """
        wait = self.backoff(retry_number, key)
        if retry_after is not None:
            wait = max(wait, retry_after)
        return wait

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict (round-trips through :meth:`from_dict`)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RetrySettings:
        """Build settings from :meth:`to_dict` output; unknown keys are an error."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown RetrySettings field(s): {', '.join(unknown)}")
        return cls(**dict(data))


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
    """One request that produced a label from the label set."""

    label: str
    verbalized: float | None = None
    label_logprob: float | None = None
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
    """One request whose answer was not a valid label; ``error`` is the feedback."""

    error: str
    raw: str = ""
    usage: Usage = Usage(requests=1)


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
