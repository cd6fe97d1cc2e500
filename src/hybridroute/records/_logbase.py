"""What every decision-log backend shares: the row layout, dedupe rules, buffering, reading.

A backend (SQLite in :mod:`._log`, PostgreSQL in :mod:`._postgres`) supplies a handful of
hooks -- write a batch of rows in one transaction with insert-if-absent on the request id,
look stored rows up by request id, run a read query -- and :class:`LogBase` builds the
public API on them, so both backends redact, deduplicate, report and read alike.

**Dedupe rules.** A row with a request id (``item_id``) is keyed on (router, router
version, request id). Of the rows sharing a key in one call the first is written and the
others are duplicates of it; a row whose key the log already holds is a duplicate of the
stored row. A duplicate whose snapshot hash differs from the row it duplicates is a
*conflict* (the caller sent other input under a logged id). Rows without a request id are
never duplicates.
"""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from .._redact import Redactor
from .._version import __version__
from ..contracts import Decision
from ..exceptions import DuplicateDecisionError
from ._audit import AuditSampler
from ._outcomes import OutcomeReport, Tx, add_outcomes, check_outcome, pending_audits, read_outcomes

__all__ = [
    "COLUMNS",
    "ON_DUPLICATE",
    "ROLES",
    "SCHEMA_VERSION",
    "LogBase",
    "LoggedDecision",
    "record_to_decision",
]

#: Version of the log's table layout; a log written by a newer layout is refused.
#: Version 2 added ``decision_id`` and ``role``; version 3 the outcomes table and the
#: audit columns ``audit_p`` (inclusion probability) and ``audited``.
SCHEMA_VERSION = 3

#: What a log does with a second decision for a logged request id (append / flush).
ON_DUPLICATE = ("skip", "error")

#: The role a logged decision played: answered to the caller, or routed in the shadow.
ROLES = ("live", "shadow")

#: The columns of a decision row, as :meth:`LogBase.rows` returns them.
COLUMNS = (
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
    "decision_id",
    "role",
    "audit_p",
    "audited",
)
#: The SQL type of each column after ``seq`` (``{real}``: the backend's float type;
#: ``{id_null}``: ``NOT NULL`` where no migrated table may hold a row without one).
_COLUMN_SQL = {
    "logged_at": "TEXT NOT NULL",
    "item_id": "TEXT",
    "router": "TEXT NOT NULL",
    "router_version": "TEXT NOT NULL",
    "stage": "TEXT NOT NULL",
    "selected_destination": "TEXT NOT NULL",
    "reason_code": "TEXT NOT NULL",
    "snapshot_hash": "TEXT NOT NULL",
    "label": "TEXT",
    "confidence": "{real}",
    "record": "TEXT NOT NULL",
    "decision_id": "TEXT{id_null}",
    "role": "TEXT NOT NULL DEFAULT 'live'{role_check}",
    "audit_p": "{real}",
    "audited": "INTEGER",
}
#: The columns version 3 added (``ALTER TABLE`` of an older log).
AUDIT_COLUMN_SQL = {"audit_p": "{real}", "audited": "INTEGER"}


def create_table_sql(table: str, *, seq: str, real: str, strict: bool) -> str:
    """``CREATE TABLE IF NOT EXISTS`` of the decisions table in a backend's dialect.

    Parameters
    ----------
    table : str
        The table's name.
    seq : str
        The type and key clause of ``seq`` (an auto-assigned, increasing integer).
    real : str
        The float type (``confidence``).
    strict : bool
        ``decision_id NOT NULL`` and a CHECK on ``role`` (a table never migrated from
        version 1 by ``ALTER TABLE``).
    """
    fill = {
        "real": real,
        "id_null": " NOT NULL" if strict else "",
        "role_check": " CHECK (role IN ('live', 'shadow'))" if strict else "",
    }
    body = ",\n    ".join(f"{c} {t.format(**fill)}" for c, t in _COLUMN_SQL.items())
    return f"CREATE TABLE IF NOT EXISTS {table} (\n    seq {seq},\n    {body}\n)"


