"""Asking the model about one text: samples, budgets and votes into one item result.

:func:`item_asker` turns a label asker (the seam, :mod:`._seam`) into the coroutine
the classifier runs once per distinct text: it renders the prompt, runs the retry loop
(:func:`~._retry.ask_with_budgets`) for each sample the confidence method wants, with at
most ``max_concurrency`` requests in flight across the batch, counts every request's
outcome, and turns the answers into ranked raw scores -- or, when no sample was answered,
into an abstention with the most common reason code. No exception of one item leaves it.

This module imports no HTTP stack; the asker it is given does.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..._retry_settings import RetrySettings
from ...exceptions import LLMError
from ._confidence import ConfidenceMethod
from ._prompt import PromptTemplate
from ._results import LLMItemResult, outcome_name, usage_from_error
from ._retry import AttemptResult, LabelFailure, Usage, ask_with_budgets

if TYPE_CHECKING:  # pragma: no cover
    from ._seam import LabelAsker

__all__ = ["item_asker"]


def item_asker(
    asker: LabelAsker,
    *,
    template: PromptTemplate,
    labels: Sequence[str],
    method: ConfidenceMethod,
    settings: RetrySettings,
    max_concurrency: int,
    outcomes: Counter[str],
    examples_for: Callable[[str], Sequence[tuple[str, str]]] | None = None,
) -> Callable[[str, str], Awaitable[LLMItemResult]]:
    """The per-item coroutine ``ask(key, text) -> LLMItemResult``.

    Parameters
    ----------
    asker : LabelAsker
        Sends one request and classifies its outcome.
    template : PromptTemplate
        Renders the conversation and the repair (re-ask) messages.
    labels : sequence of str
        The label set, in the order ties between equal scores are broken.
    method : ConfidenceMethod
        How many samples to ask for, at which temperature, and how answers become scores.
    settings : RetrySettings
        The transport and label-repair budgets.
    max_concurrency : int
        Requests in flight at once, across every item of the batch.
    outcomes : Counter
        Counts each request's outcome (:func:`~._results.outcome_name`), updated in place.
    examples_for : callable or None
        Labelled examples to show with one text (the most similar training texts,
        :mod:`._similar`), besides the template's own.
    """
    labels = list(labels)
    order = {label: i for i, label in enumerate(labels)}
    semaphore = asyncio.Semaphore(max_concurrency)
    temperature = method.temperature

    async def attempt(messages: Sequence[Mapping[str, Any]]) -> AttemptResult:
        async with semaphore:
            result = await asker.attempt(messages, temperature=temperature)
        outcomes[outcome_name(result)] += 1
        return result

    def reask(failure: LabelFailure) -> list[dict[str, str]]:
        return template.repair_messages(failure.raw, failure.error)

    async def sample(messages: list[dict[str, str]], key: str) -> Any:
        try:
            return await ask_with_budgets(attempt, messages, settings, reask=reask, key=key)
        except LLMError as exc:
            return exc

    async def ask(key: str, text: str) -> LLMItemResult:
        shown = (examples_for(text) or ()) if examples_for is not None else ()
        messages = template.render(labels, text, examples=shown)
        done = await asyncio.gather(
            *(sample(messages, f"{key}:{i}") for i in range(method.n_samples))
        )
        usage = Usage(cost_usd=0.0)
        answers = []
        failures: list[LLMError] = []
        for item in done:
            if isinstance(item, LLMError):
                failures.append(item)
                usage = usage + usage_from_error(item)
            else:
                answers.append(item.answer)
                usage = usage + item.usage
        if not answers:
            reasons = Counter(f.reason_code for f in failures)
            reason = max(reasons, key=lambda r: (reasons[r], -_first(failures, r)))
            detail = next(str(f) for f in failures if f.reason_code == reason)
            return LLMItemResult(scores=(), abstain_reason=reason, detail=detail, usage=usage)
        scores, source = method.scores(answers)
        if not scores:  # e.g. log-probabilities asked for, none returned: no evidence
            return LLMItemResult(
                scores=(),
                abstain_reason="provider_error",
                detail=f"the answer carries no confidence ({source}): the provider "
                "returned no token log-probabilities for it",
                usage=usage,
            )
        ranked = tuple(sorted(scores.items(), key=lambda kv: (-kv[1], order.get(kv[0], 0))))
        return LLMItemResult(scores=ranked, confidence_source=source, usage=usage)

    return ask


def _first(failures: Sequence[LLMError], reason: str) -> int:
    """Where ``reason`` first occurs (ties between reasons go to the earliest)."""
    return next(i for i, f in enumerate(failures) if f.reason_code == reason)
