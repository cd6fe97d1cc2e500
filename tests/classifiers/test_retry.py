"""Retry and repair: the settings value, the budget loop, the exception mapping at the seam,
and -- through the real litellm + instructor stack against the stand-in -- exact budgets
per fault kind."""

from __future__ import annotations

import asyncio
import email.utils
import json
import re
import time

import httpx
import litellm
import openai
import pydantic
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hybridroute.classifiers import LLMClassifier, PromptTemplate, RetrySettings
from hybridroute.classifiers.llm._errors import (
    describe_validation_error,
    map_exception,
    parse_retry_after,
)
from hybridroute.classifiers.llm._retry import (
    Answered,
    LabelFailure,
    TransportFailure,
    Usage,
    ask_with_budgets,
)
from hybridroute.exceptions import LLMLabelError, LLMTimeoutError, LLMTransportError
from hybridroute.testing import EXCLUSIVE_FAULTS, LabelMapPolicy, StandInLLM

LABELS = ("card_arrival", "refund", "top_up")

# litellm's own types trip this pydantic warning on first use (the seam silences it, but
# pytest restores warning filters between tests)
pytestmark = pytest.mark.filterwarnings("ignore:Items? .* using the `ReadOnly` qualifier")

# --------------------------------------------------------------------------- RetrySettings


def test_defaults_and_request_bound():
    s = RetrySettings()
    assert (s.max_transport_retries, s.max_label_repairs) == (3, 1)
    assert s.max_requests == 5
    assert RetrySettings(max_transport_retries=0, max_label_repairs=0).max_requests == 1


def test_settings_are_frozen():
    with pytest.raises(AttributeError):
        RetrySettings().timeout = 1.0  # type: ignore[misc]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"max_transport_retries": -1}, "max_transport_retries must be >= 0"),
        ({"max_label_repairs": 1.5}, "max_label_repairs must be an integer"),
        ({"max_label_repairs": True}, "max_label_repairs must be an integer"),
        ({"timeout": 0}, "timeout must be > 0"),
        ({"timeout": float("nan")}, "timeout must be finite"),
        ({"backoff_multiplier": 0.5}, "backoff_multiplier must be >= 1"),
        ({"jitter": 1.5}, r"jitter must be in \[0, 1\]"),
        ({"max_retry_after": "soon"}, "max_retry_after must be a number"),
    ],
)
def test_settings_validation(kwargs, match):
    with pytest.raises(ValueError, match=match):
        RetrySettings(**kwargs)


def test_backoff_grows_exponentially_and_is_capped():
    s = RetrySettings(backoff_initial=0.5, backoff_multiplier=2.0, backoff_max=3.0, jitter=0.0)
    assert [s.backoff(n) for n in (1, 2, 3, 4, 5)] == [0.5, 1.0, 2.0, 3.0, 3.0]


def test_jitter_is_seeded_and_bounded():
    s = RetrySettings(backoff_initial=1.0, jitter=0.5, seed=4)
    draws = [s.backoff(1, key=f"item{i}") for i in range(200)]
    assert all(0.5 <= d <= 1.0 for d in draws)
    assert len(set(draws)) > 150  # spread, not constant
    assert draws == [
        RetrySettings(backoff_initial=1.0, jitter=0.5, seed=4).backoff(1, key=f"item{i}")
        for i in range(200)
    ]
    assert RetrySettings(backoff_initial=1.0, jitter=0.5, seed=5).backoff(1, "item0") != draws[0]


def test_delay_honours_retry_after():
    s = RetrySettings(backoff_initial=0.1, jitter=0.0)
    assert s.delay(1, retry_after=2.5) == 2.5
    assert s.delay(1, retry_after=0.01) == 0.1
    assert s.delay(1) == 0.1


def test_settings_round_trip():
    s = RetrySettings(max_transport_retries=5, timeout=2.0, seed=9)
    assert RetrySettings.from_dict(json.loads(json.dumps(s.to_dict()))) == s
    with pytest.raises(ValueError, match="unknown RetrySettings field"):
        RetrySettings.from_dict({"retries": 3})


# --------------------------------------------------------------------------- the loop

FAST = RetrySettings(backoff_initial=0.001, backoff_max=0.002, jitter=0.0)


