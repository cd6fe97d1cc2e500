"""The SQLite decision log: an append-only store (WAL mode), schema-versioned, batched.

Why SQLite in WAL mode: a committed batch survives the writing process being killed
(SIGKILL) because it already sits in the write-ahead log (``synchronous = FULL``: it is
also on disk when the commit returns); a crash mid-batch loses at most that uncommitted
batch and never corrupts the file; several processes can append to the same file
(writers queue on SQLite's lock, waiting up to ``busy_timeout_s``), so two routers
logging at once lose nothing.

Each row holds the full decision record (redacted, see :mod:`hybridroute._redact`) as JSON
plus the columns that drift and replay filter on, its ``decision_id`` and its ``role``.

**One decision per request id.** An ``item_id`` given to :meth:`DecisionLog.append` (or a
request id given to :meth:`~DecisionLog.log_many`) is the caller's request id: the log
holds at most one decision per (router, router version, request id). A second one for
the same request is skipped (the default; counted in :attr:`DecisionLog.skipped`) or
refused with :class:`~hybridroute.exceptions.DuplicateDecisionError`
(``on_duplicate="error"``); one for another request (another stored snapshot hash) is
always refused (:class:`~hybridroute.exceptions.RequestIdConflictError`). The
check runs inside the write transaction (an indexed lookup of the batch's ids under
SQLite's write lock, then the insert), so it holds across processes and for logs written
before it existed; rerunning a batch with ids is idempotent. Decisions without an id are
never deduplicated. Another router version (or router) may log the same id again: that
is a new decision, not a duplicate.

**Schema versions.** Version 2 added ``decision_id`` and ``role``; version 3 the
``outcomes`` table (see :mod:`._outcomes`) and the audit columns ``audit_p`` and
``audited`` (see :mod:`._audit`; ``NULL`` for rows written without an audit sampler);
version 4 the ``routers`` table (each router version's labels and destinations, see
:mod:`._vocabulary`) and the outcome source ``adjudication`` (a version-3 outcomes table
is rebuilt with the wider CHECK, its rows and ``seq`` numbers kept). An older log is
migrated in place when it is opened (one transaction: version-1 rows get decision ids and
the role ``live``).
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..exceptions import ArtifactError
from ._audit import AuditSampler
from ._fileguard import FileGuard
from ._logbase import (
    Decide,
    Key,
    LogBase,
    Pending,
    Stored,
    new_decision_id,
    record_to_decision,
)
from ._outcomes import (
    OUTCOME_COLUMNS,
    create_outcomes_sql,
    outcomes_index_sql,
    outcomes_table_sql,
)
from ._schema import (
    AUDIT_COLUMN_SQL,
    COLUMNS,
    INSERT_COLUMNS,
    ON_DUPLICATE,
    SCHEMA_VERSION,
    STORED_COLUMNS,
    create_table_sql,
    meta_rows,
    now_iso,
)
from ._vocabulary import create_routers_sql

__all__ = [
    "COLUMNS",
    "ON_DUPLICATE",
    "SCHEMA_VERSION",
    "DecisionLog",
    "read_rows",
    "record_to_decision",
]

_SEQ = "INTEGER PRIMARY KEY AUTOINCREMENT"
_CREATE = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
{create};
CREATE INDEX IF NOT EXISTS decisions_version ON decisions (router_version, logged_at);
CREATE INDEX IF NOT EXISTS decisions_request ON decisions (router, router_version, item_id)
    WHERE item_id IS NOT NULL;
{outcomes};
{routers}
""".format(
    create=create_table_sql(
        "decisions", seq="INTEGER PRIMARY KEY AUTOINCREMENT", real="REAL", strict=False
    ),
    outcomes=";\n".join(create_outcomes_sql("outcomes", seq=_SEQ)),
    routers=create_routers_sql("routers"),
)
# after the migration (a version-1 table has no decision_id to index yet)
_CREATE_V2 = """
CREATE UNIQUE INDEX IF NOT EXISTS decisions_decision_id ON decisions (decision_id);
CREATE INDEX IF NOT EXISTS decisions_role ON decisions (role, router_version);
CREATE INDEX IF NOT EXISTS decisions_audited ON decisions (router_version, seq)
    WHERE audited = 1
"""

