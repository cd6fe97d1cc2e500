"""Reading labelled files into raw records: bytes → UTF-8 → CSV rows or JSONL objects.

Nothing is validated here beyond what is needed to split a file into rows; every value
check lives in :mod:`._validate`. Bytes that are not UTF-8 are kept as lone surrogates
(``surrogateescape``) so that the validator can name the exact row and column that holds
them instead of failing on the whole file.

Every file is read through :mod:`hybridroute._safeio`: a regular file only (a FIFO, a
device such as ``/dev/zero``, a socket or a directory is refused before a byte is read)
and at most :func:`file_byte_limit` bytes, counted while reading (the reported size is
not trusted). Each JSONL line is parsed with :func:`hybridroute._safeio.parse_json`, so a
line with a duplicate key, nesting deeper than 64 levels, an integer of more than 64
digits or ``NaN`` / ``Infinity`` is a row error naming the file and line. CSV cells are
read back from the spreadsheet-formula escaping of :mod:`hybridroute._csv` (a cell
``'=x`` written by :meth:`LabelledSet.export` reads as ``=x``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._labelled_rows import has_bad_bytes
from .._safeio import env_byte_limit, parse_json, read_bytes
from .._textrows import csv_rows, jsonl_lines
from ..exceptions import DatasetError, InputError

#: The largest labelled file read (1 GiB, counted while reading). Banking77's train file is
#: 0.8 MB and CLINC150's ``data_full.json`` 2.5 MB, so this leaves a margin of about 400x
#: while keeping a file that would not fit in memory once parsed from being read at all.
MAX_FILE_BYTES = 1 << 30
#: Environment variable that overrides :data:`MAX_FILE_BYTES` (a whole number of bytes).
MAX_FILE_BYTES_ENV = "HYBRIDROUTE_MAX_DATASET_BYTES"
#: A JSONL line longer than this is refused before it is parsed.
MAX_LINE_BYTES = 1_000_000


def file_byte_limit() -> int:
    """The byte limit of a labelled file: ``HYBRIDROUTE_MAX_DATASET_BYTES``, else 1 GiB.

    Raises
    ------
    DatasetError
        If the variable is set to something other than a positive whole number of bytes.
    """
    try:
        return env_byte_limit(MAX_FILE_BYTES_ENV, MAX_FILE_BYTES)
    except InputError as exc:
        raise DatasetError(exc.reason) from None


def read_limited(path: str | os.PathLike[str], what: str = "dataset file") -> bytes:
    """The bytes of a regular file of at most :func:`file_byte_limit` bytes.

    Raises
    ------
    DatasetError
        Naming the file: missing, unreadable, not a regular file (a FIFO, ``/dev/zero``,
        a directory...) or over the limit (the message names the variable that raises it).
    """
    limit = file_byte_limit()
    try:
        return read_bytes(path, limit=limit, what=what)
    except InputError as exc:
        reason = exc.reason
        if "larger than the limit" in reason:
            reason += f" (set {MAX_FILE_BYTES_ENV} to raise it)"
        raise DatasetError(reason, path=os.fspath(path)) from None


@dataclass(slots=True)
class RawTable:
    """The rows of one source before validation.

    ``records`` holds ``(path, row_number, mapping)`` triples (tables from several files
    can be concatenated). ``kind`` is ``"csv"`` (every value is a string, as written, the
    formula escaping undone) or ``"json"`` (values have JSON types).
    """

    path: str
    kind: str
    columns: list[str]
    records: list[tuple[str, int, dict[str, Any]]]
    had_bad_bytes: bool = False
    row_errors: list[DatasetError] = field(default_factory=list)


def _read_text(path: Path) -> tuple[str, bool]:
    data = read_limited(path)
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        return data.decode("utf-8"), False
    except UnicodeDecodeError:
        return data.decode("utf-8", errors="surrogateescape"), True


def read_csv(path: str | Path) -> RawTable:
    """Split a UTF-8 CSV file with a header row into records (row 1 = first data row).

    Rows with the wrong number of fields are reported in ``row_errors`` (column named)
    and left out of ``records``; the validator decides whether to raise or skip. Every
    cell, header included, is read back from the formula escaping of
    :func:`hybridroute._csv.escape_formula` (``'=SUM(A1)`` → ``=SUM(A1)``), so a file
    written by :meth:`~hybridroute.datasets.LabelledSet.export` loads back unchanged.
    """
    p = Path(path)
    text, bad = _read_text(p)
    if not text.strip():
        raise DatasetError("the file is empty", path=str(p))
    rows = csv_rows(text, str(p))
    _, header = next(rows)
    for name in header:
        if not name:
            raise DatasetError(
                "the header has an empty column name", path=str(p), row=0, column=name
            )
        if has_bad_bytes(name):
            raise DatasetError(
                "the header holds bytes that are not UTF-8", path=str(p), row=0, column=name
            )
        if "\x00" in name:
            raise DatasetError("the header holds a NUL character", path=str(p), row=0, column=name)
    seen: set[str] = set()
    for name in header:
        if name in seen:
            raise DatasetError(
                "column name given twice in the header", path=str(p), row=0, column=name
            )
        seen.add(name)
    records: list[tuple[str, int, dict[str, Any]]] = []
    errors: list[DatasetError] = []
    n = len(header)
    for row, cells in rows:
        if len(cells) != n:
            if len(cells) < n:
                column = header[len(cells)]
                msg = f"the row has {len(cells)} fields, the header {n}: no value for this column"
            else:
                column = header[-1]
                msg = f"the row has {len(cells)} fields, the header {n}: extra fields after this column"
            errors.append(DatasetError(msg, path=str(p), row=row, column=column))
            continue
        records.append((str(p), row, dict(zip(header, cells, strict=True))))
    return RawTable(str(p), "csv", header, records, bad, errors)


def read_jsonl(path: str | Path) -> RawTable:
    """Split a UTF-8 JSON Lines file into records (row number = line number, from 1).

    Blank lines are ignored (they still count as lines). A line that is not a JSON object
    is reported in ``row_errors``, and so is one that :func:`hybridroute._safeio.parse_json`
    refuses: a duplicate key (``{"facts": {...}, "facts": {...}}``), nesting deeper than 64
    levels, an integer of more than 64 digits, ``NaN`` / ``Infinity``, a lone surrogate
    escape.
    """
    p = Path(path)
    text, bad = _read_text(p)
    if not text.strip():
        raise DatasetError("the file is empty", path=str(p))
    records: list[tuple[str, int, dict[str, Any]]] = []
    errors: list[DatasetError] = []
    columns: dict[str, None] = {}
    for lineno, line in jsonl_lines(text):
        size = len(line.encode("utf-8", errors="surrogateescape"))
        if size > MAX_LINE_BYTES:
            errors.append(
                DatasetError(
                    f"the line is {size:,} bytes long (limit {MAX_LINE_BYTES:,})",
                    path=str(p),
                    row=lineno,
                )
            )
            continue
        try:
            obj = parse_json(line, source=str(p), line=lineno)
        except InputError as exc:
            errors.append(DatasetError(exc.reason, path=str(p), row=lineno))
            continue
        if not isinstance(obj, dict):
            errors.append(
                DatasetError(
                    f"expected a JSON object, got {type(obj).__name__}", path=str(p), row=lineno
                )
            )
            continue
        for key in obj:
            columns.setdefault(key, None)
        records.append((str(p), lineno, obj))
    return RawTable(str(p), "json", list(columns), records, bad, errors)


def sniff_kind(path: str | Path) -> str:
    """``"csv"`` or ``"jsonl"`` from a file's suffix, or raise naming the file."""
    suffix = Path(path).suffix.lower()
    if suffix == ".csv":
        return "csv"
    if suffix in (".jsonl", ".ndjson"):
        return "jsonl"
    raise DatasetError(
        "cannot tell the format from the suffix; use 'csv:PATH' or 'jsonl:PATH', "
        "or a file ending in .csv or .jsonl",
        path=str(path),
    )
