"""The decision log: an append-only SQLite store (WAL mode), schema-versioned, batched.

Why SQLite in WAL mode: a committed batch survives the writing process being killed
(SIGKILL) because it already sits in the write-ahead log; a crash mid-batch loses at most
that uncommitted batch and never corrupts the file; several processes can append to the
same file (writers queue on SQLite's lock, waiting up to ``busy_timeout_s``), so two
routers logging at once lose nothing.

Each row holds the full decision record (redacted, see :mod:`hybridroute._redact`) as JSON plus the
columns that drift and replay filter on.

**One decision per request id.** An ``item_id`` given to :meth:`DecisionLog.append` is the
caller's request id: the log holds at most one decision per (router, router version,
request id). A second one is skipped (the default; counted in :attr:`DecisionLog.skipped`)
or refused with :class:`~hybridroute.exceptions.DuplicateDecisionError`
(``on_duplicate="error"``). The check runs inside the write transaction (an indexed
lookup of the batch's ids under SQLite's write lock, then the insert), so it holds across
processes and for logs written before it existed; rerunning a batch with ids is
idempotent. Decisions without an id are never deduplicated. Another router version (or router) may log the same id again:
that is a new decision, not a duplicate.
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
from ..exceptions import ArtifactError, DuplicateDecisionError

__all__ = ["ON_DUPLICATE", "SCHEMA_VERSION", "DecisionLog"]

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
CREATE INDEX IF NOT EXISTS decisions_request ON decisions (router, router_version, item_id)
    WHERE item_id IS NOT NULL;
"""

#: What :class:`DecisionLog` does with a second decision for a logged request id.
ON_DUPLICATE = ("skip", "error")

