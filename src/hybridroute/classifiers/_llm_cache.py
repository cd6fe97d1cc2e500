"""On-disk answer cache of the LLM classifier (one SQLite file in a cache directory).

A key is the SHA-256 of the canonical JSON of everything that decides an answer: model
string, prompt-template version and content fingerprint, the label set (in order), the
structured-output mode, the confidence method and its settings, and the text. The API
base and key are not part of it (the same model behind another proxy answers the same).
Only valid answers are stored; an abstention is asked again on the next run.

Values are JSON, read back through the hardened parser (:func:`hybridroute._safeio.
parse_json`: no duplicate keys, bounded nesting and integers, no NaN / Infinity, valid
Unicode), so nothing stored can execute code or exhaust memory on load. A row that fails
that check (a damaged file, a hand-edited or hostile row) is a **cache miss**, not an
error: the text is asked again and the new answer replaces the row. Misses of that kind
are counted (:attr:`AnswerCache.damaged`) so that the classifier can warn about them --
a cache is an optimisation and must never stop a batch, but a damaged one should not go
unnoticed. The classifier also refuses rows whose labels are outside its label set.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from .._safeio import parse_json
from ..exceptions import InputError

__all__ = ["CACHE_FILENAME", "AnswerCache", "cache_key"]

CACHE_FILENAME = "llm_answers.sqlite3"
_SCHEMA_VERSION = 1


def cache_key(fields: Mapping[str, Any], text: str) -> str:
    """SHA-256 of the canonical JSON of ``fields`` plus ``text``."""
    payload = json.dumps(
        {"schema": _SCHEMA_VERSION, **fields, "text": text},
        sort_keys=True,
        ensure_ascii=False,
        separators=(",", ":"),
    )
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


class AnswerCache:
    """A small key -> JSON store in ``<directory>/llm_answers.sqlite3``.

    Use as a context manager; writes are committed on :meth:`flush` and on exit.

    Attributes
    ----------
    damaged : int
        Rows that :meth:`get_many` found but could not read (not strict JSON, or not a
        JSON object): treated as misses.
    """

    #: Longest stored value read back, in characters: a real entry is a few hundred.
    MAX_VALUE_CHARS = 1 << 16

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.path = Path(directory) / CACHE_FILENAME
        self._conn: sqlite3.Connection | None = None
        self._pending: list[tuple[str, str, float]] = []
        self.damaged = 0

    def __enter__(self) -> AnswerCache:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.path, timeout=30.0)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute(
            "CREATE TABLE IF NOT EXISTS answers (key TEXT PRIMARY KEY, value TEXT NOT NULL, "
            "created REAL NOT NULL)"
        )
        conn.commit()
        self._conn = conn
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.flush()
        finally:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def get_many(self, keys: Iterable[str]) -> dict[str, dict[str, Any]]:
        """Stored values for those of ``keys`` that are present."""
        assert self._conn is not None, "use AnswerCache as a context manager"
        wanted = list(dict.fromkeys(keys))
        found: dict[str, dict[str, Any]] = {}
        for i in range(0, len(wanted), 500):
            chunk = wanted[i : i + 500]
            marks = ",".join("?" * len(chunk))
            # Only the first MAX_VALUE_CHARS + 1 characters are fetched, so an oversized
            # row costs no more memory than a legitimate one.
            rows = self._conn.execute(
                f"SELECT key, substr(value, 1, {self.MAX_VALUE_CHARS + 1}), typeof(value) "
                f"FROM answers WHERE key IN ({marks})",
                chunk,
            )
            for key, value, kind in rows:
                parsed = self._parse(value, kind)
                if parsed is None:
                    self.damaged += 1  # a damaged row is a cache miss, not an error
                else:
                    found[key] = parsed
        return found

    def _parse(self, value: Any, kind: str) -> dict[str, Any] | None:
        if kind != "text" or not isinstance(value, str) or len(value) > self.MAX_VALUE_CHARS:
            return None
        try:
            parsed = parse_json(value, source=str(self.path), what="cached LLM answer")
        except InputError:
            return None
        return parsed if isinstance(parsed, dict) else None

    def put(self, key: str, value: Mapping[str, Any]) -> None:
        """Queue one value; written on the next :meth:`flush` (every 64 puts)."""
        self._pending.append((key, json.dumps(value, sort_keys=True), time.time()))
        if len(self._pending) >= 64:
            self.flush()

    def flush(self) -> None:
        """Write queued values."""
        if self._conn is None or not self._pending:
            return
        self._conn.executemany(
            "INSERT OR REPLACE INTO answers (key, value, created) VALUES (?, ?, ?)",
            self._pending,
        )
        self._conn.commit()
        self._pending.clear()
