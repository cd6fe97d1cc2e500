"""The one seam through which hybridroute asks a model for a label: instructor over litellm.

This is the only module that imports litellm, instructor or the OpenAI SDK; nothing on the
import path of ``import hybridroute`` or ``import hybridroute.classifiers`` imports it.

How the work is split
---------------------
* **instructor** shapes the request for the response model (tool definition for
  ``TOOLS``, schema instructions for ``JSON`` / ``MD_JSON``) and parses and validates the
  answer against it (``instructor.processing.response``). The response model is built
  from the label set, so an answer outside it fails validation.
* **litellm** sends the request (any litellm model string, or an OpenAI-compatible
  ``api_base``), with its own retries switched off (``num_retries=0``), and prices the
  answer from its offline cost map.
* **the retry loop** (:func:`~hybridroute.classifiers._retry.ask_with_budgets`) owns both
  budgets. instructor's own ``max_retries`` loop is deliberately not used: it would paste
  the feedback into the conversation for validation errors but has no transport budget of
  its own, and wrapping it in a transport retry would restart re-asks and blur the two
  budgets. One request here is exactly one HTTP request, so budgets are exact.

:meth:`LiteLLMLabelAsker.attempt` sends one request and classifies its outcome as
:class:`~hybridroute.classifiers._retry.Answered`, :class:`TransportFailure` or
:class:`LabelFailure`; dependency exceptions are mapped here (:func:`map_exception`) and
never leak past the seam. Unknown exception types (bugs) are not swallowed.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import math
import re
import time
import warnings
from collections.abc import Mapping, Sequence
from typing import Any, Literal, Protocol

import httpx
import instructor
import litellm
import openai
import pydantic
from instructor.processing.response import handle_response_model, process_response_async

from ._retry import Answered, AttemptResult, LabelFailure, TransportFailure, Usage

__all__ = [
    "MODES",
    "LabelAsker",
    "LiteLLMLabelAsker",
    "build_response_model",
    "describe_validation_error",
    "map_exception",
    "parse_retry_after",
]

# litellm prints a "Give Feedback / Get Help" banner on every mapped error; our seam maps
# and reports those errors itself.
litellm.suppress_debug_info = True
# litellm's response types trip a harmless pydantic warning on first use; only that one
# message is silenced.
warnings.filterwarnings(
    "ignore",
    message=r"Items? .* on TypedDict class '\w+' (is|are) using the `ReadOnly` qualifier",
    category=UserWarning,
)

#: Our mode names -> instructor modes.
MODES: dict[str, instructor.Mode] = {
    "tools": instructor.Mode.TOOLS,
    "json": instructor.Mode.JSON,
    "md_json": instructor.Mode.MD_JSON,
    "json_schema": instructor.Mode.JSON_SCHEMA,
}

_CONFIDENCE_DESCRIPTION = (
    "Your probability, between 0 and 1, that the label is correct for this text."
)


class LabelAsker(Protocol):
    """The seam's interface: send one request for a label and classify the outcome."""

    async def attempt(
        self, messages: Sequence[Mapping[str, Any]], *, temperature: float | None = None
    ) -> AttemptResult: ...


def build_response_model(
    labels: Sequence[str], *, with_confidence: bool
) -> type[pydantic.BaseModel]:
    """The response model: ``label`` constrained to ``labels`` (a ``Literal``), and
    optionally a verbalised ``confidence`` in [0, 1]."""
    if not labels:
        raise ValueError("the label set is empty")
    label_type = Literal.__getitem__(tuple(labels))  # the explicit label set, as data
    fields: dict[str, Any] = {
        "label": (label_type, pydantic.Field(description="One of the allowed labels.")),
    }
    if with_confidence:
        fields["confidence"] = (
            float,
            pydantic.Field(ge=0.0, le=1.0, description=_CONFIDENCE_DESCRIPTION),
        )
    return pydantic.create_model("LabelAnswer", **fields)


# --------------------------------------------------------------------------- exception mapping


