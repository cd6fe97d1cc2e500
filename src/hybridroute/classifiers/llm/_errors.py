"""Dependency exceptions mapped at the seam: litellm, the OpenAI SDK, httpx and asyncio.

:func:`map_exception` turns what the transport stack raised into a
:class:`~._retry.TransportFailure` (with its kind, whether it is retried, and a
``Retry-After`` read by :func:`parse_retry_after`); :func:`describe_validation_error`
turns a refused answer into the short feedback of a re-ask. Nothing of a dependency's
exception types leaves the seam; an exception that is not the transport's (a bug) is not
swallowed.
"""

from __future__ import annotations

import email.utils
import json
import math
import time
from collections.abc import Mapping

import httpx
import openai
import pydantic

from ._cap import refusal_in
from ._retry import TransportFailure

__all__ = ["describe_validation_error", "map_exception", "parse_retry_after"]


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

    ==========================================  ======================  =========
    exception                                   kind                    retried
    ==========================================  ======================  =========
    timeouts (litellm.Timeout, httpx, asyncio)  ``timeout``             yes
    429 (litellm.RateLimitError)                ``rate_limit``          yes, after Retry-After
    408 / 409 / 425 / 5xx status                ``server_error``        yes
    connection errors                           ``connection``          yes
    unparsable HTTP body                        ``bad_response``        yes
    other 4xx (auth, not found, bad request)    ``rejected``            no
    body over ``max_response_bytes``            ``response_too_large``  no
    body in a coding it cannot bound            ``bad_response``        no
    ==========================================  ======================  =========

    A body refused by the byte limit (:class:`ResponseBodyRefused`, found anywhere on
    the exception chain, since the SDK and litellm wrap it) is not retried: the same
    endpoint would send the same body again.

    Raises
    ------
    TypeError
        ``exc`` is not an error of the transport stack (a bug should not be swallowed).
    """
    refused = refusal_in(exc)
    if refused is not None:
        return TransportFailure(kind=refused.kind, retryable=False, detail=str(refused))
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
