"""Reading a chat-completion response: the raw answer, its usage and cost, strict JSON,
and the log-probability of the label.

These helpers read what litellm returned (an OpenAI-shaped response object) without
trusting its shape: a missing attribute reads as "nothing there", never an exception.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

import litellm
from instructor.utils import extract_json_from_codeblock

from ..._safeio import parse_json
from ...exceptions import InputError
from ._retry import Usage

__all__ = ["label_logprob", "raw_answer", "strict_json_problem", "usage_of"]


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
