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

The response byte limit
-----------------------
A hostile or broken endpoint must not make the process receive, hold and parse an
unbounded body. The seam owns the HTTP clients its requests go through and gives them an
httpx **response event hook** (:func:`capping_hook`): httpx calls it once the status and
headers are in and before a byte of the body is read, and the hook replaces the body
stream with one that counts bytes *while they arrive* (:class:`CappedBody`). Past
``max_response_bytes`` the read stops with :class:`ResponseBodyRefused`; the connection
is closed and the rest is never received. A declared ``Content-Length`` over the limit
is refused before reading. Compressed bodies are decoded here, under the same limit on
the decoded bytes (a 30 KB gzip "bomb" that inflates to 30 MB is refused at the limit);
only ``gzip`` and ``deflate`` are asked for (``Accept-Encoding``), and a body in any
other coding (``br``, ``zstd``, stacked codings) is refused, since its decoded size could
not be bounded. The cap sits in front of every parser: the OpenAI SDK, litellm and
instructor only ever see a body within the limit. An endless or trickling body ends at
the limit or at the request timeout, whichever comes first.

How the client reaches litellm depends on the provider litellm resolves the model to:

* **OpenAI SDK providers** (``openai/...``, a bare OpenAI model name, ``custom_openai/...``,
  any OpenAI-compatible ``api_base``): an ``openai.AsyncOpenAI`` on the seam's httpx
  client is passed as litellm's ``client=``; base URL and key are resolved as litellm
  would (``api_base`` > ``litellm.api_base`` > ``OPENAI_BASE_URL`` > ``OPENAI_API_BASE`` >
  the OpenAI default; ``api_key`` > ``litellm.api_key`` / ``openai_key`` >
  ``OPENAI_API_KEY``).
* **litellm's own httpx handler** (``anthropic/...``, ``ollama/...``, ``ollama_chat/...``,
  ``hosted_vllm/...``, and the OpenAI route when litellm's
  ``EXPERIMENTAL_OPENAI_BASE_LLM_HTTP_HANDLER`` switch is on): a litellm
  ``AsyncHTTPHandler`` carrying the hook is passed as ``client=``.
* **Every other provider** (Bedrock, Vertex / Gemini, Azure, Groq, Mistral, ...) is sent
  as litellm sends it, **without the cap**: litellm reaches them through clients of its
  own that do not take ours. Their bodies are bounded only by the request timeout.
  :attr:`LiteLLMLabelAsker.capped` says which case a model string is.

The HTTP stack is otherwise litellm's own (its aiohttp transport, proxy settings from
the environment, TLS settings); no litellm global is set. Clients are kept in a
:class:`ClientCache` per event loop: the classifier's long-lived background loop keeps
one for the life of the process (closed at exit), so batches reuse connections as they
did with litellm's own client cache; an asker on any other loop builds its own and
closes them in :meth:`LiteLLMLabelAsker.aclose`.