def answered(label="refund"):
    return Answered(label=label, verbalized=0.8, usage=Usage(1, 10, 2, 0.001))


def transport(kind="server_error", **kw):
    return TransportFailure(kind=kind, detail=f"TRANSPORT-SECRET {kind}", **kw)


def invalid(raw='{"label": "nope"}'):
    return LabelFailure(
        error="label: 'nope' is not one of the allowed labels",
        raw=raw,
        usage=Usage(1, 10, 3, 0.001),
    )


class Script:
    """An attempt function that plays back outcomes and records what it was sent."""

    def __init__(self, outcomes):
        self.outcomes = list(outcomes)
        self.sent = []

    async def __call__(self, messages):
        self.sent.append([dict(m) for m in messages])
        return self.outcomes.pop(0)


def run(script, settings=FAST, sleeps=None):
    async def fake_sleep(seconds):
        if sleeps is not None:
            sleeps.append(seconds)

    template = PromptTemplate()
    return asyncio.run(
        ask_with_budgets(
            script,
            template.render(LABELS, "where is my card"),
            settings,
            reask=lambda f: template.repair_messages(f.raw, f.error),
            key="k",
            sleep=fake_sleep,
        )
    )


def test_first_answer_wins():
    result = run(Script([answered()]))
    assert result.answer.label == "refund"
    assert (result.requests, result.transport_failures, result.repairs) == (1, 0, 0)
    assert result.usage == Usage(1, 10, 2, 0.001)


def test_transport_failures_are_retried_without_touching_the_prompt():
    script = Script([transport(), transport("rate_limit"), answered()])
    result = run(script)
    assert result.requests == 3 and result.transport_failures == 2
    assert script.sent[0] == script.sent[1] == script.sent[2]


def test_label_failure_is_repaired_once_with_feedback():
    script = Script([invalid(), answered()])
    result = run(script)
    assert result.repairs == 1 and result.requests == 2
    assert script.sent[1][:-2] == script.sent[0]
    assistant, user = script.sent[1][-2:]
    assert assistant == {"role": "assistant", "content": '{"label": "nope"}'}
    assert user["role"] == "user" and "'nope' is not one of the allowed labels" in user["content"]
    assert result.usage.prompt_tokens == 20  # tokens of the invalid answer are counted


@pytest.mark.parametrize(
    ("outcomes", "error", "attempts"),
    [
        ([transport()] * 4, LLMTransportError, 4),
        ([transport("timeout")] * 4, LLMTimeoutError, 4),
        ([transport(), transport(), transport(), transport("timeout")], LLMTimeoutError, 4),
        ([invalid(), invalid()], LLMLabelError, 2),
        ([transport(), invalid(), transport(), invalid()], LLMLabelError, 4),
        ([invalid(), transport(), transport(), transport(), transport()], LLMTransportError, 5),
        ([transport("rejected", retryable=False)], LLMTransportError, 1),
        ([transport("rate_limit", retry_after=120.0)], LLMTransportError, 1),
        ([transport("response_too_large", retryable=False)], LLMTransportError, 1),
        ([transport("bad_response", retryable=False)], LLMTransportError, 1),
        ([transport(), transport("response_too_large", retryable=False)], LLMTransportError, 2),
        ([invalid(), transport("response_too_large", retryable=False)], LLMTransportError, 2),
    ],
)
def test_budgets_end_in_one_documented_exception(outcomes, error, attempts):
    with pytest.raises(error) as info:
        run(Script(outcomes))
    exc = info.value
    assert exc.attempts == attempts
    assert (
        exc.reason_code
        == {
            LLMTransportError: "provider_error",
            LLMTimeoutError: "timeout",
            LLMLabelError: "invalid_label",
        }[error]
    )
    assert exc.usage["requests"] == attempts


@pytest.mark.parametrize(
    ("kind", "says"),
    [
        ("rejected", "request rejected: TRANSPORT-SECRET rejected"),
        ("response_too_large", "not retried (response_too_large): TRANSPORT-SECRET"),
        ("bad_response", "not retried (bad_response): TRANSPORT-SECRET"),
    ],
)
def test_a_failure_that_is_not_retried_says_why(kind, says):
    """An oversized body is not retried, even with budget left: the same endpoint would
    send the same body again."""
    sleeps: list[float] = []
    settings = RetrySettings(max_transport_retries=5, backoff_initial=0.1, jitter=0.0)
    with pytest.raises(LLMTransportError, match=r"^" + re.escape(says)) as info:
        run(Script([transport(kind, retryable=False), answered()]), settings, sleeps)
    assert info.value.attempts == 1 and sleeps == []
    assert info.value.reason_code == "provider_error"
    assert info.value.last_response.startswith(f"{kind}: ")


