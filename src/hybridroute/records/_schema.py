"""The decision log's table layout, shared by its backends (SQLite and PostgreSQL)."""

from __future__ import annotations

import math
import time
from datetime import UTC, datetime

from .._version import __version__

__all__ = [
    "AUDIT_COLUMN_SQL",
    "COLUMNS",
    "INSERT_COLUMNS",
    "ON_DUPLICATE",
    "ROLES",
    "SCHEMA_VERSION",
    "STORED_COLUMNS",
    "create_table_sql",
    "meta_rows",
    "now_iso",
]

#: Version of the log's table layout; a log written by a newer layout is refused.
#: Version 2 added ``decision_id`` and ``role``; version 3 the outcomes table and the
#: audit columns ``audit_p`` (inclusion probability) and ``audited``; version 4 the
#: routers table (each version's labels and destinations, see :mod:`._vocabulary`) and
#: the outcome source ``adjudication``.
SCHEMA_VERSION = 4

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


# (whole second, its "YYYY-MM-DDTHH:MM:SS" text): every row of a second shares it
_SECOND: tuple[int, str] = (0, datetime.fromtimestamp(0, tz=UTC).isoformat()[:19])


def now_iso(ts: float | None = None) -> str:
    """A UTC ISO 8601 time with microseconds (the stored ``logged_at``).

    The text ``datetime.fromtimestamp(ts, UTC).isoformat(timespec="microseconds")``
    gives (its rounding of the microseconds included: half to even, carried into the
    second), with the date and time of the second made once per second.
    """
    global _SECOND
    t = time.time() if ts is None else ts
    fraction, whole = math.modf(t)
    micros = round(fraction * 1e6)
    if micros >= 1_000_000:
        micros -= 1_000_000
        whole += 1.0
    elif micros < 0:
        micros += 1_000_000
        whole -= 1.0
    second = int(whole)
    held = _SECOND
    if held[0] != second:
        held = _SECOND = (second, datetime.fromtimestamp(second, tz=UTC).isoformat()[:-6])
    return f"{held[1]}.{micros:06d}+00:00"


def meta_rows() -> list[tuple[str, str]]:
    """The metadata a new log starts with."""
    return [
        ("schema_version", str(SCHEMA_VERSION)),
        ("created_at", now_iso()),
        ("created_by", f"hybridroute {__version__}"),
    ]
