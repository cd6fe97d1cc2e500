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
* a call is all or nothing: a malformed outcome, or one the log cannot accept, raises
  :class:`OutcomeError` naming the row (1-based) and field, and nothing of the call is
  written.

**What the log accepts** (each checked against the decision it names, in the write's
transaction):

* the decision is logged, and is a *live* decision: a shadow decision answered no one, so
  the outcome belongs to the live decision of that request;
* ``source: audit`` only for a decision the audit sampler selected (``audited = 1``);
* ``gold_intent`` is a label of the decision's router version or its out-of-scope label,
  ``gold_next_step`` one of its destinations -- the version's vocabulary registered in the
  log (see :mod:`._vocabulary`); a version without one has its outcomes refused, with how
  to register it;
* ``at`` is not before the decision was logged (an outcome without ``at`` is observed now,
  or when the decision was logged if this machine's clock is behind the logger's).

Outcomes stored before these checks existed may break them: the monitor, recalibration
and the promotion gate leave those out and report them
(:mod:`hybridroute.monitoring._labels`).

**Disputes.** Outcomes of one decision that give different gold intents (or different
gold next steps) make it *disputed*; the readers never count a disputed decision as
correct until an outcome of source ``adjudication`` settles it (see
:mod:`hybridroute.monitoring._labels`).

The write runs in one transaction that holds the log's outcome lock (SQLite's write lock;
a PostgreSQL advisory lock), so the identical / conflict checks hold across processes.

Audited decisions (see :mod:`._audit`) without an outcome of source ``audit`` (or
``adjudication``) are listed by :func:`pending_audits`.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Protocol

from .._redact import scrub_text
from .._safeio import describe_bad_char
from .._time import parse_utc_time
from ..exceptions import DatasetError
from ._vocabulary import RouterVocabulary, vocabularies_of

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

#: Where an outcome came from (``adjudication``: the label that settles a disputed decision).
SOURCES = ("human_review", "audit", "user_feedback", "agent_outcome", "adjudication")
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


def outcomes_table_sql(table: str, *, seq: str) -> str:
    """``CREATE TABLE IF NOT EXISTS`` of the outcomes table (without its index)."""
    sources = ", ".join(f"'{s}'" for s in SOURCES)
    return (
        f"CREATE TABLE IF NOT EXISTS {table} (\n    seq {seq},\n"
        "    outcome_id TEXT NOT NULL UNIQUE,\n    decision_id TEXT NOT NULL,\n"
        "    gold_intent TEXT,\n    gold_next_step TEXT,\n"
        f"    source TEXT NOT NULL CHECK (source IN ({sources})),\n"
        "    observed_at TEXT NOT NULL,\n    recorded_at TEXT NOT NULL,\n"
        "    CHECK (gold_intent IS NOT NULL OR gold_next_step IS NOT NULL)\n)"
    )


def outcomes_index_sql(table: str) -> str:
    """The index of the outcomes table (by decision and source)."""
    return f"CREATE INDEX IF NOT EXISTS {table}_decision ON {table} (decision_id, source)"


def create_outcomes_sql(table: str, *, seq: str) -> list[str]:
    """The statements creating the outcomes table and its indexes (``IF NOT EXISTS``)."""
    return [outcomes_table_sql(table, seq=seq), outcomes_index_sql(table)]


def sources_check_sql() -> str:
    """The CHECK on ``source`` (a version-3 table's lacks ``adjudication``)."""
    return f"CHECK (source IN ({', '.join(repr(s) for s in SOURCES)}))"


