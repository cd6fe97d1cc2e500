"""The LLM classifier, driven through the real litellm + instructor stack against the
stand-in server (no provider, no mock of litellm). Stand-in answers are not an LLM's
accuracy: these tests check plumbing, budgets, cache and accounting."""

from __future__ import annotations

import asyncio
import json
import math
import os
import subprocess
import sys
import time
import tracemalloc

import numpy as np
import pytest

from hybridroute.classifiers import (
    IntentClassifier,
    LLMClassifier,
    PromptTemplate,
    RankedLabels,
    RetrySettings,
    load_classifier,
)
from hybridroute.classifiers.llm._classifier import LLMItemResult, fit_llm
from hybridroute.classifiers.llm._confidence import (
    CONFIDENCE_METHODS,
    SelfConsistency,
    TokenLogprobs,
)
from hybridroute.classifiers.llm._retry import Answered
from hybridroute.exceptions import NotFittedError, SpecError, UserInputError
from hybridroute.testing import EXCLUSIVE_FAULTS, LabelMapPolicy, StandInLLM, StandInProcess

LABELS = ["card_arrival", "refund", "top_up"]
TRAIN = {
    "where is my card": "card_arrival",
    "my card has not arrived": "card_arrival",
    "give my money back": "refund",
    "I want a refund": "refund",
    "add money to my account": "top_up",
    "top up failed": "top_up",
}
FAST = RetrySettings(timeout=2.0, backoff_initial=0.001, backoff_max=0.005)


def fitted(server, **kw) -> LLMClassifier:
    kw.setdefault("retry", FAST)
    model = kw.pop("model", "openai/gpt-4o-mini")
    return LLMClassifier(model, api_base=server.api_base, **kw).fit(
        list(TRAIN), list(TRAIN.values())
    )


@pytest.fixture
def server():
    with StandInLLM(LabelMapPolicy(TRAIN, confidence=0.8), labels=LABELS) as s:
        yield s


# --------------------------------------------------------------------------- fit


def test_is_an_intent_classifier_with_kind_llm():
    clf = LLMClassifier("openai/gpt-4o-mini")
    assert isinstance(clf, IntentClassifier) and clf.kind == "llm"
    with pytest.raises(NotFittedError, match="not fitted yet"):
        clf.classify(["x"])


def test_fit_records_the_label_set_and_makes_no_request(server):
    clf = fitted(server, prompt=PromptTemplate(none_of_these="none_of_these"))
    assert list(clf.classes_) == ["card_arrival", "none_of_these", "refund", "top_up"]
    assert clf.n_train_ == 6 and clf.prompt_.examples == ()
    assert server.stats() == {}