A refused body is a :class:`~hybridroute.classifiers._retry.TransportFailure` of kind
``response_too_large`` (``bad_response`` for an unboundable coding), **not retried** --
the same endpoint would send the same body -- so the item abstains with
``provider_error`` after one request.
"""

from __future__ import annotations

import asyncio
import email.utils
import hashlib
import json
import math
import os
import re
import time
import warnings
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any, Literal, Protocol

import httpx
import instructor
import litellm
import openai
import pydantic
from instructor.processing.response import handle_response_model, process_response_async
from instructor.utils import extract_json_from_codeblock

from .._safeio import parse_json
from ..exceptions import InputError
from ._retry import Answered, AttemptResult, LabelFailure, TransportFailure, Usage

__all__ = [
    "DEFAULT_MAX_RESPONSE_BYTES",
    "MODES",
    "CappedBody",
    "ClientCache",
    "LabelAsker",
    "LiteLLMLabelAsker",
    "ResponseBodyRefused",
    "build_response_model",
    "capping_hook",
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


# --------------------------------------------------------------------------- response byte limit

#: Default limit on one response body, in bytes, as received and as decoded (1 MiB). A
#: label answer is a few hundred bytes; a long reasoning answer stays far below it.
DEFAULT_MAX_RESPONSE_BYTES = 1 << 20

#: The content codings the seam asks for, and the only ones it accepts: it decodes them
#: itself, under the limit.
_ACCEPT_ENCODING = "gzip, deflate"
_DECODABLE = frozenset({"gzip", "x-gzip", "deflate"})

#: litellm providers sent through the OpenAI SDK, honouring a caller's ``AsyncOpenAI``.
_SDK_PROVIDERS = frozenset({"openai", "custom_openai"})
#: litellm providers sent through litellm's own httpx handler, honouring a caller's
#: ``AsyncHTTPHandler`` (read in litellm 1.110: ``_complete_anthropic``, ``_complete_ollama``,
#: ``_complete_ollama_chat``, ``_complete_hosted_vllm`` pass ``client`` on).
_HANDLER_PROVIDERS = frozenset({"anthropic", "ollama", "ollama_chat", "hosted_vllm"})


class ResponseBodyRefused(Exception):
    """A response body the seam refused while receiving it; it never leaves the seam.

    It is raised inside httpx's read of the body, so it reaches :func:`map_exception`
    wrapped by the OpenAI SDK and by litellm; it is found on the exception chain.

    Attributes
    ----------
    kind : str
        The :class:`TransportFailure` kind: ``response_too_large``, or ``bad_response``
        for a content coding whose decoded size cannot be bounded.
    limit : int
        The byte limit in force.
    """

    def __init__(self, message: str, *, limit: int, kind: str = "response_too_large") -> None:
        super().__init__(message)
        self.kind = kind
        self.limit = limit


def _too_large(limit: int, what: str) -> ResponseBodyRefused:
    return ResponseBodyRefused(
        f"response body {what} more than the limit of {limit:,} bytes (max_response_bytes); "
        "the rest was not read",
        limit=limit,
    )


class _Inflater:
    """zlib / gzip decoding whose output never exceeds a budget (no decompression bomb)."""

    def __init__(self, encoding: str) -> None:
        self._obj = zlib.decompressobj(zlib.MAX_WBITS | 32)  # zlib or gzip, by its header
        # Some servers send "deflate" without the zlib wrapper: until the first output,
        # the input is kept so that it can be decoded again as raw deflate.
        self._pending: bytes | None = b"" if encoding == "deflate" else None

    def feed(self, data: bytes, budget: int) -> bytes:
        """Decode ``data``; the result is longer than ``budget`` only when over it."""
        try:
            out = self._obj.decompress(data, budget + 1)
        except zlib.error as exc:
            if self._pending is None:
                raise httpx.DecodingError(
                    f"response body is not valid compressed data: {exc}"
                ) from None
            data, self._pending = self._pending + data, None
            self._obj = zlib.decompressobj(-zlib.MAX_WBITS)
            return self.feed(data, budget)
        if self._pending is not None:
            self._pending = None if out else self._pending + data
        return out

    def finish(self) -> bytes:
        """What the decoder still holds (input was consumed in full: little or nothing)."""
        try:
            return self._obj.flush()
        except zlib.error as exc:  # pragma: no cover - flush after decompress rarely fails
            raise httpx.DecodingError(
                f"response body is not valid compressed data: {exc}"
            ) from None


class CappedBody(httpx.AsyncByteStream):
    """A response body stream that stops once more than ``limit`` bytes arrive.

    With ``encoding`` (``gzip`` / ``deflate``) the body is decoded here and the limit
    holds for the received and for the decoded bytes; at most ``limit + 1`` decoded bytes
    exist at any time beyond what was already passed on.
    """

    def __init__(
        self, inner: httpx.AsyncByteStream, *, limit: int, encoding: str | None = None
    ) -> None:
        self._inner = inner
        self._limit = limit
        self._encoding = encoding

    async def __aiter__(self) -> AsyncIterator[bytes]:
        limit = self._limit
        inflater = _Inflater(self._encoding) if self._encoding else None
        received = produced = 0
        async for chunk in self._inner:
            received += len(chunk)
            if received > limit:
                raise _too_large(limit, "received")
            if inflater is None:
                yield chunk
                continue
            out = inflater.feed(chunk, limit - produced)
            produced += len(out)
            if produced > limit:
                raise _too_large(limit, "decodes to")
            if out:
                yield out
        if inflater is not None:
            out = inflater.finish()
            if produced + len(out) > limit:
                raise _too_large(limit, "decodes to")
            if out:
                yield out

    async def aclose(self) -> None:
        await self._inner.aclose()


def capping_hook(limit: int) -> Callable[[httpx.Response], Awaitable[None]]:
    """An httpx ``response`` event hook that puts every body under ``limit`` bytes.

    httpx calls response hooks after the headers arrive and before the body is read
    (https://www.python-httpx.org/advanced/event-hooks/; hooks may modify the response).
    The hook refuses a declared ``Content-Length`` over the limit and a content coding it
    cannot decode within the limit, and replaces the body stream with a
    :class:`CappedBody`; a compressed body is decoded there (its ``Content-Encoding``
    header is removed so that httpx does not decode it again).
    """

    async def cap(response: httpx.Response) -> None:
        declared = response.headers.get("content-length")
        if declared is not None and declared.strip().isdigit() and int(declared) > limit:
            raise _too_large(limit, f"declared as {int(declared):,} bytes,")
        codings = [
            c.strip().lower()
            for c in response.headers.get_list("content-encoding", split_commas=True)
        ]
        codings = [c for c in codings if c and c != "identity"]
        if len(codings) > 1 or (codings and codings[0] not in _DECODABLE):
            raise ResponseBodyRefused(
                f"response body in content-encoding {', '.join(codings)!r}: only one of "
                f"{_ACCEPT_ENCODING} can be decoded within the byte limit",
                limit=limit,
                kind="bad_response",
            )
        if codings:
            del response.headers["content-encoding"]
        response.stream = CappedBody(
            response.stream,  # type: ignore[arg-type]  # httpx's async body stream
            limit=limit,
            encoding=codings[0] if codings else None,
        )

    return cap


async def _ask_for_decodable(request: httpx.Request) -> None:
    """Request hook: ask only for the codings :class:`CappedBody` decodes."""
    request.headers["Accept-Encoding"] = _ACCEPT_ENCODING


def _refusal_in(exc: BaseException) -> ResponseBodyRefused | None:
    """The :class:`ResponseBodyRefused` on ``exc``'s cause / context chain, if any."""
    seen: set[int] = set()
    todo: list[BaseException] = [exc]
    while todo and len(seen) < 32:
        current = todo.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, ResponseBodyRefused):
            return current
        todo.extend(e for e in (current.__cause__, current.__context__) if e is not None)
    return None


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
    refused = _refusal_in(exc)
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