def parse_retry_after(
    headers: Mapping[str, str] | None, *, now: float | None = None
) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``Retry-After`` (seconds or HTTP date)."""
    if not headers:
        return None
    lowered = {str(k).lower(): str(v) for k, v in headers.items()}
    raw_ms = lowered.get("retry-after-ms")
    if raw_ms is not None:
        try:
            value = float(raw_ms) / 1000.0
            if math.isfinite(value) and value >= 0:
                return value
        except ValueError:
            pass
    raw = lowered.get("retry-after")
    if raw is None:
        return None
    try:
        value = float(raw)
        return value if math.isfinite(value) and value >= 0 else None
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def _headers_of(exc: BaseException) -> Mapping[str, str] | None:
    headers = getattr(exc, "litellm_response_headers", None)
    if headers:
        return headers
    response = getattr(exc, "response", None)
    return getattr(response, "headers", None)


def _detail(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:300]}"


def map_exception(exc: BaseException) -> TransportFailure:
    """Map a dependency exception (litellm, OpenAI SDK, httpx, asyncio) to a
    :class:`TransportFailure`.

    ==========================================  ================  =========
    exception                                   kind              retried
    ==========================================  ================  =========
    timeouts (litellm.Timeout, httpx, asyncio)  ``timeout``       yes
    429 (litellm.RateLimitError)                ``rate_limit``    yes, after Retry-After
    408 / 409 / 425 / 5xx status                ``server_error``  yes
    connection errors                           ``connection``    yes
    unparsable HTTP body                        ``bad_response``  yes
    other 4xx (auth, not found, bad request)    ``rejected``      no
    ==========================================  ================  =========

    Raises
    ------
    TypeError
        ``exc`` is not an error of the transport stack (a bug should not be swallowed).
    """
    if isinstance(exc, openai.APITimeoutError | httpx.TimeoutException | TimeoutError):
        return TransportFailure(kind="timeout", detail=_detail(exc))
    if isinstance(exc, openai.RateLimitError):
        return TransportFailure(
            kind="rate_limit", retry_after=parse_retry_after(_headers_of(exc)), detail=_detail(exc)
        )
    status = getattr(exc, "status_code", None)
    if isinstance(exc, openai.APIConnectionError):
        # litellm reports dropped / truncated connections with a 500 status code.
        return TransportFailure(kind="connection", detail=_detail(exc))
    if isinstance(exc, openai.APIResponseValidationError):
        return TransportFailure(kind="bad_response", detail=_detail(exc))
    if isinstance(exc, openai.APIStatusError | openai.APIError) or (
        isinstance(exc, openai.OpenAIError) and isinstance(status, int)
    ):
        if not isinstance(status, int):
            status = getattr(getattr(exc, "response", None), "status_code", None)
        if status == 429:
            return TransportFailure(
                kind="rate_limit",
                retry_after=parse_retry_after(_headers_of(exc)),
                detail=_detail(exc),
            )
        if status is None or status >= 500 or status in (408, 409, 425):
            return TransportFailure(
                kind="server_error",
                retry_after=parse_retry_after(_headers_of(exc)),
                detail=_detail(exc),
            )
        return TransportFailure(kind="rejected", retryable=False, detail=_detail(exc))
    if isinstance(exc, openai.OpenAIError):
        # e.g. "The api_key client option must be set": configuration, not transient.
        return TransportFailure(kind="rejected", retryable=False, detail=_detail(exc))
    if isinstance(exc, httpx.HTTPError | ConnectionError):
        return TransportFailure(kind="connection", detail=_detail(exc))
    if isinstance(exc, json.JSONDecodeError):
        return TransportFailure(kind="bad_response", detail=_detail(exc))
    raise TypeError(f"not a transport error: {type(exc).__name__}") from exc


def describe_validation_error(exc: BaseException) -> str:
    """Short feedback for a re-ask: what was wrong with the answer (never transport)."""
    if isinstance(exc, pydantic.ValidationError):
        parts = []
        for err in exc.errors(include_url=False)[:5]:
            loc = ".".join(str(x) for x in err.get("loc", ())) or "answer"
            given = err.get("input")
            shown = repr(given)
            if len(shown) > 120:
                shown = shown[:117] + "..."
            if err.get("type") == "literal_error":
                parts.append(f"{loc}: {shown} is not one of the allowed labels")
            elif err.get("type") == "json_invalid":
                parts.append(f"the answer is not valid JSON ({err.get('msg')}): {shown}")
            else:
                msg = str(err.get("msg", ""))[:300]
                parts.append(f"{loc}: {msg} (got {shown})")
        return "\n".join(parts)
    text = " ".join(str(exc).split())[:400]
    return f"the answer could not be read: {text}" if text else "the answer could not be read"


# --------------------------------------------------------------------------- the asker

_PROBE = ({"role": "user", "content": "\x00hybridroute-probe"},)


class LiteLLMLabelAsker:
    """Ask a litellm model for a label from a fixed label set (one request per call).

    Parameters
    ----------
    model : str
        Any litellm model string (``openai/gpt-4o-mini``, ``anthropic/...``,
        ``ollama/...``).
    labels : sequence of str
        The label set the answer is constrained to.
    mode : {"tools", "json", "md_json", "json_schema"}
        How instructor asks for structured output.
    with_confidence : bool
        Ask for a verbalised ``confidence`` field.
    logprobs : bool
        Ask for token log-probabilities (JSON modes); the label's summed log-probability
        is returned in :attr:`Answered.label_logprob` when the provider gives them.
    api_base, api_key : str or None
        An OpenAI-compatible endpoint and its key (``None``: litellm's own resolution,
        e.g. provider environment variables). The key is used, never stored elsewhere.
    timeout : float
        Seconds one request may take.
    extra_params : mapping
        More litellm parameters (``max_tokens``...).
    """

    def __init__(
        self,
        *,
        model: str,
        labels: Sequence[str],
        mode: str = "tools",
        with_confidence: bool = True,
        logprobs: bool = False,
        api_base: str | None = None,
        api_key: str | None = None,
        timeout: float = 30.0,
        extra_params: Mapping[str, Any] | None = None,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}; known: {', '.join(MODES)}")
        self.model = model
        self.labels = tuple(labels)
        self.mode = mode
        self.logprobs = bool(logprobs)
        self.api_base = api_base
        self.api_key = api_key
        self.timeout = float(timeout)
        self.extra_params = dict(extra_params or {})
        self._instructor_mode = MODES[mode]
        self._response_model = build_response_model(self.labels, with_confidence=with_confidence)
        # Shape the request once. Modes whose shaping leaves the messages alone (TOOLS,
        # JSON_SCHEMA) reuse the shaped kwargs; the others reshape each conversation.
        prepared, kwargs = handle_response_model(
            self._response_model, mode=self._instructor_mode, messages=list(_PROBE)
        )
        self._prepared_model = prepared
        if kwargs.get("messages") == list(_PROBE):
            kwargs.pop("messages")
            self._static_kwargs: dict[str, Any] | None = kwargs
        else:
            self._static_kwargs = None

    def _shape(self, messages: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        if self._static_kwargs is not None:
            return {**self._static_kwargs, "messages": [dict(m) for m in messages]}
        _, kwargs = handle_response_model(
            self._response_model,
            mode=self._instructor_mode,
            messages=[dict(m) for m in messages],
        )
        return kwargs

    async def attempt(
        self, messages: Sequence[Mapping[str, Any]], *, temperature: float | None = None
    ) -> AttemptResult:
        """Send one request; classify it as answered, transport failure or label failure."""
        request = self._shape(messages)
        params: dict[str, Any] = {
            **self.extra_params,
            **request,
            "model": self.model,
            "timeout": self.timeout,
            "num_retries": 0,  # the retry loop owns retries; litellm / the SDK make none
            "max_retries": 0,
        }
        if self.api_base is not None:
            params["api_base"] = self.api_base
        if self.api_key is not None:
            params["api_key"] = self.api_key
        if temperature is not None:
            params["temperature"] = temperature
        if self.logprobs:
            params["logprobs"] = True
        try:
            # A backstop: litellm's timeout is per read; this bounds the whole request.
            async with asyncio.timeout(self.timeout + 1.0):
                response = await litellm.acompletion(**params)
        except Exception as exc:
            return map_exception(exc)  # raises TypeError for non-transport exceptions

        usage = _usage_of(response)
        choices = getattr(response, "choices", None)
        if not choices:
            return TransportFailure(
                kind="empty_response", detail="response has no choices", usage=usage
            )
        raw = _raw_answer(response)
        try:
            parsed = await process_response_async(
                response, response_model=self._prepared_model, mode=self._instructor_mode
            )
        except Exception as exc:  # parsing external data: every failure is the answer's
            return LabelFailure(error=describe_validation_error(exc), raw=raw, usage=usage)
        label = str(parsed.label)
        return Answered(
            label=label,
            verbalized=getattr(parsed, "confidence", None),
            label_logprob=_label_logprob(response, raw, label) if self.logprobs else None,
            raw=raw,
            usage=usage,
        )


# --------------------------------------------------------------------------- response helpers


def _usage_of(response: Any) -> Usage:
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


def _raw_answer(response: Any) -> str:
    try:
        message = response.choices[0].message
    except (AttributeError, IndexError, TypeError):
        return ""
    tool_calls = getattr(message, "tool_calls", None) or []
    if tool_calls:
        return str(getattr(tool_calls[0].function, "arguments", "") or "")
    return str(getattr(message, "content", "") or "")


_LABEL_VALUE_RE = re.compile(r'"label"\s*:\s*"')


def _label_logprob(response: Any, content: str, label: str) -> float | None:
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
