"""What a server takes: one profile per kind of OpenAI-compatible server.

Every model is asked through the same chat-completions request, but servers differ in
how they constrain structured output, and a request shape one accepts another refuses.
A :class:`ServerProfile` says, for one kind of server:

* whether it **constrains a named tool call** to the tool's schema (``TOOLS`` mode gives
  answers in the label set by construction);
* how it takes a **JSON schema** for the answer (``JSON_SCHEMA`` mode): OpenAI's
  ``{"type": "json_schema", "json_schema": {...}}``, or llama.cpp's
  ``{"type": "json_object", "schema": {...}}``;
* whether it returns **token log-probabilities for tool-call arguments** (OpenAI returns
  none; llama-cpp-python's server returns them, computed before its grammar);
* whether its grammar **holds a number to its bounds** (llama.cpp's does not: a
  ``confidence`` field in [0, 1] then comes back as ``10`` or ``-123``; the request
  then lists the allowed values, 0 to 1 in steps of 0.01, which its grammar does hold);
* whether it **always returns the log-probabilities asked for** (a hosted provider
  reached through litellm may return none: the logprobs method then also asks for a
  verbalised confidence to fall back on);
* whether it **bounds an answer by itself**: a hosted provider stops at its own limits;
  llama.cpp writes until the context is full, so the classifier sends a ``max_tokens``
  sized for the label set (:func:`answer_token_bound`) unless one is configured.

=============  ======================  ==============================  ===============
``server``     TOOLS                   JSON_SCHEMA request shape       tool logprobs
=============  ======================  ==============================  ===============
``openai``     constrained             ``json_schema``                 no
``llama_cpp``  constrained (grammar)   ``json_object`` + ``schema``    yes
=============  ======================  ==============================  ===============

``openai`` is the default: OpenAI's API, every hosted provider litellm translates the
OpenAI request for (Anthropic, Gemini, Bedrock...), and servers that take OpenAI's shapes
(vLLM, llama.cpp's own C++ ``llama-server``). ``llama_cpp`` is llama-cpp-python's server,
the one ``hybridroute llm-server`` starts.

**The mode-per-server rule** (``mode="auto"``, :meth:`ServerProfile.pick_mode`): ``tools``
where the server constrains tool calls -- unless the confidence method needs token
log-probabilities and the server returns none for tool calls; then ``json_schema`` in the
server's own request shape. ``json`` and ``md_json`` (the schema only in the prompt,
nothing constrained) are never picked: a small model writes until ``max_tokens`` in them.

This module imports nothing of litellm or instructor: the classifier validates its
settings with it, the seam (:mod:`._seam`) adapts requests with it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["DEFAULT_SERVER", "SERVERS", "ServerProfile", "answer_token_bound", "server_profile"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerProfile:
    """What one kind of server takes (see the module notes).

    Parameters
    ----------
    name : str
        The ``server`` setting of the classifier.
    constrains_tools : bool
        A named tool call is held to the tool's schema.
    schema_shape : {"json_schema", "json_object"}
        How ``response_format`` carries a JSON schema.
    tool_logprobs : bool
        Token log-probabilities come back for tool-call arguments.
    returns_logprobs : bool
        Token log-probabilities always come back when asked for (no verbalised fallback
        is needed).
    bounds_numbers : bool
        Its grammar holds a number to ``minimum`` / ``maximum``; when false the
        ``confidence`` field is sent as an enumeration of its allowed values.
    bounds_answers : bool
        The server stops a runaway answer by itself; when false the classifier sends a
        ``max_tokens`` sized for the label set.
    description : str
        One line for the docs and the CLI.
    """

    name: str
    constrains_tools: bool
    schema_shape: str
    tool_logprobs: bool
    returns_logprobs: bool
    bounds_numbers: bool
    bounds_answers: bool
    description: str

    def pick_mode(self, *, wants_logprobs: bool) -> str:
        """The structured-output mode for ``mode="auto"`` (the module's rule)."""
        if self.constrains_tools and (self.tool_logprobs or not wants_logprobs):
            return "tools"
        return "json_schema"

    def logprobs_refusal(self, mode: str) -> str | None:
        """Why ``confidence="logprobs"`` cannot work in ``mode`` here, or ``None``."""
        if mode == "tools" and not self.tool_logprobs:
            return (
                f"confidence='logprobs' needs a JSON mode (json, md_json, json_schema) on "
                f"server={self.name!r}, which returns no token log-probabilities for "
                "tool-call arguments; use mode='auto' (it picks json_schema there) or "
                "server='llama_cpp' for llama-cpp-python's server"
            )
        return None

    def adapt(self, request: dict[str, Any]) -> dict[str, Any]:
        """``request`` (instructor's shaped kwargs) in this server's shapes (a copy; the
        input is left as it was)."""
        request = dict(request)
        response_format = request.get("response_format")
        if isinstance(response_format, Mapping) and response_format.get("type") == "json_schema":
            inner = dict(response_format.get("json_schema") or {})
            if not self.bounds_numbers:
                inner["schema"] = _enumerated(inner.get("schema"))
            request["response_format"] = (
                {"type": "json_object", "schema": inner.get("schema")}
                if self.schema_shape == "json_object"
                else {**response_format, "json_schema": inner}
            )
        if not self.bounds_numbers and request.get("tools"):
            tools = []
            for tool in request["tools"]:
                function = dict(tool.get("function") or {})
                function["parameters"] = _enumerated(function.get("parameters"))
                tools.append({**tool, "function": function})
            request["tools"] = tools
        return request


#: The values a ``confidence`` in [0, 1] may take where a grammar ignores number bounds.
_CONFIDENCE_VALUES = [round(i / 100, 2) for i in range(101)]


def _enumerated(schema: Any) -> Any:
    """``schema`` with a ``confidence`` number bounded to [0, 1] listed as its values."""
    if not isinstance(schema, Mapping) or not isinstance(schema.get("properties"), Mapping):
        return schema
    field = schema["properties"].get("confidence")
    if not (
        isinstance(field, Mapping)
        and field.get("type") == "number"
        and field.get("minimum") == 0
        and field.get("maximum") == 1
    ):
        return schema
    listed = {**field, "enum": _CONFIDENCE_VALUES}
    return {**schema, "properties": {**schema["properties"], "confidence": listed}}


#: ``server`` name -> profile.
SERVERS: dict[str, ServerProfile] = {
    profile.name: profile
    for profile in (
        ServerProfile(
            name="openai",
            constrains_tools=True,
            schema_shape="json_schema",
            tool_logprobs=False,
            returns_logprobs=False,
            bounds_numbers=True,
            bounds_answers=True,
            description="OpenAI's request shapes: OpenAI, every hosted provider through "
            "litellm, vLLM, llama.cpp's llama-server",
        ),
        ServerProfile(
            name="llama_cpp",
            constrains_tools=True,
            schema_shape="json_object",
            tool_logprobs=True,
            returns_logprobs=True,
            bounds_numbers=False,
            bounds_answers=False,
            description="llama-cpp-python's server (hybridroute llm-server): schemas as "
            "json_object + schema, log-probabilities for tool calls, no answer bound",
        ),
    )
}

#: The profile used when none is named.
DEFAULT_SERVER = "openai"


def server_profile(name: str) -> ServerProfile:
    """The profile called ``name``.

    Raises
    ------
    ValueError
        For an unknown name (the message lists the known ones).
    """
    try:
        return SERVERS[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown server {name!r}; known: {', '.join(SERVERS)}") from None


def answer_token_bound(labels: Sequence[str]) -> int:
    """A ``max_tokens`` that a well-formed answer never reaches and a runaway one does.

    An answer is ``{"label": "<label>", "confidence": <number>}``: under a grammar a
    server may spell it one character per token, so the bound allows that for the
    longest label, plus room for the keys, a confidence with many digits and whitespace.
    """
    longest = max((len(json.dumps(str(label), ensure_ascii=False)) for label in labels), default=0)
    return 64 + longest
