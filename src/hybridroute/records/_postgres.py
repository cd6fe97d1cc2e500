"""The PostgreSQL decision log: one log several router replicas share.

The only module that imports the driver (psycopg 3, the ``postgres`` extra), lazily.

Each write is one transaction of one statement for the whole batch: the rows go in as
arrays (``INSERT ... SELECT FROM unnest(...)``) with ``ON CONFLICT DO NOTHING RETURNING``
against a unique partial index on (router, router_version, request id), so the
insert-if-absent holds across processes and replicas without a table lock; the stored
rows of the conflicts are read back in the same transaction (another writer's conflicting
row is committed by then: PostgreSQL makes the insert wait for it). ``seq`` numbers follow
the caller's order, but the rows go in in key order, so two writers with overlapping
batches take their index locks in the same order (a deadlock, should one still happen, is
retried). The commit is durable when it returns (PostgreSQL's
``synchronous_commit``, on by default).

Tables: ``hybridroute_meta``, ``hybridroute_decisions``, ``hybridroute_outcomes`` and
``hybridroute_routers`` (names that do not clash in a shared database); the layout is
schema version 4 of the SQLite log. An older database is brought to version 4 when opened,
in one transaction (version 3: the audit columns added, the outcomes table created;
version 4: the routers table created, the outcomes' CHECK on ``source`` widened to
``adjudication``). Outcome writes hold an advisory
lock for their transaction, so the identical / conflict checks hold across replicas.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from ..exceptions import ArtifactError
from ._audit import AuditSampler
from ._deadline import Deadline
from ._logbase import Decide, Key, LogBase, Pending, Stored
from ._outcomes import create_outcomes_sql, sources_check_sql
from ._schema import (
    AUDIT_COLUMN_SQL,
    INSERT_COLUMNS,
    SCHEMA_VERSION,
    STORED_COLUMNS,
    create_table_sql,
    meta_rows,
)
from ._url import display_url
from ._vocabulary import create_routers_sql

__all__ = ["PostgresLog"]

_TABLE = "hybridroute_decisions"
_META = "hybridroute_meta"
_OUTCOMES = "hybridroute_outcomes"
_ROUTERS = "hybridroute_routers"
# serialises schema creation between processes opening a new database at once
_SCHEMA_LOCK = 0x6879_6272  # "hybr"
# serialises outcome writers (their identical / conflict checks)
_OUTCOME_LOCK = 0x6879_6F75  # "hyou"

_CREATE_TABLE = create_table_sql(
    _TABLE,
    seq="BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY",
    real="DOUBLE PRECISION",
    strict=True,
)
# a version-2 table gains the audit columns (a new one has them: IF NOT EXISTS)
_ADD_AUDIT = ";\n".join(
    f"ALTER TABLE {_TABLE} ADD COLUMN IF NOT EXISTS {c} {t.format(real='DOUBLE PRECISION')}"
    for c, t in AUDIT_COLUMN_SQL.items()
)
_CREATE_OUTCOMES = ";\n".join(
    create_outcomes_sql(_OUTCOMES, seq="BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY")
)
_CREATE = f"""
CREATE TABLE IF NOT EXISTS {_META} (key TEXT PRIMARY KEY, value TEXT NOT NULL);
{_CREATE_TABLE};
CREATE UNIQUE INDEX IF NOT EXISTS {_TABLE}_request ON {_TABLE} (router, router_version, item_id)
    WHERE item_id IS NOT NULL;
