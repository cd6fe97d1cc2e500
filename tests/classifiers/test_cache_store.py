"""The classifiers' one cache store: both caches (LLM answers, embedding vectors) are a table
of it, files written before it existed read as they are, and lookups and writes batch."""

from __future__ import annotations

import sqlite3

import numpy as np
import pytest

from hybridroute.classifiers._cache_store import CacheStore
from hybridroute.classifiers.embedding._cache import EmbeddingCache, space_key, text_key
from hybridroute.classifiers.llm._cache import AnswerCache

# The tables as the two caches wrote them before they shared the store (the on-disk format
# the store keeps).
OLD_ANSWERS = (
    "CREATE TABLE answers (key TEXT PRIMARY KEY, value TEXT NOT NULL, created REAL NOT NULL)"
)
OLD_VECTORS = (
    "CREATE TABLE vectors (space TEXT NOT NULL, key TEXT NOT NULL, dim INTEGER NOT NULL, "
    "data BLOB NOT NULL, PRIMARY KEY (space, key)) WITHOUT ROWID"
)


def _old_file(path, create, insert, rows):
    with sqlite3.connect(path) as conn:
        conn.execute(create)
        conn.executemany(insert, rows)
    conn.close()


def test_an_answer_cache_written_before_reads(tmp_path):
    _old_file(
        tmp_path / "llm_answers.sqlite3",
        OLD_ANSWERS,
        "INSERT INTO answers VALUES (?, ?, 0)",
        [("k1", '{"scores": [["refund", 0.9]]}'), ("k2", '{"scores": [["top_up", 0.7]]}')],
    )
    with AnswerCache(tmp_path) as cache:
        assert cache.get_many(["k2", "k1", "k3"]) == {
            "k1": {"scores": [["refund", 0.9]]},
            "k2": {"scores": [["top_up", 0.7]]},
        }
        cache.put("k3", {"scores": []})
    with sqlite3.connect(tmp_path / "llm_answers.sqlite3") as conn:
        assert conn.execute("SELECT COUNT(*) FROM answers").fetchone()[0] == 3
    conn.close()


def test_an_embedding_cache_written_before_reads(tmp_path):
    space = space_key({"model": "m"})
    vectors = np.arange(6, dtype="<f4").reshape(2, 3)
    keys = [text_key("a"), text_key("b")]
    _old_file(
        tmp_path / "embeddings.sqlite3",
        OLD_VECTORS,
        "INSERT INTO vectors VALUES (?, ?, 3, ?)",
        [(space, k, v.tobytes()) for k, v in zip(keys, vectors, strict=True)],
    )
    with EmbeddingCache(tmp_path) as cache:
        found = cache.get_many(space, [*keys, text_key("c")])
        assert cache.count() == cache.count(space) == 2
    assert sorted(found) == sorted(keys)
    np.testing.assert_array_equal(found[keys[1]], vectors[1])


@pytest.mark.parametrize("n", [1, 499, 500, 501, 1234])
def test_lookups_of_many_keys_come_back_whole(tmp_path, n):
    space = space_key({"model": "m"})
    keys = [text_key(str(i)) for i in range(n)]
    vectors = np.random.default_rng(0).normal(size=(n, 4)).astype(np.float32)
    with EmbeddingCache(tmp_path) as cache:
        cache.put_many(space, keys, vectors)
        found = cache.get_many(space, [*keys, *keys[:3]])  # repeats are looked up once
    assert len(found) == n
    np.testing.assert_array_equal(np.stack([found[k] for k in keys]), vectors)


def test_writes_are_batched_and_flushed_on_exit(tmp_path):
    with AnswerCache(tmp_path) as cache:
        for i in range(63):
            cache.put(f"k{i}", {"i": i})
        with sqlite3.connect(cache.path) as other:
            assert other.execute("SELECT COUNT(*) FROM answers").fetchone()[0] == 0
        other.close()
        cache.put("k63", {"i": 63})  # the 64th: written
        with sqlite3.connect(cache.path) as other:
            assert other.execute("SELECT COUNT(*) FROM answers").fetchone()[0] == 64
        other.close()
        cache.put("k64", {"i": 64})
    with AnswerCache(tmp_path) as cache:
        assert len(cache.get_many(f"k{i}" for i in range(70))) == 65


def test_the_two_caches_share_a_directory(tmp_path):
    space = space_key({"model": "m"})
    with AnswerCache(tmp_path) as answers, EmbeddingCache(tmp_path) as vectors:
        answers.put("k", {"scores": []})
        vectors.put_many(space, ["k"], np.ones((1, 2), dtype=np.float32))
    assert sorted(p.name for p in tmp_path.glob("*.sqlite3")) == [
        "embeddings.sqlite3",
        "llm_answers.sqlite3",
    ]
    with AnswerCache(tmp_path) as answers, EmbeddingCache(tmp_path) as vectors:
        assert answers.get_many(["k"]) == {"k": {"scores": []}}
        assert list(vectors.get_many(space, ["k"])) == ["k"]


@pytest.mark.parametrize(
    "use",
    [
        lambda c: c.get_many(["k"]),
        lambda c: c.count_rows(),
        lambda c: list(c.select("key", ["k"])),
    ],
    ids=["get_many", "count_rows", "select"],
)
def test_a_store_is_used_as_a_context_manager(tmp_path, use):
    with pytest.raises(RuntimeError, match="use AnswerCache as a context manager"):
        use(AnswerCache(tmp_path))


def test_the_store_is_created_in_a_new_directory(tmp_path):
    store = CacheStore(
        tmp_path / "a" / "b",
        filename="x.sqlite3",
        table="t",
        create_sql="CREATE TABLE IF NOT EXISTS t (key TEXT PRIMARY KEY, v INTEGER)",
        flush_every=2,
    )
    with store:
        store.queue(("key", "v"), [("a", 1)])
        assert store.count_rows() == 0
        store.queue(("key", "v"), [("b", 2), ("a", 3)])
        assert store.count_rows() == 2
        assert sorted(store.select("key, v", ["a", "b", "c"])) == [("a", 3), ("b", 2)]
        assert store.count_rows(where="v > ?", args=[2]) == 1
    assert (tmp_path / "a" / "b" / "x.sqlite3").is_file()