#: The columns an insert writes (``seq`` is assigned by the database).
INSERT_COLUMNS = COLUMNS[1:]
#: The columns :meth:`LogBase.lookup` and the dedupe reads of a stored row.
STORED_COLUMNS = (
    "item_id",
    "router",
    "router_version",
    "decision_id",
    "snapshot_hash",
    "record",
    "role",
)

# Keys a JSONL export adds to a record (and record_to_decision strips again).
_EXPORT_KEYS = ("seq", "logged_at", "item_id", "decision_id", "role")
# Rows read per query: reads page through the log by seq so a long read never holds a
# transaction (or the log's lock) open.
_PAGE = 2000

Key = tuple[str, str, str]


def now_iso(ts: float | None = None) -> str:
    """A UTC ISO 8601 time with microseconds (the stored ``logged_at``)."""
    return datetime.fromtimestamp(time.time() if ts is None else ts, tz=UTC).isoformat(
        timespec="microseconds"
    )


def meta_rows() -> list[tuple[str, str]]:
    """The metadata a new log starts with."""
    return [
        ("schema_version", str(SCHEMA_VERSION)),
        ("created_at", now_iso()),
        ("created_by", f"hybridroute {__version__}"),
    ]


def new_decision_id() -> str:
    """A fresh decision id (uuid4, 32 hex digits)."""
    return uuid.uuid4().hex


def dumps_record(record: Mapping[str, Any]) -> str:
    """The stored JSON text of a record."""
    return json.dumps(record, ensure_ascii=False, separators=(",", ":"))


@dataclass(frozen=True, slots=True)
class LoggedDecision:
    """One decision as the log holds it.

    Attributes
    ----------
    decision_id : str
        Assigned when the decision was first logged (uuid4 hex); stable for the row.
    record : dict
        The stored (redacted) record, :meth:`Decision.to_dict` shape.
    duplicate : bool
        True when the request id was already logged for that router version (or earlier in
        the same call): nothing was written and this is the stored row.
    role : str
        ``"live"`` or ``"shadow"`` (of the stored row).
    """

    decision_id: str
    record: dict[str, Any]
    duplicate: bool
    role: str


@dataclass(frozen=True, slots=True)
class Pending:
    """A row ready to insert (``values`` in :data:`INSERT_COLUMNS` order) and its record."""

    values: tuple[Any, ...]
    record: dict[str, Any]

    @property
    def item_id(self) -> str | None:
        return self.values[1]

    @property
    def key(self) -> Key | None:
        v = self.values
        return None if v[1] is None else (v[2], v[3], v[1])

    @property
    def snapshot_hash(self) -> str:
        return self.values[7]

    @property
    def decision_id(self) -> str:
        return self.values[11]

    @property
    def role(self) -> str:
        return self.values[12]


@dataclass(frozen=True, slots=True)
class Stored:
    """A stored row as the dedupe and :meth:`LogBase.lookup` read it."""

    decision_id: str
    snapshot_hash: str
    record: str
    role: str

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> tuple[Key, Stored]:
        """From a row in :data:`STORED_COLUMNS` order: its key and itself."""
        item_id, router, version, decision_id, digest, record, role = row
        return (router, version, item_id), cls(decision_id, digest, record, role)

    def logged(self, *, duplicate: bool = True) -> LoggedDecision:
        return LoggedDecision(self.decision_id, json.loads(self.record), duplicate, self.role)


def record_to_decision(record: Mapping[str, Any]) -> Decision:
    """Rebuild a :class:`Decision` from a stored record, keeping its recorded hash."""
    rec = {k: v for k, v in record.items() if k not in _EXPORT_KEYS}
    return Decision.from_dict(rec, verify_hash=False)