# --------------------------------------------------------------------------- the clients


class ClientCache:
    """HTTP clients the seam built -- litellm ``AsyncHTTPHandler`` objects carrying the
    capping hook, and ``AsyncOpenAI`` clients over them -- keyed by what configures them.

    All clients belong to one event loop; use a cache from that loop only. Keys hold a
    SHA-256 digest of an API key, never the key.
    """

    def __init__(self) -> None:
        self._clients: dict[tuple[Any, ...], Any] = {}

    def __len__(self) -> int:
        return len(self._clients)

    def get(self, key: tuple[Any, ...], build: Callable[[], Any]) -> Any:
        """The client for ``key``, built by ``build()`` the first time."""
        client = self._clients.get(key)
        if client is None:
            client = self._clients[key] = build()
        return client

    async def aclose(self) -> None:
        """Close every client (the SDK clients share their handler's connection pool)."""
        clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            if not isinstance(client, openai.AsyncOpenAI):
                await client.close()


def _openai_through_handler() -> bool:
    """litellm's opt-in switch that sends the OpenAI route through its own httpx handler
    (which ignores an ``AsyncOpenAI`` client, so the handler is what must carry the hook)."""
    from litellm.secret_managers.main import get_secret_bool

    return bool(get_secret_bool("EXPERIMENTAL_OPENAI_BASE_LLM_HTTP_HANDLER"))


