"""Reading labelled files into raw records: bytes → UTF-8 → CSV rows or JSONL objects.

Nothing is validated here beyond what is needed to split a file into rows; every value
check lives in :mod:`._validate`. Bytes that are not UTF-8 are kept as lone surrogates
(``surrogateescape``) so that the validator can name the exact row and column that holds
them instead of failing on the whole file.
"""

from __future__ import annotations

import csv
import io
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..exceptions import DatasetError

#: A JSONL line longer than this is refused before it is parsed.
MAX_LINE_BYTES = 1_000_000
#: The CSV reader's per-field limit (the standard library's default is 131,072).
MAX_FIELD_CHARS = 1_000_000

_SURROGATE_RE = re.compile("[\udc80-\udcff]")


def has_bad_bytes(value: str) -> bool:
    """Whether ``value`` carries bytes that were not valid UTF-8 (as lone surrogates)."""
    return _SURROGATE_RE.search(value) is not None


@dataclass(slots=True)
class RawTable:
    """The rows of one source before validation.

    ``records`` holds ``(path, row_number, mapping)`` triples (tables from several files
    can be concatenated). ``kind`` is ``"csv"`` (every value
    is a string, as written) or ``"json"`` (values have JSON types).
    """

    path: str
    kind: str
    columns: list[str]
    records: list[tuple[str, int, dict[str, Any]]]
    had_bad_bytes: bool = False
    row_errors: list[DatasetError] = field(default_factory=list)


def _read_text(path: Path) -> tuple[str, bool]:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise DatasetError("file not found", path=str(path)) from None
    except IsADirectoryError:
        raise DatasetError("is a directory, not a file", path=str(path)) from None
    except OSError as exc:
        raise DatasetError(f"cannot read the file ({exc.strerror})", path=str(path)) from None
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        return data.decode("utf-8"), False
    except UnicodeDecodeError:
        return data.decode("utf-8", errors="surrogateescape"), True


def read_csv(path: str | Path) -> RawTable:
    """Split a UTF-8 CSV file with a header row into records (row 1 = first data row).

    Rows with the wrong number of fields are reported in ``row_errors`` (column named)
    and left out of ``records``; the validator decides whether to raise or skip.
    """
    p = Path(path)
    text, bad = _read_text(p)
    if not text.strip():
        raise DatasetError("the file is empty", path=str(p))
    reader = csv.reader(io.StringIO(text, newline=""), strict=False)
    old_limit = csv.field_size_limit()
    csv.field_size_limit(MAX_FIELD_CHARS)
    try:
        try:
            header = next(reader)
        except csv.Error as exc:
            raise DatasetError(f"unreadable CSV header ({exc})", path=str(p), row=0) from None
        header = [h.strip() for h in header]
        for name in header:
            if not name:
                raise DatasetError(
                    "the header has an empty column name", path=str(p), row=0, column=name
                )
            if has_bad_bytes(name):
                raise DatasetError(
                    "the header holds bytes that are not UTF-8", path=str(p), row=0, column=name
                )
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
        row = 0
        while True:
            try:
                fields = next(reader)
            except StopIteration:
                break
            except csv.Error as exc:
                row += 1
                msg = str(exc)
                if "field larger than field limit" in msg:
                    msg = f"a field is longer than {MAX_FIELD_CHARS:,} characters"
                raise DatasetError(f"unreadable CSV row ({msg})", path=str(p), row=row) from None
            if not fields or (len(fields) == 1 and not fields[0].strip() and n > 1):
                # A blank line: not a row.
                continue
            row += 1
            if len(fields) != n:
                if len(fields) < n:
                    column = header[len(fields)]
                    msg = f"the row has {len(fields)} fields, the header {n}: no value for this column"
                else:
                    column = header[-1]
                    msg = f"the row has {len(fields)} fields, the header {n}: extra fields after this column"
                errors.append(DatasetError(msg, path=str(p), row=row, column=column))
                continue
            records.append((str(p), row, dict(zip(header, fields, strict=True))))
    finally:
        csv.field_size_limit(old_limit)
    return RawTable(str(p), "csv", header, records, bad, errors)


def read_jsonl(path: str | Path) -> RawTable:
    """Split a UTF-8 JSON Lines file into records (row number = line number, from 1).

    Blank lines are ignored (they still count as lines). A line that is not a JSON object
    is reported in ``row_errors``.
    """
    p = Path(path)
    text, bad = _read_text(p)
    if not text.strip():
        raise DatasetError("the file is empty", path=str(p))
    records: list[tuple[str, int, dict[str, Any]]] = []
    errors: list[DatasetError] = []
    columns: dict[str, None] = {}
    # Split on "\n" only: JSON strings may hold U+2028 and friends, which splitlines() breaks on.
    for lineno, line in enumerate(text.split("\n"), start=1):
        line = line.removesuffix("\r")
        if not line.strip():
            continue
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
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            errors.append(
                DatasetError(
                    f"not valid JSON ({exc.msg} at character {exc.colno})", path=str(p), row=lineno
                )
            )
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
