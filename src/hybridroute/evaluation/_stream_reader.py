"""Reading a labelled set from disk one row at a time, in bounded memory.

:class:`LabelledStream` yields the rows of a JSONL or CSV file (optionally gzip-compressed)
one at a time, checked with the per-row checks of the dataset loaders
(:mod:`hybridroute._labelled_rows`), for :func:`~hybridroute.evaluation.evaluate_stream`.
"""

from __future__ import annotations

import csv
import gzip
import io
import os
import zlib
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, NamedTuple

from .._csv import json_kind, unescape_formula
from .._labelled_rows import (
    DEFAULT_MAX_TEXT_CHARS,
    RESERVED_COLUMNS,
    SPLIT_ORDER,
    RowProblem,
    check_chars,
    check_csv_cell,
    check_deep,
    check_fact_value,
    first_missing_required,
    json_facts,
    known_splits_hint,
    normalise_split,
    read_annotation,
    read_id,
    read_label,
    read_split,
    read_text,
)
from .._safeio import env_byte_limit, open_regular, parse_json
from ..contracts import FactSchema, FactSpec
from ..exceptions import DatasetError, InputError

__all__ = [
    "MAX_LINE_BYTES",
    "MAX_STREAM_BYTES",
    "MAX_STREAM_BYTES_ENV",
    "LabelledStream",
    "SkippedStreamRow",
    "stream_byte_limit",
]

#: Most bytes a :class:`LabelledStream` reads, after decompression (64 GiB). A stream is
#: read in constant memory, so the limit only bounds the time spent on a file (or a gzip
#: stream that expands without end); ``HYBRIDROUTE_MAX_STREAM_BYTES`` or ``max_bytes=``
#: sets another.
MAX_STREAM_BYTES = 64 << 30
#: Environment variable that overrides :data:`MAX_STREAM_BYTES` (a whole number of bytes).
MAX_STREAM_BYTES_ENV = "HYBRIDROUTE_MAX_STREAM_BYTES"
#: The longest line read (the dataset loaders' limit); memory per line is bounded by it.
MAX_LINE_BYTES = 1_000_000


class SkippedStreamRow(NamedTuple):
    """A row :class:`LabelledStream` left out (``on_error="skip"``): where, and why."""

    row: int
    column: str | None
    reason: str


