"""Reading a chat-completion response: the raw answer, its usage and cost, strict JSON,
whether it was cut off, and the label's log-probability or distribution.

These helpers read what litellm returned (an OpenAI-shaped response object) without
trusting its shape: a missing attribute reads as "nothing there", never an exception.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

import litellm
from instructor.utils import extract_json_from_codeblock

from ..._safeio import parse_json
from ...exceptions import InputError
from ._retry import Usage

__all__ = [
    "cut_off",
    "label_distribution",
    "label_logprob",
    "raw_answer",
    "strict_json_problem",
    "usage_of",
]


def usage_of(response: Any) -> Usage:
    """One request's tokens and cost (litellm's price, or its offline cost map; ``None``
    for a model without a known price)."""
    usage = getattr(response, "usage", None)
    prompt = int(getattr(usage, "prompt_tokens", 0) or 0)
    completion = int(getattr(usage, "completion_tokens", 0) or 0)
    cost: float | None = None
    hidden = getattr(response, "_hidden_params", None) or {}
    if isinstance(hidden, Mapping) and hidden.get("response_cost") is not None:
        cost = float(hidden["response_cost"])
    else:
        try:  # the offline cost map; unknown models have no price
            cost = float(litellm.completion_cost(completion_response=response))
        except Exception:  # litellm raises plain Exceptions for unmapped models
            cost = None
    return Usage(requests=1, prompt_tokens=prompt, completion_tokens=completion, cost_usd=cost)


def strict_json_problem(raw: str, *, tools: bool) -> str | None:
    """Why the answer's JSON is refused by the hardened reader (``_safeio.parse_json``:
    duplicate keys, nesting over 64, huge integers, NaN / Infinity, lone surrogates), or
    ``None``. Text that is not JSON at all is left to instructor's validation error."""
    text = raw if tools else extract_json_from_codeblock(raw)
    try:
        parse_json(text, source="the model's answer", what="the answer")
    except InputError as exc:
        try:
            json.loads(text)
        except RecursionError:
            pass  # nested deeper than Python's parser goes: refused as too deep
        except ValueError:
            return None
        return f"the answer is not acceptable JSON: {exc.reason}"
    return None


def raw_answer(response: Any) -> str:
    """The answer as the model wrote it: the first tool call's arguments, or the content."""
    try:
        message = response.choices[0].message
    except (AttributeError, IndexError, TypeError):
        return ""
    tool_calls = getattr(message, "tool_calls", None) or []
    if tool_calls:
        return str(getattr(tool_calls[0].function, "arguments", "") or "")
    return str(getattr(message, "content", "") or "")


_LABEL_VALUE_RE = re.compile(r'"label"\s*:\s*"')


def label_logprob(response: Any, content: str, label: str) -> float | None:
    """Sum of the log-probabilities of the tokens that spell the label's value."""
    try:
        tokens = response.choices[0].logprobs.content
    except (AttributeError, IndexError, TypeError):
        return None
    if not tokens:
        return None
    match = _LABEL_VALUE_RE.search(content)
    if match is None:
        return None
    start = match.end()
    end = start + len(json.dumps(label)[1:-1])
    total, position, seen = 0.0, 0, False
    for token in tokens:
        text = str(getattr(token, "token", "") or "")
        token_end = position + len(text)
        if token_end > start and position < end:
            logprob = getattr(token, "logprob", None)
            if logprob is None:
                return None
            total += float(logprob)
            seen = True
        position = token_end
    return total if seen else None


def cut_off(response: Any) -> bool:
    """Whether the answer stopped at ``max_tokens`` (``finish_reason == "length"``)."""
    try:
        return getattr(response.choices[0], "finish_reason", None) == "length"
    except (AttributeError, IndexError, TypeError):
        return False


