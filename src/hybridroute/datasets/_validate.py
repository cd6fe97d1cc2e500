"""Row-by-row validation of raw records into the labelled-set frame.

Every problem is located: the error (or the skip report) names the file, the row and
the column as the user wrote them. Checks, in the order they run:

1. per row: id, text (present, a string, valid UTF-8 without NUL characters, not blank,
   not absurdly long), label (present, a string or integer, inside the declared label
   set), split (one of :data:`SPLIT_ORDER`, or an alias of one), annotations
   (``next_step``, ``destination``, ``evidence``, ``tags``), fact cells (no NUL character
   or invalid UTF-8 in any string, names included; in CSV, no cell that would read as
   JSON with duplicate keys, deep nesting or ``NaN``, as an integer of more than 64
   digits, or as a number too large for a float);
2. per fact column: every value has the column's type (declared, or else the type most
   rows have); an empty or blank string counts as an absent fact (``None``), in JSONL as in
   CSV, so the two formats read alike;
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

from .._safeio import describe_bad_char, first_bad_string, parse_json
from ..contracts import FactSchema, FactSpec, json_kind, parse_csv_cell
from ..exceptions import DatasetError, FactsError, InputError
from ._io import RawTable, has_bad_bytes

#: The columns every labelled-set frame starts with.
CORE_COLUMNS = ("id", "text", "label", "split")
#: Optional per-row annotations, kept after the facts (never treated as facts).
ANNOTATION_COLUMNS = ("next_step", "destination", "evidence", "tags")
#: The JSONL key that holds nested facts.
FACTS_KEY = "facts"
#: The split names a labelled set may use, in the order they are listed. Any other name
#: in a file is an error (naming the row): the commands that train, calibrate and test
#: select these splits by name, so rows in a split named otherwise would silently be
#: left out of all of them.
SPLIT_ORDER = ("train", "validation", "calibration", "test")
#: Spellings of split names that are read as the canonical name.
SPLIT_ALIASES = {
    "val": "validation",
    "valid": "validation",
    "dev": "validation",
    "calib": "calibration",
}
#: The default limit on the length of one text.
DEFAULT_MAX_TEXT_CHARS = 10_000

_RESERVED = frozenset(CORE_COLUMNS) | frozenset(ANNOTATION_COLUMNS) | {FACTS_KEY}


class SkippedRow(NamedTuple):
    """One row left out by ``on_error="skip"``: where, and why."""

    row: int
    column: str | None
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


class _Bad(Exception):
    """A problem with one cell (internal; becomes a DatasetError or a SkippedRow)."""

    def __init__(self, column: str | None, reason: str) -> None:
        super().__init__(reason)
        self.column = column
        self.reason = reason


# --------------------------------------------------------------------------- value helpers


def normalise_split(name: str) -> str:
    """The canonical spelling of a split name (``val`` → ``validation``...)."""
    key = name.strip().lower()
    return SPLIT_ALIASES.get(key, key)


def text_key(text: str) -> str:
    """The key under which two texts count as "the same text" (case and spacing ignored)."""
    return " ".join(text.split()).casefold()


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


_BAD_BYTES = "holds bytes that are not valid UTF-8"


def _check_chars(column: str | None, what: str, value: str) -> None:
    """Refuse a string holding NUL, or bytes that were not UTF-8 (kept as surrogates).

    A NUL makes two strings look equal to a person but not to a program (a risk rule's
    ``delete_account_data`` vs ``delete_account_data\\x00``); an undecodable byte cannot be
    written back as UTF-8. Either is named with its row and column.
    """
    problem = describe_bad_char(value)
    if problem is None:
        return
    if has_bad_bytes(value) and "\x00" not in value:
        raise _Bad(column, f"{what} {_BAD_BYTES}")
    raise _Bad(column, f"{what} {problem}")


def _check_deep(column: str | None, what: str, value: Any) -> None:
    """:func:`_check_chars` on every string in a JSON value, object keys included."""
    found = first_bad_string(value)
    if found is not None:
        _check_chars(column, f"{what} (a key)" if found[1] else what, found[0])


def _check_csv_cell(column: str, cell: str) -> None:
    """Refuse a CSV fact cell that :func:`~hybridroute.contracts.parse_csv_cell` refuses
    (JSON with duplicate keys, deep nesting or NaN, a huge integer, ``1e400``)."""
    try:
        parse_csv_cell(cell)
    except InputError as exc:
        raise _Bad(column, exc.reason) from None


def fact_types_from(spec: Mapping[str, str] | FactSchema | None) -> dict[str, str] | None:
    """Declared fact types as ``{name: type}`` from a mapping or a :class:`FactSchema`."""
    if spec is None:
        return None
    if isinstance(spec, FactSchema):
        return {s.name: s.type for s in spec.specs}
    out = {}
    for name, type_ in spec.items():
        FactSpec(name=str(name), type=str(type_), nullable=True)  # validates the type name
        out[str(name)] = str(type_)
    return out


# --------------------------------------------------------------------------- build


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
    else:
        fact_cols_csv = []

    if not raw.records and not raw.row_errors:
        what = "the file has a header but no data rows" if is_csv else "the file has no data rows"
        raise DatasetError(what, path=path)

    skipped: list[SkippedRow] = []
    pending = sorted(raw.row_errors, key=lambda e: e.row or 0)
    if not raising:
        skipped.extend(SkippedRow(e.row or 0, e.column, _reason(e)) for e in pending)
        pending = []

    label_set = opt.label_set
    max_chars = opt.max_text_chars
    make_id = opt.make_id
    declared_types = dict(opt.fact_types or {})

    # ---------------------------------------------------------------- pass 1: each row
    rows: list[tuple[str, int, str, str, str, str | None, dict[str, Any], dict[str, Any]]] = []
    for rpath, row, rec in raw.records:
        if pending and (pending[0].row or 0) < row:
            raise pending[0]
        try:
            # id
            if id_col is not None:
                rid = _read_id(rec.get(id_col), id_col)
            else:
                rid = make_id(rpath, row) if make_id is not None else str(row)
            # text
            text = rec.get(text_col, _MISSING)
            if text is _MISSING or text is None:
                raise _Bad(text_col, "no text: the field is missing")
            if not isinstance(text, str):
                raise _Bad(text_col, f"expected a string, got {json_kind(text)} {_short(text)}")
            _check_chars(text_col, "the text", text)
            if not text.strip():
                raise _Bad(text_col, "the text is empty or whitespace only")
            if len(text) > max_chars:
                raise _Bad(
                    text_col, f"the text is {len(text):,} characters long (limit {max_chars:,})"
                )
            # label
            label = _read_label(rec.get(label_col), label_col)
            if label_set is not None and label not in label_set:
                shown = ", ".join(sorted(label_set)[:12])
                more = "" if len(label_set) <= 12 else f", ... ({len(label_set)} in all)"
                raise _Bad(
                    label_col, f"label {label!r} is not in the declared label set ({shown}{more})"
                )
            # split
            split: str | None = None
            if split_col is not None:
                split = _read_split(rec.get(split_col), split_col)
            # facts
            if is_csv:
                facts = {}
                for c in fact_cols_csv:
                    cell = rec[c]
                    _check_chars(c, "the value", cell)
                    if declared_types.get(c) != "str":
                        _check_csv_cell(c, cell)
                    facts[c] = cell
            else:
                facts = _json_facts(rec, role_columns, annotation_cols)
            # annotations
            notes_: dict[str, Any] = {}
            for c in annotation_cols:
                notes_[c] = _read_annotation(c, rec.get(c), is_csv)
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

    # ---------------------------------------------------------------- pass 2: fact columns
    if is_csv:
        fact_cols = list(fact_cols_csv)
    else:
        seen_cols: dict[str, None] = {}
        for r in rows:
            for k in r[6]:
                seen_cols.setdefault(k, None)
        fact_cols = list(seen_cols)
    declared = dict(opt.fact_types or {})
    if opt.declared_must_exist:
        for name in declared:
            if name not in fact_cols:
                raise DatasetError(
                    "a declared fact is not a column of the file "
                    f"(fact columns: {', '.join(fact_cols) or 'none'})",
                    path=path,
                    row=header_row,
                    column=name,
                )
    fact_types: dict[str, str] = {}
    bad_rows: dict[int, tuple[str, str]] = {}
    for c in fact_cols:
        type_, problems = _settle_column(c, rows, is_csv, declared.get(c))
        fact_types[c] = type_
        for idx, reason in problems:
            bad_rows.setdefault(idx, (c, reason))
    if bad_rows:
        if raising:
            idx = min(bad_rows)
            c, reason = bad_rows[idx]
            raise DatasetError(reason, path=rows[idx][0], row=rows[idx][1], column=c)
        for idx in sorted(bad_rows):
            c, reason = bad_rows[idx]
            skipped.append(SkippedRow(rows[idx][1], c, reason))
        rows = [r for i, r in enumerate(rows) if i not in bad_rows]

    # ---------------------------------------------------------------- pass 3: across rows
    notes: list[str] = []
    first_id: dict[str, int] = {}
    first_text: dict[str, tuple[str, int, str]] = {}
    kept: list[Any] = []
    for r in rows:
        rpath, row, rid, text, label = r[0], r[1], r[2], r[3], r[4]
        try:
            if rid in first_id:
                raise _Bad(
                    id_col or "id", f"duplicate id {rid!r} (first given at row {first_id[rid]})"
                )
            key = text_key(text)
            prior = first_text.get(key)
            if prior is not None and prior[2] != label:
                where = f"row {prior[1]}" if prior[0] == rpath else f"{prior[0]}, row {prior[1]}"
                msg = f"the same text is labelled {prior[2]!r} at {where} and {label!r} here"
                if not opt.allow_conflicts:
                    raise _Bad(label_col, msg)
                notes.append(f"{rpath}, row {row}, column {label_col!r}: {msg} (kept as published)")
        except _Bad as bad:
            if raising:
                raise DatasetError(bad.reason, path=rpath, row=row, column=bad.column) from None
            skipped.append(SkippedRow(row, bad.column, bad.reason))
            continue
        first_id[rid] = row
        first_text.setdefault(key, (rpath, row, label))
        kept.append(r)
    rows = kept
    skipped.sort(key=lambda s: s.row)

    # ---------------------------------------------------------------- whole-set checks
    if not rows:
        first = skipped[0]
        where = f"row {first.row}" + (f", column {first.column!r}" if first.column else "")
        raise DatasetError(
            f"no valid rows: all {len(skipped)} rows were skipped (first: {where}: {first.reason})",
            path=path,
        )
    distinct = {r[4] for r in rows}
    if len(distinct) < 2:
        (only,) = distinct
        raise DatasetError(
            f"every one of the {len(rows)} rows has the label {only!r}; "
            "a labelled set needs at least two classes",
            path=path,
            column=label_col,
        )

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
    frame = pd.DataFrame(data)
    return Built(frame, tuple(fact_cols), fact_types, skipped, notes)


# --------------------------------------------------------------------------- pieces

_MISSING: Any = object()


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


def _read_id(value: Any, column: str) -> str:
    if value is None or (isinstance(value, str) and not value.strip()):
        raise _Bad(column, "missing id")
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise _Bad(
            column, f"expected a string or integer id, got {json_kind(value)} {_short(value)}"
        )
    if isinstance(value, str):
        _check_chars(column, "the id", value)
        return value.strip()
    return str(value)


def _read_label(value: Any, column: str) -> str:
    if value is None or value is _MISSING:
        raise _Bad(column, "missing label")
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise _Bad(column, f"expected a string label, got {json_kind(value)} {_short(value)}")
    if isinstance(value, int):
        return str(value)
    _check_chars(column, "the label", value)
    label = value.strip()
    if not label:
        raise _Bad(column, "missing label (the cell is empty)")
    return label


def known_splits_hint() -> str:
    """``"the known splits are train, validation, ... (or val, ...)"``, for messages."""
    return f"the known splits are {', '.join(SPLIT_ORDER)} (or {', '.join(SPLIT_ALIASES)})"


def _read_split(value: Any, column: str) -> str:
    if value is None:
        raise _Bad(column, "missing split")
    if not isinstance(value, str):
        raise _Bad(column, f"expected a split name, got {json_kind(value)} {_short(value)}")
    _check_chars(column, "the split", value)
    split = normalise_split(value)
    if not split:
        raise _Bad(column, "missing split (the cell is empty)")
    if split not in SPLIT_ORDER:
        raise _Bad(
            column,
            f"unknown split {_short(value.strip(), 40)}; {known_splits_hint()}: rows of "
            "any other split would be left out of training and testing",
        )
    return split


def _json_facts(
    rec: Mapping[str, Any], role_columns: set[str], annotation_cols: list[str]
) -> dict[str, Any]:
    facts: dict[str, Any] = {}
    nested = rec.get(FACTS_KEY)
    if nested is not None:
        if not isinstance(nested, dict):
            raise _Bad(FACTS_KEY, f"expected a JSON object of facts, got {json_kind(nested)}")
        for k, v in nested.items():
            if k in _RESERVED:
                raise _Bad(f"{FACTS_KEY}.{k}", f"a fact cannot be named {k!r} (a reserved column)")
            facts[k] = v
    for k, v in rec.items():
        if k in role_columns or k in annotation_cols or k == FACTS_KEY:
            continue
        if k in _RESERVED:
            raise _Bad(k, f"a fact cannot be named {k!r} (a reserved column)")
        if k in facts:
            raise _Bad(k, f"given both at the top level and inside {FACTS_KEY!r}")
        facts[k] = v
    for k, v in facts.items():
        _check_chars(k, "the fact name", k)
        _check_deep(k, "the value", v)
    for k, v in facts.items():
        if isinstance(v, str) and not v.strip():
            facts[k] = None  # an empty fact is an absent one, as in a CSV cell
    return facts


def _read_annotation(column: str, value: Any, is_csv: bool) -> Any:
    if is_csv:
        if value is None or not value.strip():
            return None
        _check_chars(column, "the value", value)
        s = value.strip()
        if column in ("next_step", "destination"):
            return s
        if s[0] in "[{":
            try:
                parsed = parse_json(s)
            except InputError as exc:
                raise _Bad(column, exc.reason) from None
        elif column == "tags":
            parsed = [t.strip() for t in s.split(";") if t.strip()]
        else:
            parsed = s
        value = parsed
    else:
        _check_deep(column, "the value", value)
    if value is None:
        return None
    if column in ("next_step", "destination"):
        if not isinstance(value, str):
            raise _Bad(column, f"expected a string or null, got {json_kind(value)} {_short(value)}")
        return value.strip() or None
    if column == "tags" and not (
        isinstance(value, list) and all(isinstance(t, str) for t in value)
    ):
        raise _Bad(column, f"expected a list of strings, got {json_kind(value)} {_short(value)}")
    return value


def _kind_ok(expected: str, kind: str) -> bool:
    return kind == "null" or kind == expected or (expected == "number" and kind == "int")


def _settle_column(
    column: str, rows: list[Any], is_csv: bool, declared: str | None
) -> tuple[str, list[tuple[int, str]]]:
    """Decide a fact column's type, convert its values in place, return the bad rows."""
    problems: list[tuple[int, str]] = []
    if is_csv:
        if declared == "str":  # kept as written: not read as JSON or a number at all
            parsed: list[tuple[str, Any]] = [("str", r[6][column]) for r in rows]
        else:  # safe to parse: pass 1 refused the cells parse_csv_cell reads unsafely
            parsed = [parse_csv_cell(r[6][column]) for r in rows]
    else:
        parsed = [(json_kind(v), v) for v in (r[6].get(column) for r in rows)]

    if declared is not None:
        spec = FactSpec(name=column, type=declared, nullable=True)
        for i, (kind, value) in enumerate(parsed):
            raw = rows[i][6].get(column)
            if is_csv and declared == "str":
                value = raw if raw.strip() else None
            try:
                value = spec.check(value)
            except FactsError:
                shown = raw if is_csv else value
                problems.append((i, f"expected {declared}, got {kind} {_short(shown)}"))
                continue
            rows[i][6][column] = list(value) if isinstance(value, tuple) else value
        return declared, problems

    counts = Counter(k for k, _ in parsed if k != "null")
    if not counts:
        for r in rows:
            r[6][column] = None
        return "null", problems
    if "int" in counts and "number" in counts:
        counts["number"] += counts.pop("int")
    best = max(counts.values())
    tied = [k for k in counts if counts[k] == best]  # Counter keeps first-seen order
    if is_csv and "str" in tied:
        kind_ = "str"
    else:
        kind_ = tied[0]
    if is_csv and kind_ == "str":
        # CSV has no types: a text column keeps every cell as written.
        for r in rows:
            cell = r[6][column]
            r[6][column] = cell if cell.strip() else None
        return "str", problems
    for i, (kind, value) in enumerate(parsed):
        if _kind_ok(kind_, kind):
            rows[i][6][column] = value
        else:
            shown = rows[i][6][column] if is_csv else value
            problems.append(
                (
                    i,
                    f"expected {kind_} like the other rows of this column, got {kind} {_short(shown)}",
                )
            )
    return kind_, problems
