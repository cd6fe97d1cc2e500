"""Outcomes: what really happened to a logged decision, attached after the fact.

An outcome names a logged decision (by ``decision_id``, or by ``request_id`` with its
``router`` and ``router_version``) and gives its gold intent and/or gold next step, a
``source`` (:data:`SOURCES`) and when it was observed. The outcomes table is append-only:

* an outcome identical to one stored (same decision, source, gold intent and gold next
  step; the time is not compared, so a retried call is idempotent) is *already present*:
  nothing is written;
* an outcome whose decision and source already hold another gold (stored, or earlier in
  the same call) is a *conflict*: it is written too -- nothing is overwritten -- and listed
  in the :class:`OutcomeReport`;
* a call is all or nothing: a malformed outcome, or one naming a decision the log does not
  hold, raises :class:`OutcomeError` naming the row (1-based) and field, and nothing of the
  call is written.

The write runs in one transaction that holds the log's outcome lock (SQLite's write lock;
a PostgreSQL advisory lock), so the identical / conflict checks hold across processes.

Audited decisions (see :mod:`._audit`) without an outcome of source ``audit`` are listed
by :func:`pending_audits`.
"""

from __future__ import annotations

import math
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from .._safeio import describe_bad_char
from ..exceptions import DatasetError

__all__ = [
    "OUTCOME_COLUMNS",
    "OUTCOME_FIELDS",
    "SOURCES",
    "OutcomeError",
    "OutcomeReport",
    "add_outcomes",
    "create_outcomes_sql",
    "pending_audits",
    "read_outcomes",
]

#: Where an outcome came from.
SOURCES = ("human_review", "audit", "user_feedback", "agent_outcome")
#: The fields an outcome given to ``add_outcomes`` may have.
OUTCOME_FIELDS = (
    "decision_id",
    "request_id",
    "router",
    "router_version",
    "gold_intent",
    "gold_next_step",
    "source",
    "at",
)
#: The columns of the outcomes table (after ``seq``), as :func:`read_outcomes` returns them.
OUTCOME_COLUMNS = (
    "outcome_id",
    "decision_id",
    "gold_intent",
    "gold_next_step",
    "source",
    "observed_at",
    "recorded_at",
)
#: Longest id, name or gold value, in characters.
MAX_CHARS = 256
#: How far ahead of this machine's clock an observation time may be (clock skew), seconds.
MAX_FUTURE_S = 300.0
# ids looked up per query (well under SQLite's smallest limit on parameters)
_CHUNK = 500


def create_outcomes_sql(table: str, *, seq: str) -> list[str]:
    """The statements creating the outcomes table and its indexes (``IF NOT EXISTS``)."""
    sources = ", ".join(f"'{s}'" for s in SOURCES)
    return [
        f"CREATE TABLE IF NOT EXISTS {table} (\n    seq {seq},\n"
        "    outcome_id TEXT NOT NULL UNIQUE,\n    decision_id TEXT NOT NULL,\n"
        "    gold_intent TEXT,\n    gold_next_step TEXT,\n"
        f"    source TEXT NOT NULL CHECK (source IN ({sources})),\n"
        "    observed_at TEXT NOT NULL,\n    recorded_at TEXT NOT NULL,\n"
        "    CHECK (gold_intent IS NOT NULL OR gold_next_step IS NOT NULL)\n)",
        f"CREATE INDEX IF NOT EXISTS {table}_decision ON {table} (decision_id, source)",
    ]


class OutcomeError(DatasetError):
    """An outcome is malformed or names a decision the log does not hold.

    A :class:`~hybridroute.exceptions.DatasetError` (so a
    :class:`~hybridroute.exceptions.UserInputError`: exit code 2 on the command line);
    ``reason`` keeps the message without the location.

    Parameters
    ----------
    message : str
        What is wrong, without the location.
    path : str, optional
        The file the outcomes came from.
    row : int, optional
        The 1-based row: the outcome's position in the call, or its line / CSV data row
        in a file (a CSV header is row 0).
    column : str, optional
        The field at fault (also :attr:`field`).
    """

    def __init__(self, message: str, **where: Any) -> None:
        self.reason = message
        super().__init__(message, **where)

    @property
    def field(self) -> str | None:
        """The field at fault (the same as ``column``)."""
        return self.column


