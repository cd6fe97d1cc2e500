"""What every decision-log backend shares: the row layout, dedupe rules, buffering, reading.

A backend (SQLite in :mod:`._log`, PostgreSQL in :mod:`._postgres`) supplies a handful of
hooks -- write a batch of rows in one transaction with insert-if-absent on the request id,
look stored rows up by request id, run a read query -- and :class:`LogBase` builds the
public API on them, so both backends redact, deduplicate, report and read alike.

**Dedupe rules.** A row with a request id (``item_id``) is keyed on (router, router
version, request id). Of the rows sharing a key in one call the first is written and the
others are duplicates of it; a row whose key the log already holds is a duplicate of the
stored row. Rows without a request id are never duplicates.

**A request id names one request** (an idempotency key, as payment APIs treat theirs). A
duplicate whose stored snapshot hash equals the row it duplicates is the same request
(the snapshot holds the facts with their defaults, the text and the evidence; router and
version are in the key) and gets the logged decision back. A duplicate whose hash differs
is a *conflict*: the caller sent another request under a logged id. A conflict refuses
its whole *group* -- the entries of one request, e.g. a batch -- and nothing of that group
is written (:class:`~hybridroute.exceptions.RequestIdConflictError`); other groups of the
same transaction are unaffected. The comparison uses only the stored hash, which is the
hash of what the log stores (redacted), so it reveals nothing the stored record does not:
two requests that differ only in what redaction removed are the same request.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from json.encoder import c_make_encoder as _c_make_encoder  # type: ignore[attr-defined]
from typing import Any

from .._jsontext import fast_dumps
from .._redact import Redactor
from ..contracts import Decision
from ..exceptions import DuplicateDecisionError, RequestIdConflictError, UserInputError
from ._audit import AuditSampler
from ._logoutcomes import LogOutcomes
from ._schema import (
    COLUMNS,
    ON_DUPLICATE,
    ROLES,
    SCHEMA_VERSION,
    now_iso,
)

__all__ = [
    "COLUMNS",
    "ON_DUPLICATE",
    "ROLES",
    "SCHEMA_VERSION",
    "LogBase",
    "LoggedDecision",
    "record_to_decision",
]


# Keys a JSONL export adds to a record (and record_to_decision strips again).
_EXPORT_KEYS = ("seq", "logged_at", "item_id", "decision_id", "role")
# Rows read per query: reads page through the log by seq so a long read never holds a
# transaction (or the log's lock) open.
_PAGE = 2000

Key = tuple[str, str, str]
Entry = tuple[Decision, Any, str]  # (decision, request id or None, role)


#: Decision ids drawn from one read of the system's randomness (one call per id cost a
#: fifteenth of the log's write path).
_ID_POOL = 256
_ids = bytearray()  # random bytes for the next ids; emptied in a forked child
_ids_at = 0
_ids_lock = threading.Lock()


def _forget_ids() -> None:
    """In a forked child: the parent's unused random bytes are its own, never reused."""
    global _ids, _ids_at
    _ids, _ids_at = bytearray(), 0


os.register_at_fork(after_in_child=_forget_ids)


def new_decision_id() -> str:
    """A fresh decision id (uuid4, 32 hex digits): what ``uuid.uuid4().hex`` gives --
    16 bytes from ``os.urandom`` with the version (4) and variant (RFC 4122) bits set --
    without building a UUID object, and with the bytes of :data:`_ID_POOL` ids read at
    once (a forked process reads its own)."""
    global _ids, _ids_at
    with _ids_lock:
        if _ids_at >= len(_ids):
            _ids, _ids_at = bytearray(os.urandom(16 * _ID_POOL)), 0
        raw = _ids[_ids_at : _ids_at + 16]
        _ids_at += 16
    raw[6] = (raw[6] & 0x0F) | 0x40
    raw[8] = (raw[8] & 0x3F) | 0x80
    return raw.hex()


# One encoder for every record (json.dumps with options builds one per call). Records are
# trees the redactor just built, so the circular-reference bookkeeping is skipped: it
# changes nothing in the text.
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), check_circular=False)
_ENCODE = _ENCODER.encode
# ... and the C encoder encode makes anew for every dict, made once with the arguments it
# passes (no markers, ensure_ascii=False, no indent): a tenth of a record's encoding
_C_ENCODE = _c_make_encoder and _c_make_encoder(
    None, _ENCODER.default, json.encoder.encode_basestring, None, ":", ",", False, False, True
)


