"""The OpenAI chat-completions wire format, as the stand-in LLM reads and writes it.

Reading: the text to classify (inside the ``<text>`` markers of the prompt template) and
the label set (from the tool schema, or the JSON-mode prompt's ``enum``). Writing: the
completion body for one answer in the request's structured-output mode -- a forced tool
call (``tools``), JSON content (``json``) or a ```` ```json ```` code block (``md_json``)
-- with token log-probabilities when asked, and approximate token usage.
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


def extract_labels(body: Mapping[str, Any]) -> tuple[str, ...]:
    """The label set from the request's schema (tool parameters or the JSON-mode prompt)."""
    for tool in body.get("tools") or ():
        props = ((tool.get("function") or {}).get("parameters") or {}).get("properties") or {}
        enum = (props.get("label") or {}).get("enum")
        if enum:
            return tuple(str(v) for v in enum)
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
) -> dict[str, Any]:
    """The completion body answering ``label`` with ``confidence`` in ``mode``.

    ``malformed`` cuts the answer's JSON mid-object; ``empty`` sends ``"choices": []``.
    """
    messages = body["messages"]
    obj = {"label": label, "confidence": round(confidence, 4)}
    arguments = json.dumps(obj)
    if malformed:
        arguments = arguments[: max(1, len(arguments) // 2)]  # cut mid-object
    created = int(time.time())
    choice: dict[str, Any] = {"index": 0, "finish_reason": "stop", "logprobs": None}
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
    else:
        content = arguments if mode == "json" else f"```json\n{arguments}\n```"
        choice["message"] = {"role": "assistant", "content": content}
        if body.get("logprobs"):
            choice["logprobs"] = {"content": token_logprobs(content, label, confidence)}
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


def token_logprobs(content: str, label: str, confidence: float) -> list[dict[str, Any]]:
    """Split ``content`` into tokens; the label's tokens share ``log(confidence)``."""
    logp = math.log(confidence) if confidence > 0 else -1e4
    needle = json.dumps(label)[1:-1]
    start = content.find(f'"label": "{needle}"')
    start = start + len('"label": "') if start >= 0 else -1
    pieces: list[tuple[str, float]] = []
    if start < 0:
        pieces = [(content, 0.0)]
    else:
        end = start + len(needle)
        label_pieces = [needle[i : i + 4] for i in range(0, len(needle), 4)] or [""]
        share = logp / len(label_pieces)
        pieces = [(content[:start], 0.0)]
        pieces += [(p, share) for p in label_pieces]
        pieces.append((content[end:], 0.0))
    return [
        {"token": tok, "logprob": lp, "bytes": list(tok.encode("utf-8")), "top_logprobs": []}
        for tok, lp in pieces
        if tok
    ]
