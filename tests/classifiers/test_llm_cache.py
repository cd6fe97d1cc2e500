"""The LLM answer cache reads stored rows through the hardened JSON reader: a damaged or
hostile row is a counted miss, never an error and never a value."""

from __future__ import annotations

import sqlite3

import pytest

from hybridroute.classifiers import PromptTemplate
from hybridroute.classifiers.llm._cache import (
    CACHE_FILENAME,
    AnswerCache,
    answer_fields,
    cache_key,
    endpoint_identity,
    normalise_url,
    prompt_identity,
)

GOOD = {"scores": [["refund", 0.9]], "confidence_source": "verbalized", "usage": {}}


def store(tmp_path, rows: dict[str, object]) -> None:
    with AnswerCache(tmp_path):
        pass  # creates the table
    with sqlite3.connect(tmp_path / CACHE_FILENAME) as conn:
        conn.executemany(
            "INSERT OR REPLACE INTO answers (key, value, created) VALUES (?, ?, 0)",
            list(rows.items()),
        )


def test_values_round_trip(tmp_path):
    with AnswerCache(tmp_path) as cache:
        cache.put("k", GOOD)
    with AnswerCache(tmp_path) as cache:
        assert cache.get_many(["k", "missing"]) == {"k": GOOD}
        assert cache.damaged == 0


@pytest.mark.parametrize(
    "value",
    [
        '{"scores": [["refund", 0.9]], "scores": [["delete_everything", 1.0]]}',
        '{"scores": [["refund", NaN]]}',
        '{"scores": [["refund", Infinity]]}',
        '{"scores": [["refund", 1' + "0" * 400 + "]]}",
        '{"scores": [["refund", ' + "9" * 5000 + "]]}",
        '{"x": ' + "[" * 100 + "]" * 100 + "}",
        '{"x": ' + "[" * 100_000 + "]" * 100_000 + "}",
        '{"x": "\\udc80"}',
        '{"scores": ',
        "[1, 2]",
        '"a string"',
        "",
        b'{"scores": [["refund", 0.9]]}',  # a blob, not text
        '{"scores": [["refund", 0.9]], "pad": "' + "x" * (1 << 17) + '"}',
    ],
    ids=[
        "duplicate-key",
        "nan",
        "infinity",
        "float-overflow",
        "huge-int",
        "deep",
        "very-deep",
        "lone-surrogate",
        "not-json",
        "array",
        "string",
        "empty",
        "blob",
        "oversized",
    ],
)
def test_a_damaged_row_is_a_counted_miss(tmp_path, value):
    store(tmp_path, {"bad": value, "good": '{"scores": [["refund", 0.9]]}'})
    with AnswerCache(tmp_path) as cache:
        found = cache.get_many(["bad", "good"])
    assert found == {"good": {"scores": [["refund", 0.9]]}}
    assert cache.damaged == 1


def test_an_oversized_row_is_not_loaded_whole(tmp_path):
    """Only the first MAX_VALUE_CHARS + 1 characters of a row are fetched."""
    import tracemalloc

    store(tmp_path, {"bad": '{"pad": "' + "x" * (50 << 20) + '"}'})
    with AnswerCache(tmp_path) as cache:
        tracemalloc.start()
        try:
            assert cache.get_many(["bad"]) == {}
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert peak < 4 << 20 and cache.damaged == 1


def test_keys_are_stable_and_cover_the_text():
    fields = {"model": "m", "labels": ["a", "b"]}
    assert cache_key(fields, "x") == cache_key(dict(reversed(fields.items())), "x")
    assert cache_key(fields, "x") != cache_key(fields, "y")


# --------------------------------------------------------------------------- what the key holds


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://127.0.0.1:8000/v1", "http://127.0.0.1:8000/v1"),
        ("HTTP://LocalHost:8000/v1/", "http://localhost:8000/v1"),
        ("https://api.openai.com:443/v1", "https://api.openai.com/v1"),
        ("http://example.com:80", "http://example.com"),
        ("https://user:secret@host.example/v1#frag", "https://host.example/v1"),
        ("https://host.example/deploy?api-version=2", "https://host.example/deploy?api-version=2"),
        ("http://[::1]:9000/v1", "http://[::1]:9000/v1"),
        ("  http://h:1/v1//  ", "http://h:1/v1"),
        ("localhost:8000", "localhost:8000"),
        ("http://h:notaport/v1", "http://h:notaport/v1"),
    ],
)
def test_endpoint_urls_are_normalised(url, expected):
    assert normalise_url(url) == expected