CREATE UNIQUE INDEX IF NOT EXISTS {_TABLE}_decision_id ON {_TABLE} (decision_id);
CREATE INDEX IF NOT EXISTS {_TABLE}_version ON {_TABLE} (router_version, logged_at);
CREATE INDEX IF NOT EXISTS {_TABLE}_role ON {_TABLE} (role, router_version);
{_ADD_AUDIT};
CREATE INDEX IF NOT EXISTS {_TABLE}_audited ON {_TABLE} (router_version, seq) WHERE audited = 1;
{_CREATE_OUTCOMES};
ALTER TABLE {_OUTCOMES} DROP CONSTRAINT IF EXISTS {_OUTCOMES}_source_check;
ALTER TABLE {_OUTCOMES} ADD CONSTRAINT {_OUTCOMES}_source_check {sources_check_sql()};
{create_routers_sql(_ROUTERS)}
"""

_TYPES = {"confidence": "float8", "audit_p": "float8", "audited": "int4"}
# Parameters go in binary (%b): a text array sent as text would have every quote of every
# JSON record escaped, which was most of the time of a call.
# seq follows the caller's order (numbers drawn in input order), while the rows go in in
# key order: two writers with overlapping batches take their index locks in one order
_INSERT = (
    "WITH v AS MATERIALIZED (SELECT nextval(pg_get_serial_sequence("
    f"'{_TABLE}', 'seq')) AS seq, u.* FROM unnest("
    + ", ".join(f"%b::{_TYPES.get(c, 'text')}[]" for c in INSERT_COLUMNS)
    + f") WITH ORDINALITY AS u({', '.join(INSERT_COLUMNS)}, ord) ORDER BY u.ord) "
    f"INSERT INTO {_TABLE} (seq, {', '.join(INSERT_COLUMNS)}) OVERRIDING SYSTEM VALUE "
    f"SELECT seq, {', '.join(INSERT_COLUMNS)} FROM v "
    "ORDER BY item_id IS NULL, router, router_version, item_id "
    "ON CONFLICT (router, router_version, item_id) WHERE item_id IS NOT NULL "
    "DO NOTHING RETURNING decision_id"
)
_DELETE_IDS = f"DELETE FROM {_TABLE} WHERE decision_id = ANY(%b::text[])"
_SELECT_KEYS = (
    f"SELECT {', '.join('d.' + c for c in STORED_COLUMNS)} FROM {_TABLE} d JOIN "
    "unnest(%b::text[], %b::text[], %b::text[]) AS k(router, router_version, item_id) "
    "USING (router, router_version, item_id) ORDER BY d.seq"
)


def _driver() -> Any:
    try:
        import psycopg
    except ImportError:
        return None
    return psycopg


def _timeouts(params: dict[str, Any], statement_timeout_s: float | None) -> dict[str, Any]:
    """libpq parameters bounding a call: the server's ``statement_timeout`` and, over TCP,
    keepalives and ``tcp_user_timeout`` (each kept when the URL sets it)."""
    if statement_timeout_s is None:
        return {}
    if not (isinstance(statement_timeout_s, int | float) and statement_timeout_s > 0):
        raise ValueError(f"statement_timeout_s must be > 0 or None, got {statement_timeout_s!r}")
    ms = max(1, int(statement_timeout_s * 1000))
    out: dict[str, Any] = {}
    options = str(params.get("options") or "")
    if "statement_timeout" not in options:
        out["options"] = f"{options} -c statement_timeout={ms}".strip()
    tcp = {
        "keepalives": 1,
        "keepalives_idle": 30,
        "keepalives_interval": 10,
        "keepalives_count": 3,
        "tcp_user_timeout": ms,
    }
    out.update({k: v for k, v in tcp.items() if k not in params})
    return out


class PostgresLog(LogBase):
    """A decision log in a PostgreSQL database (see the module docstring).

    Open it with :func:`~hybridroute.records.open_log`; the API is that of
    :class:`~hybridroute.records.DecisionLog` (``integrity_check`` aside).

    Parameters
    ----------
    url : str
        ``postgresql://`` or ``postgres://`` libpq URL; query parameters allowed.
    batch_size, sensitive_fields, salt, on_duplicate, audit
        As for :class:`~hybridroute.records.DecisionLog`.
    connect_timeout_s : float
        How long connecting may take (unless the URL sets ``connect_timeout``).
    statement_timeout_s : float or None, default 60
        The longest any one statement may run, waiting for a lock included, before the
        server cancels it and the call raises :class:`~hybridroute.exceptions.ArtifactError`
        (as SQLite's ``busy_timeout_s`` bounds a wait for its lock); ``None``: no limit.
        A URL whose ``options`` set ``statement_timeout`` keeps its own. Over TCP the
        connection also sends keepalives and gives up on unacknowledged data after the
        same time (libpq's ``tcp_user_timeout``), so a server that vanishes mid-call ends
        the call instead of hanging it.
    create : bool, default True
        Create the tables when the database has none (``False``: an error instead).
    call_timeout_s : float or None, optional
        The client-side deadline of every call (default ``statement_timeout_s`` plus 2 s):
        a server that stops answering altogether -- frozen, its kernel still acknowledging
        packets, its own ``statement_timeout`` frozen too -- is given up on after this
        long (the connection's socket is shut down and replaced on the next call) and
        the call raises :class:`~hybridroute.exceptions.ArtifactError`. ``None`` with
        ``statement_timeout_s=None``: no deadline.
    """

    _ph = "%s"
    commits_in_seq_order = False
    _table = _TABLE
    _meta_table = _META
    _outcomes_table = _OUTCOMES
    _routers_table = _ROUTERS

    def __init__(
        self,
        url: str,
        *,
        batch_size: int = 500,
        sensitive_fields: Iterable[str] = (),
        salt: str | None = None,
        on_duplicate: str = "skip",
        connect_timeout_s: float = 10.0,
        statement_timeout_s: float | None = 60.0,
        create: bool = True,
        audit: AuditSampler | None = None,
        call_timeout_s: float | None = None,
    ) -> None:
        self._setup(batch_size, sensitive_fields, salt, on_duplicate, audit)
        if call_timeout_s is None and statement_timeout_s is not None:
            call_timeout_s = float(statement_timeout_s) + 2.0
        if call_timeout_s is not None and not (
            isinstance(call_timeout_s, int | float) and call_timeout_s > 0
        ):
            raise ValueError(f"call_timeout_s must be > 0 or None, got {call_timeout_s!r}")
        self._call_timeout = call_timeout_s
        self._deadline = Deadline("hybridroute-pg-deadline")
        self._armed_for = 0.0
        self.where = display_url(url)
        self._pg = _driver()
        if self._pg is None:
            raise ArtifactError(
                "a PostgreSQL decision log needs the driver: pip install 'hybridroute[postgres]'",
                path=self.where,
            )
        try:
            params = self._pg.conninfo.conninfo_to_dict(url)
        except self._pg.Error as exc:
            raise ArtifactError(
                f"not a usable PostgreSQL URL ({self._say(exc)})", path=self.where
            ) from None
        self._secret = str(params.get("password") or "")
        self._url = url
        self._connect_args: dict[str, Any] = {"autocommit": True}
        if "connect_timeout" not in params:
            self._connect_args["connect_timeout"] = max(1, int(connect_timeout_s))
        if "application_name" not in params:
            self._connect_args["application_name"] = "hybridroute"
        self._connect_args.update(_timeouts(params, statement_timeout_s))
        self._conn: Any = None
        with self._lock:
            try:
                self._init_schema(create)
            except BaseException:
                self._close_connection()
                raise

    def __repr__(self) -> str:
        return f"PostgresLog({self.where!r})"

    # ------------------------------------------------------------------ connection
    def _say(self, exc: BaseException) -> str:
        """The driver's message, on one line, without the password."""
        text = " ".join(str(exc).split()) or type(exc).__name__
        secret = getattr(self, "_secret", "")
        return text.replace(secret, "***") if secret else text

    def _fail(self, exc: BaseException, what: str = "cannot use the decision log") -> ArtifactError:
        if self._deadline.fired:
            return ArtifactError(
                f"{what}: the server did not answer within {self._armed_for:g} s, so the "
                "call was given up (client-side deadline; the connection is replaced on the "
                "next call)",
                path=self.where,
            )
        return ArtifactError(f"{what} ({self._say(exc)})", path=self.where)

    def _watch(self, conn: Any, seconds: float | None = None) -> Any:
        """The client-side deadline of one call on ``conn`` (see :mod:`._deadline`)."""
        seconds = self._call_timeout if seconds is None else seconds
        self._armed_for = seconds or 0.0
        try:
            fd = conn.fileno()
        except Exception:  # a closed connection: the call fails at once anyway
            fd = None
        return self._deadline.armed(seconds, fd)

    def _connection(self) -> Any:
        self._deadline.clear()
        if self._closed:
            raise ArtifactError("the decision log is closed", path=self.where)
        conn = self._conn
        if conn is None or conn.closed or conn.broken:
            if conn is not None:
                conn.close()
            self._conn = None
            try:
                self._conn = self._pg.connect(self._url, **self._connect_args)
            except self._pg.Error as exc:
                raise self._fail(exc, "cannot connect to the decision log") from None
        return self._conn

    def _init_schema(self, create: bool) -> None:
        conn = self._connection()
        with self._watch(conn):
            self._init_schema_on(conn, create)

    def _init_schema_on(self, conn: Any, create: bool) -> None:
        try:
            row = conn.execute(
                f"SELECT to_regclass('{_META}') IS NOT NULL, to_regclass('{_TABLE}') IS NOT NULL"
            ).fetchone()
            version = None
            if row[0]:
                got = conn.execute(
                    f"SELECT value FROM {_META} WHERE key = 'schema_version'"
                ).fetchone()
                version = None if got is None else int(got[0])
            if version is not None and version > SCHEMA_VERSION:
                raise ArtifactError(
                    f"log schema version {version} is newer than this hybridroute reads "
                    f"({SCHEMA_VERSION})",
                    path=self.where,
                )
            if version == SCHEMA_VERSION and row[1]:
                return  # nothing to create: a role that may only read can open the log
            if not create and not row[1]:  # an older log is migrated, never a new one made
                raise ArtifactError("no decision log in this database", path=self.where)
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
                for stmt in _CREATE.strip().split(";"):
                    conn.execute(stmt)
                with conn.cursor() as cur:
                    cur.executemany(
                        f"INSERT INTO {_META} (key, value) VALUES (%s, %s) ON CONFLICT DO NOTHING",
                        meta_rows(),
                    )
                got = conn.execute(
                    f"SELECT value FROM {_META} WHERE key = 'schema_version'"
                ).fetchone()
                if int(got[0]) < SCHEMA_VERSION:  # an older log, migrated by _CREATE above
                    conn.execute(
                        f"UPDATE {_META} SET value = %s WHERE key = 'schema_version'",
                        (str(SCHEMA_VERSION),),
                    )
                    conn.execute(
                        f"INSERT INTO {_META} (key, value) VALUES ('migrated_from', %s) "
                        "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
                        (got[0],),
                    )
        except self._pg.Error as exc:
            raise self._fail(exc, "not a usable decision log") from None

    # ------------------------------------------------------------------ backend hooks
    def _write(
        self, rows: list[Pending], decide: Decide, *, undo: bool
    ) -> tuple[list[Stored | None], set[int]]:
        pg = self._pg
        arrays = [list(col) for col in zip(*(r.values for r in rows), strict=True)]
        for attempt in range(3):
            conn = self._connection()
            try:
                with self._watch(conn):
                    return self._write_on(conn, rows, arrays, decide, undo=undo)
            except pg.errors.DeadlockDetected:  # pragma: no cover - key order prevents it
                if attempt == 2:
                    raise self._fail(
                        RuntimeError("deadlock"), "cannot write the decision log"
                    ) from None
            except pg.Error as exc:
                raise self._fail(exc, "cannot write the decision log") from None
        raise AssertionError("unreachable")  # pragma: no cover

    def _write_on(
        self, conn: Any, rows: list[Pending], arrays: list[list[Any]], decide: Decide, *, undo: bool
    ) -> tuple[list[Stored | None], set[int]]:
        if undo:
            # the rows of a refused group may already be inserted when the stored rows are
            # known: take them back before the transaction commits
            with conn.transaction():
                written, found = self._insert(conn, rows, arrays)
                hits = self._hits(rows, written, found)
                withheld = decide(hits)
                back = [rows[i].decision_id for i in withheld if hits[i] is None]
                if back:
                    conn.execute(_DELETE_IDS, [back])
            return hits, withheld
        # one statement in autocommit is its own transaction: all its rows or none,
        # durable when it returns -- one round trip instead of three. Each group is one
        # row here, so a refused group's row is a stored one
        written, found = self._insert(conn, rows, arrays)
        hits = self._hits(rows, written, found)
        withheld = decide(hits)
        if any(hits[i] is None for i in withheld):  # pragma: no cover - a bug
            raise RuntimeError("a written row was refused without undo")
        return hits, withheld

    def _hits(
        self, rows: list[Pending], written: set[str], found: dict[Key, Stored]
    ) -> list[Stored | None]:
        out: list[Stored | None] = []
        for r in rows:
            if r.decision_id in written:
                out.append(None)
                continue
            hit = found.get(r.key)  # type: ignore[arg-type]
            if hit is None:  # pragma: no cover - the index guarantees a stored row
                raise ArtifactError(
                    f"request id {r.item_id!r} conflicted but no stored row was found",
                    path=self.where,
                )
            out.append(hit)
        return out

    def _insert(
        self, conn: Any, rows: list[Pending], arrays: list[list[Any]]
    ) -> tuple[set[str], dict[Key, Stored]]:
        """Insert-if-absent; the decision ids written and the stored rows of the others
        (committed by then: an insert conflicting with another writer's waits for it)."""
        written = {r[0] for r in conn.execute(_INSERT, arrays).fetchall()}
        missed = [r.key for r in rows if r.decision_id not in written]
        return written, (self._stored(missed, conn) if missed else {})

    def _stored(self, keys: Sequence[Key | None], conn: Any = None) -> dict[Key, Stored]:
        wanted = [k for k in keys if k is not None]
        if not wanted:
            return {}
        columns = [list(c) for c in zip(*wanted, strict=True)]
        if conn is not None:  # inside a write (and its deadline)
            rows = conn.execute(_SELECT_KEYS, columns).fetchall()
        else:
            try:
                own = self._connection()
                with self._watch(own):
                    rows = own.execute(_SELECT_KEYS, columns).fetchall()
            except self._pg.Error as exc:
                raise self._fail(exc, "cannot read the decision log") from None
        found: dict[Key, Stored] = {}
        for row in rows:
            key, stored = Stored.from_row(row)
            found.setdefault(key, stored)
        return found

    def _query(self, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            try:
                conn = self._connection()
                with self._watch(conn):
                    return conn.execute(sql.replace("?", "%s"), tuple(args)).fetchall()
            except self._pg.Error as exc:
                raise self._fail(exc, "cannot read the decision log") from None

    def _in_transaction(self, work: Any) -> Any:
        with self._lock:
            conn = self._connection()
            try:
                with self._watch(conn), conn.transaction():
                    conn.execute("SELECT pg_advisory_xact_lock(%s)", (_OUTCOME_LOCK,))
                    return work(_PgTx(conn))
            except self._pg.Error as exc:
                raise self._fail(exc, "cannot write the decision log") from None

    def _close_connection(self) -> None:
        self._deadline.stop()
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def check_writable(self, *, timeout_s: float = 5.0) -> None:
        """Raise :class:`~hybridroute.exceptions.ArtifactError` naming the log when it
        cannot be written now: the server does not answer (a new connection waits at most
        ``connect_timeout_s``, the check's query ``timeout_s`` on the server and about
        ``timeout_s`` on the client, should the server be frozen), is a read-only standby,
        or the user may not insert into the log's table. Writes nothing."""
        with self._lock:
            try:
                conn = self._connection()
                with self._watch(conn, timeout_s + 0.5), conn.transaction():
                    conn.execute(f"SET LOCAL statement_timeout = {max(1, int(timeout_s * 1000))}")
                    row = conn.execute(
                        "SELECT pg_is_in_recovery(), current_setting('transaction_read_only'), "
                        "has_table_privilege(%s, 'INSERT')",
                        (_TABLE,),
                    ).fetchone()
            except self._pg.Error as exc:
                raise self._fail(exc, "the decision log is not writable") from None
        recovery, read_only, may_insert = row
        if recovery or read_only == "on" or not may_insert:
            why = "a read-only standby" if recovery or read_only == "on" else "no INSERT privilege"
            raise ArtifactError(f"the decision log is not writable ({why})", path=self.where)


class _PgTx:
    """The :class:`~._outcomes.Tx` of one PostgreSQL transaction (``?`` -> ``%s``)."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn

    def query(self, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return list(self._conn.execute(sql.replace("?", "%s"), tuple(args)).fetchall())

    def insert(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        with self._conn.cursor() as cur:
            cur.executemany(sql.replace("?", "%s"), rows)