@dataclass(frozen=True, slots=True)
class OutcomeReport:
    """What one ``add_outcomes`` call did.

    Attributes
    ----------
    added : int
        Outcomes written (conflicts included).
    already_present : int
        Outcomes identical to one stored (or earlier in the call): nothing written.
    conflicts : tuple of dict
        The written outcomes whose decision and source already held another gold: each
        ``{"row", "decision_id", "source", "gold_intent", "gold_next_step", "previous"}``
        (``previous``: the other golds, each ``{"gold_intent", "gold_next_step"}``).
    outcome_ids : tuple of str
        The ids of the outcomes written, in row order.
    """

    added: int
    already_present: int
    conflicts: tuple[dict[str, Any], ...] = ()
    outcome_ids: tuple[str, ...] = field(default=(), repr=False)

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON types (``added``, ``already_present``, ``conflicts``)."""
        return {
            "added": self.added,
            "already_present": self.already_present,
            "conflicts": [dict(c) for c in self.conflicts],
        }

    def summary_lines(self) -> list[str]:
        """The report as lines for a terminal."""
        lines = [
            f"outcomes: {self.added} added, {self.already_present} already present, "
            f"{len(self.conflicts)} conflicting"
        ]
        for c in self.conflicts[:20]:
            lines.append(
                f"  conflict at row {c['row']}: decision {c['decision_id']} ({c['source']}) "
                f"already has another gold; both are kept"
            )
        if len(self.conflicts) > 20:
            lines.append(f"  ... and {len(self.conflicts) - 20} more conflicts")
        return lines


class Tx(Protocol):
    """The transaction a backend hands to :func:`add_outcomes` (``?`` placeholders)."""

    def query(self, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]: ...

    def insert(self, sql: str, rows: Sequence[Sequence[Any]]) -> None: ...


# --------------------------------------------------------------------------- checking
@dataclass(frozen=True, slots=True)
class _Outcome:
    row: int
    decision_id: str | None
    request: tuple[str, str, str] | None  # (router, router_version, request_id)
    gold_intent: str | None
    gold_next_step: str | None
    source: str
    observed_at: str

    @property
    def gold(self) -> tuple[str | None, str | None]:
        return self.gold_intent, self.gold_next_step


def _name(value: Any, column: str, fail: Callable[[str, str], OutcomeError]) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and column == "request_id":
        value = str(value)
    if not isinstance(value, str) or not value.strip():
        raise fail(column, f"must be a non-empty string, got {_short(value)}")
    if len(value) > MAX_CHARS:
        raise fail(column, f"is longer than {MAX_CHARS} characters")
    problem = describe_bad_char(value)
    if problem is not None:
        raise fail(column, problem)
    return value


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _observed_at(value: Any, now: float, fail: Callable[[str, str], OutcomeError]) -> str:
    if value is None:
        return datetime.fromtimestamp(now, tz=UTC).isoformat(timespec="microseconds")
    if not isinstance(value, str):
        raise fail("at", f"must be an ISO 8601 time with a UTC offset, got {_short(value)}")
    try:
        at = datetime.fromisoformat(value.strip())
    except ValueError:
        raise fail(
            "at", f"not an ISO 8601 time (e.g. 2026-05-01T12:00:00Z), got {_short(value)}"
        ) from None
    if at.tzinfo is None or at.utcoffset() is None:
        raise fail("at", f"needs a UTC offset (Z or +00:00), got {_short(value)}")
    ts = at.timestamp()
    if not math.isfinite(ts) or ts > now + MAX_FUTURE_S:
        raise fail("at", f"is in the future ({value})")
    return at.astimezone(UTC).isoformat(timespec="microseconds")


def check_outcome(
    item: Any, row: int, *, path: str | None = None, now: float | None = None
) -> _Outcome:
    """One outcome checked and normalised (raises :class:`OutcomeError` naming it)."""

    def fail(column: str | None, message: str) -> OutcomeError:
        return OutcomeError(message, path=path, row=row, column=column)

    if not isinstance(item, Mapping):
        raise fail(None, f"an outcome must be an object, got {type(item).__name__}")
    unknown = sorted(str(k) for k in item if k not in OUTCOME_FIELDS)
    if unknown:
        raise fail(unknown[0], f"is not an outcome field (fields: {', '.join(OUTCOME_FIELDS)})")
    given = {k: v for k, v in item.items() if v is not None}
    decision_id = request = None
    if "decision_id" in given:
        for extra in ("request_id", "router", "router_version"):
            if extra in given:
                raise fail(extra, "give decision_id, or request_id with router and router_version")
        decision_id = _name(given["decision_id"], "decision_id", fail)
    elif "request_id" in given:
        request_id = _name(given["request_id"], "request_id", fail)
        for need in ("router", "router_version"):
            if need not in given:
                raise fail(need, "is required with request_id")
        request = (
            _name(given["router"], "router", fail),
            _name(given["router_version"], "router_version", fail),
            request_id,
        )
    else:
        raise fail(
            "decision_id",
            "is required (or request_id with router and router_version): which decision?",
        )
    golds = []
    for column in ("gold_intent", "gold_next_step"):
        golds.append(None if column not in given else _name(given[column], column, fail))
    if golds == [None, None]:
        raise fail("gold_intent", "no gold given: give gold_intent, gold_next_step or both")
    source = given.get("source")
    if source is None:
        raise fail("source", f"is required: one of {', '.join(SOURCES)}")
    if source not in SOURCES:
        raise fail("source", f"must be one of {', '.join(SOURCES)}, got {_short(source)}")
    observed = _observed_at(given.get("at"), time.time() if now is None else now, fail)
    return _Outcome(row, decision_id, request, golds[0], golds[1], source, observed)


# --------------------------------------------------------------------------- writing
def _chunks(values: Sequence[Any]) -> Iterable[Sequence[Any]]:
    for start in range(0, len(values), _CHUNK):
        yield values[start : start + _CHUNK]


def _resolve(tx: Tx, decisions: str, outcomes: Sequence[_Outcome]) -> dict[Any, str]:
    """Decision id of each reference the log holds (by decision id or request key)."""
    found: dict[Any, str] = {}
    ids = sorted({o.decision_id for o in outcomes if o.decision_id is not None})
    for part in _chunks(ids):
        sql = f"SELECT decision_id FROM {decisions} WHERE decision_id IN ({', '.join('?' * len(part))})"
        found.update({r[0]: r[0] for r in tx.query(sql, part)})
    by_version: dict[tuple[str, str], set[str]] = {}
    for o in outcomes:
        if o.request is not None:
            by_version.setdefault(o.request[:2], set()).add(o.request[2])
    for (router, version), rids in by_version.items():
        for part in _chunks(sorted(rids)):
            sql = (
                f"SELECT item_id, decision_id FROM {decisions} WHERE router = ? AND "
                f"router_version = ? AND item_id IN ({', '.join('?' * len(part))}) ORDER BY seq"
            )
            for item_id, decision_id in tx.query(sql, (router, version, *part)):
                found.setdefault((router, version, item_id), decision_id)
    return found


def add_outcomes(
    tx: Tx,
    *,
    decisions: str,
    table: str,
    outcomes: Sequence[_Outcome],
    where: str | None,
    new_id: Callable[[], str] = lambda: uuid.uuid4().hex,
    recorded_at: str,
) -> OutcomeReport:
    """Write checked outcomes in the caller's transaction (see the module docstring)."""
    found = _resolve(tx, decisions, outcomes)
    resolved: list[str] = []
    for o in outcomes:
        ref: Any = o.decision_id if o.decision_id is not None else o.request
        decision_id = found.get(ref)
        if decision_id is None:
            if o.request is not None:
                router, version, rid = o.request
                what = f"request id {rid!r} of router {router!r} version {version!r}"
                column = "request_id"
            else:
                what, column = f"decision id {o.decision_id!r}", "decision_id"
            raise OutcomeError(
                f"the log holds no decision with {what}; nothing was written",
                path=where,
                row=o.row,
                column=column,
            )
        resolved.append(decision_id)
    golds: dict[tuple[str, str], list[tuple[str | None, str | None]]] = {}
    for part in _chunks(sorted(set(resolved))):
        sql = (
            f"SELECT decision_id, source, gold_intent, gold_next_step FROM {table} "
            f"WHERE decision_id IN ({', '.join('?' * len(part))}) ORDER BY seq"
        )
        for decision_id, source, intent, step in tx.query(sql, part):
            golds.setdefault((decision_id, source), []).append((intent, step))
    rows: list[tuple[Any, ...]] = []
    conflicts: list[dict[str, Any]] = []
    present = 0
    for o, decision_id in zip(outcomes, resolved, strict=True):
        held = golds.setdefault((decision_id, o.source), [])
        if o.gold in held:
            present += 1
            continue
        if held:
            conflicts.append(
                {
                    "row": o.row,
                    "decision_id": decision_id,
                    "source": o.source,
                    "gold_intent": o.gold_intent,
                    "gold_next_step": o.gold_next_step,
                    "previous": [{"gold_intent": i, "gold_next_step": s} for i, s in held],
                }
            )
        held.append(o.gold)
        rows.append(
            (new_id(), decision_id, o.gold_intent, o.gold_next_step, o.source, o.observed_at,
             recorded_at)
        )  # fmt: skip
    if rows:
        columns = ", ".join(OUTCOME_COLUMNS)
        tx.insert(
            f"INSERT INTO {table} ({columns}) VALUES ({', '.join('?' * len(OUTCOME_COLUMNS))})",
            rows,
        )
    return OutcomeReport(len(rows), present, tuple(conflicts), tuple(r[0] for r in rows))