def dumps_record(record: Mapping[str, Any]) -> str:
    """The stored JSON text of a record: what ``_ENCODER.encode`` writes, or orjson's text
    where that reads back as the same record (:func:`~hybridroute._jsontext.fast_dumps`:
    the same values, a float at most spelled otherwise)."""
    raw = fast_dumps(record)
    if raw is not None:
        return raw.decode("utf-8")
    if _C_ENCODE is not None and type(record) is dict:
        return "".join(_C_ENCODE(record, 0))
    return _ENCODE(record)


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
    """A row ready to insert (``values`` in :data:`INSERT_COLUMNS` order) and its record
    (``None`` in the :meth:`LogBase.append` buffer: a flush returns no records, and
    holding each one's tree until the flush had the garbage collector rescan them all,
    a fifth of the write path)."""

    values: tuple[Any, ...]
    record: dict[str, Any] | None

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


Decide = Callable[[list[Stored | None]], set[int]]


@dataclass(slots=True)
class _Committed:
    """What one write did: the result per row (``None``: not written, its group refused),
    the positions of the duplicates and, per refused group, its conflicting positions."""

    results: list[LoggedDecision | None]
    duplicates: list[int]
    conflicts: dict[int, list[int]]


def record_to_decision(record: Mapping[str, Any]) -> Decision:
    """Rebuild a :class:`Decision` from a stored record, keeping its recorded hash."""
    rec = {k: v for k, v in record.items() if k not in _EXPORT_KEYS}
    return Decision.from_dict(rec, verify_hash=False)


