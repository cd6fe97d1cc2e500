"""The decision log: an append-only SQLite store (WAL mode), schema-versioned, batched.

Why SQLite in WAL mode: a committed batch survives the writing process being killed
(SIGKILL) because it already sits in the write-ahead log; a crash mid-batch loses at most
that uncommitted batch and never corrupts the file; several processes can append to the
same file (writers queue on SQLite's lock, waiting up to ``busy_timeout_s``), so two
routers logging at once lose nothing.

Each row holds the full decision record (redacted, see :mod:`hybridroute._redact`) as JSON plus the
columns that drift and replay filter on.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Iterable, Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .._redact import Redactor
from .._version import __version__
from ..contracts import Decision
from ..exceptions import ArtifactError

__all__ = ["SCHEMA_VERSION", "DecisionLog"]

#: Version of the log's table layout; a log written by a newer layout is refused.
SCHEMA_VERSION = 1

_CREATE = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS decisions (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    logged_at TEXT NOT NULL,
    item_id TEXT,
    router TEXT NOT NULL,
    router_version TEXT NOT NULL,
    stage TEXT NOT NULL,
    selected_destination TEXT NOT NULL,
    reason_code TEXT NOT NULL,
    snapshot_hash TEXT NOT NULL,
    label TEXT,
    confidence REAL,
    record TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS decisions_hash ON decisions (snapshot_hash);
CREATE INDEX IF NOT EXISTS decisions_version ON decisions (router_version, logged_at);
"""

_COLUMNS = (
    "seq",
    "logged_at",
    "item_id",
    "router",
    "router_version",
    "stage",
    "selected_destination",
    "reason_code",
    "snapshot_hash",
    "label",
    "confidence",
    "record",
)


def _now_iso(ts: float | None = None) -> str:
    return datetime.fromtimestamp(time.time() if ts is None else ts, tz=UTC).isoformat(
        timespec="microseconds"
    )