@pytest.mark.parametrize(
    ("model", "extra", "env", "expected"),
    [
        ("openai/gpt-4o-mini", None, {}, {"provider_default": "openai", "overrides": {}}),
        (
            "gpt-4o-mini",
            None,
            {"OPENAI_BASE_URL": "http://127.0.0.1:1/v1/"},
            {
                "provider_default": "openai",
                "overrides": {"OPENAI_BASE_URL": "http://127.0.0.1:1/v1"},
            },
        ),
        (
            "openai/gpt-4o-mini",
            None,
            {"OPENAI_API_BASE": "http://a/v1", "ANTHROPIC_API_BASE": "http://b"},
            {"provider_default": "openai", "overrides": {"OPENAI_API_BASE": "http://a/v1"}},
        ),
        (
            "anthropic/claude-3-haiku",
            None,
            {"OPENAI_BASE_URL": "http://a/v1", "ANTHROPIC_BASE_URL": "http://b"},
            {"provider_default": "anthropic", "overrides": {"ANTHROPIC_BASE_URL": "http://b"}},
        ),
        (
            "ollama_chat/llama3",
            None,
            {"OLLAMA_API_BASE": "http://box:11434"},
            {
                "provider_default": "ollama_chat",
                "overrides": {"OLLAMA_API_BASE": "http://box:11434"},
            },
        ),
        (
            "my-model",
            {"custom_llm_provider": "hosted_vllm"},
            {"HOSTED_VLLM_API_BASE": "http://vllm:8000/v1", "OPENAI_BASE_URL": "http://a/v1"},
            {
                "provider_default": "hosted_vllm",
                "overrides": {"HOSTED_VLLM_API_BASE": "http://vllm:8000/v1"},
            },
        ),
    ],
    ids=["openai", "bare-name", "other-provider-ignored", "anthropic", "ollama-chat", "custom"],
)
def test_the_default_endpoint_is_the_provider_and_its_environment(model, extra, env, expected):
    assert endpoint_identity(model, None, extra, environ=env) == expected


def test_an_api_base_decides_alone():
    env = {"OPENAI_BASE_URL": "http://elsewhere/v1"}
    assert endpoint_identity("openai/m", "http://127.0.0.1:9/v1/", None, environ=env) == {
        "api_base": "http://127.0.0.1:9/v1"
    }


def test_a_base_set_on_litellm_by_the_caller_is_part_of_the_endpoint(monkeypatch):
    import litellm

    monkeypatch.setattr(litellm, "api_base", "http://proxy.internal:4000/")
    assert endpoint_identity("openai/m", None, None, environ={})["overrides"] == {
        "litellm.api_base": "http://proxy.internal:4000"
    }


def _fields(**change):
    base = {
        "model": "openai/m",
        "api_base": "http://127.0.0.1:9/v1",
        "extra_params": None,
        "template": PromptTemplate(),
        "labels": ["a", "b"],
        "mode": "tools",
        "confidence": {"method": "verbalized"},
    }
    return answer_fields(**{**base, **change})


@pytest.mark.parametrize(
    "change",
    [
        {"api_base": "http://127.0.0.1:10/v1"},
        {"api_base": None},
        {"model": "openai/n"},
        {"extra_params": {"max_tokens": 5}},
        {"template": PromptTemplate(instructions="Other words.")},
        {"template": PromptTemplate(version="2")},
        {"labels": ["b", "a"]},
        {"mode": "json"},
        {"confidence": {"method": "logprobs"}},
    ],
)
def test_every_part_changes_the_key(change):
    assert cache_key(_fields(**change), "x") != cache_key(_fields(), "x")
    assert cache_key(_fields(), "x") == cache_key(_fields(), "x")


def test_the_prompt_part_hashes_the_rendered_messages(monkeypatch):
    from hybridroute.classifiers.llm import _prompt

    template = PromptTemplate(version="v")
    before = prompt_identity(template, ["a", "b"])
    monkeypatch.setattr(_prompt, "render_text", lambda text: f"[{text}]")
    after = prompt_identity(template, ["a", "b"])
    assert before["template_sha256"] == after["template_sha256"]  # same template content
    assert before["messages_sha256"] != after["messages_sha256"]  # other words sent
    assert before["version"] == after["version"] == "v"


def test_extra_params_json_cannot_write_are_keyed_by_repr():
    class Opaque:
        def __repr__(self):
            return "Opaque()"

    fields = _fields(extra_params={"x": Opaque(), "y": (1, 2)})
    assert fields["extra_params"] == {"x": "Opaque()", "y": [1, 2]}
    assert len(cache_key(fields, "t")) == 64
