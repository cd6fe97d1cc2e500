"""The LLM answer cache reads stored rows through the hardened JSON reader: a damaged or
hostile row is a counted miss, never an error and never a value."""

from __future__ import annotations

import sqlite3

import pytest

from hybridroute.classifiers._llm_cache import CACHE_FILENAME, AnswerCache, cache_key

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
