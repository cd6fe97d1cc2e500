"""The one seam through which hybridroute asks a model for a label: instructor over litellm.

Only this module and the parts it is made of import litellm, instructor or the OpenAI SDK;
nothing on the import path of ``import hybridroute`` or ``import hybridroute.classifiers``
imports them.

How the work is split
---------------------
* **instructor** shapes the request for the response model (tool definition for
  ``TOOLS``, schema instructions for ``JSON`` / ``MD_JSON``) and parses and validates the
  answer against it (instructor's response parser for the mode, the one
  ``process_response_async`` calls). The response model is built from the label set, so
  an answer outside it fails validation; it, the shaped request and the parser are built
  once per label set and shared by every batch's asker (:func:`_shape_for`).
* **litellm** sends the request (any litellm model string, or an OpenAI-compatible
  ``api_base``), with its own retries switched off (``num_retries=0``), and prices the
  answer from its offline cost map.
* **the retry loop** (:func:`~hybridroute.classifiers.llm._retry.ask_with_budgets`) owns both
  budgets. instructor's own ``max_retries`` loop is deliberately not used: it would paste
  the feedback into the conversation for validation errors but has no transport budget of
  its own, and wrapping it in a transport retry would restart re-asks and blur the two
  budgets. One request here is exactly one HTTP request, so budgets are exact.

:meth:`LiteLLMLabelAsker.attempt` sends one request and classifies its outcome as
:class:`~hybridroute.classifiers.llm._retry.Answered`, :class:`TransportFailure` or
:class:`LabelFailure`; dependency exceptions are mapped at the seam
(:func:`~._errors.map_exception`) and never leak past it. Unknown exception types
(bugs) are not swallowed.

The parts
---------
* :mod:`._cap` -- the response byte limit (an httpx hook that bounds every body
  while it is received, compressed bodies included);
* :mod:`._clients` -- which route a model's requests take, and the capped HTTP
  clients for it (kept per event loop);
* :mod:`._errors` -- dependency exceptions mapped to transport failures, and the
  feedback of a re-ask;
* :mod:`._response` -- reading a response: answer, usage and cost, strict JSON,
  label log-probability;
* :mod:`._quiet` -- litellm's debug banner and pydantic's ``ReadOnly`` warning kept
  out of the host's output without changing its settings for good.
"""

from __future__ import annotations

import asyncio
import copy
import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, NamedTuple, Protocol

import instructor
import litellm
import pydantic
from instructor.processing.response import handle_response_model, process_response_async

from ._clients import ClientCache, build_client, resolve_route
from ._errors import describe_validation_error, map_exception
from ._options import DEFAULT_MAX_RESPONSE_BYTES, MODE_NAMES, TOP_LOGPROBS
from ._quiet import quiet_litellm, readonly_warnings_ignored, warm_up, warm_up_provider
from ._response import (
    cut_off,
    label_distribution,
    label_logprob,
    raw_answer,
    strict_json_problem,
    usage_of,
)
from ._retry import Answered, AttemptResult, LabelFailure, TransportFailure
from ._servers import DEFAULT_SERVER, server_profile

__all__ = ["MODES", "LabelAsker", "LiteLLMLabelAsker", "build_response_model"]

#: Our mode names -> instructor modes.
MODES: dict[str, instructor.Mode] = {
    "tools": instructor.Mode.TOOLS,
    "json": instructor.Mode.JSON,
    "md_json": instructor.Mode.MD_JSON,
    "json_schema": instructor.Mode.JSON_SCHEMA,
}
assert tuple(MODES) == MODE_NAMES  # one vocabulary: the classifier validates against it

_CONFIDENCE_DESCRIPTION = (
    "Your probability, between 0 and 1, that the label is correct for this text."
)

warm_up()  # litellm's first-use types, built here (synchronously) and quietly


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


# --------------------------------------------------------------------------- shapes

_PROBE = ({"role": "user", "content": "\x00hybridroute-probe"},)