class OutcomeError(DatasetError):
    """An outcome is malformed or the log cannot accept it.

    A :class:`~hybridroute.exceptions.DatasetError` (so a
    :class:`~hybridroute.exceptions.UserInputError`: exit code 2 on the command line);
    ``reason`` keeps the message without the location.

    Parameters
    ----------
    message : str
        What is wrong, without the location.
    header : bool, default False
        The fault is in a CSV file's header (the message says so: ``row 1 (the header)``).
    **where
        Where the fault is: ``path``, ``row``, ``column`` (below).

    Other Parameters
    ----------------
    path : str, optional
        The file the outcomes came from.
    row : int, optional
        The 1-based row: the outcome's position in the call, or its line in a file (a CSV
        file's header is line 1, its first data row line 2, as a spreadsheet numbers them).
    column : str, optional
        The field at fault (also :attr:`field`).
    """

    def __init__(self, message: str, *, header: bool = False, **where: Any) -> None:
        self.reason = message
        self.header = bool(header)
        super().__init__(message, **where)
        if self.header:  # "row 1 (the header)": a header is not a data row
            parts = [] if self.path is None else [str(self.path)]
            parts.append("the header" if self.row is None else f"row {self.row} (the header)")
            if self.column is not None:
                parts.append(f"column {self.column!r}")
            self.args = (f"{', '.join(parts)}: {message}",)

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
        if self.conflicts:
            lines.append(
                "  a decision whose outcomes disagree is disputed: the monitor, recalibration "
                "and the promotion gate never count it as correct until an outcome of source "
                "adjudication settles it"
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
    at_given: bool = True

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
    try:
        at = parse_utc_time(value)  # the one parser of every time the toolkit reads
    except ValueError as exc:
        raise fail("at", str(exc)) from None
    if at.timestamp() > now + MAX_FUTURE_S:
        raise fail("at", f"is in the future ({value})")
    return at.isoformat(timespec="microseconds")


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
    return _Outcome(
        row, decision_id, request, golds[0], golds[1], source, observed, given.get("at") is not None
    )


# --------------------------------------------------------------------------- writing
def _chunks(values: Sequence[Any]) -> Iterable[Sequence[Any]]:
    for start in range(0, len(values), _CHUNK):
        yield values[start : start + _CHUNK]


#: The columns of a decision an outcome is checked against.
_DECISION_FACTS = ("decision_id", "router", "router_version", "role", "audited", "logged_at")


@dataclass(frozen=True, slots=True)
class _Logged:
    """The facts of a logged decision that its outcomes are checked against."""

    decision_id: str
    router: str
    router_version: str
    role: str
    audited: Any
    logged_at: str


def _resolve(tx: Tx, decisions: str, outcomes: Sequence[_Outcome]) -> dict[Any, _Logged]:
    """The decision each reference names, of those the log holds (by decision id or
    request key)."""
    columns = ", ".join(_DECISION_FACTS)
    found: dict[Any, _Logged] = {}
    ids = sorted({o.decision_id for o in outcomes if o.decision_id is not None})
    for part in _chunks(ids):
        sql = (
            f"SELECT {columns} FROM {decisions} WHERE decision_id IN ({', '.join('?' * len(part))})"
        )
        found.update({r[0]: _Logged(*r) for r in tx.query(sql, part)})
    by_version: dict[tuple[str, str], set[str]] = {}
    for o in outcomes:
        if o.request is not None:
            by_version.setdefault(o.request[:2], set()).add(o.request[2])
    for (router, version), rids in by_version.items():
        for part in _chunks(sorted(rids)):
            sql = (
                f"SELECT item_id, {columns} FROM {decisions} WHERE router = ? AND "
                f"router_version = ? AND item_id IN ({', '.join('?' * len(part))}) ORDER BY seq"
            )
            for item_id, *facts in tx.query(sql, (router, version, *part)):
                found.setdefault((router, version, item_id), _Logged(*facts))
    return found


def _time(value: str) -> datetime:
    at = datetime.fromisoformat(value)
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)


def _accepted(
    o: _Outcome, d: _Logged | None, vocab: RouterVocabulary | None, where: str | None
) -> _Outcome:
    """``o`` checked against the decision it names (see the module docstring); the
    observation time of an outcome without ``at`` is moved to the decision's when this
    machine's clock is behind the logger's."""
    ref = "decision_id" if o.request is None else "request_id"

    def fail(column: str, message: str) -> OutcomeError:
        return OutcomeError(message, path=where, row=o.row, column=column)

    if d is None:
        if o.request is not None:
            router, version, rid = o.request
            what = f"request id {rid!r} of router {router!r} version {version!r}"
        else:
            what = f"decision id {o.decision_id!r}"
        raise fail(ref, f"the log holds no decision with {what}; nothing was written")
    which = f"router {d.router!r} version {d.router_version!r}"
    if d.role != "live":
        raise fail(
            ref,
            f"names a {d.role} decision ({which}): it answered no one, so it has no outcome; "
            "attach the outcome to the live decision of that request",
        )
    if o.source == "audit" and d.audited != 1:
        raise fail(
            "source",
            f"is 'audit', but decision {d.decision_id} was not selected for audit; give its "
            "outcome as human_review, user_feedback or agent_outcome",
        )
    if vocab is None:
        raise fail(
            ref,
            f"the log knows no labels of {which}, so the outcome cannot be checked: register "
            "the version first (hybridroute outcomes add --router BUNDLE with that version's "
            "bundle; a service registers its routers when it starts)",
        )
    if o.gold_intent is not None:
        problem = vocab.intent_problem(o.gold_intent)
        if problem is not None:
            raise fail("gold_intent", f"{_short(scrub_text(o.gold_intent))} {problem}")
    if o.gold_next_step is not None:
        problem = vocab.next_step_problem(o.gold_next_step)
        if problem is not None:
            raise fail("gold_next_step", f"{_short(scrub_text(o.gold_next_step))} {problem}")
    logged = _time(d.logged_at)
    if _time(o.observed_at) < logged:
        if o.at_given:
            raise fail(
                "at",
                f"is before decision {d.decision_id} was logged ({d.logged_at}): an outcome "
                "is observed after its decision",
            )
        return replace(o, observed_at=logged.astimezone(UTC).isoformat(timespec="microseconds"))
    return o


