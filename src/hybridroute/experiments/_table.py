"""The comparison table: printed with rich, written as JSON and CSV, all from the same rows.

Each of the three renderings passes the rows through a
:class:`~hybridroute._scrub.Scrubber` (credentials removed; in the CSV, text cells also
escaped against spreadsheet formulas), so the printed table, the JSON and the CSV agree
and none of them carries a credential that reached a row, a note or a label.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Mapping, Sequence
from typing import Any

from .._scrub import Scrubber
from .kinds import Column

__all__ = ["format_cell", "render_table", "table_csv", "table_document"]


def _num(v: Any, fmt: str) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "–"
    if fmt == "pct":
        return f"{100.0 * float(v):.1f}%"
    if fmt == "int":
        return str(int(v))
    if fmt == "bool":
        return "yes" if v else "no"
    if fmt == "str":
        return str(v)
    if isinstance(v, (int, float)):
        return f"{float(v):.3f}"
    return str(v)


def format_cell(column: Column, row: Mapping[str, Any]) -> str:
    """The printed text of one cell."""
    if column.fmt == "parts":
        return " / ".join(_num(row.get(k), "int") for k in column.parts)
    value = row.get(column.key)
    if column.fmt == "ci":
        text = _num(value, "float")
        if column.ci is not None and value is not None:
            lo, hi = (row.get(k) for k in column.ci)
            if lo is not None and hi is not None:
                text += f" [{_num(lo, 'float')}, {_num(hi, 'float')}]"
        return text
    return _num(value, column.fmt)


def render_table(
    title: str,
    columns: Sequence[Column],
    rows: Sequence[Mapping[str, Any]],
    notes: Sequence[str] = (),
    *,
    scrubber: Scrubber | None = None,
) -> Any:
    """A :class:`rich.table.Table` of the rows (notes as its caption), scrubbed."""
    from rich.markup import escape
    from rich.table import Table

    scrub = scrubber if scrubber is not None else Scrubber()
    rows = scrub.value(list(rows))
    notes = [escape(n) for n in scrub.value(list(notes))]
    table = Table(
        title=escape(scrub.text(title)),
        caption="\n".join(notes) if notes else None,
        caption_justify="left",
    )
    shown = [c for c in columns if c.show]
    for c in shown:
        table.add_column(
            c.header, justify="left" if c.fmt in ("str", "parts") else "right", overflow="fold"
        )
    for row in rows:
        # a cell is text, not rich markup ("[REDACTED]" would otherwise vanish as a tag)
        table.add_row(*(escape(format_cell(c, row)) for c in shown))
    return table


def table_document(
    columns: Sequence[Column],
    rows: Sequence[Mapping[str, Any]],
    *,
    scrubber: Scrubber | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """The table as one JSON object: column definitions, rows (plain values), and ``extra``,
    scrubbed."""
    scrub = scrubber if scrubber is not None else Scrubber()
    cols = [
        {"key": c.key, "header": c.header, "role": c.role, "format": c.fmt, "help": c.help}
        for c in columns
        if c.in_rows
    ]
    return scrub.value({**extra, "columns": cols, "rows": [dict(r) for r in rows]})


def table_csv(
    columns: Sequence[Column],
    rows: Sequence[Mapping[str, Any]],
    *,
    scrubber: Scrubber | None = None,
) -> str:
    """The rows as CSV (one column per row key, empty cells for missing values; text cells
    scrubbed and escaped against spreadsheet formulas; floats written exactly)."""
    scrub = scrubber if scrubber is not None else Scrubber()
    keys = [c.key for c in columns if c.in_rows]
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow([scrub.csv_cell(k) for k in keys])
    for row in rows:
        writer.writerow(
            [repr(v) if isinstance(v := row.get(k), float) else scrub.csv_cell(v) for k in keys]
        )
    return buf.getvalue()