# No index on snapshot_hash: no query of the log looks rows up by it (the drift report
# groups a read frame), and a B-tree of random 64-digit keys cost a quarter of every
# insert. Logs created before keep theirs; nothing reads or needs it.
_INDEXES = {
    "decisions_version",
    "decisions_request",
    "decisions_decision_id",
    "decisions_role",
    "decisions_audited",
    "outcomes_decision",
}

_INSERT = (
    f"INSERT INTO decisions ({', '.join(INSERT_COLUMNS)}) "
    f"VALUES ({', '.join('?' * len(INSERT_COLUMNS))})"
)
#: The page size of a new log file (bytes; an existing log keeps the one it was made with).
PAGE_SIZE = 16384
# Request ids looked up per query (well under SQLite's smallest limit on parameters).
_LOOKUP_CHUNK = 500


class DecisionLog(LogBase):
    """Append decisions to, and read them back from, a SQLite decision log.

    :func:`~hybridroute.records.open_log` opens one from a ``sqlite:///`` URL or a path.

    Parameters
    ----------
    path : str or path-like
        The log file (created if missing, in a directory that must exist).
    batch_size : int
        Decisions buffered by :meth:`append` before one transaction writes them all.
    sensitive_fields : iterable of str
        Fact names stored as salted hashes (see :class:`~hybridroute.records.Redactor`).
    salt : str, optional
        The salt for those hashes (default: ``HYBRIDROUTE_LOG_SALT``); never stored.
    busy_timeout_s : float
        How long a writer waits for another process's write to finish.
    on_duplicate : {"skip", "error"}
        A decision whose ``item_id`` (request id) the log already holds for the same
        router and router version, with the same request: ``"skip"`` leaves it out and
        counts it (:attr:`skipped`, :attr:`last_skipped`); ``"error"`` writes nothing of that
        flush and raises :class:`~hybridroute.exceptions.DuplicateDecisionError` (the
        refused decisions are dropped from the buffer, the others stay buffered for the
        next :meth:`flush`). :meth:`log_many` always reports duplicates instead. The same
        id with *another* request is always refused
        (:class:`~hybridroute.exceptions.RequestIdConflictError`, either setting).
    audit : AuditSampler, optional
        Audit sampling of the live auto-routed decisions written: each live row records
        its inclusion probability (``audit_p``) and whether it was selected
        (``audited``). ``None``: both stay ``NULL`` (no audit declared).

    Attributes
    ----------
    skipped : int
        Decisions skipped as duplicates since the log was opened.
    last_skipped : list of str
        The request ids skipped by the latest flush.

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
        audit: AuditSampler | None = None,
    ) -> None:
        self._setup(batch_size, sensitive_fields, salt, on_duplicate, audit)
        self.path = Path(path)
        self.where = str(self.path)
        from ._url import check_sqlite_file

        check_sqlite_file(self.path, create=True)  # a file, in a directory that exists
        try:
            self._conn = sqlite3.connect(
                str(self.path),
                timeout=busy_timeout_s,
                isolation_level=None,
                check_same_thread=False,
            )
            self._busy_ms = int(busy_timeout_s * 1000)
            self._conn.execute(f"PRAGMA busy_timeout = {self._busy_ms}")
            # a new file gets pages that hold several records each (a record is 1-2 KB):
            # a quarter less work per insert than 4 KB pages; an existing log keeps its own
            self._conn.execute(f"PRAGMA page_size = {PAGE_SIZE}")
            mode = self._switch_to_wal(busy_timeout_s)
            # FULL: a commit is on disk when it returns (NORMAL would only survive the
            # process being killed, not the machine losing power)
            self._conn.execute("PRAGMA synchronous = FULL")
            self._init_schema()
        except sqlite3.DatabaseError as exc:
            raise ArtifactError(f"not a usable decision log ({exc})", path=self.where) from None
        # the files this connection writes through (checked around every write)
        self._guard = FileGuard(str(self.path), self.where)
        if str(mode).lower() != "wal":  # pragma: no cover - e.g. a network filesystem
            raise ArtifactError(
                f"cannot switch the log to WAL mode (got {mode!r})", path=self.where
            )

    def __repr__(self) -> str:
        return f"DecisionLog({self.where!r})"

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
        row = None
        try:
            row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        except sqlite3.OperationalError:
            pass  # no meta table yet
        if row is not None and int(row[0]) == SCHEMA_VERSION:
            names = {
                r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")
            }
            if _INDEXES <= names:
                return  # nothing to create or migrate: no write lock (a read-only file opens)
        conn.execute("BEGIN IMMEDIATE")
        try:
            for stmt in _CREATE.strip().split(";"):
                conn.execute(stmt)
            row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
            if row is None:
                conn.executemany("INSERT INTO meta (key, value) VALUES (?, ?)", meta_rows())
            elif int(row[0]) > SCHEMA_VERSION:
                raise ArtifactError(
                    f"log schema version {row[0]} is newer than this hybridroute reads ({SCHEMA_VERSION})",
                    path=self.where,
                )
            elif int(row[0]) < SCHEMA_VERSION:
                self._migrate(int(row[0]))
            for stmt in _CREATE_V2.strip().split(";"):
                conn.execute(stmt)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def _migrate(self, version: int) -> None:
        """Bring an older log to this version (inside the caller's transaction)."""
        conn = self._conn
        have = {r[1] for r in conn.execute("PRAGMA table_info(decisions)")}
        if "decision_id" not in have:
            conn.execute("ALTER TABLE decisions ADD COLUMN decision_id TEXT")
        if "role" not in have:
            conn.execute("ALTER TABLE decisions ADD COLUMN role TEXT NOT NULL DEFAULT 'live'")
        for name, sql_type in AUDIT_COLUMN_SQL.items():
            if name not in have:
                conn.execute(
                    f"ALTER TABLE decisions ADD COLUMN {name} {sql_type.format(real='REAL')}"
                )
        seqs = [r[0] for r in conn.execute("SELECT seq FROM decisions WHERE decision_id IS NULL")]
        conn.executemany(
            "UPDATE decisions SET decision_id = ? WHERE seq = ?",
            ((new_decision_id(), s) for s in seqs),
        )
        _widen_outcome_sources(conn)
        conn.execute(
            "UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION),)
        )
        conn.execute(
            "INSERT OR REPLACE INTO meta (key, value) VALUES ('migrated_from', ?)", (str(version),)
        )

    # ------------------------------------------------------------------ backend hooks
    def _fail(
        self, exc: sqlite3.Error, what: str = "cannot write the decision log"
    ) -> ArtifactError:
        return ArtifactError(f"{what} ({exc})", path=self.where)

    @contextmanager
    def _immediate(
        self, what: str = "cannot write the decision log"
    ) -> Iterator[sqlite3.Connection]:
        """One write transaction under SQLite's write lock: committed when the block ends
        (unless it rolled back itself), rolled back when it raises.

        The log's files are checked before and after (:class:`~._fileguard.FileGuard`):
        a commit into a file that was removed or replaced meanwhile raises, so it is
        never acknowledged.
        """
        conn = self._conn
        self._guard.check()
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
                if conn.in_transaction:
                    conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
        except sqlite3.DatabaseError as exc:
            raise self._fail(exc, what) from None
        self._guard.check()

    def _write(
        self, rows: list[Pending], decide: Decide, *, undo: bool
    ) -> tuple[list[Stored | None], set[int]]:
        with self._immediate() as conn:
            # the lookup runs under the write lock: no other writer can log an id between
            # the check and the insert, in this process or any other; so what is withheld
            # is known before anything is inserted (``undo`` is never needed)
            keys = [r.key for r in rows]
            found = self._stored([k for k in keys if k is not None])
            hits: list[Stored | None] = (
                [None if k is None else found.get(k) for k in keys] if found else [None] * len(rows)
            )
            withheld = decide(hits)
            if found or withheld:
                fresh = [
                    r.values
                    for i, (r, h) in enumerate(zip(rows, hits, strict=True))
                    if h is None and i not in withheld
                ]
            else:
                fresh = [r.values for r in rows]
            if fresh:
                conn.executemany(_INSERT, fresh)
            else:
                conn.execute("ROLLBACK")
        return hits, withheld

    def _stored(self, keys: Sequence[Key]) -> dict[Key, Stored]:
        wanted: dict[tuple[str, str], set[str]] = {}
        for router, version, item_id in keys:
            wanted.setdefault((router, version), set()).add(item_id)
        found: dict[Key, Stored] = {}
        for (router, version), ids in wanted.items():
            ordered = sorted(ids)
            for start in range(0, len(ordered), _LOOKUP_CHUNK):
                part = ordered[start : start + _LOOKUP_CHUNK]
                sql = (
                    f"SELECT {', '.join(STORED_COLUMNS)} FROM decisions WHERE router = ? AND "
                    f"router_version = ? AND item_id IN ({', '.join('?' * len(part))}) "
                    "ORDER BY seq"
                )
                for row in self._conn.execute(sql, (router, version, *part)):
                    key, stored = Stored.from_row(row)
                    found.setdefault(key, stored)  # a log from before the check: the first
        return found

    def _query(self, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            return self._conn.execute(sql, tuple(args)).fetchall()

    def _in_transaction(self, work: Any) -> Any:
        with self._lock, self._immediate() as conn:
            return work(_SqliteTx(conn))

    def _close_connection(self) -> None:
        self._conn.close()

    def check_writable(self, *, timeout_s: float = 5.0) -> None:
        """Raise :class:`~hybridroute.exceptions.ArtifactError` naming the log when it
        cannot be written now: closed, its file removed or replaced since it was opened,
        the disk holding it (nearly) full, a read-only file, a lock held too long.

        Commits one metadata row (``ready_check``: the time of the check), waiting at most
        ``timeout_s`` for another writer: the check takes the path a decision's commit
        takes, fsync included.
        """
        if self._closed:
            raise ArtifactError("the decision log is closed", path=self.where)
        with self._lock:
            self._guard.check()
            self._guard.check_room()
            conn = self._conn
            try:
                conn.execute(f"PRAGMA busy_timeout = {int(timeout_s * 1000)}")
                try:
                    with self._immediate("the decision log is not writable"):
                        conn.execute(
                            "INSERT OR REPLACE INTO meta (key, value) VALUES ('ready_check', ?)",
                            (now_iso(),),
                        )
                finally:
                    conn.execute(f"PRAGMA busy_timeout = {self._busy_ms}")
            except sqlite3.Error as exc:
                raise ArtifactError(
                    f"the decision log is not writable ({exc})", path=self.where
                ) from None

    def integrity_check(self) -> str:
        """SQLite's own integrity check (``"ok"`` for an intact file)."""
        return str(self._query("PRAGMA integrity_check")[0][0])


def read_rows(path: str | os.PathLike[str]) -> list[tuple[int, str | None, str]]:
    """``(seq, item_id, record)`` of every decision in the SQLite log at ``path``, in log
    order, ``record`` as the stored JSON text -- read without writing.

    For readers that must leave a log as they found it (the Spark reader): the file is
    opened read-only, never created, switched to WAL or migrated, so an older log (any
    schema version up to this one) reads as it is. A newer schema, or a file that is not a
    decision log, is an :class:`~hybridroute.exceptions.ArtifactError` naming ``path``.
    """
    where = os.fsdecode(os.fspath(path))
    conn = sqlite3.connect(f"{Path(path).resolve().as_uri()}?mode=ro", uri=True)
    try:
        try:
            version = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
            rows = conn.execute(
                "SELECT seq, item_id, record FROM decisions ORDER BY seq"
            ).fetchall()
        except sqlite3.DatabaseError as exc:
            raise ArtifactError(f"not a readable decision log ({exc})", path=where) from None
    finally:
        conn.close()
    if version is None or int(version[0]) > SCHEMA_VERSION:
        raise ArtifactError(
            f"decision log schema version {None if version is None else version[0]} "
            f"is not one this hybridroute reads ({SCHEMA_VERSION})",
            path=where,
        )
    return [(int(seq), item, record) for seq, item, record in rows]


def _widen_outcome_sources(conn: sqlite3.Connection) -> None:
    """Rebuild a version-3 outcomes table, whose CHECK on ``source`` predates
    ``adjudication``, with this version's (rows, ``seq`` numbers and index kept)."""
    (sql,) = conn.execute(
        "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'outcomes'"
    ).fetchone()
    if "'adjudication'" in sql:
        return
    conn.execute("DROP TABLE IF EXISTS outcomes_v4")
    conn.execute(outcomes_table_sql("outcomes_v4", seq=_SEQ))
    columns = ", ".join(("seq", *OUTCOME_COLUMNS))
    conn.execute(f"INSERT INTO outcomes_v4 ({columns}) SELECT {columns} FROM outcomes ORDER BY seq")
    conn.execute("DROP TABLE outcomes")
    conn.execute("ALTER TABLE outcomes_v4 RENAME TO outcomes")
    conn.execute(outcomes_index_sql("outcomes"))


class _SqliteTx:
    """The :class:`~._outcomes.Tx` of one SQLite transaction."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def query(self, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return self._conn.execute(sql, tuple(args)).fetchall()

    def insert(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        self._conn.executemany(sql, rows)