def test_fit_and_config_do_not_import_litellm():
    code = (
        "import sys, json\n"
        "from hybridroute.classifiers import LLMClassifier\n"
        "c = LLMClassifier('openai/gpt-4o-mini').fit(['a', 'b'], ['x', 'y'])\n"
        "c.get_config(); c.get_state()\n"
        "print(json.dumps([m for m in sys.modules if m.split('.')[0] in "
        "('litellm', 'instructor', 'openai')]))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []


def test_few_shot_examples_are_seeded_and_per_label():
    texts, labels = list(TRAIN), list(TRAIN.values())
    a = LLMClassifier("m", n_examples_per_label=1, seed=3).fit(texts, labels)
    b = LLMClassifier("m", n_examples_per_label=1, seed=3).fit(texts, labels)
    c = LLMClassifier("m", n_examples_per_label=2, seed=3).fit(texts, labels)
    assert a.prompt_.examples == b.prompt_.examples
    assert sorted(label for _, label in a.prompt_.examples) == LABELS
    assert len(c.prompt_.examples) == 6
    assert all(TRAIN[text] == label for text, label in c.prompt_.examples)
    seeds = {
        LLMClassifier("m", n_examples_per_label=1, seed=s).fit(texts, labels).prompt_.examples
        for s in range(10)
    }
    assert len(seeds) > 1


@pytest.mark.parametrize(
    ("kwargs", "texts", "labels", "match"),
    [
        ({}, ["a"], [], "differ in length"),
        ({}, [], [], "at least one labelled text"),
        ({}, ["a"], [""], "label 0 is not a non-empty string"),
        ({}, [3], ["x"], "text 0 is not a string"),
        ({"mode": "xml"}, ["a"], ["x"], "unknown mode 'xml'"),
        ({"confidence": "vibes"}, ["a"], ["x"], "unknown confidence method 'vibes'"),
        # mode="auto" (the default since issue 28) picks json_schema for logprobs on an
        # OpenAI-shaped server; asking for tools explicitly is still refused there.
        ({"confidence": "logprobs", "mode": "tools"}, ["a"], ["x"], "needs a JSON mode"),
        ({"server": "ollama"}, ["a"], ["x"], "unknown server 'ollama'"),
        ({"n_similar_examples": -1}, ["a"], ["x"], "n_similar_examples must be an integer"),
        ({"n_similar_examples": True}, ["a"], ["x"], "n_similar_examples must be an integer"),
        ({"confidence": "self_consistency", "n_samples": 1}, ["a"], ["x"], "n_samples >= 2"),
        ({"max_concurrency": 0}, ["a"], ["x"], "max_concurrency must be >= 1"),
        ({"max_response_bytes": 0}, ["a"], ["x"], "max_response_bytes must be a positive"),
        ({"max_response_bytes": -1}, ["a"], ["x"], "max_response_bytes must be a positive"),
        ({"max_response_bytes": 1.5}, ["a"], ["x"], "max_response_bytes must be a positive"),
        ({"max_response_bytes": True}, ["a"], ["x"], "max_response_bytes must be a positive"),
        ({"max_response_bytes": "1MB"}, ["a"], ["x"], "max_response_bytes must be a positive"),
        ({"extra_params": {"api_key": "sk-123"}}, ["a"], ["x"], "must not carry credentials"),
        (
            {"prompt": PromptTemplate(label_descriptions={"ghost": "?"})},
            ["a"],
            ["x"],
            "describes labels not in the label set: ghost",
        ),
    ],
)
def test_fit_validation(kwargs, texts, labels, match):
    with pytest.raises(ValueError, match=match):
        LLMClassifier("openai/gpt-4o-mini", **kwargs).fit(texts, labels)


# --------------------------------------------------------------------------- the real stack


@pytest.mark.parametrize("mode", ["tools", "json", "md_json", "json_schema"])
def test_modes_answer_through_the_real_stack(server, mode):
    clf = fitted(server, mode=mode)
    batch = clf.classify(list(TRAIN))
    assert [item.label for item in batch.items] == list(TRAIN.values())
    assert all(item.scores[0][1] == pytest.approx(0.8) for item in batch.items)
    assert all(item.confidence_source == "verbalized" for item in batch.items)
    expected_mode = "json" if mode == "json_schema" else mode
    assert server.stats()[f"mode:{expected_mode}"] == 6


def test_predict_predict_proba_and_rank(server):
    clf = fitted(server)
    texts = ["where is my card", "I want a refund"]
    assert clf.predict(texts) == ["card_arrival", "refund"]
    proba = clf.predict_proba(texts)
    assert proba.shape == (2, 3)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    # the answered label keeps its raw score; the rest is shared by the other labels
    np.testing.assert_allclose(proba[0], [0.8, 0.1, 0.1])
    ranked = clf.rank(texts, k=3)
    assert isinstance(ranked[0], RankedLabels)
    assert ranked[0].labels == ("card_arrival",) and ranked[0].scores == (0.8,)
    assert ranked[0].margin == pytest.approx(0.8)
    usage = ranked[0].usage
    assert usage["requests"] == 1 and usage["cached"] is False
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"] > 0


def test_abstentions_are_never_a_made_up_label():
    with StandInLLM(labels=LABELS, faults={"out_of_set": 1.0}) as server:
        clf = fitted(server)
        ranked = clf.rank(["x"])[0]
        assert ranked.abstained and ranked.abstain_reason == "invalid_label"
        assert ranked.labels == () and ranked.top is None and ranked.confidence is None
        assert ranked.usage["requests"] == 2 and "not_a_declared_label" in ranked.usage["detail"]
        assert clf.predict(["x"]) == [None]
        np.testing.assert_allclose(clf.predict_proba(["x"]), [[1 / 3] * 3])


def test_self_consistency_votes(server):
    server.policy = LabelMapPolicy(TRAIN, confidence=0.6)
    clf = fitted(server, confidence="self_consistency", n_samples=5, sample_temperature=1.0)
    batch = clf.classify(list(TRAIN))
    assert batch.report.requests == 30 == server.stats()["requests"]
    for item in batch.items:
        assert item.confidence_source == "votes"
        assert sum(score for _, score in item.scores) == pytest.approx(1.0)
        assert all(score * 5 == pytest.approx(round(score * 5)) for _, score in item.scores)
    majority = sum(
        item.label == truth for item, truth in zip(batch.items, TRAIN.values(), strict=True)
    )
    assert majority >= 3


def test_self_consistency_failed_samples_lower_the_score():
    answers = [Answered(label="a"), Answered(label="a"), Answered(label="b")]
    assert SelfConsistency(n_samples=5).scores(answers) == ({"a": 0.4, "b": 0.2}, "votes")


@pytest.mark.parametrize("mode", ["json", "md_json"])
def test_logprob_confidence(server, mode):
    clf = fitted(server, mode=mode, confidence="logprobs")
    item = clf.classify(["give my money back"]).items[0]
    assert item.label == "refund" and item.confidence_source == "logprobs"
    assert item.scores[0][1] == pytest.approx(0.8)


def test_logprobs_fall_back_to_verbalized_when_missing():
    method = TokenLogprobs()
    assert method.scores([Answered(label="a", verbalized=0.7)]) == (
        {"a": 0.7},
        "verbalized_fallback",
    )
    assert method.scores([Answered(label="a", label_logprob=math.log(0.25))])[0] == {
        "a": pytest.approx(0.25)
    }
    assert set(CONFIDENCE_METHODS) == {"verbalized", "self_consistency", "logprobs"}


def test_concurrency_is_bounded():
    with StandInLLM(labels=LABELS, latency=0.1) as server:
        clf = fitted(server, max_concurrency=4)
        clf.classify([f"text {i}" for i in range(24)])
        assert server.stats()["max_in_flight"] == 4


def test_duplicates_in_a_batch_cost_one_request(server):
    batch = fitted(server).classify(["where is my card"] * 5)
    assert server.stats()["requests"] == 1 and batch.report.requests == 1
    assert [item.label for item in batch.items] == ["card_arrival"] * 5
    assert [item.cached for item in batch.items] == [False, True, True, True, True]
    assert batch.report.n_unique == 1


def test_works_when_called_inside_a_running_event_loop(server):
    clf = fitted(server)

    async def inside():
        sync = clf.predict(["where is my card"])  # sync API from async code
        batch = await clf.aclassify(["I want a refund"])
        return sync, batch.items[0].label

    assert asyncio.run(inside()) == (["card_arrival"], "refund")


# --------------------------------------------------------------------------- response byte limit

MIB = 1 << 20
CAPPED_MODELS = ["openai/gpt-4o-mini", "hosted_vllm/standin"]  # the SDK route, litellm's handler


def huge_server(**kw) -> StandInLLM:
    return StandInLLM(
        LabelMapPolicy(TRAIN, confidence=0.8), labels=LABELS, faults={"huge_body": 1.0}, **kw
    )


ONE_REQUEST_EACH = RetrySettings(max_transport_retries=3, timeout=10, backoff_initial=0.001)


@pytest.mark.parametrize("model", CAPPED_MODELS)
@pytest.mark.parametrize(
    ("encoding", "declared"), [(None, False), (None, True), ("gzip", False), ("gzip", True)]
)
def test_a_30_mib_body_is_an_abstention_in_bounded_time_and_memory(model, encoding, declared):
    """Before the cap, litellm read, held and parsed all 30 MiB (peak ~70 MB) and answered."""
    with huge_server(
        huge_body_bytes=30 * MIB, huge_body_encoding=encoding, huge_body_declared=declared
    ) as server:
        clf = fitted(server, model=model, retry=ONE_REQUEST_EACH)
        clf.classify(["warm up the client stack"])  # litellm's first use allocates a lot
        tracemalloc.start()
        try:
            started = time.perf_counter()
            batch = clf.classify(["where is my card", "give my money back"])
            seconds = time.perf_counter() - started
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert [item.abstain_reason for item in batch.items] == ["provider_error"] * 2
    for item in batch.items:
        assert item.label is None and "max_response_bytes" in item.detail
        assert item.usage.requests == 1  # not retried: the endpoint would send it again
    assert batch.report.request_outcomes == {"response_too_large": 2}
    assert batch.report.abstentions == {"provider_error": 2}
    assert seconds < 5, seconds
    assert peak < 8 * MIB, peak  # server thread included; the body alone would be 30 MiB


@pytest.mark.parametrize("model", CAPPED_MODELS)
@pytest.mark.parametrize("encoding", [None, "gzip"])
@pytest.mark.parametrize(
    ("limit", "size", "accepted"),
    [
        (MIB, MIB, True),
        (MIB, MIB - 1024, True),
        (MIB, MIB + 1, False),
        (50_000, 50_000, True),
        (50_000, 50_001, False),
        (50_000, 2 * MIB, False),
    ],
)
def test_a_body_within_the_limit_still_parses(model, encoding, limit, size, accepted):
    with huge_server(huge_body_bytes=size, huge_body_encoding=encoding) as server:
        clf = fitted(server, model=model, retry=ONE_REQUEST_EACH, max_response_bytes=limit)
        batch = clf.classify(["where is my card", "give my money back"])
    if accepted:
        assert [item.label for item in batch.items] == ["card_arrival", "refund"]
        assert batch.report.request_outcomes == {"answered": 2}
    else:
        assert [item.abstain_reason for item in batch.items] == ["provider_error"] * 2
        assert batch.report.request_outcomes == {"response_too_large": 2}


def test_the_limit_can_be_switched_off():
    with huge_server(huge_body_bytes=2 * MIB) as server:
        clf = fitted(server, retry=ONE_REQUEST_EACH, max_response_bytes=None)
        assert clf.classify(["where is my card"]).items[0].label == "card_arrival"


def test_a_hostile_endpoint_does_not_stop_the_batch_or_poison_the_next_request():
    """Huge bodies for some requests, answers for the rest: the refused connections are
    closed, and the requests after them on the same client read their own answers."""
    with StandInLLM(
        LabelMapPolicy(TRAIN, confidence=0.8),
        labels=LABELS,
        faults={"huge_body": 0.5},
        seed=3,
        huge_body_bytes=4 * MIB,
    ) as server:
        clf = fitted(server, retry=ONE_REQUEST_EACH, max_concurrency=1)
        texts = [f"{t} #{i}" for i in range(12) for t in ("where is my card", "refund")]
        batch = clf.classify(texts)
        stats = server.stats()
    assert stats["huge_body"] > 0 and stats["ok"] > 0
    assert batch.report.request_outcomes == {
        "response_too_large": stats["huge_body"],
        "answered": stats["ok"],
    }
    assert all(item.label is None or item.label in LABELS for item in batch.items)


def test_litellms_experimental_openai_handler_switch_is_capped_too(monkeypatch):
    """With this litellm switch the OpenAI route ignores an SDK client; the seam then
    hands litellm its handler instead, so the limit still holds."""
    monkeypatch.setenv("EXPERIMENTAL_OPENAI_BASE_LLM_HTTP_HANDLER", "true")
    with huge_server(huge_body_bytes=30 * MIB) as server:
        batch = fitted(server, retry=ONE_REQUEST_EACH).classify(["where is my card"])
    assert batch.report.request_outcomes == {"response_too_large": 1}
    with huge_server(huge_body_bytes=1000) as server:
        batch = fitted(server, retry=ONE_REQUEST_EACH).classify(["where is my card"])
    assert batch.items[0].label == "card_arrival"


def test_a_process_that_asked_the_llm_exits_cleanly():
    """The shared clients are closed at exit: no unclosed-session noise on stderr."""
    code = (
        "from hybridroute.classifiers import LLMClassifier\n"
        "from hybridroute.testing import LabelMapPolicy, StandInLLM\n"
        "with StandInLLM(LabelMapPolicy({'a': 'x'}), labels=['x', 'y']) as s:\n"
        "    c = LLMClassifier('openai/gpt-4o-mini', api_base=s.api_base).fit(['a'], ['x'])\n"
        "    print(c.predict(['a'])[0])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0 and done.stdout.strip() == "x", done.stderr
    assert "Exception ignored" not in done.stderr and "Unclosed" not in done.stderr


def test_sync_batches_reuse_the_seams_clients(server):
    from hybridroute.classifiers.llm._loop import BackgroundLoop

    clf = fitted(server)
    clf.classify(["where is my card"])
    shared = BackgroundLoop._clients
    clients = dict(shared._clients)
    clf.classify(["give my money back"])
    fitted(server).classify(["top up failed"])
    assert BackgroundLoop._clients is shared and shared._clients == clients
    assert all(not c._client.is_closed for c in clients.values() if hasattr(c, "_client"))


def test_a_batch_on_the_callers_loop_closes_its_clients(server, monkeypatch):
    from hybridroute.classifiers.llm._clients import ClientCache

    closed: list[int] = []
    original = ClientCache.aclose

    async def counting(self):
        closed.append(len(self))
        await original(self)

    monkeypatch.setattr(ClientCache, "aclose", counting)
    batch = asyncio.run(fitted(server).aclassify(["where is my card", "refund"]))
    assert [item.abstained for item in batch.items] == [False, False]
    assert closed == [2]  # its handler and its SDK client, closed when the batch ended


# --------------------------------------------------------------------------- cache


def test_rerun_makes_zero_requests(server, tmp_path):
    texts = [f"{t} ({i})" for i in range(10) for t in TRAIN]
    first = fitted(server, cache_dir=tmp_path).classify(texts)
    assert first.report.requests == 60 and first.report.cache_hits == 0
    server.reset_stats()
    second = fitted(server, cache_dir=tmp_path).classify(texts)
    assert server.stats() == {}
    assert second.report.requests == 0 and second.report.cache_hits == 60
    assert second.report.cost_usd == 0.0 and second.report.prompt_tokens == 0
    assert [i.scores for i in second.items] == [i.scores for i in first.items]
    assert all(i.cached for i in second.items)


@pytest.mark.parametrize(
    "change",
    [
        {"prompt": PromptTemplate(version="v2")},
        {"prompt": PromptTemplate(instructions="Classify the text.")},
        {"model": "openai/gpt-4o"},
        {"mode": "json"},
        {"confidence": "self_consistency", "n_samples": 2},
    ],
    ids=["version", "template-content", "model", "mode", "confidence"],
)
def test_cache_key_covers_what_changes_an_answer(server, tmp_path, change):
    fitted(server, cache_dir=tmp_path).classify(["where is my card"])
    server.reset_stats()
    fitted(server, cache_dir=tmp_path, **change).classify(["where is my card"])
    assert server.stats()["requests"] >= 1


def test_cache_key_covers_the_label_set(server, tmp_path):
    fitted(server, cache_dir=tmp_path).classify(["where is my card"])
    server.reset_stats()
    other = LLMClassifier("openai/gpt-4o-mini", api_base=server.api_base, cache_dir=tmp_path)
    other.fit([*TRAIN, "lost pin"], [*TRAIN.values(), "pin"]).classify(["where is my card"])
    assert server.stats()["requests"] == 1


OTHER_ANSWERS = {"where is my card": "refund", "give my money back": "top_up"}


@pytest.fixture
def other_server():
    """A second stand-in on another port that answers differently."""
    with StandInLLM(LabelMapPolicy(OTHER_ANSWERS, confidence=0.6), labels=LABELS) as s:
        yield s


def test_servers_behind_one_model_string_keep_their_own_answers(server, other_server, tmp_path):
    """Before, the second endpoint was served the first one's cached answers."""
    texts = list(OTHER_ANSWERS)
    first = [i.label for i in fitted(server, cache_dir=tmp_path).classify(texts).items]
    second = fitted(other_server, cache_dir=tmp_path).classify(texts)
    assert first == ["card_arrival", "refund"]
    assert [i.label for i in second.items] == ["refund", "top_up"]
    assert second.report.cache_hits == 0 and other_server.stats()["requests"] == 2
    for srv, labels in ((server, first), (other_server, ["refund", "top_up"])):
        srv.reset_stats()
        again = fitted(srv, cache_dir=tmp_path).classify(texts)
        assert [i.label for i in again.items] == labels and all(i.cached for i in again.items)
        assert srv.stats() == {}


def test_the_provider_default_endpoint_is_keyed_by_its_environment(
    server, other_server, tmp_path, monkeypatch
):
    """No api_base: the OpenAI route's base URL comes from the environment, and so does
    the key (a stand-in there and the provider itself never share answers)."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
    texts = list(OTHER_ANSWERS)
    seen = []
    for srv in (server, other_server, server):
        monkeypatch.setenv("OPENAI_BASE_URL", srv.api_base)
        clf = LLMClassifier("openai/gpt-4o-mini", retry=FAST, cache_dir=tmp_path)
        batch = clf.fit(list(TRAIN), list(TRAIN.values())).classify(texts)
        seen.append(([i.label for i in batch.items], batch.report.cache_hits))
    assert seen == [
        (["card_arrival", "refund"], 0),
        (["refund", "top_up"], 0),
        (["card_arrival", "refund"], 2),
    ]


@pytest.mark.parametrize("spelling", ["{base}/", "{base}//", "HTTP://127.0.0.1:{port}/v1"])
def test_one_endpoint_spelled_another_way_shares_its_answers(server, tmp_path, spelling):
    fitted(server, cache_dir=tmp_path).classify(["where is my card"])
    server.reset_stats()
    from urllib.parse import urlsplit

    api_base = spelling.format(base=server.api_base, port=urlsplit(server.api_base).port)
    clf = LLMClassifier("openai/gpt-4o-mini", api_base=api_base, cache_dir=tmp_path)
    batch = clf.fit(list(TRAIN), list(TRAIN.values())).classify(["where is my card"])
    assert batch.report.cache_hits == 1 and server.stats() == {}


def _reword_the_system_message(monkeypatch):
    from hybridroute.classifiers.llm import _prompt

    original = _prompt.PromptTemplate.system_message
    monkeypatch.setattr(
        _prompt.PromptTemplate,
        "system_message",
        lambda self, labels, *more: original(self, labels, *more).replace(
            "Allowed labels", "Labels"
        ),
    )


def _reword_the_text_message(monkeypatch):
    from hybridroute.classifiers.llm import _prompt

    monkeypatch.setattr(_prompt, "render_text", lambda text: f"Text: {text}")


@pytest.mark.parametrize(
    "change",
    [
        lambda mp: {"prompt": PromptTemplate(instructions="Pick the intent of the text.")},
        lambda mp: {"prompt": PromptTemplate(label_descriptions={"refund": "money back"})},
        lambda mp: {"prompt": PromptTemplate(examples=[("where is my card", "card_arrival")])},
        lambda mp: _reword_the_system_message(mp) or {},
        lambda mp: _reword_the_text_message(mp) or {},
        lambda mp: {"extra_params": {"max_tokens": 64}},
        lambda mp: {"extra_params": {"top_p": 0.5}},
    ],
    ids=[
        "instructions",
        "descriptions",
        "examples",
        "rendered-system-message",
        "rendered-text-message",
        "max-tokens",
        "top-p",
    ],
)
def test_the_same_version_string_with_other_wording_or_parameters_misses(
    server, tmp_path, monkeypatch, change
):
    """Same version string ("1") every time; the prompt sent or the parameters differ."""
    fitted(server, cache_dir=tmp_path).classify(["where is my card"])
    server.reset_stats()
    kwargs = change(monkeypatch)
    assert kwargs.get("prompt", PromptTemplate()).version == "1"
    batch = fitted(server, cache_dir=tmp_path, **kwargs).classify(["where is my card"])
    assert batch.report.cache_hits == 0 and server.stats()["requests"] == 1


def test_rows_under_the_old_key_are_misses(server, tmp_path):
    """A row stored under the schema-1 key (model, prompt version and fingerprint, labels,
    mode, confidence, text: no endpoint) is never served: the text is asked again."""
    import hashlib
    import sqlite3

    from hybridroute.classifiers.llm._cache import CACHE_FILENAME, AnswerCache

    clf = fitted(server, cache_dir=tmp_path)
    old_fields = {
        "schema": 1,
        "model": clf.model,
        "prompt_version": clf.prompt_.version,
        "prompt_fingerprint": clf.prompt_.fingerprint(),
        "labels": LABELS,
        "mode": clf.mode,
        "confidence": clf._method().settings(),
        "text": "where is my card",
    }
    payload = json.dumps(old_fields, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    with AnswerCache(tmp_path):
        pass
    with sqlite3.connect(tmp_path / CACHE_FILENAME) as conn:
        conn.execute(
            "INSERT INTO answers (key, value, created) VALUES (?, ?, 0)",
            (
                hashlib.sha256(payload.encode()).hexdigest(),
                '{"scores": [["top_up", 0.99]], "confidence_source": "verbalized"}',
            ),
        )
    batch = clf.classify(["where is my card"])
    assert batch.items[0].label == "card_arrival" and not batch.items[0].cached
    assert server.stats()["requests"] == 1


def test_abstentions_are_not_cached(tmp_path):
    with StandInLLM(labels=LABELS, faults={"server_error": 1.0}) as server:
        settings = RetrySettings(max_transport_retries=0)
        fitted(server, cache_dir=tmp_path, retry=settings).classify(["x"])
        fitted(server, cache_dir=tmp_path, retry=settings).classify(["x"])
        assert server.stats()["requests"] == 2


TAMPERED = {
    "duplicate-keys": '{"scores": [["refund", 0.9]], "scores": [["delete_everything", 1.0]]}',
    "outside-label-set": '{"scores": [["delete_everything", 1.0]]}',
    "no-scores": '{"scores": []}',
    "nan-score": '{"scores": [["refund", NaN]]}',
    "score-above-one": '{"scores": [["refund", 7.5]]}',
    "not-an-object": '[["refund", 0.9]]',
    "not-json": '{"scores": [["refund", 0.9]',
    "deep": '{"scores": ' + "[" * 200 + "]" * 200 + "}",
    "huge-int": '{"scores": [["refund", ' + "9" * 5000 + "]]}",
    "oversized": '{"scores": [["refund", 0.9]], "pad": "' + "x" * 200_000 + '"}',
    "source-not-text": '{"scores": [["refund", 0.9]], "confidence_source": 5}',
}


@pytest.mark.parametrize("value", list(TAMPERED.values()), ids=list(TAMPERED))
def test_a_tampered_cache_row_is_a_miss_with_a_warning(server, tmp_path, value):
    import sqlite3
    import warnings

    from hybridroute.classifiers.llm._cache import CACHE_FILENAME

    texts = ["where is my card", "give my money back"]
    fitted(server, cache_dir=tmp_path).classify(texts)
    with sqlite3.connect(tmp_path / CACHE_FILENAME) as conn:
        conn.execute("UPDATE answers SET value = ?", (value,))
    server.reset_stats()
    with pytest.warns(RuntimeWarning, match=r"2 stored answer\(s\) are malformed or outside"):
        again = fitted(server, cache_dir=tmp_path).classify(texts)
    assert [item.label for item in again.items] == ["card_arrival", "refund"]
    assert not any(item.cached for item in again.items)
    assert server.stats()["requests"] == 2
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # the new answers replaced the rows
        third = fitted(server, cache_dir=tmp_path).classify(texts)
    assert all(item.cached for item in third.items)


# --------------------------------------------------------------------------- accounting


def test_cost_comes_from_litellms_offline_cost_map(server):
    import litellm

    batch = fitted(server).classify(list(TRAIN))
    prices = litellm.model_cost["gpt-4o-mini"]
    for item in batch.items:
        expected = (
            item.usage.prompt_tokens * prices["input_cost_per_token"]
            + item.usage.completion_tokens * prices["output_cost_per_token"]
        )
        assert item.usage.cost_usd == pytest.approx(expected)
    assert batch.report.cost_usd == pytest.approx(sum(i.usage.cost_usd for i in batch.items))
    assert batch.report.prompt_tokens == sum(i.usage.prompt_tokens for i in batch.items)


def test_unknown_model_has_unknown_cost(server):
    batch = fitted(server, model="openai/hybridroute-standin-model").classify(["where is my card"])
    assert batch.items[0].label == "card_arrival"
    assert batch.items[0].usage.cost_usd is None and batch.report.cost_usd is None


def test_missing_key_variable_is_a_user_error(server):
    clf = fitted(server, api_key_env="HYBRIDROUTE_TEST_NO_SUCH_KEY")
    with pytest.raises(UserInputError, match="HYBRIDROUTE_TEST_NO_SUCH_KEY"):
        clf.classify(["x"])


# --------------------------------------------------------------------------- the fault run


N_TEXTS = 400  # enough for every fault kind to occur many times (seeded draws)


def test_four_hundred_texts_with_ten_percent_of_each_fault(tmp_path):
    """Every text comes back labelled or abstained with a reason; no exception escapes;
    requests stay within the budgets."""
    texts = [
        f"ticket {i}: where is my card" if i % 3 == 0 else f"ticket {i}: refund me"
        for i in range(N_TEXTS)
    ]
    truth = {t: ("card_arrival" if "card" in t else "refund") for t in texts}
    faults = {kind: 0.1 for kind in ("slow", *EXCLUSIVE_FAULTS)}
    settings = RetrySettings(
        max_transport_retries=3,
        max_label_repairs=1,
        timeout=1.0,  # a hang costs this much; ordinary answers never come near it
        backoff_initial=0.001,
        backoff_max=0.01,
    )
    with StandInProcess(
        LabelMapPolicy(truth),
        labels=LABELS,
        faults=faults,
        seed=11,
        retry_after=0.01,
        slow_seconds=0.02,
        hang_seconds=30,
        huge_body_bytes=1 << 20,
    ) as server:
        clf = LLMClassifier(
            "openai/gpt-4o-mini",
            api_base=server.api_base,
            retry=settings,
            max_concurrency=64,
            cache_dir=tmp_path,
            max_response_bytes=1 << 16,  # huge bodies refused after 64 KiB: cheap to run
        ).fit(list(TRAIN), list(TRAIN.values()))
        batch = clf.classify(texts)
        stats = server.stats()

    assert len(batch.items) == N_TEXTS
    reasons = {"invalid_label", "provider_error", "timeout"}
    for text, item in zip(texts, batch.items, strict=True):
        if item.abstained:
            assert item.abstain_reason in reasons and item.label is None and item.detail
        else:
            assert item.label == truth[text]  # repaired answers are the right ones
        assert 1 <= item.usage.requests <= settings.max_requests
    report = batch.report
    assert report.n_answered + report.n_abstained == N_TEXTS
    assert report.requests == sum(i.usage.requests for i in batch.items)
    assert report.requests == sum(report.request_outcomes.values())
    assert report.requests <= N_TEXTS * settings.max_requests
    assert stats["requests"] <= report.requests  # a request may die before reaching it
    assert set(report.abstentions) == reasons
    for kind in ("slow", *EXCLUSIVE_FAULTS):
        assert stats[kind] > 0, kind
    # A refused body ends its item at once (it is not retried), so with 10% of requests
    # huge about a quarter of the items (2-3 requests each) abstain with provider_error.
    assert 0 < report.request_outcomes["response_too_large"] <= report.abstentions["provider_error"]
    assert report.n_answered > 0.4 * N_TEXTS


# --------------------------------------------------------------------------- configuration


def test_config_round_trip_and_no_key_anywhere(tmp_path, monkeypatch):
    monkeypatch.setenv("HYBRIDROUTE_TEST_KEY", "sk-very-secret-value")
    clf = LLMClassifier(
        "openai/gpt-4o-mini",
        api_base="http://127.0.0.1:9/v1",
        api_key_env="HYBRIDROUTE_TEST_KEY",
        prompt=PromptTemplate(version="v7", none_of_these="oos"),
        retry=RetrySettings(timeout=3.0),
        confidence="self_consistency",
        n_samples=3,
        extra_params={"max_tokens": 40},
        cache_dir=tmp_path / "cache",
    ).fit(list(TRAIN), list(TRAIN.values()))
    config = clf.get_config()
    assert json.loads(json.dumps(config)) == config
    rebuilt = LLMClassifier.from_config(config)
    assert rebuilt.get_config() == config
    saved = clf.save(tmp_path / "model")
    loaded = load_classifier(saved)
    assert isinstance(loaded, LLMClassifier)
    assert loaded.get_config() == config and list(loaded.classes_) == list(clf.classes_)
    assert loaded.prompt_ == clf.prompt_
    for path in saved.rglob("*"):
        if path.is_file():
            assert "sk-very-secret-value" not in path.read_text()
    with pytest.raises(ValueError, match="unknown LLMClassifier config key"):
        LLMClassifier.from_config({**config, "api_key": "sk"})
    assert config["max_response_bytes"] == 1 << 20
    small = LLMClassifier.from_config({**config, "max_response_bytes": 4096})
    assert small.max_response_bytes == 4096
    older = {k: v for k, v in config.items() if k != "max_response_bytes"}  # saved before
    assert LLMClassifier.from_config(older).max_response_bytes == 1 << 20
    assert (
        LLMClassifier.from_config({**config, "max_response_bytes": None}).max_response_bytes is None
    )
    with pytest.raises(ValueError, match="max_response_bytes must be a positive"):
        LLMClassifier.from_config({**config, "max_response_bytes": 0})


def test_get_and_set_params():
    clf = LLMClassifier("openai/gpt-4o-mini")
    assert clf.get_params()["model"] == "openai/gpt-4o-mini"
    assert clf.set_params(max_concurrency=3).max_concurrency == 3
    with pytest.raises(ValueError, match="unknown parameter"):
        clf.set_params(temperture=0)


def test_fit_llm(tmp_path):
    prompt = tmp_path / "prompt.yaml"
    prompt.write_text("version: support-v1\nnone_of_these: none_of_these\n")
    clf = fit_llm(
        list(TRAIN),
        list(TRAIN.values()),
        model="ollama/llama3",
        prompt_path=prompt,
        timeout=5.0,
        n_examples_per_label=1,
        seed=1,
    )
    assert clf.prompt_.version == "support-v1" and len(clf.prompt_.examples) == 3
    assert "none_of_these" in clf.classes_ and clf.retry.timeout == 5.0
    prompt.write_text("versoin: 1\n")
    with pytest.raises(SpecError, match="unknown prompt template field") as info:
        fit_llm(list(TRAIN), list(TRAIN.values()), model="m", prompt_path=prompt)
    assert info.value.field == "versoin"
    with pytest.raises(SpecError, match="unknown mode"):
        fit_llm(list(TRAIN), list(TRAIN.values()), model="m", mode="xml")
    assert clf.max_response_bytes == 1 << 20
    small = fit_llm(["a"], ["x"], model="m", max_response_bytes=4096)
    assert small.max_response_bytes == 4096
    with pytest.raises(SpecError, match="max_response_bytes must be a positive integer"):
        fit_llm(["a"], ["x"], model="m", max_response_bytes=0)


@pytest.mark.parametrize(
    ("option", "message"),
    [
        ({"mode": "xml"}, "unknown mode 'xml'"),
        ({"max_concurrency": 0}, "max_concurrency must be >= 1"),
        ({"n_examples_per_label": -1}, "n_examples_per_label must be an integer >= 0"),
        ({"timeout": 0.0}, "timeout must be > 0"),  # a ValueError before this change
        ({"confidence": "vibes"}, "unknown confidence method 'vibes'"),
        ({"model": " "}, "model must be a non-empty"),
    ],
)
def test_fit_llm_errors_name_the_python_parameter_not_a_cli_flag(option, message):
    kwargs = {"model": "m", **option}
    with pytest.raises(SpecError, match=message) as info:
        fit_llm(list(TRAIN), list(TRAIN.values()), **kwargs)
    assert "--" not in str(info.value)  # the CLI adds its own wording


def test_item_results_round_trip_through_the_cache_format():
    item = LLMItemResult(scores=(("a", 0.6), ("b", 0.4)), confidence_source="votes")
    back = LLMItemResult.from_cache(json.loads(json.dumps(item.to_cache())))
    assert back.scores == item.scores and back.cached and back.usage.requests == 0


def test_no_api_key_placeholder_only_with_api_base(monkeypatch):
    assert LLMClassifier("m", api_base="http://x/v1")._api_key() == "no-key-required"
    assert LLMClassifier("m")._api_key() is None
    monkeypatch.setenv("HYBRIDROUTE_TEST_KEY2", "abc")
    assert LLMClassifier("m", api_key_env="HYBRIDROUTE_TEST_KEY2")._api_key() == "abc"
    assert os.environ.get("HYBRIDROUTE_TEST_NO_SUCH_KEY") is None