class LogBase:
    """The decision-log API over a backend's hooks (see the module docstring).

    Subclasses set :attr:`where` (the log's name in messages: a path, or a URL without
    its password), :attr:`_ph` (the driver's placeholder), :attr:`_table` and
    :attr:`_meta_table`, and implement :meth:`_write`, :meth:`_stored`, :meth:`_query`,
    :meth:`_close_connection` and :meth:`check_writable`.
    """

    where: str
    _ph = "?"
    _table = "decisions"
    _meta_table = "meta"
    _outcomes_table = "outcomes"

    def _setup(
        self,
        batch_size: int,
        sensitive_fields: Iterable[str],
        salt: str | None,
        on_duplicate: str,
        audit: AuditSampler | None = None,
    ) -> None:
        if audit is not None and not isinstance(audit, AuditSampler):
            raise TypeError(f"audit must be an AuditSampler or None, got {type(audit).__name__}")
        #: The audit sampler of the live decisions written (``None``: no audit declared).
        self.audit = audit
        if int(batch_size) < 1:
            raise ValueError("batch_size must be at least 1")
        if on_duplicate not in ON_DUPLICATE:
            raise ValueError(f"on_duplicate must be one of {ON_DUPLICATE}, got {on_duplicate!r}")
        self.on_duplicate = on_duplicate
        self.batch_size = int(batch_size)
        self.skipped = 0
        self.last_skipped: list[str] = []
        self.last_conflicts: list[str] = []
        self._redactor = Redactor(sensitive_fields, salt)
        self._buffer: list[Pending] = []
        # one transaction at a time on the connection (the service writes from a thread pool)
        self._lock = threading.RLock()
        self._closed = False

    # ------------------------------------------------------------------ backend hooks
    def _write(self, rows: list[Pending], *, abort_on_duplicate: bool) -> list[Stored | None]:
        """Insert ``rows`` (distinct keys) in one committed transaction, skipping those whose
        key is stored; return, per row, ``None`` (written) or the stored row. With
        ``abort_on_duplicate`` and any stored key, write nothing (roll back)."""
        raise NotImplementedError

    def _stored(self, keys: Sequence[Key]) -> dict[Key, Stored]:
        """The stored rows of ``keys`` (the first logged, for a key logged twice)."""
        raise NotImplementedError

    def _query(self, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run a read query (``?`` placeholders are the backend's) and fetch all rows."""
        raise NotImplementedError

    def _close_connection(self) -> None:
        raise NotImplementedError

    def _in_transaction(self, work: Any) -> Any:
        """Run ``work(tx)`` (a :class:`~._outcomes.Tx`) in one committed transaction that
        holds the log's outcome lock; rolled back (and re-raised) when ``work`` raises."""
        raise NotImplementedError

    def check_writable(self, *, timeout_s: float = 5.0) -> None:
        """Raise :class:`~hybridroute.exceptions.ArtifactError` naming the log when it
        cannot be written now (a read-only file, a server that is down), waiting at most
        about ``timeout_s``."""
        raise NotImplementedError

    # ------------------------------------------------------------------ rows
    def _pending(
        self, decision: Decision, item_id: Any, role: str, at: float | None = None
    ) -> Pending:
        if role not in ROLES:
            raise ValueError(f"role must be one of {ROLES}, got {role!r}")
        record = self._redactor.apply_decision(decision)
        decision_id = new_decision_id()
        audit_p: float | None = None
        audited: int | None = None
        if self.audit is not None and role == "live":
            audit_p, selected = self.audit.mark(decision_id, decision.stage)
            audited = int(selected)
        values = (
            now_iso(at),
            None if item_id is None else str(item_id),
            decision.router,
            decision.router_version,
            decision.stage,
            decision.selected_destination,
            decision.reason_code,
            record["snapshot_hash"],  # of the stored (redacted) snapshot
            decision.label,
            decision.confidence,
            dumps_record(record),
            decision_id,
            role,
            audit_p,
            audited,
        )
        return Pending(values, record)

    def _commit(
        self, rows: list[Pending], *, refuse: bool
    ) -> tuple[list[LoggedDecision], list[int], list[str]]:
        """Write ``rows`` under the dedupe rules in one transaction.

        Returns the result per row, the positions of the duplicates and the request ids of
        the conflicts. With ``refuse`` and any duplicate, nothing is written (the results
        then describe what the write would have done).
        """
        first: dict[Key, int] = {}
        earlier: dict[int, int] = {}  # position -> position of the first row with its key
        distinct: list[int] = []
        for pos, row in enumerate(rows):
            key = row.key
            if key is not None and key in first:
                earlier[pos] = first[key]
                continue
            if key is not None:
                first[key] = pos
            distinct.append(pos)
        with self._lock:
            if refuse and earlier:
                # refused anyway: only find which of the others are logged, write nothing
                keys = [rows[p].key for p in distinct]
                found = self._stored([k for k in keys if k is not None])
                stored = [None if k is None else found.get(k) for k in keys]
            else:
                stored = self._write([rows[p] for p in distinct], abort_on_duplicate=refuse)
        results: list[LoggedDecision | None] = [None] * len(rows)
        hashes: dict[int, str] = {}
        duplicates: list[int] = []
        conflicting: list[int] = []
        for pos, hit in zip(distinct, stored, strict=True):
            row = rows[pos]
            if hit is None:
                results[pos] = LoggedDecision(row.decision_id, row.record, False, row.role)
                hashes[pos] = row.snapshot_hash
            else:
                results[pos] = hit.logged()
                hashes[pos] = hit.snapshot_hash
                duplicates.append(pos)
                if hit.snapshot_hash != row.snapshot_hash:
                    conflicting.append(pos)
        for pos, to in earlier.items():
            prior = results[to]
            assert prior is not None
            results[pos] = LoggedDecision(prior.decision_id, prior.record, True, prior.role)
            duplicates.append(pos)
            if hashes[to] != rows[pos].snapshot_hash:
                conflicting.append(pos)
        duplicates.sort()
        conflicts = [str(rows[p].item_id) for p in sorted(conflicting)]
        return [r for r in results if r is not None], duplicates, conflicts

    # ------------------------------------------------------------------ writing
    def log_many(self, entries: Iterable[tuple[Decision, Any, str]]) -> list[LoggedDecision]:
        """Log decisions in one transaction, committed before this returns.

        Parameters
        ----------
        entries : iterable of (Decision, request id or None, role)
            ``role`` is ``"live"`` or ``"shadow"``. A request id is stored as a string;
            for a non-null one the log inserts only if (router, router version, request
            id) is not logged yet (nor earlier in ``entries``), across processes.

        Returns
        -------
        list of LoggedDecision
            One per entry, in order: a new row (``duplicate=False``) or the stored row
            that a duplicate matched (``duplicate=True``, nothing written for it).
            Independent of the :meth:`append` buffer and of ``on_duplicate``.
        """
        rows = [self._pending(d, rid, role) for d, rid, role in entries]
        if not rows:
            return []
        results, duplicates, _ = self._commit(rows, refuse=False)
        self.skipped += len(duplicates)
        return results

    def lookup(self, router: str, router_version: str, request_id: Any) -> LoggedDecision | None:
        """The logged decision of a request id for a router version.

        Parameters
        ----------
        router, router_version : str
            The router (name) and version that logged it.
        request_id : str
            The caller's request id (compared as the stored string).

        Returns
        -------
        LoggedDecision or None
            The stored row (``duplicate=False``), or ``None`` when there is none.
        """
        key = (str(router), str(router_version), str(request_id))
        with self._lock:
            hit = self._stored([key]).get(key)
        return None if hit is None else hit.logged(duplicate=False)

    def append(
        self,
        decision: Decision,
        *,
        item_id: str | None = None,
        at: float | None = None,
        role: str = "live",
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
        role : {"live", "shadow"}, default "live"

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
        row = self._pending(decision, item_id, role, at)
        self._buffer.append(row)
        if len(self._buffer) >= self.batch_size:
            self.flush()
        return row.record

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

        Decisions skipped as duplicates are not counted (see :attr:`last_skipped`). With
        ``on_duplicate="error"`` a duplicate refuses the whole flush: the refused decisions
        are dropped from the buffer, the others stay for the next flush.
        """
        self.last_skipped = []
        self.last_conflicts = []
        if not self._buffer:
            return 0
        rows, self._buffer = self._buffer, []
        refuse = self.on_duplicate == "error"
        try:
            _, duplicates, conflicts = self._commit(rows, refuse=refuse)
        except BaseException:
            self._buffer = rows + self._buffer  # keep them for a retry; nothing is dropped
            raise
        if refuse and duplicates:
            dropped = set(duplicates)
            self._buffer = [r for i, r in enumerate(rows) if i not in dropped] + self._buffer
            ids = tuple(str(rows[p].item_id) for p in duplicates)
            shown = ", ".join(repr(i) for i in ids[:10])
            more = f" and {len(ids) - 10} more" if len(ids) > 10 else ""
            raise DuplicateDecisionError(
                f"{len(ids)} decision(s) refused: request id(s) {shown}{more} already "
                "logged for this router version; nothing of this batch was written",
                path=self.where,
                item_ids=ids,
            )
        self.skipped += len(duplicates)
        self.last_skipped = [str(rows[i].item_id) for i in duplicates]
        self.last_conflicts = conflicts
        return len(rows) - len(duplicates)

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
        if self._closed:
            return
        try:
            self.flush()
        finally:
            self._closed = True
            self._close_connection()

    def __enter__(self) -> Any:
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
        return {
            str(k): str(v) for k, v in self._query(f"SELECT key, value FROM {self._meta_table}")
        }

    def _where(self, router_version: str | None, role: str | None) -> tuple[list[str], list[Any]]:
        clauses: list[str] = []
        args: list[Any] = []
        if router_version is not None:
            clauses.append("router_version = ?")
            args.append(router_version)
        if role is not None:
            clauses.append("role = ?")
            args.append(role)
        return clauses, args

    def count(self, *, router_version: str | None = None, role: str | None = None) -> int:
        """Decisions written (not counting the buffer), of a version / role when given."""
        clauses, args = self._where(router_version, role)
        where = f" WHERE {' AND '.join(clauses)}" if clauses else ""
        return int(self._query(f"SELECT COUNT(*) FROM {self._table}{where}", args)[0][0])

    def _columns(
        self,
        columns: Sequence[str],
        *,
        router_version: str | None = None,
        role: str | None = None,
        with_id: bool = False,
        audited: bool = False,
    ) -> Iterator[tuple[Any, ...]]:
        """Rows of ``columns`` in log order, read a page at a time (``seq`` first); only
        rows with a request id / only audited rows when asked."""
        clauses, args = self._where(router_version, role)
        if with_id:
            clauses.append("item_id IS NOT NULL")
        if audited:
            clauses.append("audited = 1")
        clauses.append("seq > ?")
        sql = (
            f"SELECT seq, {', '.join(columns)} FROM {self._table} WHERE "
            f"{' AND '.join(clauses)} ORDER BY seq LIMIT {_PAGE}"
        )
        last = 0
        while True:
            page = self._query(sql, (*args, last))
            yield from page
            if len(page) < _PAGE:
                return
            last = page[-1][0]

    def _counts(
        self,
        columns: Sequence[str],
        *,
        router_version: str | None,
        role: str | None,
        stages: Sequence[str],
    ) -> list[tuple[Any, ...]]:
        """``(*columns, count)`` per distinct value of ``columns`` among the rows of these
        stages, counted by the database (the monitor's label mix)."""
        clauses, args = self._where(router_version, role)
        clauses.append(f"stage IN ({', '.join('?' for _ in stages)})")
        args.extend(stages)
        cols = ", ".join(columns)
        sql = (
            f"SELECT {cols}, COUNT(*) FROM {self._table} WHERE {' AND '.join(clauses)} "
            f"GROUP BY {cols}"
        )
        return self._query(sql, args)

    def rows(
        self, *, router_version: str | None = None, role: str | None = None
    ) -> Iterator[dict[str, Any]]:
        """Written rows in order, each with its columns (:data:`COLUMNS`, among them
        ``decision_id`` and ``role``) and the parsed ``record``."""
        for row in self._columns(COLUMNS[1:], router_version=router_version, role=role):
            out = dict(zip(COLUMNS, row, strict=True))
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

    def to_jsonl(self, path: str | os.PathLike[str], **kw: Any) -> int:
        """Write the stored records as JSON lines (each with ``seq``, ``logged_at``,
        ``item_id``, ``decision_id`` and ``role``); ``kw`` filters as :meth:`rows`."""
        n = 0
        with open(path, "w", encoding="utf-8") as fh:
            for row in self.rows(**kw):
                line = {k: row[k] for k in _EXPORT_KEYS}
                line.update(row["record"])
                fh.write(json.dumps(line, ensure_ascii=False) + "\n")
                n += 1
        return n

    def to_frame(self, **kw: Any) -> Any:
        """A pandas DataFrame: one row per decision, the columns plus ``record``."""
        import pandas as pd

        frame = pd.DataFrame(list(self.rows(**kw)), columns=list(COLUMNS))
        frame["logged_at"] = pd.to_datetime(frame["logged_at"], utc=True)
        return frame

    # ------------------------------------------------------------------ outcomes, audits
    def add_outcomes(
        self,
        outcomes: Iterable[Mapping[str, Any]],
        *,
        rows: Sequence[int] | None = None,
        path: str | None = None,
    ) -> OutcomeReport:
        """Attach outcomes to logged decisions: all or nothing, in one transaction.

        Parameters
        ----------
        outcomes : iterable of mapping
            Each ``{"decision_id": ...}`` or ``{"request_id", "router", "router_version"}``,
            with ``gold_intent`` and/or ``gold_next_step``, a ``source`` (one of
            ``human_review``, ``audit``, ``user_feedback``, ``agent_outcome``) and
            optionally ``at`` (when it was observed: ISO 8601 with a UTC offset; default
            now). ``None`` values count as absent.
        rows : sequence of int, optional
            The row number of each outcome in messages (default 1, 2, ...; a file's
            reader passes its line numbers).
        path : str, optional
            The file they came from, for messages.

        Returns
        -------
        OutcomeReport
            Counts added / already present (an identical outcome: nothing written) and
            the conflicts (another gold for the same decision and source: written too).

        Raises
        ------
        OutcomeError
            A malformed outcome, or one naming a decision the log does not hold (the
            message names the row and field); nothing is written.
        """
        items = list(outcomes)
        numbers = list(range(1, len(items) + 1)) if rows is None else list(rows)
        if len(numbers) != len(items):
            raise ValueError("rows must give one row number per outcome")
        now = time.time()
        checked = [
            check_outcome(item, row, path=path, now=now)
            for item, row in zip(items, numbers, strict=True)
        ]
        if not checked:
            return OutcomeReport(0, 0)

        def work(tx: Tx) -> OutcomeReport:
            return add_outcomes(
                tx,
                decisions=self._table,
                table=self._outcomes_table,
                outcomes=checked,
                where=path,
                new_id=new_decision_id,
                recorded_at=now_iso(),
            )

        report: OutcomeReport = self._in_transaction(work)
        return report

    def outcomes(self, decision_id: str | None = None) -> list[dict[str, Any]]:
        """The stored outcomes (of ``decision_id`` when given) in the order recorded,
        each with ``outcome_id``, ``decision_id``, ``gold_intent``, ``gold_next_step``,
        ``source``, ``observed_at`` and ``recorded_at``."""
        return read_outcomes(self._query, self._outcomes_table, decision_id)

    def pending_audits(
        self, *, router_version: str | None = None, limit: int | None = None
    ) -> list[dict[str, Any]]:
        """Audited decisions that have no outcome of source ``audit`` yet, oldest first.

        Each is ``{"decision_id", "request_id", "router", "router_version", "logged_at",
        "audit_p", "selected_destination", "label", "text"}`` (``text``: the snapshot's
        text as stored, redacted and scrubbed).
        """
        if limit is not None and (isinstance(limit, bool) or int(limit) < 1):
            raise ValueError("limit must be at least 1")
        return pending_audits(
            self._query,
            decisions=self._table,
            table=self._outcomes_table,
            router_version=router_version,
            limit=limit,
            loads=json.loads,
        )
