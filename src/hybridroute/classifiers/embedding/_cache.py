"""On-disk cache of sentence embeddings, keyed by (embedding space, text content hash).

An *embedding space* is everything that decides a text's vector: the fingerprint of the
model's weights and tokenizer, the hidden layers pooled and the maximum sequence length
(:func:`space_key`). A text is keyed by the SHA-256 of its UTF-8 bytes, so the cache holds
no text, only hashes and vectors. Retraining, recalibrating or re-scoring the same texts
with the same model therefore embeds nothing twice.

Storage is one table of the classifiers' cache store
(:mod:`hybridroute.classifiers._cache_store`), a SQLite file (``embeddings.sqlite3``) in
the cache directory: the standard library reads it, several processes may share it
(write-ahead log), and a vector comes
back through :func:`numpy.frombuffer` from raw little-endian float32 bytes -- nothing
stored can run code when read.

:func:`embed_through_cache` is the read-through the classifier uses: cached vectors are
read, the rest embedded once and stored. Both backends share the cache: a text keeps
whichever backend's vector was stored first (they agree to about 1e-6).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from ..._cachedir import cache_root
from .._cache_store import CacheStore

__all__ = [
    "CACHE_FILENAME",
    "EmbeddingCache",
    "default_cache_dir",
    "embed_through_cache",
    "space_key",
    "text_key",
]

CACHE_FILENAME = "embeddings.sqlite3"
_SCHEMA_VERSION = 1
_DTYPE = np.dtype("<f4")
_TABLE = (
    "CREATE TABLE IF NOT EXISTS vectors (space TEXT NOT NULL, key TEXT NOT NULL, "
    "dim INTEGER NOT NULL, data BLOB NOT NULL, PRIMARY KEY (space, key)) WITHOUT ROWID"
)


def default_cache_dir() -> Path:
    """``$HYBRIDROUTE_CACHE_DIR/embeddings``, else ``$XDG_CACHE_HOME/hybridroute/embeddings``,
    else ``~/.cache/hybridroute/embeddings`` (the same root as the dataset cache)."""
    return cache_root() / "embeddings"


def text_key(text: str) -> str:
    """SHA-256 (hex) of ``text``'s UTF-8 bytes."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def space_key(fields: Mapping[str, Any]) -> str:
    """SHA-256 of the canonical JSON of what decides a vector (model fingerprint, layers...)."""
    payload = json.dumps(
        {"schema": _SCHEMA_VERSION, **fields}, sort_keys=True, separators=(",", ":")
    )
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


class EmbeddingCache(CacheStore):
    """Vectors stored by ``(space, text key)`` in ``<directory>/embeddings.sqlite3`` (a
    :class:`~hybridroute.classifiers._cache_store.CacheStore`).

    Use as a context manager; :meth:`put_many` commits at once.

    Parameters
    ----------
    directory : str or path
        The cache directory (created on first use).
    """

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        super().__init__(directory, filename=CACHE_FILENAME, table="vectors", create_sql=_TABLE)

    def get_many(self, space: str, keys: Iterable[str]) -> dict[str, np.ndarray]:
        """Stored vectors (float32) for those of ``keys`` present in ``space``."""
        found: dict[str, np.ndarray] = {}
        for key, dim, data in self.select("key, dim, data", keys, where="space = ?", args=[space]):
            vector = np.frombuffer(data, dtype=_DTYPE)
            # A row of the wrong size (a damaged file) is treated as missing.
            if vector.shape == (int(dim),):
                found[key] = vector.astype(np.float32)
        return found

    def put_many(self, space: str, keys: Sequence[str], vectors: np.ndarray) -> None:
        """Store one vector per key (rows of ``vectors``) in ``space``; commit."""
        vectors = np.asarray(vectors, dtype=_DTYPE)
        if vectors.ndim != 2 or len(vectors) != len(keys):
            raise ValueError("vectors must be a 2-d array with one row per key")
        dim = int(vectors.shape[1])
        rows = [(space, key, dim, row.tobytes()) for key, row in zip(keys, vectors, strict=True)]
        self.queue(("space", "key", "dim", "data"), rows)
        self.flush()

    def count(self, space: str | None = None) -> int:
        """Number of stored vectors (in ``space`` when given)."""
        if space is None:
            return self.count_rows()
        return self.count_rows(where="space = ?", args=[space])


class _Encoder(Protocol):
    space: str
    dim: int

    def encode(self, texts: Sequence[str], *, progress: bool | None) -> np.ndarray: ...


def embed_through_cache(
    texts: Sequence[str],
    encoder: _Encoder,
    *,
    cache_dir: Path | None,
    progress: bool | None = None,
) -> tuple[np.ndarray, dict[str, int]]:
    """Vectors of ``texts`` (one row each) and what it took to get them.

    Each distinct text is looked up once in ``cache_dir`` (``None``: no cache) under the
    encoder's space; the missing ones are embedded in one pass and stored. Returns the
    vectors and ``{"n_texts", "n_unique", "n_embedded", "n_cached"}``.
    """
    unique = list(dict.fromkeys(texts))
    vectors: dict[str, np.ndarray] = {}
    if cache_dir is not None and unique:
        keys = [text_key(t) for t in unique]
        with EmbeddingCache(cache_dir) as store:
            found = store.get_many(encoder.space, keys)
            missing = [(t, k) for t, k in zip(unique, keys, strict=True) if k not in found]
            vectors = {t: found[k] for t, k in zip(unique, keys, strict=True) if k in found}
            if missing:
                fresh = encoder.encode([t for t, _ in missing], progress=progress)
                store.put_many(encoder.space, [k for _, k in missing], fresh)
                vectors.update({t: row for (t, _), row in zip(missing, fresh, strict=True)})
        n_embedded = len(missing)
    else:
        fresh = encoder.encode(unique, progress=progress)
        vectors = dict(zip(unique, fresh, strict=True))
        n_embedded = len(unique)
    out = np.empty((len(texts), encoder.dim), dtype=np.float32)
    for i, text in enumerate(texts):
        out[i] = vectors[text]
    stats = {
        "n_texts": len(texts),
        "n_unique": len(unique),
        "n_embedded": n_embedded,
        "n_cached": len(unique) - n_embedded,
    }
    return out, stats