def test_label_error_keeps_the_last_answer_for_diagnosis():
    with pytest.raises(LLMLabelError) as info:
        run(Script([invalid("first"), invalid("second")]))
    assert info.value.last_response == "second"


def test_sleeps_follow_backoff_and_retry_after():
    sleeps: list[float] = []
    settings = RetrySettings(backoff_initial=0.1, backoff_multiplier=2, jitter=0.0)
    run(
        Script([transport(), transport("rate_limit", retry_after=1.5), transport(), answered()]),
        settings=settings,
        sleeps=sleeps,
    )
    assert sleeps == [0.1, 1.5, 0.4]


def test_zero_budgets():
    settings = RetrySettings(max_transport_retries=0, max_label_repairs=0)
    with pytest.raises(LLMTransportError):
        run(Script([transport()]), settings=settings)
    with pytest.raises(LLMLabelError):
        run(Script([invalid()]), settings=settings)


outcome_strategy = st.sampled_from(["answer", "transport", "timeout", "invalid"])


@settings(max_examples=200, deadline=None)
@given(
    script=st.lists(outcome_strategy, min_size=1, max_size=12),
    transport_budget=st.integers(0, 4),
    repair_budget=st.integers(0, 3),
)
def test_budgets_are_exact_and_transport_never_reaches_the_prompt(
    script, transport_budget, repair_budget
):
    settings = RetrySettings(
        max_transport_retries=transport_budget,
        max_label_repairs=repair_budget,
        backoff_initial=0.0,
        jitter=0.0,
    )
    make = {
        "answer": answered,
        "transport": transport,
        "timeout": lambda: transport("timeout"),
        "invalid": invalid,
    }
    # pad so the loop never runs out of scripted outcomes
    outcomes = [make[name]() for name in script] + [answered()]
    played = Script(outcomes)
    try:
        result = run(played, settings=settings)
        requests = result.requests
        assert isinstance(outcomes[requests - 1], Answered)
    except (LLMTransportError, LLMTimeoutError, LLMLabelError) as exc:
        requests = exc.attempts
    assert requests == len(played.sent)
    assert requests <= settings.max_requests
    seen = outcomes[:requests]
    assert sum(isinstance(o, TransportFailure) for o in seen) <= transport_budget + 1
    assert sum(isinstance(o, LabelFailure) for o in seen) <= repair_budget + 1
    for messages in played.sent:
        assert not any("TRANSPORT-SECRET" in str(m.get("content")) for m in messages)


# --------------------------------------------------------------------------- exception mapping

REQUEST = httpx.Request("POST", "http://127.0.0.1/v1/chat/completions")


def response(status, headers=None):
    return httpx.Response(status, headers=headers or {}, request=REQUEST)


