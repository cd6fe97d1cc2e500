"""The OpenAI chat-completions wire format, as the stand-in LLM reads and writes it.

Reading: the text to classify (inside the ``<text>`` markers of the prompt template) and
the label set (from the tool schema, the ``response_format`` schema -- OpenAI's
``json_schema`` shape or llama.cpp's ``json_object`` + ``schema`` -- or the JSON-mode
prompt's ``enum``). Writing: the completion body for one answer in the request's
structured-output mode -- a forced tool call (``tools``), JSON content (``json``) or a
```` ```json ```` code block (``md_json``) -- with token log-probabilities and their
alternatives when asked, ``max_tokens`` honoured (an answer past it is cut off, with
``finish_reason: "length"``), and approximate token usage.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Mapping, Sequence
from typing import Any

from .._safeio import parse_json
from ..exceptions import InputError

__all__ = [
    "LocalEndpoint",
    "completion_payload",
    "content_text",
    "extract_labels",
    "extract_text",
    "request_mode",
    "token_logprobs",
]


class LocalEndpoint:
    """The addresses of a stand-in listening on 127.0.0.1 at ``self.port``."""

    port: int

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def api_base(self) -> str:
        """The ``api_base`` to give litellm / the OpenAI SDK: ``http://127.0.0.1:PORT/v1``."""
        return self.url + "/v1"


_TEXT_RE = re.compile(r"<text>\n(.*)\n</text>", re.DOTALL)
_ENUM_RE = re.compile(r'"enum"\s*:\s*(\[[^\]]*\])')


def content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def extract_text(messages: Sequence[Mapping[str, Any]]) -> str:
    """The text to classify: inside ``<text>`` markers of the first user message."""
    for message in messages:
        if message.get("role") == "user":
            content = content_text(message.get("content"))
            match = _TEXT_RE.search(content)
            return match.group(1) if match else content
    return ""


def _schema_labels(schema: Any) -> tuple[str, ...]:
    props = (schema.get("properties") if isinstance(schema, Mapping) else None) or {}
    enum = (props.get("label") or {}).get("enum") if isinstance(props, Mapping) else None
    return tuple(str(v) for v in enum) if isinstance(enum, list) else ()


def extract_labels(body: Mapping[str, Any]) -> tuple[str, ...]:
    """The label set from the request's schema (tool parameters, ``response_format`` or
    the JSON-mode prompt)."""
    for tool in body.get("tools") or ():
        labels = _schema_labels((tool.get("function") or {}).get("parameters"))
        if labels:
            return labels
    response_format = body.get("response_format")
    if isinstance(response_format, Mapping):
        inner = response_format.get("json_schema")
        schema = inner.get("schema") if isinstance(inner, Mapping) else None
        labels = _schema_labels(schema or response_format.get("schema"))
        if labels:
            return labels
    for message in body.get("messages") or ():
        match = _ENUM_RE.search(content_text(message.get("content")))
        if match:
            try:
                values = parse_json(match.group(1), what="label enum")
            except InputError:
                continue
            if isinstance(values, list):
                return tuple(str(v) for v in values)
    return ()


def _approx_tokens(text: str) -> int:
    return max(1, math.ceil(len(text) / 4))


def request_mode(body: Mapping[str, Any]) -> str:
    """The structured-output mode a request asks for: ``tools``, ``json`` or ``md_json``."""
    if body.get("tools"):
        return "tools"
    return "json" if body.get("response_format") else "md_json"