class LogBase(LogOutcomes):
    """The decision-log API over a backend's hooks (see the module docstring).

    Subclasses set :attr:`where` (the log's name in messages: a path, or a URL without
    its password), :attr:`_ph` (the driver's placeholder), :attr:`_table` and
    :attr:`_meta_table`, and implement :meth:`_write`, :meth:`_stored`, :meth:`_query`,
    :meth:`_close_connection` and :meth:`check_writable`.
    """

    where: str
    #: Whether rows become visible in ``seq`` order (SQLite: one writer at a time). A
    #: PostgreSQL log numbers rows when they are inserted and shows them when their
    #: transaction commits, so a reader may see a higher ``seq`` before a lower one.
    commits_in_seq_order = True
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
        self._redactor = Redactor(sensitive_fields, salt)
        self._buffer: list[Pending] = []
        # one transaction at a time on the connection (the service writes from a thread pool)
        self._lock = threading.RLock()
        self._closed = False

    # ------------------------------------------------------------------ backend hooks
    def _write(
        self, rows: list[Pending], decide: Decide, *, undo: bool
    ) -> tuple[list[Stored | None], set[int]]:
        """Insert ``rows`` (distinct keys) in one committed transaction.

        Rows whose key is stored are not written; ``decide(hits)`` -- called inside the
        transaction with the stored row of each row's key (``None``: not stored) --
        returns the positions that must not be written either. Returns the hits and
        those positions. ``undo``: the positions may include rows with no stored key (a
        backend that inserts before it knows must be able to take them back).
        """
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
        return Pending(*self._row(decision, item_id, role, at))

    def _row(
        self, decision: Decision, item_id: Any, role: str, at: float | None
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """A row's values (:data:`INSERT_COLUMNS` order) and its stored record."""
        if role not in ROLES:
            raise ValueError(f"role must be one of {ROLES}, got {role!r}")
        if item_id is not None:
            item_id = str(item_id)
            if self._redactor.scrub_text(item_id) != item_id:
                # the request id is stored and echoed as it is: a key-shaped id (or one that
                # quotes a sensitive value) would put a secret in the log's item_id column
                raise UserInputError(
                    f"{self.where}: a request id looks like a credential or holds a sensitive "
                    "value (not shown); use an opaque id"
                )
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
        return values, record

    def _commit(
        self,
        rows: list[Pending],
        group_of: Sequence[int],
        *,
        refuse_duplicates: bool = False,
        results: bool = True,
    ) -> _Committed:
        """Write ``rows`` under the dedupe rules in one transaction.

        ``group_of[i]`` is the group of row ``i`` (the entries of one request): a group
        with a conflict is written not at all. With ``refuse_duplicates`` any duplicate
        refuses every row (nothing is written; the results then describe what the write
        would have done). A key may repeat within a group, never across groups.
        ``results=False``: only the duplicates and conflicts are reported (a flush of the
        buffer returns no rows), the results stay ``None``.
        """
        first: dict[Key, int] = {}
        earlier: dict[int, int] = {}  # position -> position of the first row with its key
        distinct: list[int] = []
        for pos, row in enumerate(rows):
            key = row.key
            if key is not None:
                if key in first:
                    if group_of[first[key]] != group_of[pos]:
                        raise ValueError(
                            f"request id {row.item_id!r} is in two groups of one write"
                        )
                    earlier[pos] = first[key]
                    continue
                first[key] = pos
            distinct.append(pos)
        state = _Committed([None] * len(rows), [], {})

        def decide(hits: list[Stored | None]) -> set[int]:
            # called by the backend inside its transaction, once the stored rows are known
            state.duplicates.clear()
            state.conflicts.clear()
            stored: dict[int, str] = {}  # position -> the hash its stored key holds
            for pos, hit in zip(distinct, hits, strict=True):
                if hit is not None:
                    stored[pos] = hit.snapshot_hash
                    state.duplicates.append(pos)
            state.duplicates.extend(earlier)
            for pos in state.duplicates:
                # the hash the key stands for: the stored row's, else the first row's
                to = earlier.get(pos, pos)
                theirs = stored.get(to)
                if theirs is None:
                    theirs = rows[to].snapshot_hash
                if theirs != rows[pos].snapshot_hash:
                    state.conflicts.setdefault(group_of[pos], []).append(pos)
            if refuse_duplicates and state.duplicates:
                return set(range(len(distinct)))
            if not state.conflicts:
                return set()
            return {i for i, pos in enumerate(distinct) if group_of[pos] in state.conflicts}

        multi = len(set(group_of)) < len(rows)  # some group holds several rows
        with self._lock:
            hits, withheld = self._write(
                [rows[p] for p in distinct], decide, undo=multi or refuse_duplicates
            )
        state.duplicates.sort()
        for positions in state.conflicts.values():
            positions.sort()
        if not results:
            return state
        for i, (pos, hit) in enumerate(zip(distinct, hits, strict=True)):
            row = rows[pos]
            if hit is not None:
                state.results[pos] = hit.logged()
            elif i not in withheld or refuse_duplicates:
                record = row.record
                if record is None:  # pragma: no cover - buffered rows are committed without results
                    record = json.loads(row.values[10])
                state.results[pos] = LoggedDecision(row.decision_id, record, False, row.role)
        for pos, to in earlier.items():
            prior = state.results[to]
            if prior is not None:
                state.results[pos] = LoggedDecision(
                    prior.decision_id, prior.record, True, prior.role
                )
        return state

    def _conflict(self, rows: Sequence[Pending], positions: Sequence[int], base: int) -> Any:
        """The :class:`RequestIdConflictError` of one group (``base``: its first row)."""
        ids = tuple(str(rows[p].item_id) for p in positions)
        first = rows[positions[0]]
        shown = ", ".join(repr(i) for i in ids[:5])
        more = f" and {len(ids) - 5} more" if len(ids) > 5 else ""
        plural = "s" if len(ids) > 1 else ""
        return RequestIdConflictError(
            f"request id{plural} {shown}{more} already logged for router {first.values[2]} "
            f"version {first.values[3]} with another request (its text, facts or evidence "
            "differ); a request id names one request: send a new request under a new id. "
            "Nothing of this request was written",
            path=self.where,
            item_ids=ids,
            positions=tuple(p - base for p in positions),
        )

    # ------------------------------------------------------------------ writing
    def log_groups(
        self, groups: Sequence[Sequence[Entry]]
    ) -> list[list[LoggedDecision] | RequestIdConflictError]:
        """Log the entries of several requests in one transaction, each all or nothing.

        Parameters
        ----------
        groups : sequence of sequences of (Decision, request id or None, role)
            One group per request (a batch is one group). A request id may not appear in
            two groups of one call.

        Returns
        -------
        list
            Per group, in order: its :class:`LoggedDecision` list (as :meth:`log_many`
            returns it), or the :class:`~hybridroute.exceptions.RequestIdConflictError`
            that refused it (nothing of that group was written; ``positions`` index its
            entries).
        """
        rows: list[Pending] = []
        group_of: list[int] = []
        spans: list[tuple[int, int]] = []
        for g, entries in enumerate(groups):
            start = len(rows)
            for decision, request_id, role in entries:
                rows.append(self._pending(decision, request_id, role))
                group_of.append(g)
            spans.append((start, len(rows)))
        if not rows:
            return [[] for _ in spans]
        done = self._commit(rows, group_of)
        out: list[list[LoggedDecision] | RequestIdConflictError] = []
        for g, (a, b) in enumerate(spans):
            bad = done.conflicts.get(g)
            if bad:
                out.append(self._conflict(rows, bad, a))
                continue
            self.skipped += sum(1 for p in done.duplicates if a <= p < b)
            part = done.results[a:b]
            out.append([r for r in part if r is not None])
        return out

    def log_many(self, entries: Iterable[Entry]) -> list[LoggedDecision]:
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
            that a duplicate of the same request matched (``duplicate=True``, nothing
            written for it). Independent of the :meth:`append` buffer and of
            ``on_duplicate``.

        Raises
        ------
        RequestIdConflictError
            A request id is logged (or repeated in ``entries``) with another request;
            nothing of ``entries`` was written.
        """
        (result,) = self.log_groups([list(entries)])
        if isinstance(result, RequestIdConflictError):
            raise result
        return result

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
        values, record = self._row(decision, item_id, role, at)
        # buffered without its record tree (see Pending): only the row's values are written
        self._buffer.append(Pending(values, None))
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

        Decisions skipped as duplicates of the same request are not counted (see
        :attr:`last_skipped`). A request id logged (or buffered earlier) with another
        request refuses the whole flush with
        :class:`~hybridroute.exceptions.RequestIdConflictError`; with
        ``on_duplicate="error"`` any duplicate refuses it with
        :class:`~hybridroute.exceptions.DuplicateDecisionError`. Either way the refused
        decisions are dropped from the buffer and the others stay for the next flush.
        """
        self.last_skipped = []
        if not self._buffer:
            return 0
        rows, self._buffer = self._buffer, []
        refuse = self.on_duplicate == "error"
        try:
            done = self._commit(rows, [0] * len(rows), refuse_duplicates=refuse, results=False)
        except BaseException:
            self._buffer = rows + self._buffer  # keep them for a retry; nothing is dropped
            raise
        bad = done.conflicts.get(0)
        if bad:
            dropped = set(bad)
            self._buffer = [r for i, r in enumerate(rows) if i not in dropped] + self._buffer
            raise self._conflict(rows, bad, 0)
        duplicates = done.duplicates
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
        after: int = 0,
    ) -> Iterator[tuple[Any, ...]]:
        """Rows of ``columns`` in log order, read a page at a time (``seq`` first); only
        rows with a request id / only audited rows / only rows after ``seq`` ``after``
        when asked."""
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
        last = int(after)
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
        seqs: tuple[int, int | None] | None = None,
    ) -> list[tuple[Any, ...]]:
        """``(*columns, count)`` per distinct value of ``columns`` among the rows of these
        stages (with ``after < seq <= upto`` for ``seqs=(after, upto)``; ``upto`` ``None``:
        no bound), counted by the database (the monitor's label mix)."""
        clauses, args = self._where(router_version, role)
        clauses.append(f"stage IN ({', '.join('?' for _ in stages)})")
        args.extend(stages)
        if seqs is not None:
            clauses.append("seq > ?")
            args.append(int(seqs[0]))
            if seqs[1] is not None:
                clauses.append("seq <= ?")
                args.append(int(seqs[1]))
        cols = ", ".join(columns)
        sql = (
            f"SELECT {cols}, COUNT(*) FROM {self._table} WHERE {' AND '.join(clauses)} "
            f"GROUP BY {cols}"
        )
        return self._query(sql, args)

    def _last_seq(self, table: str | None = None) -> int:
        """The highest ``seq`` of the decisions (or another) table; 0 when empty."""
        row = self._query(f"SELECT MAX(seq) FROM {table or self._table}")[0]
        return int(row[0] or 0)

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