class LabelledStream:
    """Labelled rows read one at a time from a JSONL or CSV file (``.gz`` accepted).

    Each yielded row is ``{"id", "text", "label", "facts", "next_step", "split"}``. Each
    row is checked by the same functions as a row of
    :func:`hybridroute.datasets.load_dataset` (:mod:`hybridroute._labelled_rows`), so it
    is refused with the same words: the id, when given, is a string or an integer; the
    text is present, a string, not blank and at most ``max_text_chars`` long; no text,
    label, id, split, fact name or string fact holds a NUL character; the label is a
    non-empty string or an integer (and in ``label_set`` when one is given); the split,
    when given, is one of ``train``, ``validation``, ``calibration``, ``test`` (or
    ``val``, ``valid``, ``dev``, ``calib``); ``next_step`` is a string or null; the facts
    (a nested ``facts`` object, or the non-reserved top-level keys / CSV columns) take no
    reserved name and, when ``fact_types`` is given, pass the fact check of the loaders
    (:func:`hybridroute._labelled_rows.check_fact_value`): their declared types, and with
    a facts schema also its ``enum``, ``min`` / ``max`` and required facts (a CSV header
    without a required fact is refused at once; a row without one is a bad row). Checks
    that need the whole set in memory are not made: duplicate ids, the same text with two
    labels, and the inference of an undeclared fact column's type from the majority of
    its rows (declare ``fact_types`` instead; the router validates facts against its
    schema anyway).

    Reading is bounded: the path must be a regular file (a FIFO or ``/dev/zero`` is refused
    before a byte is read), no line may be longer than :data:`MAX_LINE_BYTES`, and at most
    ``max_bytes`` bytes are read (after decompression, so a small ``.gz`` cannot expand
    without end). Each JSONL line is parsed with :func:`hybridroute._safeio.parse_json`
    (no duplicate keys, nesting deeper than 64 levels, integers of more than 64 digits,
    ``NaN``); CSV cells are read back from the spreadsheet-formula escaping of
    :func:`hybridroute._csv.escape_formula`, as the loaders read them.

    Parameters
    ----------
    path : str or path-like
        A ``.jsonl`` / ``.json`` / ``.csv`` file, optionally ending in ``.gz``.
    fact_types : mapping of str to str, or FactSchema, optional
        Declared fact types (``{"amount": "number", ...}``), or a facts schema
        (:class:`~hybridroute.contracts.FactSchema`, e.g. a router's
        ``router.rules.schema``: each fact checked whole, as ``load_dataset(...,
        fact_types=schema)`` checks it); values are checked and canonicalised, undeclared
        facts are passed through as read.
    label_set : iterable of str, optional
        Labels the rows may carry.
    split : str, optional
        Yield only the rows of this split.
    max_text_chars : int
        The longest text accepted.
    on_error : {"raise", "skip"}
        Raise :class:`~hybridroute.exceptions.DatasetError` naming file, row and column at
        the first bad row, or leave bad rows out (counted in :attr:`n_skipped`, the first
        ``keep_skipped`` listed in :attr:`skipped`). Problems with the file as a whole
        (not a regular file, over ``max_bytes``, a broken gzip stream, an unreadable CSV
        row) always raise.
    max_bytes : int, optional
        Most bytes read; default :data:`MAX_STREAM_BYTES` (64 GiB), or the
        ``HYBRIDROUTE_MAX_STREAM_BYTES`` environment variable when set.
    keep_skipped : int, default 100
        With ``on_error="skip"``: how many skipped rows :attr:`skipped` keeps (the first
        ones); :attr:`n_skipped` counts them all, so memory stays bounded.

    Notes
    -----
    Row numbers are those of the loaders: in JSONL the line number (from 1, blank lines
    counted), in CSV the data row (the header is row 0). Iterating twice reads the file
    twice.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        fact_types: Mapping[str, str] | FactSchema | None = None,
        label_set: Iterable[str] | None = None,
        split: str | None = None,
        max_text_chars: int = DEFAULT_MAX_TEXT_CHARS,
        on_error: str = "raise",
        keep_skipped: int = 100,
        max_bytes: int | None = None,
    ) -> None:
        if on_error not in ("raise", "skip"):
            raise ValueError(f"on_error must be 'raise' or 'skip', not {on_error!r}")
        self.path = Path(path)
        name = self.path.name.lower()
        self.gzipped = name.endswith(".gz")
        base = name[:-3] if self.gzipped else name
        if base.endswith((".jsonl", ".json", ".ndjson")):
            self.kind = "json"
        elif base.endswith(".csv"):
            self.kind = "csv"
        else:
            raise DatasetError(
                "cannot tell the format from the file name (use .jsonl or .csv, optionally .gz)",
                path=str(self.path),
            )
        self.schema: FactSchema | None = None
        self.specs: dict[str, FactSpec]
        if isinstance(fact_types, FactSchema):
            self.schema = fact_types
            self.specs = {s.name: s for s in fact_types.specs}
        else:
            self.specs = {
                str(k): FactSpec(name=str(k), type=str(t), nullable=True)
                for k, t in (fact_types or {}).items()
            }
        # only a schema makes a fact required (a spec made from a bare type has no default)
        self.required = frozenset(
            s.name for s in self.specs.values() if self.schema is not None and s.required
        )
        self.label_set = None if label_set is None else frozenset(str(x) for x in label_set)
        if split is not None:
            canonical = normalise_split(split)
            if canonical not in SPLIT_ORDER:
                raise ValueError(f"unknown split {split!r}; {known_splits_hint()}")
            split = canonical
        self.split = split
        self.max_text_chars = int(max_text_chars)
        self.on_error = on_error
        self.keep_skipped = int(keep_skipped)
        if max_bytes is None:
            max_bytes = stream_byte_limit()
        elif isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 1:
            raise ValueError(f"max_bytes must be a positive integer, got {max_bytes!r}")
        self.max_bytes = max_bytes
        self.n_skipped = 0
        self.skipped: list[SkippedStreamRow] = []

    def __iter__(self) -> Iterator[dict[str, Any]]:
        self.n_skipped = 0
        self.skipped = []
        records = self._json_records() if self.kind == "json" else self._csv_records()
        for row, rec, written in records:
            try:
                out = self._check(rec, written)
            except RowProblem as bad:
                self._bad(row, bad.column, bad.reason)
                continue
            if self.split is None or out["split"] == self.split:
                yield out

    def _bad(self, row: int, column: str | None, reason: str) -> None:
        if self.on_error == "raise":
            raise DatasetError(reason, path=str(self.path), row=row, column=column)
        self.n_skipped += 1
        if len(self.skipped) < self.keep_skipped:
            self.skipped.append(SkippedStreamRow(row, column, reason))

    # ------------------------------------------------------------------ bounded reading

    def _fail(self, reason: str, row: int | None = None) -> DatasetError:
        return DatasetError(reason, path=str(self.path), row=row)

    def _lines(self) -> Iterator[tuple[int, bytes | None]]:
        """``(line number, raw line with its ending)``; ``None`` for a line over the limit.

        Memory stays bounded: a line is read at most :data:`MAX_LINE_BYTES` + 2 bytes at a
        time (the rest of an overlong line is read and dropped in such pieces), and the
        total read is checked against :attr:`max_bytes` as it grows.
        """
        try:
            fd, _ = open_regular(self.path, "labelled file")
        except InputError as exc:
            raise self._fail(exc.reason) from None
        limit = self.max_bytes
        with os.fdopen(fd, "rb") as raw:
            fh: gzip.GzipFile | io.BufferedReader = (
                gzip.GzipFile(fileobj=raw, mode="rb") if self.gzipped else raw
            )
            with fh:
                total = 0
                lineno = 0
                while True:
                    chunk = self._read(fh, MAX_LINE_BYTES + 2)
                    if not chunk:
                        return
                    lineno += 1
                    total += len(chunk)
                    overlong = False
                    while not chunk.endswith(b"\n") and len(chunk) > MAX_LINE_BYTES + 1:
                        overlong = True  # drop the rest of the line, piece by piece
                        chunk = self._read(fh, MAX_LINE_BYTES + 2)
                        total += len(chunk)
                        if total > limit or not chunk:
                            break
                    if total > limit:
                        raise self._fail(self._too_large(limit))
                    if not overlong:
                        body = chunk.removesuffix(b"\n").removesuffix(b"\r")
                        overlong = len(body) > MAX_LINE_BYTES
                    yield lineno, None if overlong else chunk

    def _read(self, fh: gzip.GzipFile | io.BufferedReader, n: int) -> bytes:
        try:
            return fh.readline(n)
        except (OSError, EOFError, zlib.error) as exc:
            raise self._fail(f"cannot read the gzip stream ({exc})") from None

    def _too_large(self, limit: int) -> str:
        what = "decompressed, " if self.gzipped else ""
        return (
            f"the file is larger than the limit of {limit:,} bytes ({what}set "
            f"{MAX_STREAM_BYTES_ENV} or max_bytes= to raise it)"
        )

    def _decode(self, lineno: int, chunk: bytes) -> str:
        if lineno == 1 and chunk.startswith(b"\xef\xbb\xbf"):
            chunk = chunk[3:]
        try:
            return chunk.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise RowProblem(None, f"not valid UTF-8 (byte {exc.start} of line {lineno})") from None

    def _json_records(self) -> Iterator[tuple[int, dict[str, Any], None]]:
        for lineno, chunk in self._lines():
            if chunk is None:
                self._bad(lineno, None, f"the line is longer than {MAX_LINE_BYTES:,} bytes")
                continue
            try:
                line = self._decode(lineno, chunk)
            except RowProblem as bad:
                self._bad(lineno, None, bad.reason)
                continue
            if not line.strip():
                continue
            try:
                rec = parse_json(line, source=str(self.path), line=lineno)
            except InputError as exc:
                self._bad(lineno, None, exc.reason)
                continue
            if not isinstance(rec, dict):
                self._bad(lineno, None, f"expected a JSON object, got {json_kind(rec)}")
                continue
            yield lineno, rec, None

    def _text_lines(self) -> Iterator[str]:
        for lineno, chunk in self._lines():
            if chunk is None:
                raise self._fail(f"line {lineno} is longer than {MAX_LINE_BYTES:,} bytes")
            try:
                yield self._decode(lineno, chunk)
            except RowProblem as bad:
                raise self._fail(bad.reason) from None

    def _csv_records(self) -> Iterator[tuple[int, dict[str, Any], dict[str, str]]]:
        """``(row, record, fact cells as written)``: the record's facts are read from the
        cells, the cells kept for the messages of the fact check."""
        # csv reads quoted fields across lines from the line iterator; a field is capped by
        # csv.field_size_limit (131,072 characters by default), so an unclosed quote
        # cannot gather the whole file
        reader = csv.reader(self._text_lines())
        row = 0

        def next_cells() -> list[str] | None:
            try:
                return next(reader)
            except StopIteration:
                return None
            except csv.Error as exc:
                raise self._fail(f"unreadable CSV row ({exc})", row=row + 1) from None

        header = next_cells()
        if header is None:
            raise DatasetError("the file is empty", path=str(self.path))
        header = [unescape_formula(h.strip()) for h in header]
        for name in header:
            try:
                check_chars(name, "the column name", name)
            except RowProblem as bad:
                raise DatasetError(bad.reason, path=str(self.path), row=0, column=name) from None
        for col in ("text", "label"):
            if col not in header:
                raise DatasetError(
                    f"missing column: the header has {', '.join(map(repr, header))}",
                    path=str(self.path),
                    row=0,
                    column=col,
                )
        if self.schema is not None:
            fact_cols = [c for c in header if c not in RESERVED_COLUMNS]
            missing = first_missing_required(self.schema, fact_cols)
            if missing is not None:
                raise DatasetError(missing[1], path=str(self.path), row=0, column=missing[0])
        while True:
            cells = next_cells()
            if cells is None:
                return
            if not cells or (len(cells) == 1 and not cells[0].strip() and len(header) > 1):
                continue  # a blank line: not a row (as in the loaders)
            row += 1
            if len(cells) != len(header):
                self._bad(row, None, f"{len(cells)} cells for {len(header)} columns")
                continue
            rec: dict[str, Any] = {}
            facts: dict[str, Any] = {}
            written: dict[str, str] = {}
            try:
                for col, cell in zip(header, cells, strict=True):
                    if cell[:1] == "'":
                        cell = unescape_formula(cell)
                    if col in RESERVED_COLUMNS:
                        rec[col] = cell if cell.strip() else None
                    else:
                        check_chars(col, "the value", cell)
                        written[col] = cell
                        spec = self.specs.get(col)
                        if spec is not None and spec.type == "str":
                            facts[col] = cell  # kept as written: not read as JSON
                        else:
                            value = check_csv_cell(col, cell)[1]
                            check_deep(col, "the value", value)  # e.g. "[\"a\u0000\"]"
                            facts[col] = value
            except RowProblem as bad:
                self._bad(row, bad.column, bad.reason)
                continue
            rec["facts"] = facts
            yield row, rec, written

    # ------------------------------------------------------------------ row checks

    def _check(self, rec: Mapping[str, Any], written: Mapping[str, str] | None) -> dict[str, Any]:
        """One row checked as the loaders check it, in their order (id, text, label,
        split, facts, next step); ``RowProblem`` names the column. ``written`` holds a CSV
        row's fact cells as written (what a message quotes)."""
        is_csv = self.kind == "csv"
        rid = rec.get("id")
        if rid is not None:  # a streamed row needs no id; one that is given is checked
            rid = read_id(rid, "id")
        text = read_text(rec.get("text"), "text", self.max_text_chars)
        label = read_label(rec.get("label"), "label", self.label_set)
        split = read_split(rec.get("split"), "split", required=False)
        facts = self._facts(rec, written or {})
        next_step = read_annotation("next_step", rec.get("next_step"), is_csv)
        return {
            "id": rid,
            "text": text,
            "label": label,
            "facts": facts,
            "next_step": next_step,
            "split": split,
        }

    def _facts(self, rec: Mapping[str, Any], written: Mapping[str, str]) -> dict[str, Any]:
        if self.kind == "json":
            facts = json_facts(rec, RESERVED_COLUMNS)
        else:  # the cells were checked as they were read (_csv_records)
            facts = {
                k: None if isinstance(v, str) and not v.strip() else v
                for k, v in (rec.get("facts") or {}).items()
            }
        for k, spec in self.specs.items():  # the loaders' fact check, value by value
            value = facts.get(k)
            checked, reason = check_fact_value(
                spec, json_kind(value), value, written.get(k, value), required=k in self.required
            )
            if reason is not None:
                raise RowProblem(k, reason)
            if value is not None:
                facts[k] = checked
        return facts


def stream_byte_limit() -> int:
    """The byte limit of a :class:`LabelledStream`: ``HYBRIDROUTE_MAX_STREAM_BYTES``, else
    :data:`MAX_STREAM_BYTES`.

    Raises
    ------
    DatasetError
        If the variable is not a positive whole number of bytes.
    """
    try:
        return env_byte_limit(MAX_STREAM_BYTES_ENV, MAX_STREAM_BYTES)
    except InputError as exc:
        raise DatasetError(exc.reason) from None