def _digest(secret: str | None) -> str | None:
    return None if secret is None else hashlib.sha256(secret.encode("utf-8")).hexdigest()


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
    max_response_bytes : int or None
        Most bytes one response body may have, enforced while it is received and on the
        decoded bytes of a compressed body (see the module docstring for the providers
        it covers, :attr:`capped`). ``None`` switches the limit off and leaves litellm to
        build its own clients.
    clients : ClientCache or None
        Where to keep the HTTP clients for reuse by later askers on the same event loop
        (the classifier passes one for its long-lived background loop, so connections
        are reused across batches). ``None``: the asker keeps its own, closed by
        :meth:`aclose`.

    Notes
    -----
    HTTP clients are built on the first request, inside the running event loop (they
    belong to it).
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
        max_response_bytes: int | None = DEFAULT_MAX_RESPONSE_BYTES,
        clients: ClientCache | None = None,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}; known: {', '.join(MODES)}")
        if max_response_bytes is not None and (
            isinstance(max_response_bytes, bool)
            or not isinstance(max_response_bytes, int)
            or max_response_bytes < 1
        ):
            raise ValueError(
                f"max_response_bytes must be a positive integer or None, got {max_response_bytes!r}"
            )
        self.max_response_bytes = max_response_bytes
        self._route: str | None = None
        self._shared = clients
        self._own = ClientCache()  # clients built for this asker alone (closed by aclose)
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

    # ------------------------------------------------------------------ clients

    @property
    def route(self) -> str:
        """How requests reach the provider: ``"sdk"`` (the OpenAI SDK on the seam's capped
        client), ``"handler"`` (litellm's httpx handler with the seam's hook) or
        ``"litellm"`` (litellm's own clients: no byte limit)."""
        if self._route is None:
            try:
                provider = litellm.get_llm_provider(
                    self.model,
                    custom_llm_provider=self.extra_params.get("custom_llm_provider"),
                    api_base=self.api_base,
                )[1]
            except Exception:  # an unknown model string: litellm refuses it at request time
                provider = None
            if provider in _SDK_PROVIDERS and _openai_through_handler():
                provider = "hosted_vllm"  # litellm then sends OpenAI through its handler
            self._route = (
                "sdk"
                if provider in _SDK_PROVIDERS
                else "handler"
                if provider in _HANDLER_PROVIDERS
                else "litellm"
            )
        return self._route

    @property
    def capped(self) -> bool:
        """Whether this asker's response bodies are held to ``max_response_bytes``."""
        return self.max_response_bytes is not None and self.route != "litellm"

    def _client(self) -> Any:
        """The ``client=`` for litellm (``None``: litellm's own), built on first use."""
        if not self.capped:
            return None
        limit = self.max_response_bytes
        assert limit is not None
        cache = self._shared if self._shared is not None else self._own
        ssl_verify = self.extra_params.get("ssl_verify")

        def build_handler() -> Any:
            from litellm.llms.custom_httpx.http_handler import AsyncHTTPHandler

            return AsyncHTTPHandler(
                timeout=self.timeout,
                event_hooks={"request": [_ask_for_decodable], "response": [capping_hook(limit)]},
                ssl_verify=ssl_verify,
            )

        handler_key = ("handler", limit, self.timeout, ssl_verify)
        handler = cache.get(handler_key, build_handler)
        if self.route == "handler":
            return handler
        # Resolved as litellm resolves them for the OpenAI route (litellm uses the client's
        # base URL and key once it is given one); reading, never setting.
        base_url = (
            self.api_base
            or litellm.api_base
            or os.environ.get("OPENAI_BASE_URL")
            or os.environ.get("OPENAI_API_BASE")
            or "https://api.openai.com/v1"
        )
        api_key = (
            self.api_key
            or litellm.api_key
            or litellm.openai_key
            or os.environ.get("OPENAI_API_KEY")
        )
        organization = self.extra_params.get("organization")  # litellm sets it on the client
        sdk_key = (*handler_key, base_url, _digest(api_key), organization)
        return cache.get(
            sdk_key,
            lambda: openai.AsyncOpenAI(  # without a key: refuses (a ``rejected`` failure)
                api_key=api_key,
                base_url=base_url,
                http_client=handler.client,
                max_retries=0,
                timeout=self.timeout,
            ),
        )

    async def aclose(self) -> None:
        """Close the HTTP clients this asker built itself (not those of a shared
        :class:`ClientCache`); a later request builds new ones."""
        await self._own.aclose()

    # ------------------------------------------------------------------ requests

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
            client = self._client()  # inside: building an SDK client can refuse a missing key
            if client is not None:
                params["client"] = client
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
        problem = _strict_json_problem(raw, tools=self.mode == "tools")
        if problem is not None:
            return LabelFailure(error=problem, raw=raw, usage=usage)
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


def _strict_json_problem(raw: str, *, tools: bool) -> str | None:
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
