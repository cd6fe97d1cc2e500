"""The seam's per-request client cost: what it builds once instead of per batch or request.

* The response model, instructor's shaping of the request and the answer parser are built
  once per label set (shared by every asker of it: one per batch), while each asker still
  gets its own copy of the shaped request.
* An answer is parsed by instructor's parser for the mode, looked up once, instead of
  ``process_response_async`` per answer (which walks the model for async validators,
  re-derives the handlers and formats the whole response into a debug message each time):
  the parsed answers and the refusals are the same as ``process_response_async``'s.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import litellm
import pytest
from instructor.processing.response import process_response_async

from hybridroute.classifiers import LLMClassifier
from hybridroute.classifiers.llm import _seam
from hybridroute.classifiers.llm._retry import Answered
from hybridroute.classifiers.llm._seam import LiteLLMLabelAsker
from hybridroute.testing import LabelMapPolicy, StandInLLM

LABELS = ("card_arrival", "refund", "top_up")


def asker(labels: tuple[str, ...] = LABELS, **kw: Any) -> LiteLLMLabelAsker:
    return LiteLLMLabelAsker(
        model="openai/gpt-4o-mini", labels=labels, api_base="http://127.0.0.1:9/v1", **kw
    )


def test_the_response_model_and_shaping_are_built_once_per_label_set(monkeypatch):
    _seam._shape_for.cache_clear()
    built: list[Any] = []
    original = _seam.handle_response_model

    def counting(*args: Any, **kwargs: Any) -> Any:
        built.append(args)
        return original(*args, **kwargs)

    monkeypatch.setattr(_seam, "handle_response_model", counting)
    first, second = asker(), asker()
    assert len(built) == 1  # the second asker of the label set builds nothing
    assert first._response_model is second._response_model
    assert first._prepared_model is second._prepared_model
    # ... but each asker has its own shaped request: none can change another's
    assert first._static_kwargs == second._static_kwargs
    assert first._static_kwargs is not second._static_kwargs
    assert first._static_kwargs is not None and second._static_kwargs is not None
    assert first._static_kwargs["tools"] is not second._static_kwargs["tools"]

    other = asker(("refund", "top_up"))
    no_confidence = asker(with_confidence=False)
    json_mode = asker(mode="json")
    assert len(built) == 4  # another label set, confidence field or mode: built anew
    assert other._response_model is not first._response_model
    assert "confidence" not in no_confidence._response_model.model_fields
    assert json_mode._static_kwargs is None  # JSON mode reshapes each conversation


def test_batches_of_one_classifier_share_the_response_model(monkeypatch):
    _seam._shape_for.cache_clear()
    built: list[Any] = []
    original = _seam.build_response_model

    def counting(*args: Any, **kwargs: Any) -> Any:
        built.append(args)
        return original(*args, **kwargs)

    monkeypatch.setattr(_seam, "build_response_model", counting)
    answers = {"my card": "card_arrival", "money back": "refund", "add funds": "top_up"}
    with StandInLLM(LabelMapPolicy(answers, confidence=0.8), labels=LABELS) as server:
        clf = LLMClassifier("openai/gpt-4o-mini", api_base=server.api_base).fit(
            list(answers), list(answers.values())
        )
        for text, label in answers.items():  # one batch (one asker) per text
            assert clf.predict([text]) == [label]
    assert len(built) == 1


def test_answers_are_parsed_without_process_response_async(monkeypatch):
    calls: list[Any] = []

    async def refuse(*args: Any, **kwargs: Any) -> Any:
        calls.append(args)
        raise AssertionError("process_response_async is not needed per answer")

    monkeypatch.setattr(_seam, "process_response_async", refuse)
    with StandInLLM(LabelMapPolicy({"money back": "refund"}, confidence=0.7), labels=LABELS) as s:
        seam = LiteLLMLabelAsker(
            model="openai/gpt-4o-mini", labels=LABELS, api_base=s.api_base, api_key="not-a-key"
        )

        async def go() -> Any:
            try:
                return await seam.attempt([{"role": "user", "content": "<text>money back</text>"}])
            finally:
                await seam.aclose()

        result = asyncio.run(go())
    assert isinstance(result, Answered)
    assert (result.label, result.verbalized) == ("refund", 0.7)
    assert calls == []


# --------------------------------------------------------------------------- same answers

_ANSWERS = [
    {"label": "refund", "confidence": 0.9},
    {"label": "top_up", "confidence": 0},
    {"label": "lost_card", "confidence": 0.9},  # outside the label set
    {"label": "refund", "confidence": 1.5},  # out of range
    {"label": "refund"},  # no confidence
    {"confidence": 0.5},  # no label
    {"label": "refund", "confidence": "high"},
    {"label": ["refund"], "confidence": 0.2},
]
_RAW = ["not json at all", "", '{"label": "refund", "confidence": 0.9', "[1, 2]"]


def _response(mode: str, raw: str, tool_name: str | None) -> Any:
    if mode == "tools":
        message: dict[str, Any] = {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_0",
                    "type": "function",
                    "function": {"name": tool_name, "arguments": raw},
                }
            ],
        }
    elif mode == "md_json":
        message = {"role": "assistant", "content": f"Here it is:\n```json\n{raw}\n```"}
    else:
        message = {"role": "assistant", "content": raw}
    return litellm.ModelResponse(
        id="chatcmpl-0",
        model="gpt-4o-mini",
        choices=[{"index": 0, "finish_reason": "stop", "message": message}],
        usage={"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    )


def _outcome(call: Any) -> tuple[str, Any]:
    try:
        parsed = call()
        if asyncio.iscoroutine(parsed):
            parsed = asyncio.run(parsed)
    except Exception as exc:
        return type(exc).__name__, str(exc)
    return type(parsed).__name__, parsed.model_dump()


@pytest.mark.parametrize("with_confidence", [True, False])
@pytest.mark.parametrize("mode", ["tools", "json", "md_json", "json_schema"])
def test_the_parser_reads_answers_as_process_response_async_does(mode, with_confidence):
    seam = asker(mode=mode, with_confidence=with_confidence)
    assert seam._parse is not None  # the installed instructor has the handler registry
    tool = None
    if mode == "tools":
        assert seam._static_kwargs is not None
        tool = seam._static_kwargs["tools"][0]["function"]["name"]
    raws = [json.dumps(answer) for answer in _ANSWERS] + _RAW
    outcomes = set()
    for raw in raws:
        response = _response(mode, raw, tool)
        fast = _outcome(lambda response=response: seam._parse(response))
        public = _outcome(
            lambda response=response: process_response_async(
                response, response_model=seam._prepared_model, mode=seam._instructor_mode
            )
        )
        assert fast == public, raw
        outcomes.add(fast[0])
    assert "LabelAnswer" in outcomes and len(outcomes) > 1  # both answers and refusals seen


def test_without_the_handler_registry_answers_go_through_process_response_async(monkeypatch):
    _seam._shape_for.cache_clear()
    monkeypatch.setattr(_seam, "_answer_parser", lambda prepared, mode: None)
    try:
        assert asker()._parse is None
    finally:
        _seam._shape_for.cache_clear()  # later askers get the parser again