# --------------------------------------------------------------------------- reading
Query = Callable[[str, Sequence[Any]], list[tuple[Any, ...]]]


def read_outcomes(query: Query, table: str, decision_id: str | None) -> list[dict[str, Any]]:
    """The stored outcomes in the order they were recorded (of one decision when given)."""
    where, args = ("", ()) if decision_id is None else (" WHERE decision_id = ?", (decision_id,))
    sql = f"SELECT {', '.join(OUTCOME_COLUMNS)} FROM {table}{where} ORDER BY seq"
    return [dict(zip(OUTCOME_COLUMNS, r, strict=True)) for r in query(sql, args)]


#: The keys of one pending audit (:func:`pending_audits`).
PENDING_KEYS = (
    "decision_id",
    "request_id",
    "router",
    "router_version",
    "logged_at",
    "audit_p",
    "selected_destination",
    "label",
    "text",
)


def pending_audits(
    query: Query,
    *,
    decisions: str,
    table: str,
    router_version: str | None,
    limit: int | None,
    loads: Callable[[str], Any],
) -> list[dict[str, Any]]:
    """Audited decisions without an outcome of source ``audit``, oldest first."""
    clauses = ["d.audited = 1"]
    args: list[Any] = []
    if router_version is not None:
        clauses.append("d.router_version = ?")
        args.append(router_version)
    sql = (
        "SELECT d.decision_id, d.item_id, d.router, d.router_version, d.logged_at, d.audit_p, "
        f"d.selected_destination, d.label, d.record FROM {decisions} d WHERE "
        f"{' AND '.join(clauses)} AND NOT EXISTS (SELECT 1 FROM {table} o WHERE "
        "o.decision_id = d.decision_id AND o.source = 'audit') ORDER BY d.seq"
    )
    if limit is not None:
        sql += f" LIMIT {int(limit)}"
    out = []
    for *head, record in query(sql, args):
        snapshot = loads(record).get("input_snapshot") or {}
        out.append(dict(zip(PENDING_KEYS, (*head, snapshot.get("text")), strict=True)))
    return out