def completion_payload(
    body: Mapping[str, Any],
    *,
    mode: str,
    label: str,
    confidence: float,
    completion_id: str,
    malformed: bool = False,
    empty: bool = False,
    labels: Sequence[str] = (),
    probability: float | None = None,
    tool_logprobs: bool = False,
) -> dict[str, Any]:
    """The completion body answering ``label`` with ``confidence`` in ``mode``.

    ``malformed`` cuts the answer's JSON mid-object; ``empty`` sends ``"choices": []``.
    ``probability`` (default: ``confidence`` within [0, 1]) is the label's share in the
    token log-probabilities; the other ``labels`` share the rest as alternatives
    (``top_logprobs``). ``tool_logprobs`` sends log-probabilities for tool calls too, as
    llama-cpp-python's server does (OpenAI sends none). A ``max_tokens`` the answer does
    not fit in cuts it there (``finish_reason: "length"``).
    """
    messages = body["messages"]
    obj = {"label": label, "confidence": round(confidence, 4)}
    arguments = json.dumps(obj)
    if malformed:
        arguments = arguments[: max(1, len(arguments) // 2)]  # cut mid-object
    finish = "stop"
    limit = body.get("max_tokens")
    if isinstance(limit, int) and not isinstance(limit, bool) and limit >= 0:
        if _approx_tokens(arguments) > limit:
            arguments, finish = arguments[: 4 * limit], "length"
    created = int(time.time())
    choice: dict[str, Any] = {"index": 0, "finish_reason": finish, "logprobs": None}
    share = min(1.0, max(0.0, confidence)) if probability is None else probability
    top = body.get("top_logprobs")
    top_n = int(top) if isinstance(top, int) and not isinstance(top, bool) else 0
    others = [x for x in labels if x != label][:top_n]
    if mode == "tools":
        tool = (body["tools"][0].get("function") or {}).get("name", "answer")
        choice["message"] = {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": f"call_{completion_id}",
                    "type": "function",
                    "function": {"name": tool, "arguments": arguments},
                }
            ],
        }
        content = arguments
        if body.get("logprobs") and tool_logprobs:
            choice["logprobs"] = {"content": token_logprobs(content, label, share, others)}
    else:
        content = arguments if mode == "json" else f"```json\n{arguments}\n```"
        choice["message"] = {"role": "assistant", "content": content}
        if body.get("logprobs"):
            choice["logprobs"] = {"content": token_logprobs(content, label, share, others)}
    prompt_chars = sum(len(content_text(m.get("content"))) for m in messages)
    prompt_tokens = max(1, prompt_chars // 4)
    completion_tokens = _approx_tokens(content)
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": created,
        "model": str(body.get("model", "standin")),
        "system_fingerprint": "hybridroute-standin",
        "choices": [] if empty else [choice],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def token_logprobs(
    content: str, label: str, confidence: float, others: Sequence[str] = ()
) -> list[dict[str, Any]]:
    """Split ``content`` into tokens; the label's tokens share ``log(confidence)``.

    With ``others``, the label's first token lists the first tokens of those labels as
    alternatives (``top_logprobs``), sharing ``1 - confidence`` equally -- those whose
    first token is the label's own are left out (they share its path). The first token
    then carries all of ``log(confidence)`` (the rest of the label is certain once it is
    chosen), so that token's listed probabilities sum to 1, as a real distribution's do.
    """
    logp = math.log(confidence) if confidence > 0 else -1e4
    needle = json.dumps(label)[1:-1]
    start = content.find(f'"label": "{needle}"')
    start = start + len('"label": "') if start >= 0 else -1
    pieces: list[tuple[str, float, list[tuple[str, float]]]] = []
    if start < 0:
        pieces = [(content, 0.0, [])]
    else:
        end = start + len(needle)
        label_pieces = [needle[i : i + 4] for i in range(0, len(needle), 4)] or [""]
        share = logp / len(label_pieces)
        firsts = sorted({json.dumps(x)[1:5] for x in others} - {label_pieces[0]})
        rest = (1.0 - confidence) / len(firsts) if firsts else 0.0
        alternatives = [(f, math.log(rest)) for f in firsts] if rest > 0 else []
        shares = [share] * len(label_pieces)
        if alternatives:
            shares = [logp] + [0.0] * (len(label_pieces) - 1)
        pieces = [(content[:start], 0.0, [])]
        pieces += [
            (p, shares[i], alternatives if i == 0 else []) for i, p in enumerate(label_pieces)
        ]
        pieces.append((content[end:], 0.0, []))
    return [
        {
            "token": tok,
            "logprob": lp,
            "bytes": list(tok.encode("utf-8")),
            "top_logprobs": [
                {"token": t, "logprob": alp, "bytes": list(t.encode("utf-8"))}
                for t, alp in [(tok, lp), *alts]
            ]
            if alts
            else [],
        }
        for tok, lp, alts in pieces
        if tok
    ]
