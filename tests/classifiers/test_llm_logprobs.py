"""Issue 28, item 4: the label distribution read from token log-probabilities, for labels
of one or several tokens, and the logprobs confidence method end to end on the stand-in
(log-probabilities for tool calls, as llama-cpp-python's server sends them)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from hybridroute.classifiers import LLMClassifier, RetrySettings
from hybridroute.classifiers.llm._confidence import TokenLogprobs
from hybridroute.classifiers.llm._response import label_distribution
from hybridroute.classifiers.llm._retry import Answered
from hybridroute.testing import LabelMapPolicy, StandInLLM

HEAD = ['{"', "label", '":', ' "']


def response(steps):
    """A chat response whose tokens are ``steps``: (token, p, {alternative: p}) each."""
    tokens = []
    for token, p, alternatives in steps:
        listed = {token: p, **alternatives}
        tokens.append(
            SimpleNamespace(
                token=token,
                logprob=math.log(p),
                top_logprobs=[
                    SimpleNamespace(token=t, logprob=math.log(q)) for t, q in listed.items()
                ],
            )
        )
    choice = SimpleNamespace(logprobs=SimpleNamespace(content=tokens))
    return SimpleNamespace(choices=[choice])


def answer(*value_steps):
    """The answer's tokens: the fixed head, the value's steps, then the closing tokens."""
    return response(
        [(t, 0.9, {}) for t in HEAD] + list(value_steps) + [(t, 0.99, {}) for t in ('"', "}")]
    )


def as_dict(pairs):
    return {label: pytest.approx(p) for label, p in pairs}


def test_single_token_labels_share_the_renormalised_mass():
    got = label_distribution(
        answer(("refund", 0.6, {"card": 0.2, "top": 0.1, "hello": 0.1})),
        ["card", "refund", "top"],
        "refund",
    )
    assert dict(got) == as_dict([("refund", 0.6 / 0.9), ("card", 0.2 / 0.9), ("top", 0.1 / 0.9)])


def test_multi_token_labels_and_labels_that_prefix_others():
    # "top_up" is written; at its closing quote the model also considered "_" (-> top_up_failed)
    labels = ["card_arrival", "top_up", "top_up_failed"]
    got = label_distribution(
        response(
            [(t, 0.9, {}) for t in HEAD]
            + [("top", 0.5, {"card": 0.5}), ("_", 1.0, {}), ("up", 1.0, {})]
            + [('"', 0.6, {"_": 0.4}), ("}", 1.0, {})]
        ),
        labels,
        "top_up",
    )
    assert dict(got) == as_dict([("card_arrival", 0.5), ("top_up", 0.3), ("top_up_failed", 0.2)])


def test_an_alternative_that_starts_several_labels_splits_its_share():
    got = label_distribution(
        answer(("refund", 0.5, {"top": 0.5})), ["refund", "top_up", "top_up_failed"], "refund"
    )
    assert dict(got) == as_dict([("refund", 0.5), ("top_up", 0.25), ("top_up_failed", 0.25)])


@pytest.mark.parametrize(
    "make",
    [
        lambda: SimpleNamespace(choices=[SimpleNamespace(logprobs=None)]),
        lambda: SimpleNamespace(choices=[]),
        lambda: answer(("refund", 0.9, {})),  # no alternatives: nothing to compare with
        lambda: answer(("refund", 0.9, {"hello": 0.1})),  # none that reaches a label
        lambda: answer(("ref", 0.9, {"card": 0.1})),  # tokens that spell no label
        lambda: response([("no json at all", 0.5, {"x": 0.5})]),
    ],
)
def test_no_distribution_without_comparable_alternatives(make):
    assert label_distribution(make(), ["card", "refund"], "refund") is None


def test_the_method_prefers_the_distribution_then_the_label_logprob():
    method = TokenLogprobs(verbalized_fallback=False)
    scored = Answered(label="a", label_scores=(("a", 0.7), ("b", 0.3)), label_logprob=-0.1)
    assert method.scores([scored]) == ({"a": 0.7, "b": 0.3}, "logprobs")
    assert method.scores([Answered(label="a", verbalized=0.9)]) == ({}, "no_logprobs")
    assert TokenLogprobs().scores([Answered(label="a", verbalized=0.9)])[1] == "verbalized_fallback"


LABELS = ["card_arrival", "refund", "top_up"]
TRAIN = {
    "where is my card": "card_arrival",
    "give my money back": "refund",
    "top up failed": "top_up",
}
FAST = RetrySettings(timeout=2.0, backoff_initial=0.001, backoff_max=0.005)


def test_tool_call_logprobs_give_the_distribution_on_llama_cpp():
    policy = LabelMapPolicy(TRAIN, confidence=0.7)
    with StandInLLM(policy, labels=LABELS, tool_logprobs=True, record=1) as server:
        clf = LLMClassifier(
            "openai/smol",
            api_base=server.api_base,
            server="llama_cpp",
            confidence="logprobs",
            retry=FAST,
        ).fit(list(TRAIN), list(TRAIN.values()))
        item = clf.classify(["give my money back"]).items[0]
        body = server.requests[0]
    assert clf.mode_ == "tools" and body["tools"] and body["logprobs"] is True
    assert body["top_logprobs"] == 20
    assert item.confidence_source == "logprobs"
    assert dict(item.scores) == as_dict([("refund", 0.7), ("card_arrival", 0.15), ("top_up", 0.15)])
    # no verbalised confidence is asked for where log-probabilities always come back
    assert "confidence" not in body["tools"][0]["function"]["parameters"]["properties"]


def test_a_server_that_sends_no_logprobs_gives_an_abstention_not_a_made_up_score():
    with StandInLLM(LabelMapPolicy(TRAIN), labels=LABELS, tool_logprobs=False) as server:
        clf = LLMClassifier(
            "openai/smol",
            api_base=server.api_base,
            server="llama_cpp",
            confidence="logprobs",
            retry=FAST,
        ).fit(list(TRAIN), list(TRAIN.values()))
        item = clf.classify(["give my money back"]).items[0]
    assert item.abstain_reason == "provider_error"
    assert "no token log-probabilities" in item.detail