@pytest.mark.parametrize(
    ("exc", "kind", "retryable", "retry_after"),
    [
        (litellm.Timeout("slow", model="m", llm_provider="openai"), "timeout", True, None),
        (openai.APITimeoutError(request=REQUEST), "timeout", True, None),
        (httpx.ReadTimeout("read"), "timeout", True, None),
        (TimeoutError(), "timeout", True, None),
        (
            litellm.RateLimitError(
                "busy", "openai", "m", response=response(429, {"retry-after": "2"})
            ),
            "rate_limit",
            True,
            2.0,
        ),
        (
            litellm.RateLimitError(
                "busy", "openai", "m", response=response(429, {"retry-after-ms": "250"})
            ),
            "rate_limit",
            True,
            0.25,
        ),
        (
            litellm.InternalServerError("boom", "openai", "m", response=response(500)),
            "server_error",
            True,
            None,
        ),
        (
            litellm.ServiceUnavailableError("down", "openai", "m", response=response(503)),
            "server_error",
            True,
            None,
        ),
        (
            litellm.BadGatewayError("bad gw", "openai", "m", response=response(502)),
            "server_error",
            True,
            None,
        ),
        (litellm.APIConnectionError("reset", "openai", "m"), "connection", True, None),
        (httpx.ConnectError("refused"), "connection", True, None),
        (httpx.RemoteProtocolError("truncated"), "connection", True, None),
        (ConnectionResetError(), "connection", True, None),
        (json.JSONDecodeError("bad", "{", 0), "bad_response", True, None),
        (
            litellm.AuthenticationError("no key", "openai", "m", response=response(401)),
            "rejected",
            False,
            None,
        ),
        (
            litellm.NotFoundError("no model", "openai", "m", response=response(404)),
            "rejected",
            False,
            None,
        ),
        (
            litellm.BadRequestError("bad", "m", "openai", response=response(400)),
            "rejected",
            False,
            None,
        ),
        (
            litellm.ContextWindowExceededError("long", "m", "openai", response=response(400)),
            "rejected",
            False,
            None,
        ),
        (openai.OpenAIError("The api_key client option must be set"), "rejected", False, None),
    ],
    ids=lambda v: type(v).__name__ if isinstance(v, BaseException) else None,
)
def test_dependency_exceptions_are_mapped(exc, kind, retryable, retry_after):
    failure = map_exception(exc)
    assert (failure.kind, failure.retryable, failure.retry_after) == (kind, retryable, retry_after)
    assert type(exc).__name__ in failure.detail


@pytest.mark.parametrize("exc", [ValueError("bug"), KeyError("x"), ZeroDivisionError()])
def test_non_transport_exceptions_are_not_swallowed(exc):
    with pytest.raises(TypeError, match="not a transport error"):
        map_exception(exc)


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"Retry-After": "3"}, 3.0),
        ({"retry-after": "0.5"}, 0.5),
        ({"retry-after-ms": "1500", "retry-after": "9"}, 1.5),
        ({"retry-after-ms": "junk", "retry-after": "9"}, 9.0),
        ({"retry-after": "-1"}, None),
        ({"retry-after": "soon"}, None),
        ({}, None),
        (None, None),
    ],
)
def test_parse_retry_after(headers, expected):
    assert parse_retry_after(headers) == expected


def test_parse_retry_after_http_date():
    now = 1_700_000_000.0
    header = email.utils.formatdate(now + 30, usegmt=True)
    assert parse_retry_after({"Retry-After": header}, now=now) == pytest.approx(30.0)


def test_validation_errors_become_short_feedback():
    from typing import Literal

    model = pydantic.create_model("M", label=(Literal["a", "b"], ...))
    with pytest.raises(pydantic.ValidationError) as literal:
        model.model_validate_json('{"label": "zebra"}')
    assert describe_validation_error(literal.value) == (
        "label: 'zebra' is not one of the allowed labels"
    )
    with pytest.raises(pydantic.ValidationError) as broken:
        model.model_validate_json('{"label": "a", ')
    assert describe_validation_error(broken.value).startswith("the answer is not valid JSON")
    assert describe_validation_error(ValueError("no tool call")) == (
        "the answer could not be read: no tool call"
    )


# --------------------------------------------------------------------------- the real stack

TEST_RETRY = RetrySettings(
    max_transport_retries=2,
    max_label_repairs=1,
    timeout=0.5,
    backoff_initial=0.001,
    backoff_max=0.005,
)
TEXTS = ["where is my card", "give my money back", "add money to my account"]
TRUTH = dict(zip(TEXTS, LABELS, strict=True))


def classifier(server, **kw):
    kw.setdefault("retry", TEST_RETRY)
    return LLMClassifier("openai/gpt-4o-mini", api_base=server.api_base, **kw).fit(
        TEXTS, list(LABELS)
    )


FAULT_BUDGETS = [
    ("rate_limit", "provider_error", 3),
    ("server_error", "provider_error", 3),
    ("truncated", "provider_error", 3),
    ("empty_choices", "provider_error", 3),
    ("hang", "timeout", 3),
    ("malformed_json", "invalid_label", 2),
    ("out_of_set", "invalid_label", 2),
    ("huge_body", "provider_error", 1),  # a 30 MiB body: refused at 1 MiB, never retried
]


def test_every_fault_kind_has_its_budget_checked():
    assert {fault for fault, _, _ in FAULT_BUDGETS} == set(EXCLUSIVE_FAULTS)