def _token_alternatives(token: Any) -> dict[str, float] | None:
    """``{text: logprob}`` of a token and its listed alternatives (``None``: unreadable)."""
    text = getattr(token, "token", None)
    logprob = getattr(token, "logprob", None)
    if not isinstance(text, str) or not isinstance(logprob, int | float):
        return None
    out = {text: float(logprob)}
    for alt in getattr(token, "top_logprobs", None) or ():
        alt_text = getattr(alt, "token", None)
        alt_logprob = getattr(alt, "logprob", None)
        if isinstance(alt_text, str) and isinstance(alt_logprob, int | float):
            out.setdefault(alt_text, float(alt_logprob))
    return out


def label_distribution(
    response: Any, labels: Sequence[str], label: str
) -> tuple[tuple[str, float], ...] | None:
    """The distribution over ``labels`` read from the answer's token log-probabilities.

    The tokens that spell the label's value (and the one that closes it) are walked in
    order. At each, the token written and its listed alternatives (``top_logprobs``)
    that continue *some* label still possible are the choices a constrained decoder
    had; their probabilities, renormalised over those choices (the grammar of a
    constrained server forbids the rest, and servers report log-probabilities from
    before it), split the remaining mass: an alternative's share goes to the labels it
    starts (equally, when it starts several: the one approximation), the written token's
    share carries on to the next token. The result sums to 1, works for labels of any
    number of tokens and for any tokenisation, and covers only the labels that some
    listed alternative reaches (the others get 0).

    ``None`` when the response has no log-probabilities, no alternatives at the label
    (nothing to compare with: :func:`label_logprob` is all there is), or tokens that do
    not spell ``label``.
    """
    try:
        tokens = list(response.choices[0].logprobs.content or ())
    except (AttributeError, IndexError, TypeError):
        return None
    steps = [_token_alternatives(token) for token in tokens]
    if not steps or any(step is None for step in steps):
        return None
    texts = [str(getattr(token, "token", "")) for token in tokens]
    joined = "".join(texts)
    match = _LABEL_VALUE_RE.search(joined)
    if match is None:
        return None
    start = match.end()
    head = joined[:start]
    # Each label as its value would be written, closing quote included (so that a label
    # that is a prefix of another stays apart from it).
    spelled = {str(x): head + json.dumps(str(x), ensure_ascii=False)[1:-1] + '"' for x in labels}
    if label not in spelled:
        return None
    alive = set(spelled)
    mass: dict[str, float] = {}
    path = 1.0
    position = 0
    compared = False
    for text, step in zip(texts, steps, strict=True):
        end = position + len(text)
        if end < start:  # before the value's opening quote: the same for every label
            position = end
            continue
        assert step is not None
        prefix = joined[:position]
        written = prefix + text
        choices: list[tuple[float, list[str]]] = []
        chosen_weight = 0.0
        chosen_labels: list[str] = []
        for alt, logprob in step.items():
            candidate = prefix + alt
            reaches = [
                x
                for x in alive
                if spelled[x].startswith(candidate) or candidate.startswith(spelled[x])
            ]
            if alt == text:
                chosen_weight, chosen_labels = math.exp(logprob), reaches
            elif reaches and len(candidate) > start:
                choices.append((math.exp(logprob), reaches))
        if not chosen_labels:
            return None  # the tokens do not spell a label
        compared = compared or bool(choices)
        total = chosen_weight + sum(weight for weight, _ in choices)
        if total <= 0.0:
            return None
        for weight, reaches in choices:
            share = path * weight / total / len(reaches)
            for x in reaches:
                mass[x] = mass.get(x, 0.0) + share
        path *= chosen_weight / total
        alive = set(chosen_labels)
        closed = [x for x in alive if written.startswith(spelled[x])]
        if closed:
            if closed != [label]:
                return None
            mass[label] = mass.get(label, 0.0) + path
            break
        position = end
    else:
        return None  # the value was never closed
    if not compared:
        return None
    total_mass = sum(mass.values())
    ranked = sorted(((x, m / total_mass) for x, m in mass.items() if m > 0), key=lambda kv: -kv[1])
    return tuple(ranked)
