"""Splitting a scores file into a header and raw rows: CSV, JSON Lines, Parquet.

Nothing is checked here beyond what it takes to split the file (the values are checked
in :mod:`._read`). Every file is read once, through :func:`hybridroute._safeio.read_bytes`
(a regular file only, the byte limit counted while reading), and parsed from those bytes,
so the fingerprint and the rows come from the same bytes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from .._safeio import check_text, parse_json
from .._textrows import csv_rows, jsonl_lines
from ..exceptions import DatasetError, InputError

__all__ = ["HEADER_KEY", "RawScores", "parse_csv", "parse_jsonl", "parse_parquet"]

#: The key of the header in a Parquet file's schema metadata.
HEADER_KEY = "hybridroute.scores"
#: A JSONL line longer than this is refused before it is parsed.
MAX_LINE_BYTES = 1_000_000


@dataclass(slots=True)
class RawScores:
    """A file split into its header (or ``None``), column names and ``(row, values)``."""

    header: dict[str, Any] | None
    columns: list[str]
    records: list[tuple[int, dict[str, Any]]] = field(default_factory=list)


def _decode(data: bytes, path: str) -> str:
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise DatasetError(f"not UTF-8 text (line {line}, byte {exc.start})", path=path) from None


def _column_name(name: str, path: str) -> str:
    try:
        check_text(name, what="the column name")
    except InputError as exc:
        raise DatasetError(exc.reason, path=path, row=0, column=name) from None
    if not name:
        raise DatasetError("the header has an empty column name", path=path, row=0)
    return name


def _columns(names: list[str], path: str) -> list[str]:
    seen: set[str] = set()
    for name in names:
        _column_name(name, path)
        if name in seen:
            raise DatasetError("column given twice in the header", path=path, row=0, column=name)
        seen.add(name)
    return names


def parse_csv(data: bytes, path: str) -> RawScores:
    """A CSV file with a header row; row 1 is the first data row, every value a string.

    Cells are read back from the spreadsheet-formula escaping of :mod:`hybridroute._csv`.
    """
    rows = csv_rows(_decode(data, path), path, strict=True)
    _, header = next(rows)
    columns = _columns(header, path)
    out = RawScores(None, columns)
    for row, cells in rows:
        if len(cells) != len(columns):
            raise DatasetError(
                f"the row has {len(cells)} fields, the header {len(columns)}",
                path=path,
                row=row,
            )
        out.records.append((row, dict(zip(columns, cells, strict=True))))
    return out


def parse_jsonl(data: bytes, path: str) -> RawScores:
    """JSON Lines: an optional header object first (``"format": "hybridroute.scores"``),
    then one object per row; the row number is the line number."""
    text = _decode(data, path)
    header: dict[str, Any] | None = None
    columns: list[str] | None = None
    records: list[tuple[int, dict[str, Any]]] = []
    for lineno, line in jsonl_lines(text):
        if len(line.encode("utf-8")) > MAX_LINE_BYTES:
            raise DatasetError(
                f"the line is longer than {MAX_LINE_BYTES:,} bytes", path=path, row=lineno
            )
        try:
            obj = parse_json(line, source=path, line=lineno, what="JSON line")
        except InputError as exc:
            raise DatasetError(exc.reason, path=path, row=lineno) from None
        if not isinstance(obj, dict):
            raise DatasetError(
                f"expected a JSON object, got {type(obj).__name__}", path=path, row=lineno
            )
        if "format" in obj:
            if records or header is not None:
                raise DatasetError(
                    "a header line (with 'format') must be the first line of the file",
                    path=path,
                    row=lineno,
                    column="format",
                )
            header = obj
            continue
        if columns is None:
            columns = _columns(list(obj), path)
        records.append((lineno, obj))
    return RawScores(header, columns or [], records)


def _pyarrow(path: str) -> tuple[Any, Any]:
    try:
        import pyarrow
        import pyarrow.parquet
    except ImportError:
        raise DatasetError(
            "reading a Parquet scores file needs pyarrow, which is not installed "
            "(pip install pyarrow); or write the scores as CSV or JSONL",
            path=path,
        ) from None
    return pyarrow, pyarrow.parquet


def parse_parquet(data: bytes, path: str, *, limit: int) -> RawScores:
    """A Parquet file of string and number columns; its header, if any, in the schema
    metadata (:data:`HEADER_KEY`). Row 1 is the first row.

    The footer is read first: a file whose columns would decompress to more than
    ``limit`` bytes, or that holds a column of another type (lists, structs, binary...),
    is refused before any data page is read.
    """
    pa, pq = _pyarrow(path)
    try:
        pf = pq.ParquetFile(pa.BufferReader(data))
        meta = pf.metadata
        expanded = sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))
        schema = pf.schema_arrow
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise DatasetError(f"not a readable Parquet file ({exc})", path=path) from None
    if expanded > limit:
        raise DatasetError(
            f"the Parquet data expands to {expanded:,} bytes, over the limit of {limit:,}",
            path=path,
        )
    columns = _columns([str(f.name) for f in schema], path)
    for f in schema:
        t = f.type
        if not (
            pa.types.is_string(t)
            or pa.types.is_large_string(t)
            or pa.types.is_integer(t)
            or pa.types.is_floating(t)
        ):
            raise DatasetError(
                f"has Parquet type {t}; a scores file holds string and number columns "
                "(one score:<label> column per class)",
                path=path,
                row=0,
                column=f.name,
            )
    header = None
    raw_header = (schema.metadata or {}).get(HEADER_KEY.encode())
    if raw_header is not None:
        try:
            header = parse_json(
                raw_header.decode("utf-8"), source=path, what=f"Parquet metadata {HEADER_KEY!r}"
            )
        except (InputError, UnicodeDecodeError) as exc:
            reason = exc.reason if isinstance(exc, InputError) else "not UTF-8"
            raise DatasetError(reason, path=path, row=0, column=HEADER_KEY) from None
        if not isinstance(header, dict):
            raise DatasetError("the header must be a JSON object", path=path, column=HEADER_KEY)
    try:
        values = pf.read().to_pydict()
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise DatasetError(f"not a readable Parquet file ({exc})", path=path) from None
    n = meta.num_rows
    records = [(i + 1, {c: values[c][i] for c in columns}) for i in range(n)]
    return RawScores(header, columns, records)


def suffix_format(path: str) -> str:
    """``"csv"``, ``"jsonl"`` or ``"parquet"`` from a file name, or raise naming it."""
    suffix = os.path.splitext(path)[1].lower()
    formats = {".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl"}
    formats |= {".parquet": "parquet", ".pq": "parquet"}
    if suffix not in formats:
        raise DatasetError(
            "cannot tell the format of a scores file from its name; end it in .csv, .jsonl "
            "or .parquet",
            path=path,
        )
    return formats[suffix]
