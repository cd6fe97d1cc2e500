"""The one on-disk cache store of the classifiers: one SQLite table in a cache directory.

Both caches -- the LLM classifier's answers (:mod:`hybridroute.classifiers.llm._cache`)
and the embedding classifier's vectors (:mod:`hybridroute.classifiers.embedding._cache`)
-- are a :class:`CacheStore`: a table in a SQLite file that the standard library reads
and several processes may share (write-ahead log; ``synchronous=NORMAL``: a cache may
lose its last writes to a power cut, never its consistency). A cache names its file and
its table, and says how a value is written and read back; the store owns the file, the
lookups by key (in chunks under SQLite's smallest limit on parameters) and the batched
writes.

Nothing stored can run code when read: a cache reads back JSON through the hardened
parser or raw float32 bytes, and treats a row it cannot read as missing. This module is
the only one outside :mod:`hybridroute.records` that opens a SQLite file (its caches are
private files of the classifiers, never the decision log).
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, Self

__all__ = ["CacheStore"]

# Keys looked up in one query (SQLite's host-parameter limit is 999 on old builds).
_CHUNK = 500
# Seconds a writer waits for another process's lock before SQLite gives up.
_BUSY_TIMEOUT_S = 60.0


class CacheStore:
    """A table of cached values, keyed by text, in ``<directory>/<filename>``.

    Use as a context manager: the file (and its directory) is created on entry, queued
    writes are committed by :meth:`flush` (at once when ``flush_every`` rows are queued)
    and on exit.

    Parameters
    ----------
    directory : str or path
        The cache directory (``~`` expanded; created on first use).
    filename : str
        The SQLite file in it.
    table : str
        The table's name (the SQL of a subclass, never user input).
    create_sql : str
        ``CREATE TABLE IF NOT EXISTS`` statement of the table; its key column is ``key``.
    flush_every : int, default 64
        Queued rows that trigger a write.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        filename: str,
        table: str,
        create_sql: str,
        flush_every: int = 64,
    ) -> None:
        self.path = Path(directory).expanduser() / filename
        self._table = table
        self._create_sql = create_sql
        self._flush_every = flush_every
        self._conn: sqlite3.Connection | None = None
        self._pending: list[tuple[Any, ...]] = []
        self._insert_sql = ""

    def __enter__(self) -> Self:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.path, timeout=_BUSY_TIMEOUT_S)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute(self._create_sql)
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

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            raise RuntimeError(f"use {type(self).__name__} as a context manager")
        return self._conn

    def select(
        self, columns: str, keys: Iterable[str], *, where: str = "", args: Sequence[Any] = ()
    ) -> Iterator[tuple[Any, ...]]:
        """Rows (``columns``: SQL expressions) whose ``key`` is among ``keys``.

        ``where`` (with its ``args``) narrows the rows further, e.g. ``"space = ?"``.
        Each distinct key is looked up once, in chunks.
        """
        conn = self._connection()
        wanted = list(dict.fromkeys(keys))
        narrow = f"{where} AND " if where else ""
        for i in range(0, len(wanted), _CHUNK):
            chunk = wanted[i : i + _CHUNK]
            marks = ",".join("?" * len(chunk))
            yield from conn.execute(
                f"SELECT {columns} FROM {self._table} WHERE {narrow}key IN ({marks})",
                [*args, *chunk],
            )

    def queue(self, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
        """Queue rows (values of ``columns``) to insert or replace; written on the next
        :meth:`flush`, at once when ``flush_every`` rows are queued."""
        sql = (
            f"INSERT OR REPLACE INTO {self._table} ({', '.join(columns)}) "
            f"VALUES ({', '.join('?' * len(columns))})"
        )
        if self._pending and sql != self._insert_sql:
            self.flush()
        self._insert_sql = sql
        self._pending.extend(tuple(row) for row in rows)
        if len(self._pending) >= self._flush_every:
            self.flush()

    def flush(self) -> None:
        """Write the queued rows (one transaction)."""
        if self._conn is None or not self._pending:
            return
        with self._conn:
            self._conn.executemany(self._insert_sql, self._pending)
        self._pending.clear()

    def count_rows(self, *, where: str = "", args: Sequence[Any] = ()) -> int:
        """Number of stored rows (those matching ``where`` when given)."""
        sql = f"SELECT COUNT(*) FROM {self._table}" + (f" WHERE {where}" if where else "")
        return int(self._connection().execute(sql, list(args)).fetchone()[0])