def add_outcomes(
    tx: Tx,
    *,
    decisions: str,
    table: str,
    routers: str,
    outcomes: Sequence[_Outcome],
    where: str | None,
    new_id: Callable[[], str] = lambda: uuid.uuid4().hex,
    recorded_at: str,
) -> OutcomeReport:
    """Check and write outcomes in the caller's transaction (see the module docstring)."""
    found = _resolve(tx, decisions, outcomes)
    keys = {(d.router, d.router_version) for d in found.values()}
    vocabs = vocabularies_of(tx.query, routers, keys)
    accepted: list[_Outcome] = []
    resolved: list[str] = []
    for o in outcomes:
        d = found.get(o.decision_id if o.decision_id is not None else o.request)
        vocab = None if d is None else vocabs.get((d.router, d.router_version))
        accepted.append(_accepted(o, d, vocab, where))
        assert d is not None
        resolved.append(d.decision_id)
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
    for o, decision_id in zip(accepted, resolved, strict=True):
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


def read_outcomes_after(query: Query, table: str, after: int) -> list[tuple[int, dict[str, Any]]]:
    """``(seq, outcome)`` of the stored outcomes with ``seq > after``, in recorded order."""
    sql = f"SELECT seq, {', '.join(OUTCOME_COLUMNS)} FROM {table} WHERE seq > ? ORDER BY seq"
    return [
        (int(r[0]), dict(zip(OUTCOME_COLUMNS, r[1:], strict=True))) for r in query(sql, (after,))
    ]


def misplaced_outcomes(
    query: Query,
    *,
    decisions: str,
    table: str,
    router_version: str | None,
    seqs: tuple[int, int | None] | None = None,
) -> dict[str, int]:
    """Stored outcomes the log refuses today by where they point (an older version took
    them): ``{"shadow": outcomes of shadow decisions, "audit_not_audited": audit outcomes
    of decisions not selected for audit}`` (of one router version's decisions when given;
    of the outcomes with ``after < seq <= upto`` for ``seqs=(after, upto)``, ``upto``
    ``None``: no bound). Readers never count them; this says how many there are."""
    where, args = (
        ("", ()) if router_version is None else (" AND d.router_version = ?", (router_version,))
    )
    if seqs is not None:
        where += " AND o.seq > ?" + ("" if seqs[1] is None else " AND o.seq <= ?")
        args = (*args, int(seqs[0]), *(() if seqs[1] is None else (int(seqs[1]),)))
    # outcomes first, each decision looked up by its id (CROSS JOIN keeps SQLite from
    # walking every decision of the version instead): the cost follows the outcomes,
    # not the size of the log (the service's monitor runs this on every recompute)
    sql = (
        "SELECT SUM(CASE WHEN d.role <> 'live' THEN 1 ELSE 0 END), "
        "SUM(CASE WHEN d.role = 'live' AND o.source = 'audit' AND (d.audited IS NULL OR "
        f"d.audited <> 1) THEN 1 ELSE 0 END) FROM {table} o CROSS JOIN {decisions} d "
        f"WHERE d.decision_id = o.decision_id{where}"
    )
    shadow, unaudited = query(sql, args)[0]
    return {"shadow": int(shadow or 0), "audit_not_audited": int(unaudited or 0)}


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
    """Audited decisions without an outcome of source ``audit`` or ``adjudication``,
    oldest first."""
    clauses = ["d.audited = 1"]
    args: list[Any] = []
    if router_version is not None:
        clauses.append("d.router_version = ?")
        args.append(router_version)
    sql = (
        "SELECT d.decision_id, d.item_id, d.router, d.router_version, d.logged_at, d.audit_p, "
        f"d.selected_destination, d.label, d.record FROM {decisions} d WHERE "
        f"{' AND '.join(clauses)} AND NOT EXISTS (SELECT 1 FROM {table} o WHERE "
        "o.decision_id = d.decision_id AND o.source IN ('audit', 'adjudication')) ORDER BY d.seq"
    )
    if limit is not None:
        sql += f" LIMIT {int(limit)}"
    out = []
    for *head, record in query(sql, args):
        snapshot = loads(record).get("input_snapshot") or {}
        out.append(dict(zip(PENDING_KEYS, (*head, snapshot.get("text")), strict=True)))
    return out