@pytest.mark.parametrize(("fault", "reason", "requests_per_item"), FAULT_BUDGETS)
def test_each_fault_kind_spends_exactly_its_budget(fault, reason, requests_per_item):
    with StandInLLM(
        LabelMapPolicy(TRUTH), labels=LABELS, faults={fault: 1.0}, retry_after=0.01, hang_seconds=30
    ) as server:
        batch = classifier(server).classify(TEXTS)
        stats = server.stats()
    assert [item.abstain_reason for item in batch.items] == [reason] * 3
    assert all(item.label is None and item.detail for item in batch.items)
    assert [item.usage.requests for item in batch.items] == [requests_per_item] * 3
    assert batch.report.requests == 3 * requests_per_item == stats["requests"]
    assert stats[fault] == 3 * requests_per_item
    assert batch.report.abstentions == {reason: 3}


def test_reasks_carry_the_validation_error_and_never_a_transport_error():
    faults = {"out_of_set": 0.35, "malformed_json": 0.15, "server_error": 0.2, "rate_limit": 0.2}
    with StandInLLM(
        LabelMapPolicy(TRUTH), labels=LABELS, faults=faults, record=1000, retry_after=0.01, seed=3
    ) as server:
        texts = [f"{t} #{i}" for i in range(20) for t in TEXTS]
        classifier(server).classify(texts)
        bodies = server.requests
    reasks = [b for b in bodies if any(m["role"] == "assistant" for m in b["messages"])]
    assert reasks, "the seed should produce re-asks"
    for body in reasks:
        feedback = body["messages"][-1]["content"]
        assert body["messages"][-1]["role"] == "user"
        assert "not one of the allowed labels" in feedback or "not valid JSON" in feedback
        for message in body["messages"]:
            text = str(message.get("content")).lower()
            for leaked in ("rate limit", "internal server error", "429", "500", "retry"):
                assert leaked not in text, (leaked, message)
    # one repair at most per item: never two assistant turns
    assert max(sum(m["role"] == "assistant" for m in b["messages"]) for b in bodies) == 1


def test_retry_after_is_honoured():
    settings = RetrySettings(max_transport_retries=2, timeout=2.0, backoff_initial=0.0, jitter=0.0)
    with StandInLLM(labels=LABELS, faults={"rate_limit": 1.0}, retry_after=0.3) as server:
        clf = classifier(server, retry=settings)
        started = time.perf_counter()
        batch = clf.classify(["one text"])
        elapsed = time.perf_counter() - started
    assert batch.items[0].abstain_reason == "provider_error"
    assert batch.report.requests == 3
    assert elapsed >= 0.6  # two waits of Retry-After 0.3 s


def test_retry_after_beyond_the_cap_gives_up_at_once():
    settings = RetrySettings(max_transport_retries=3, max_retry_after=1.0)
    with StandInLLM(labels=LABELS, faults={"rate_limit": 1.0}, retry_after=30) as server:
        started = time.perf_counter()
        batch = classifier(server, retry=settings).classify(["one text"])
    assert time.perf_counter() - started < 10
    assert batch.items[0].abstain_reason == "provider_error"
    assert "max_retry_after" in batch.items[0].detail
    assert batch.report.requests == 1


def test_litellm_and_sdk_make_no_retries_of_their_own():
    settings = RetrySettings(max_transport_retries=0, max_label_repairs=0)
    with StandInLLM(labels=LABELS, faults={"server_error": 1.0}) as server:
        batch = classifier(server, retry=settings).classify(TEXTS)
        assert server.stats()["requests"] == 3
    assert batch.report.requests == 3


def test_unreachable_server_is_a_provider_error():
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again: nothing listens there
    clf = LLMClassifier(
        "openai/gpt-4o-mini",
        api_base=f"http://127.0.0.1:{port}/v1",
        retry=RetrySettings(max_transport_retries=1, backoff_initial=0.001),
    ).fit(TEXTS, list(LABELS))
    batch = clf.classify(["x"])
    assert batch.items[0].abstain_reason == "provider_error"
    # litellm reports a refused connection as a 500 (InternalServerError); either way it
    # is a retried transport failure
    assert sum(batch.report.request_outcomes.values()) == 2
    assert set(batch.report.request_outcomes) <= {"connection", "server_error"}