class DecisionLog:
    """Append decisions to, and read them back from, a SQLite decision log.

    Parameters
    ----------
    path : str or path-like
        The log file (created with its directory if missing).
    batch_size : int
        Decisions buffered before one transaction writes them all.
    sensitive_fields : iterable of str
        Fact names stored as salted hashes (see :class:`~hybridroute.records.Redactor`).
    salt : str, optional
        The salt for those hashes (default: ``HYBRIDROUTE_LOG_SALT``); never stored.
    busy_timeout_s : float
        How long a writer waits for another process's write to finish.

    Use as a context manager, or call :meth:`close` (which flushes).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        batch_size: int = 500,
        sensitive_fields: Iterable[str] = (),
        salt: str | None = None,
        busy_timeout_s: float = 60.0,
    ) -> None:
        if int(batch_size) < 1:
            raise ValueError("batch_size must be at least 1")
        self.path = Path(path)
        self.batch_size = int(batch_size)
        self._redactor = Redactor(sensitive_fields, salt)
        self._buffer: list[tuple[Any, ...]] = []
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._conn = sqlite3.connect(
                str(self.path),
                timeout=busy_timeout_s,
                isolation_level=None,
                check_same_thread=False,
            )
            self._conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}")
            mode = self._switch_to_wal(busy_timeout_s)
            self._conn.execute("PRAGMA synchronous = NORMAL")
            self._init_schema()
        except sqlite3.DatabaseError as exc:
            raise ArtifactError(f"not a usable decision log ({exc})", path=str(self.path)) from None
        if str(mode).lower() != "wal":  # pragma: no cover - e.g. a network filesystem
            raise ArtifactError(
                f"cannot switch the log to WAL mode (got {mode!r})", path=str(self.path)
            )

    def _switch_to_wal(self, timeout_s: float) -> str:
        # Switching a new file to WAL needs a moment alone with it: when another process
        # is creating the same log right now, SQLite answers "locked" (or leaves the mode)
        # instead of waiting, so retry until the busy timeout.
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                mode = str(self._conn.execute("PRAGMA journal_mode = WAL").fetchone()[0])
            except sqlite3.OperationalError:
                if time.monotonic() > deadline:
                    raise
                mode = ""
            if mode.lower() == "wal" or time.monotonic() > deadline:
                return mode
            time.sleep(0.01)

    # ------------------------------------------------------------------ schema
    def _init_schema(self) -> None:
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            for stmt in _CREATE.strip().split(";"):
                if stmt.strip():
                    conn.execute(stmt)
            row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
            if row is None:
                conn.executemany(
                    "INSERT INTO meta (key, value) VALUES (?, ?)",
                    [
                        ("schema_version", str(SCHEMA_VERSION)),
                        ("created_at", _now_iso()),
                        ("created_by", f"hybridroute {__version__}"),
                    ],
                )
            elif int(row[0]) > SCHEMA_VERSION:
                raise ArtifactError(
                    f"log schema version {row[0]} is newer than this hybridroute reads ({SCHEMA_VERSION})",
                    path=str(self.path),
                )
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    # ------------------------------------------------------------------ writing
    def append(
        self, decision: Decision, *, item_id: str | None = None, at: float | None = None
    ) -> None:
        """Buffer one decision; a full buffer is written in one transaction."""
        record = self._redactor.apply_decision(decision)
        self._buffer.append(
            (
                _now_iso(at),
                None if item_id is None else str(item_id),
                decision.router,
                decision.router_version,
                decision.stage,
                decision.selected_destination,
                decision.reason_code,
                record["snapshot_hash"],  # of the stored (redacted) snapshot
                decision.label,
                decision.confidence,
                json.dumps(record, ensure_ascii=False, separators=(",", ":")),
            )
        )
        if len(self._buffer) >= self.batch_size:
            self.flush()

    def extend(
        self, decisions: Iterable[Decision], *, item_ids: Iterable[str | None] | None = None
    ) -> None:
        """:meth:`append` each decision (with its item id, when given)."""
        if item_ids is None:
            for d in decisions:
                self.append(d)
        else:
            for d, i in zip(decisions, item_ids, strict=True):
                self.append(d, item_id=i)

    def flush(self) -> int:
        """Write the buffered decisions in one transaction; return how many were written."""
        if not self._buffer:
            return 0
        rows, self._buffer = self._buffer, []
        conn = self._conn
        try:
            conn.execute("BEGIN IMMEDIATE")
            conn.executemany(
                "INSERT INTO decisions (logged_at, item_id, router, router_version, stage, "
                "selected_destination, reason_code, snapshot_hash, label, confidence, record) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                rows,
            )
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            self._buffer = rows + self._buffer  # keep them for a retry; nothing is dropped
            raise
        return len(rows)

    def close(self) -> None:
        """Flush and close."""
        if self._conn is None:
            return
        try:
            self.flush()
        finally:
            self._conn.close()
            self._conn = None  # type: ignore[assignment]

    def __enter__(self) -> DecisionLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ reading
    @property
    def pending(self) -> int:
        """Decisions buffered but not yet written."""
        return len(self._buffer)

    def meta(self) -> dict[str, str]:
        """The log's metadata (schema version, creation time and tool)."""
        return dict(self._conn.execute("SELECT key, value FROM meta").fetchall())

    def count(self) -> int:
        """Decisions written (not counting the buffer)."""
        return int(self._conn.execute("SELECT COUNT(*) FROM decisions").fetchone()[0])

    def rows(self, *, router_version: str | None = None) -> Iterator[dict[str, Any]]:
        """Written rows in order, each with its columns and the parsed ``record``."""
        sql = f"SELECT {', '.join(_COLUMNS)} FROM decisions"
        args: tuple[Any, ...] = ()
        if router_version is not None:
            sql += " WHERE router_version = ?"
            args = (router_version,)
        sql += " ORDER BY seq"
        for row in self._conn.execute(sql, args):
            out = dict(zip(_COLUMNS, row, strict=True))
            out["record"] = json.loads(out["record"])
            yield out

    def records(self, **kw: Any) -> Iterator[dict[str, Any]]:
        """The stored decision records (``Decision.to_dict()`` shape, redacted)."""
        for row in self.rows(**kw):
            yield row["record"]

    def decisions(self, **kw: Any) -> Iterator[Decision]:
        """Stored records rebuilt as :class:`Decision` values.

        The stored ``snapshot_hash`` is kept as recorded: for records with hashed
        sensitive facts it identifies the original input, not the redacted snapshot.
        """
        for rec in self.records(**kw):
            yield record_to_decision(rec)

    def to_jsonl(self, path: str | os.PathLike[str]) -> int:
        """Write every stored record as one JSON line (with ``seq``, ``logged_at``, ``item_id``)."""
        n = 0
        with open(path, "w", encoding="utf-8") as fh:
            for row in self.rows():
                line = {
                    "seq": row["seq"],
                    "logged_at": row["logged_at"],
                    "item_id": row["item_id"],
                    **row["record"],
                }
                fh.write(json.dumps(line, ensure_ascii=False) + "\n")
                n += 1
        return n

    def to_frame(self) -> Any:
        """A pandas DataFrame: one row per decision, the indexed columns plus ``record``."""
        import pandas as pd

        rows = list(self.rows())
        frame = pd.DataFrame(rows, columns=list(_COLUMNS))
        frame["logged_at"] = pd.to_datetime(frame["logged_at"], utc=True)
        return frame

    def integrity_check(self) -> str:
        """SQLite's own integrity check (``"ok"`` for an intact file)."""
        return str(self._conn.execute("PRAGMA integrity_check").fetchone()[0])


def record_to_decision(record: Mapping[str, Any]) -> Decision:
    """Rebuild a :class:`Decision` from a stored record, keeping its recorded hash."""
    rec = {k: v for k, v in record.items() if k not in ("seq", "logged_at", "item_id")}
    return Decision.from_dict(rec, verify_hash=False)
