"""Splitting decoded text into rows: CSV rows and JSON Lines lines; no value is checked.

The one way the readers of whole files -- labelled sets (:mod:`hybridroute.datasets`) and
scores files (:mod:`hybridroute.scores`) -- split a file: a CSV header and its data rows
(a blank line is no row; cells read back from the formula escaping of
:mod:`hybridroute._csv`), and the lines of a JSON Lines file (split on ``"\\n"`` only,
blank lines skipped but counted). Each reader checks the rows its own way. A leaf module:
it imports only the exceptions and :mod:`hybridroute._csv`.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator

from ._csv import unescape_formula
from .exceptions import DatasetError

__all__ = ["MAX_FIELD_CHARS", "csv_rows", "jsonl_lines"]

#: The CSV reader's per-field limit (the standard library's default is 131,072).
MAX_FIELD_CHARS = 1_000_000


def _next(reader: Iterator[list[str]]) -> list[str]:
    """The reader's next row, read under :data:`MAX_FIELD_CHARS` (the limit is the csv
    module's, process-wide: it is raised for this read only, so a caller that stops early
    leaves it as it found it)."""
    old = csv.field_size_limit(MAX_FIELD_CHARS)
    try:
        return next(reader)
    finally:
        csv.field_size_limit(old)


def csv_rows(text: str, path: str, *, strict: bool = False) -> Iterator[tuple[int, list[str]]]:
    """The header as row 0 (each name stripped), then each data row numbered from 1.

    A blank line is no row (and not counted); data cells are read back from the formula
    escaping (``'=SUM(A1)`` -> ``=SUM(A1)``), header names too. Rows are yielded as
    written: one with another number of fields than the header is the caller's to judge.

    Parameters
    ----------
    text : str
        The decoded file.
    path : str
        The file, for the errors.
    strict : bool, default False
        The csv module's ``strict`` (refuse a stray quote inside a field).

    Raises
    ------
    DatasetError
        Naming the file and row: no header (an empty file), or a header or row the csv
        module cannot read (a field longer than :data:`MAX_FIELD_CHARS` characters...).
    """
    reader = csv.reader(io.StringIO(text, newline=""), strict=strict)
    try:
        header = _next(reader)
    except StopIteration:
        raise DatasetError("the file is empty", path=path) from None
    except csv.Error as exc:
        raise DatasetError(f"unreadable CSV header ({exc})", path=path, row=0) from None
    header = [unescape_formula(h.strip()) for h in header]
    yield 0, header
    n = len(header)
    row = 0
    while True:
        try:
            fields = _next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            msg = str(exc)
            if "field larger than field limit" in msg:
                msg = f"a field is longer than {MAX_FIELD_CHARS:,} characters"
            raise DatasetError(f"unreadable CSV row ({msg})", path=path, row=row + 1) from None
        if not fields or (len(fields) == 1 and not fields[0].strip() and n > 1):
            continue  # a blank line: not a row
        row += 1
        yield row, [unescape_formula(f) if f[:1] == "'" else f for f in fields]


def jsonl_lines(text: str) -> Iterator[tuple[int, str]]:
    """``(line number, line)`` of each line that is not blank, numbered from 1.

    Split on ``"\\n"`` only (a JSON string may hold U+2028 and the other characters
    :meth:`str.splitlines` breaks on), a trailing ``"\\r"`` removed.
    """
    for lineno, line in enumerate(text.split("\n"), start=1):
        line = line.removesuffix("\r")
        if line.strip():
            yield lineno, line