class _Shape(NamedTuple):
    """What one label set asks for and how its answer is read, built once per label set."""

    response_model: type[pydantic.BaseModel]
    prepared: Any  # instructor's schema-carrying subclass of ``response_model``
    static_kwargs: dict[str, Any] | None  # the shaped request less its messages, if reusable
    parse: Callable[[Any], Any] | None  # instructor's answer parser for the mode, resolved


@functools.lru_cache(maxsize=64)
def _shape_for(labels: tuple[str, ...], with_confidence: bool, mode: str, server: str) -> _Shape:
    """The response model, instructor's shaping and its parser for one label set (cached:
    every asker of a label set -- one per batch -- shares them; the shaped kwargs are
    copied per asker and per request, never handed out)."""
    response_model = build_response_model(labels, with_confidence=with_confidence)
    prepared, kwargs = handle_response_model(
        response_model, mode=MODES[mode], messages=list(_PROBE)
    )
    kwargs = server_profile(server).adapt(kwargs)
    static: dict[str, Any] | None = None
    if kwargs.get("messages") == list(_PROBE):
        # Modes whose shaping leaves the messages alone (TOOLS, JSON_SCHEMA) reuse the
        # shaped kwargs; the others reshape each conversation.
        kwargs.pop("messages")
        static = kwargs
    return _Shape(response_model, prepared, static, _answer_parser(prepared, MODES[mode]))


def _answer_parser(prepared: Any, mode: instructor.Mode) -> Callable[[Any], Any] | None:
    """instructor's response parser for ``mode``, looked up once; ``None`` (then each answer
    goes through ``process_response_async``) when this instructor has no such registry.

    ``process_response_async`` does the same for a plain response model, but per answer
    it also walks the model for async validators (done here once: the model is fixed),
    re-derives the provider from the mode, looks the handlers up again and formats the
    whole response into a debug message; the parse and validation are the same call.
    """
    try:
        import instructor.v2  # noqa: F401  (registers the handlers)
        from instructor.v2.core.providers import (
            Provider,
            normalize_mode_for_provider,
            provider_from_mode,
        )
        from instructor.v2.core.registry import mode_registry
        from instructor.v2.validation.async_validators import reject_async_validators

        reject_async_validators(prepared)
        provider = provider_from_mode(mode, Provider.OPENAI)
        parser = mode_registry.get_handlers(
            provider, normalize_mode_for_provider(mode, provider)
        ).response_parser
    except Exception:  # another instructor: the public entry point per answer
        return None

    def parse(response: Any) -> Any:
        model = parser(
            response=response,
            response_model=prepared,
            validation_context=None,
            strict=None,
            stream=False,
            is_async=True,
        )
        if isinstance(model, pydantic.BaseModel):  # as process_response_async leaves it
            object.__setattr__(model, "_raw_response", response)
        return model

    return parse