_INSERT = (
    "INSERT INTO decisions (logged_at, item_id, router, router_version, stage, "
    "selected_destination, reason_code, snapshot_hash, label, confidence, record) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
# Request ids looked up per query (well under SQLite's smallest limit on parameters).
_LOOKUP_CHUNK = 500

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
    on_duplicate : {"skip", "error"}
        A decision whose ``item_id`` (request id) the log already holds for the same
        router and router version: ``"skip"`` leaves it out and counts it
        (:attr:`skipped`, :attr:`last_skipped`); ``"error"`` writes nothing of that
        flush and raises :class:`~hybridroute.exceptions.DuplicateDecisionError` (the
        refused decisions are dropped from the buffer, the others stay buffered for the
        next :meth:`flush`).

    Attributes
    ----------
    skipped : int
        Decisions skipped as duplicates since the log was opened.
    last_skipped : list of str
        The request ids skipped by the latest flush.
    last_conflicts : list of str
        Those of :attr:`last_skipped` whose logged decision was made for another input
        (another snapshot hash): the caller sent different input under a logged id.

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
        on_duplicate: str = "skip",
    ) -> None:
        if int(batch_size) < 1:
            raise ValueError("batch_size must be at least 1")
        if on_duplicate not in ON_DUPLICATE:
            raise ValueError(f"on_duplicate must be one of {ON_DUPLICATE}, got {on_duplicate!r}")
        self.on_duplicate = on_duplicate
        self.skipped = 0
        self.last_skipped: list[str] = []
        self.last_conflicts: list[str] = []
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
    ) -> dict[str, Any]:
        """Buffer one decision; a full buffer is written in one transaction.

        Parameters
        ----------
        decision : Decision
            The decision to log; its sensitive facts are hashed and credentials scrubbed
            before it is buffered (the snapshot hash stored is the redacted snapshot's).
        item_id : str or None, default None
            The caller's request id (stored as a string). A decision with an id already
            logged for the same router and version is handled as ``on_duplicate`` says;
            one without an id is never a duplicate.
        at : float or None, default None
            When the decision was made, in seconds since the Unix epoch; stored as a UTC
            ISO 8601 time. ``None``: now.

        Returns
        -------
        dict
            The record as it will be stored (redacted), e.g. for printing.

        Raises
        ------
        DuplicateDecisionError
            With ``on_duplicate="error"``, when this append fills the buffer and the flush
            meets a logged request id.
        """
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
        return record

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
        """Write the buffered decisions in one transaction; return how many were written.

        Decisions skipped as duplicates are not counted (see :attr:`last_skipped`).
        """
        self.last_skipped = []
        self.last_conflicts = []
        if not self._buffer:
            return 0
        rows, self._buffer = self._buffer, []
        conn = self._conn
        try:
            conn.execute("BEGIN IMMEDIATE")
            # the lookup runs under the write lock: no other writer can log an id between
            # the check and the insert, in this process or any other
            refused, conflicts = self._already_logged(rows)
            if refused and self.on_duplicate == "error":
                conn.execute("ROLLBACK")
                dropped = set(refused)
                self._buffer = [r for i, r in enumerate(rows) if i not in dropped]
                ids = tuple(str(rows[i][1]) for i in refused)
                shown = ", ".join(repr(i) for i in ids[:10])
                more = f" and {len(ids) - 10} more" if len(ids) > 10 else ""
                raise DuplicateDecisionError(
                    f"{len(ids)} decision(s) refused: request id(s) {shown}{more} already "
                    "logged for this router version; nothing of this batch was written",
                    path=str(self.path),
                    item_ids=ids,
                )
            if refused:
                dropped = set(refused)
                conn.executemany(_INSERT, [r for i, r in enumerate(rows) if i not in dropped])
            else:
                conn.executemany(_INSERT, rows)
            conn.execute("COMMIT")
        except DuplicateDecisionError:
            raise
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            self._buffer = rows + self._buffer  # keep them for a retry; nothing is dropped
            raise
        self.skipped += len(refused)
        self.last_skipped = [str(rows[i][1]) for i in refused]
        self.last_conflicts = conflicts
        return len(rows) - len(refused)

    def _already_logged(self, rows: list[tuple[Any, ...]]) -> tuple[list[int], list[str]]:
        """Positions in ``rows`` whose request id is logged (or earlier in ``rows``) for
        the same router and version, and the ids among them that came with other input.

        Rows without an id are never duplicates; of the rows sharing an id, the first is
        kept unless the id was logged before.
        """
        wanted: dict[tuple[str, str], set[str]] = {}
        for row in rows:
            if row[1] is not None:
                wanted.setdefault((row[2], row[3]), set()).add(row[1])
        if not wanted:
            return [], []
        first_hash: dict[tuple[str, str, str], str] = {}
        for (router, version), ids in wanted.items():
            ordered = sorted(ids)
            for start in range(0, len(ordered), _LOOKUP_CHUNK):
                part = ordered[start : start + _LOOKUP_CHUNK]
                sql = (
                    "SELECT item_id, snapshot_hash FROM decisions WHERE router = ? AND "
                    f"router_version = ? AND item_id IN ({', '.join('?' * len(part))}) "
                    "ORDER BY seq"
                )
                for item_id, digest in self._conn.execute(sql, (router, version, *part)):
                    first_hash.setdefault((router, version, item_id), digest)
        refused: list[int] = []
        conflicts: list[str] = []
        for pos, row in enumerate(rows):
            if row[1] is None:
                continue
            key = (row[2], row[3], row[1])
            logged = first_hash.get(key)
            if logged is None:
                first_hash[key] = row[7]  # a later row with this id is a duplicate
                continue
            refused.append(pos)
            if logged != row[7]:
                conflicts.append(str(row[1]))
        return refused, conflicts

    def discard(self) -> int:
        """Drop the buffered decisions without writing them; return how many there were.

        For callers that write a batch all or nothing: buffer it whole (a ``batch_size``
        above its length), then :meth:`flush` once, or :meth:`discard` on failure.
        """
        n = len(self._buffer)
        self._buffer = []
        return n

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
