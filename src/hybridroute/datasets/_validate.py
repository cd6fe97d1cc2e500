"""Row-by-row validation of raw records into the labelled-set frame.

Every problem is located: the error (or the skip report) names the file, the row and
the column as the user wrote them. Checks, in the order they run:

1. per row: id, text (present, a string, valid UTF-8 without NUL characters, not blank,
   not absurdly long), label (present, a string or integer, inside the declared label
   set), split (one of :data:`~hybridroute._labelled_rows.SPLIT_ORDER`, or an alias of
   one), annotations (``next_step``, ``destination``, ``evidence``, ``tags``), fact cells
   (no NUL character or invalid UTF-8 in any string, names included; in CSV, no cell
   that would read as JSON with duplicate keys, deep nesting or ``NaN``, as an integer of
   more than 64 digits, or as a number too large for a float);
2. per fact column: every value has the column's type (declared, or else the type most
   rows have); an empty or blank string counts as an absent fact (``None``), in JSONL as in
   CSV, so the two formats read alike. Declared by a facts schema
   (:class:`~hybridroute.contracts.FactSchema`), every value also passes the fact's
   ``enum`` and ``min`` / ``max`` (:func:`hybridroute._labelled_rows.check_fact_value`,
   the check the streamed reader makes too), a required fact (no default) is present in
   every row, and an undeclared fact column is noted when the schema forbids extra
   facts. A CSV column read as text whose cells also spell booleans or numbers is kept as
   written and noted (:attr:`Built.notes`), naming the first row whose kind differs from
   the first row's; fixed-width digit codes (``02134``, ``10001``) are text without a
   note;
3. across rows: duplicate ids, and the same text given two different labels.

With ``on_error="raise"`` the first problem (in row order within each pass) raises a
:class:`~hybridroute.exceptions.DatasetError`; with ``on_error="skip"`` the bad row is
left out and recorded as a :class:`SkippedRow`. Problems with the file as a whole (empty,
header only, a missing column, a single class) always raise.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import pandas as pd

from .._csv import json_kind, parse_csv_cell

# The per-row checks, the fact check and the split names live in hybridroute._labelled_rows
# (shared with the streamed evaluation); import them from there.
from .._labelled_rows import (
    ANNOTATION_COLUMNS,
    DEFAULT_MAX_TEXT_CHARS,
    check_fact_value,
    first_missing_required,
    json_facts,
    kind_ok,
    name_list,
    read_label,
    read_text,
)
from .._labelled_rows import RESERVED_COLUMNS as _RESERVED
from .._labelled_rows import RowProblem as _Bad
from .._labelled_rows import check_chars as _check_chars
from .._labelled_rows import check_csv_cell as _check_csv_cell
from .._labelled_rows import read_annotation as _read_annotation
from .._labelled_rows import read_id as _read_id
from .._labelled_rows import read_split as _read_split
from .._labelled_rows import short as _short
from ..contracts import FactSchema, FactSpec
from ..exceptions import DatasetError
from ._io import RawTable


class SkippedRow(NamedTuple):
    """One row left out by ``on_error="skip"``: where, and why.

    Attributes
    ----------
    row : int
        The row as the user counts it: a CSV data row (1-based, the header is row 0,
        blank lines not counted), a JSONL line number, or a frame row (1-based).
    column : str or None
        The column at fault, or ``None`` when the problem is the row as a whole.
    reason : str
        What was wrong, in words.
    """

    row: int
    column: str | None
    reason: str


class FactProblem(NamedTuple):
    """A fact that breaks a facts schema (:meth:`LabelledSet.check_facts`).

    Attributes
    ----------
    row : int or None
        The 1-based position of the row in the set; ``None`` for a required fact that is
        no column of the set.
    id : str or None
        The row's id; ``None`` with ``row``.
    column : str
        The fact at fault.
    reason : str
        Which rule of the schema the value breaks, in words.
    """

    row: int | None
    id: str | None
    column: str
    reason: str


@dataclass(slots=True)
class Options:
    """How to read the columns of a raw table (see :func:`build`)."""

    text_column: str = "text"
    label_column: str = "label"
    split_column: str | None = "split"
    split_required: bool = False
    id_column: str | None = "id"
    id_required: bool = False
    label_set: frozenset[str] | None = None
    fact_types: Mapping[str, str] | None = None
    declared_must_exist: bool = True
    max_text_chars: int = DEFAULT_MAX_TEXT_CHARS
    on_error: str = "raise"
    allow_conflicts: bool = False
    make_id: Callable[[str, int], str] | None = None


@dataclass(slots=True)
class Built:
    """The result of :func:`build`."""

    frame: pd.DataFrame
    fact_columns: tuple[str, ...]
    fact_types: dict[str, str]
    skipped: list[SkippedRow] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


# --------------------------------------------------------------------------- value helpers


def text_key(text: str) -> str:
    """The key under which two texts count as "the same text" (case and spacing ignored)."""
    return " ".join(text.split()).casefold()


class DeclaredTypes(dict[str, str]):
    """Declared fact types ``{name: type}`` that came from a :class:`FactSchema`.

    The schema rides along (:attr:`schema`) so that :func:`build` checks everything it
    declares, not only the types: ``enum``, ``min`` / ``max``, required facts (no
    default); and notes undeclared fact columns when the schema forbids extra facts. As a
    plain mapping it is what a loader records in its provenance.
    """

    __slots__ = ("schema",)

    def __init__(self, schema: FactSchema) -> None:
        super().__init__((s.name, s.type) for s in schema.specs)
        self.schema = schema


def fact_types_from(spec: Mapping[str, str] | FactSchema | None) -> dict[str, str] | None:
    """Declared fact types as ``{name: type}`` from a mapping or a :class:`FactSchema`
    (then a :class:`DeclaredTypes`, which keeps the schema for :func:`build`)."""
    if spec is None:
        return None
    if isinstance(spec, FactSchema):
        return DeclaredTypes(spec)
    if isinstance(spec, DeclaredTypes):
        return spec
    out = {}
    for name, type_ in spec.items():
        FactSpec(name=str(name), type=str(type_), nullable=True)  # validates the type name
        out[str(name)] = str(type_)
    return out


# --------------------------------------------------------------------------- build

#: One validated row: (path, row, id, text, label, split, facts, annotations).
_Row = tuple[str, int, str, str, str, str | None, dict[str, Any], dict[str, Any]]


@dataclass(frozen=True, slots=True)
class _Layout:
    """Which column of a raw table plays which role (see :func:`_layout`)."""

    path: str
    is_csv: bool
    header_row: int | None
    text_col: str
    label_col: str
    split_col: str | None
    id_col: str | None
    role_columns: frozenset[str]
    annotation_cols: list[str]
    fact_cols_csv: list[str]


def build(raw: RawTable, opt: Options) -> Built:
    """Validate ``raw`` and turn it into the labelled-set frame.

    Raises
    ------
    DatasetError
        Naming file, row and column, for the first problem (``on_error="raise"``) or for
        a problem with the file as a whole.
    """
    if opt.on_error not in ("raise", "skip"):
        raise ValueError(f"on_error must be 'raise' or 'skip', not {opt.on_error!r}")
    raising = opt.on_error == "raise"
    lay = _layout(raw, opt)
    if not raw.records and not raw.row_errors:
        what = (
            "the file has a header but no data rows" if lay.is_csv else "the file has no data rows"
        )
        raise DatasetError(what, path=lay.path)

    skipped: list[SkippedRow] = []
    pending = sorted(raw.row_errors, key=lambda e: e.row or 0)
    if not raising:
        skipped.extend(SkippedRow(e.row or 0, e.column, _reason(e)) for e in pending)
        pending = []
    rows = _read_rows(raw, opt, lay, pending, skipped)
    rows, fact_cols, fact_types, notes = _settle_facts(rows, opt, lay, skipped)
    rows = _check_across_rows(rows, opt, lay, skipped, notes)
    skipped.sort(key=lambda s: s.row)
    _check_whole_set(rows, skipped, lay)
    return Built(
        _frame(rows, fact_cols, lay.annotation_cols), tuple(fact_cols), fact_types, skipped, notes
    )


def _layout(raw: RawTable, opt: Options) -> _Layout:
    """Resolve the role columns of ``raw``; raise for a missing or a reserved column.

    A split or id column the table lacks is dropped unless required; a CSV file must have
    its text and label columns (a JSONL row missing one is a row problem, found later).
    Every other CSV column is a fact column, and may not bear a reserved name.
    """
    is_csv = raw.kind == "csv"
    path = raw.path
    header_row = 0 if is_csv else None
    text_col, label_col = opt.text_column, opt.label_column
    columns = list(raw.columns)
    present = set(columns)
    split_col = opt.split_column
    if split_col is not None and split_col not in present:
        if opt.split_required:
            _missing_column(path, header_row, split_col, columns, is_csv)
        split_col = None
    id_col = opt.id_column if opt.id_column is not None and opt.id_column in present else None
    if opt.id_required and id_col is None and opt.id_column is not None:
        _missing_column(path, header_row, opt.id_column, columns, is_csv)
    if is_csv:
        for col in (text_col, label_col):
            if col not in present:
                _missing_column(path, header_row, col, columns, is_csv)
    role_columns = {text_col, label_col} | {c for c in (split_col, id_col) if c is not None}
    annotation_cols = [c for c in ANNOTATION_COLUMNS if c in present and c not in role_columns]
    fact_cols_csv: list[str] = []
    if is_csv:
        fact_cols_csv = [c for c in columns if c not in role_columns and c not in annotation_cols]
        for c in fact_cols_csv:
            if c in _RESERVED:
                raise DatasetError(
                    f"a fact column cannot be named {c!r} (a reserved column of labelled sets); "
                    "rename it, or pick it as the text/label/split/id column",
                    path=path,
                    row=0,
                    column=c,
                )
    return _Layout(
        path=path,
        is_csv=is_csv,
        header_row=header_row,
        text_col=text_col,
        label_col=label_col,
        split_col=split_col,
        id_col=id_col,
        role_columns=frozenset(role_columns),
        annotation_cols=annotation_cols,
        fact_cols_csv=fact_cols_csv,
    )


def _read_rows(
    raw: RawTable,
    opt: Options,
    lay: _Layout,
    pending: list[DatasetError],
    skipped: list[SkippedRow],
) -> list[_Row]:
    """Pass 1: check each row on its own (id, text, label, split, fact cells, annotations).

    ``pending`` are the reader's own row errors (raised in row order among the checks'
    when raising; empty when skipping, as they are already in ``skipped``).
    """
    raising = opt.on_error == "raise"
    declared_types = dict(opt.fact_types or {})
    rows: list[_Row] = []
    for rpath, row, rec in raw.records:
        if pending and (pending[0].row or 0) < row:
            raise pending[0]
        try:
            if lay.id_col is not None:
                rid = _read_id(rec.get(lay.id_col), lay.id_col)
            else:
                rid = opt.make_id(rpath, row) if opt.make_id is not None else str(row)
            text = read_text(rec.get(lay.text_col), lay.text_col, opt.max_text_chars)
            label = read_label(rec.get(lay.label_col), lay.label_col, opt.label_set)
            split: str | None = None
            if lay.split_col is not None:
                split = _read_split(rec.get(lay.split_col), lay.split_col)
            if lay.is_csv:
                facts = {}
                for c in lay.fact_cols_csv:
                    cell = rec[c]
                    _check_chars(c, "the value", cell)
                    if declared_types.get(c) != "str":
                        _check_csv_cell(c, cell)
                    facts[c] = cell
            else:
                facts = json_facts(rec, lay.role_columns | set(lay.annotation_cols))
            notes_: dict[str, Any] = {}
            for c in lay.annotation_cols:
                notes_[c] = _read_annotation(c, rec.get(c), lay.is_csv)
        except _Bad as bad:
            if raising:
                if pending and (pending[0].row or 0) < row:
                    raise pending[0] from None
                raise DatasetError(bad.reason, path=rpath, row=row, column=bad.column) from None
            skipped.append(SkippedRow(row, bad.column, bad.reason))
            continue
        rows.append((rpath, row, rid, text, label, split, facts, notes_))
    if pending:
        raise pending[0]
    return rows


def _settle_facts(
    rows: list[_Row], opt: Options, lay: _Layout, skipped: list[SkippedRow]
) -> tuple[list[_Row], list[str], dict[str, str], list[str]]:
    """Pass 2: settle each fact column's type and check its values against it.

    Returns the rows left, the fact columns, their types and the notes. A value that breaks
    its column's type (or its schema) raises, or leaves its row out when skipping.
    """
    if lay.is_csv:
        fact_cols = list(lay.fact_cols_csv)
    else:
        seen_cols: dict[str, None] = {}
        for r in rows:
            for k in r[6]:
                seen_cols.setdefault(k, None)
        fact_cols = list(seen_cols)
    declared = dict(opt.fact_types or {})
    schema: FactSchema | None = getattr(opt.fact_types, "schema", None)
    notes: list[str] = []
    if schema is not None:
        notes += _check_schema_columns(schema, fact_cols, rows, lay.path, lay.header_row)
    elif opt.declared_must_exist:
        for name in declared:
            if name not in fact_cols:
                raise DatasetError(
                    "a declared fact is not a column of the file "
                    f"(fact columns: {', '.join(fact_cols) or 'none'})",
                    path=lay.path,
                    row=lay.header_row,
                    column=name,
                )
    fact_types: dict[str, str] = {}
    bad_rows: dict[int, tuple[str, str]] = {}
    for c in fact_cols:
        spec = schema[c] if schema is not None and c in schema else None
        type_, problems, note = _settle_column(c, rows, lay.is_csv, declared.get(c), spec)
        fact_types[c] = type_
        for idx, reason in problems:
            bad_rows.setdefault(idx, (c, reason))
        if note is not None:
            notes.append(note)
    if bad_rows:
        if opt.on_error == "raise":
            idx = min(bad_rows)
            c, reason = bad_rows[idx]
            raise DatasetError(reason, path=rows[idx][0], row=rows[idx][1], column=c)
        for idx in sorted(bad_rows):
            c, reason = bad_rows[idx]
            skipped.append(SkippedRow(rows[idx][1], c, reason))
        rows = [r for i, r in enumerate(rows) if i not in bad_rows]
    return rows, fact_cols, fact_types, notes


def _check_across_rows(
    rows: list[_Row], opt: Options, lay: _Layout, skipped: list[SkippedRow], notes: list[str]
) -> list[_Row]:
    """Pass 3: refuse a duplicate id, and the same text under two labels (noted instead
    with ``allow_conflicts``); return the rows kept."""
    first_id: dict[str, int] = {}
    first_text: dict[str, tuple[str, int, str]] = {}
    kept: list[_Row] = []
    for r in rows:
        rpath, row, rid, text, label = r[0], r[1], r[2], r[3], r[4]
        try:
            if rid in first_id:
                raise _Bad(
                    lay.id_col or "id",
                    f"duplicate id {rid!r} (first given at row {first_id[rid]})",
                )
            key = text_key(text)
            prior = first_text.get(key)
            if prior is not None and prior[2] != label:
                where = f"row {prior[1]}" if prior[0] == rpath else f"{prior[0]}, row {prior[1]}"
                msg = f"the same text is labelled {prior[2]!r} at {where} and {label!r} here"
                if not opt.allow_conflicts:
                    raise _Bad(lay.label_col, msg)
                notes.append(
                    f"{rpath}, row {row}, column {lay.label_col!r}: {msg} (kept as published)"
                )
        except _Bad as bad:
            if opt.on_error == "raise":
                raise DatasetError(bad.reason, path=rpath, row=row, column=bad.column) from None
            skipped.append(SkippedRow(row, bad.column, bad.reason))
            continue
        first_id[rid] = row
        first_text.setdefault(key, (rpath, row, label))
        kept.append(r)
    return kept


def _check_whole_set(rows: list[_Row], skipped: list[SkippedRow], lay: _Layout) -> None:
    """Raise when no row is left, or when the rows left hold a single class."""
    if not rows:
        first = skipped[0]
        where = f"row {first.row}" + (f", column {first.column!r}" if first.column else "")
        raise DatasetError(
            f"no valid rows: all {len(skipped)} rows were skipped (first: {where}: {first.reason})",
            path=lay.path,
        )
    distinct = {r[4] for r in rows}
    if len(distinct) < 2:
        (only,) = distinct
        left = ""
        if skipped:  # say so, or the bad rows that were skipped go unreported
            first = skipped[0]
            col = f", column {first.column!r}" if first.column else ""
            left = (
                f" left after skipping {len(skipped)} bad row(s) (first: row {first.row}{col}: "
                f"{first.reason})"
            )
        raise DatasetError(
            f"every one of the {len(rows)} rows{left} has the label {only!r}; "
            "a labelled set needs at least two classes",
            path=lay.path,
            column=lay.label_col,
        )


def _frame(rows: list[_Row], fact_cols: list[str], annotation_cols: list[str]) -> pd.DataFrame:
    """The labelled-set frame of the validated rows: id, text, label, split, facts, annotations."""
    data: dict[str, Any] = {
        "id": [r[2] for r in rows],
        "text": [r[3] for r in rows],
        "label": [r[4] for r in rows],
        "split": pd.Series([r[5] for r in rows], dtype=object),
    }
    for c in fact_cols:
        data[c] = pd.Series([r[6].get(c) for r in rows], dtype=object)
    for c in annotation_cols:
        data[c] = pd.Series([r[7].get(c) for r in rows], dtype=object)
    return pd.DataFrame(data)


# --------------------------------------------------------------------------- pieces


def _reason(err: DatasetError) -> str:
    text = str(err)
    where = []
    if err.path is not None:
        where.append(str(err.path))
    if err.row is not None:
        where.append(f"row {err.row}")
    if err.column is not None:
        where.append(f"column {err.column!r}")
    prefix = ", ".join(where) + ": "
    return text[len(prefix) :] if where and text.startswith(prefix) else text


def _missing_column(
    path: str, row: int | None, column: str, columns: list[str], is_csv: bool
) -> None:
    what = "header" if is_csv else "file"
    raise DatasetError(
        f"missing column: the {what} has {', '.join(repr(c) for c in columns) or 'no columns'}",
        path=path,
        row=row,
        column=column,
    )


def _check_schema_columns(
    schema: FactSchema, fact_cols: list[str], rows: list[Any], path: str, header_row: int | None
) -> list[str]:
    """Raise for a required fact the file lacks; note each column the schema forbids.

    A column the schema does not declare is no fact a rule reads: the rows can still be
    routed without it (an evaluation routes the declared facts only), so it is a note, not
    an error, even when the schema forbids undeclared facts (a router given it as a fact
    refuses it).
    """
    missing = first_missing_required(schema, fact_cols)
    if missing is not None:
        raise DatasetError(missing[1], path=path, row=header_row, column=missing[0])
    undeclared = [c for c in fact_cols if c not in schema]
    if schema.extra != "forbid" or not undeclared:
        return []
    c = undeclared[0]
    where, row = path, header_row
    if row is None:  # JSONL has no header: the first row giving it
        first = next(r for r in rows if c in r[6])
        where, row = first[0], first[1]
    others = f", nor are {', '.join(map(repr, undeclared[1:]))}" if undeclared[1:] else ""
    return [
        f"{where}, row {row}, column {c!r}: not a declared fact{others} (declared: "
        f"{name_list(schema.names)}); the facts schema forbids undeclared facts, so a router "
        "given one as a fact refuses it"
    ]


def _is_code_column(cells: list[str]) -> bool:
    """Whether a CSV column's cells are fixed-width digit codes (``02134``, ``10001``).

    :func:`parse_csv_cell` keeps a leading-zero cell as text; in a column of codes of one
    width with at least one such cell, the cells without a leading zero are codes too.
    """
    written = [c.strip() for c in cells if c.strip()]
    if not written or not any(c.startswith("0") for c in written):
        return False
    width = len(written[0])
    return width > 1 and all(len(c) == width and c.isascii() and c.isdigit() for c in written)


def _mixed_note(column: str, rows: list[Any], parsed: list[tuple[str, Any]]) -> str | None:
    """The note for a CSV text column that also holds booleans, numbers, lists or objects."""
    present = [(i, kind) for i, (kind, _) in enumerate(parsed) if kind != "null"]
    counts = Counter(kind for _, kind in present)
    if set(counts) <= {"str"}:
        return None
    first, first_kind = present[0]
    odd = next(i for i, kind in present if kind != first_kind)
    mix = ", ".join(f"{kind} in {n} row{'s' if n > 1 else ''}" for kind, n in counts.items())
    cell = rows[odd][6][column]
    return (
        f"{rows[odd][0]}, row {rows[odd][1]}, column {column!r}: the column mixes kinds ({mix}): "
        f"{parsed[odd][0]} {_short(cell)} here, {first_kind} {_short(rows[first][6][column])} "
        f"at row {rows[first][1]}; read as text, every cell as written (declare the fact's type "
        "to check it)"
    )


def _settle_column(
    column: str,
    rows: list[Any],
    is_csv: bool,
    declared: str | None,
    spec: FactSpec | None = None,
) -> tuple[str, list[tuple[int, str]], str | None]:
    """Decide a fact column's type, convert its values in place, return the bad rows.

    ``spec`` is the column's declaration in a facts schema (checked whole: ``enum``,
    bounds, required) when there is one. Also returns a note for a CSV column read as text
    whose cells mix kinds (see :func:`_mixed_note`), else ``None``.
    """
    problems: list[tuple[int, str]] = []
    if is_csv:
        if declared == "str":  # kept as written: not read as JSON or a number at all
            parsed: list[tuple[str, Any]] = [("str", r[6][column]) for r in rows]
        else:  # safe to parse: pass 1 refused the cells parse_csv_cell reads unsafely
            parsed = [parse_csv_cell(r[6][column]) for r in rows]
    else:
        parsed = [(json_kind(v), v) for v in (r[6].get(column) for r in rows)]

    if declared is not None:
        check = spec if spec is not None else FactSpec(name=column, type=declared, nullable=True)
        required = spec is not None and spec.required
        for i, (kind, value) in enumerate(parsed):
            raw = rows[i][6].get(column)
            if is_csv and declared == "str":
                value = raw if raw.strip() else None
                kind = "str" if value is not None else "null"
            value, reason = check_fact_value(
                check, kind, value, raw if is_csv else value, required=required
            )
            if reason is not None:
                problems.append((i, reason))
                continue
            rows[i][6][column] = value
        return declared, problems, None

    counts = Counter(k for k, _ in parsed if k != "null")
    if not counts:
        for r in rows:
            r[6][column] = None
        return "null", problems, None
    if "int" in counts and "number" in counts:
        counts["number"] += counts.pop("int")
    best = max(counts.values())
    tied = [k for k in counts if counts[k] == best]  # Counter keeps first-seen order
    if is_csv and "str" in tied:
        kind_ = "str"
    else:
        kind_ = tied[0]
    codes = is_csv and kind_ in ("str", "int") and _is_code_column([r[6][column] for r in rows])
    if is_csv and (kind_ == "str" or codes):
        # CSV has no types: a text column keeps every cell as written.
        note = None if codes else _mixed_note(column, rows, parsed)
        for r in rows:
            cell = r[6][column]
            r[6][column] = cell if cell.strip() else None
        return "str", problems, note
    for i, (kind, value) in enumerate(parsed):
        if kind_ok(kind_, kind):
            rows[i][6][column] = value
        else:
            shown = rows[i][6][column] if is_csv else value
            problems.append(
                (
                    i,
                    f"expected {kind_} like the other rows of this column, got {kind} {_short(shown)}",
                )
            )
    return kind_, problems, None