# --------------------------------------------------------------------------- the asker


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
        Ask for token log-probabilities and their ``top_logprobs`` alternatives; the
        label's summed log-probability and the label distribution they give
        (:func:`~._response.label_distribution`) are returned in
        :attr:`Answered.label_logprob` and :attr:`Answered.label_scores` when the
        provider gives them.
    server : str
        The kind of server (:mod:`._servers`): how a JSON schema is sent.
    max_tokens : int or None
        Sent as ``max_tokens`` unless ``extra_params`` sets it (the classifier gives one
        for servers that do not bound an answer themselves).
    api_base, api_key : str or None
        An OpenAI-compatible endpoint and its key (``None``: litellm's own resolution,
        e.g. provider environment variables). The key is used, never stored elsewhere.
    timeout : float
        Seconds one request may take.
    extra_params : mapping
        More litellm parameters (``max_tokens``...).
    max_response_bytes : int or None
        Most bytes one response body may have, enforced while it is received and on the
        decoded bytes of a compressed body (see :mod:`._clients` for the providers
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
        server: str = DEFAULT_SERVER,
        max_tokens: int | None = None,
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
        self._profile = server_profile(server)
        self.max_tokens = max_tokens
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
        # The response model and the shaped request: built once per label set (_shape_for).
        shape = _shape_for(self.labels, bool(with_confidence), mode, server)
        self._response_model = shape.response_model
        self._prepared_model = shape.prepared
        self._parse = shape.parse
        self._static_kwargs: dict[str, Any] | None = (
            None if shape.static_kwargs is None else copy.deepcopy(shape.static_kwargs)
        )

    # ------------------------------------------------------------------ clients

    @property
    def route(self) -> str:
        """How requests reach the provider: ``"sdk"`` (the OpenAI SDK on the seam's capped
        client), ``"handler"`` (litellm's httpx handler with the seam's hook) or
        ``"litellm"`` (litellm's own clients: no byte limit)."""
        if self._route is None:
            with readonly_warnings_ignored(), quiet_litellm():  # synchronous: no await
                self._route, provider = resolve_route(
                    self.model,
                    custom_llm_provider=self.extra_params.get("custom_llm_provider"),
                    api_base=self.api_base,
                )
            warm_up_provider(self.model, provider)
        return self._route

    @property
    def capped(self) -> bool:
        """Whether this asker's response bodies are held to ``max_response_bytes``."""
        return self.max_response_bytes is not None and self.route != "litellm"

    def _client(self) -> Any:
        """The ``client=`` for litellm (``None``: litellm's own), built on first use."""
        if not self.capped:
            return None
        assert self.max_response_bytes is not None
        return build_client(
            self._shared if self._shared is not None else self._own,
            route=self.route,
            limit=self.max_response_bytes,
            timeout=self.timeout,
            ssl_verify=self.extra_params.get("ssl_verify"),
            api_base=self.api_base,
            api_key=self.api_key,
            organization=self.extra_params.get("organization"),  # litellm sets it on the client
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
        return self._profile.adapt(kwargs)

    async def attempt(
        self, messages: Sequence[Mapping[str, Any]], *, temperature: float | None = None
    ) -> AttemptResult:
        """Send one request; classify it as answered, transport failure or label failure."""
        with quiet_litellm():  # litellm's debug banner off while the request runs
            return await self._attempt(messages, temperature)

    async def _attempt(
        self, messages: Sequence[Mapping[str, Any]], temperature: float | None
    ) -> AttemptResult:
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
            params.setdefault("top_logprobs", TOP_LOGPROBS)
        if self.max_tokens is not None and not (
            {"max_tokens", "max_completion_tokens"} & set(self.extra_params)
        ):
            params["max_tokens"] = self.max_tokens
        try:
            client = self._client()  # inside: building an SDK client can refuse a missing key
            if client is not None:
                params["client"] = client
            # A backstop: litellm's timeout is per read; this bounds the whole request.
            async with asyncio.timeout(self.timeout + 1.0):
                response = await litellm.acompletion(**params)
        except Exception as exc:
            return map_exception(exc)  # raises TypeError for non-transport exceptions

        usage = usage_of(response)
        choices = getattr(response, "choices", None)
        if not choices:
            return TransportFailure(
                kind="empty_response", detail="response has no choices", usage=usage
            )
        raw = raw_answer(response)
        if cut_off(response):
            return LabelFailure(
                error=f"the answer was cut off at max_tokens ({usage.completion_tokens} "
                "tokens, finish_reason=length)",
                raw=raw,
                usage=usage,
                cut_off=True,
            )
        problem = strict_json_problem(raw, tools=self.mode == "tools")
        if problem is not None:
            return LabelFailure(error=problem, raw=raw, usage=usage)
        try:
            if self._parse is not None:
                parsed = self._parse(response)
            else:
                parsed = await process_response_async(
                    response, response_model=self._prepared_model, mode=self._instructor_mode
                )
        except Exception as exc:  # parsing external data: every failure is the answer's
            return LabelFailure(error=describe_validation_error(exc), raw=raw, usage=usage)
        label = str(parsed.label)
        return Answered(
            label=label,
            verbalized=getattr(parsed, "confidence", None),
            label_logprob=label_logprob(response, raw, label) if self.logprobs else None,
            label_scores=label_distribution(response, self.labels, label)
            if self.logprobs
            else None,
            raw=raw,
            usage=usage,
        )
