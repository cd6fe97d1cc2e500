"""The checks of one labelled row, shared by the dataset loaders and the streamed evaluation.

:func:`hybridroute.datasets.load_dataset` validates a whole labelled set in memory and
:class:`hybridroute.evaluation.LabelledStream` reads one row at a time; both check each
row with these functions, so a row one refuses the other refuses with the same words.
Checks that need every row (duplicate ids, one text with two labels, the type of an
undeclared fact column) stay with the loaders.

Each check raises :class:`RowProblem` (the column as the user wrote it, and why); the
caller turns it into a :class:`~hybridroute.exceptions.DatasetError` naming file and row,
or into a skipped row. A fact value is checked against its declaration in a facts schema
(type, ``enum``, ``min`` / ``max``, required) by :func:`check_fact_value`, which returns
the reason instead (the loaders check a whole column before they raise).

A neutral leaf: it imports only :mod:`hybridroute._safeio`, :mod:`hybridroute._csv` and
:mod:`hybridroute.exceptions` (a :class:`~hybridroute.contracts.FactSpec` is only read),
so the datasets package and the evaluation package (which may not import each other) can
both import it.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ._csv import json_kind, parse_csv_cell
from ._safeio import describe_bad_char, first_bad_string, parse_json
from .exceptions import FactsError, InputError

if TYPE_CHECKING:  # pragma: no cover
    from ._facts import FactSchema, FactSpec

__all__ = [
    "ANNOTATION_COLUMNS",
    "CORE_COLUMNS",
    "DEFAULT_MAX_TEXT_CHARS",
    "FACTS_KEY",
    "REQUIRED_MISSING",
    "RESERVED_COLUMNS",
    "SPLIT_ALIASES",
    "SPLIT_ORDER",
    "RowProblem",
    "check_chars",
    "check_csv_cell",
    "check_deep",
    "check_fact_value",
    "first_missing_required",
    "has_bad_bytes",
    "json_facts",
    "kind_ok",
    "known_splits_hint",
    "missing_required",
    "name_list",
    "normalise_split",
    "read_annotation",
    "read_id",
    "read_label",
    "read_split",
    "read_text",
    "short",
]

#: The columns every labelled-set frame starts with.
CORE_COLUMNS = ("id", "text", "label", "split")
#: Optional per-row annotations, kept after the facts (never treated as facts).
ANNOTATION_COLUMNS = ("next_step", "destination", "evidence", "tags")
#: The JSONL key that holds nested facts.
FACTS_KEY = "facts"
#: Names that are never facts.
RESERVED_COLUMNS = frozenset(CORE_COLUMNS) | frozenset(ANNOTATION_COLUMNS) | {FACTS_KEY}
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

#: What ``surrogateescape`` decoding makes of a byte that is not UTF-8.
_UNDECODED_RE = re.compile("[\udc80-\udcff]")
_BAD_BYTES = "holds bytes that are not valid UTF-8"


class RowProblem(Exception):
    """A problem with one cell of one row: the column, and why."""

    def __init__(self, column: str | None, reason: str) -> None:
        super().__init__(reason)
        self.column = column
        self.reason = reason


# --------------------------------------------------------------------------- split names


def normalise_split(name: str) -> str:
    """The canonical spelling of a split name (``val`` → ``validation``...)."""
    key = name.strip().lower()
    return SPLIT_ALIASES.get(key, key)


def known_splits_hint() -> str:
    """``"the known splits are train, validation, ... (or val, ...)"``, for messages."""
    return f"the known splits are {', '.join(SPLIT_ORDER)} (or {', '.join(SPLIT_ALIASES)})"


# --------------------------------------------------------------------------- characters


def short(value: Any, limit: int = 60) -> str:
    """``repr(value)``, cut to ``limit`` characters for a message."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def has_bad_bytes(value: str) -> bool:
    """Whether ``value`` carries bytes that were not valid UTF-8 (read with
    ``surrogateescape``, they are lone surrogates ``\\udc80``-``\\udcff``)."""
    return _UNDECODED_RE.search(value) is not None


def check_chars(column: str | None, what: str, value: str) -> None:
    """Refuse a string holding NUL, or bytes that were not UTF-8 (kept as surrogates).

    A NUL makes two strings look equal to a person but not to a program (a risk rule's
    ``delete_account_data`` vs ``delete_account_data\\x00``); an undecodable byte cannot be
    written back as UTF-8. Either is named with its column.
    """
    problem = describe_bad_char(value)
    if problem is None:
        return
    if "\x00" not in value and has_bad_bytes(value):
        raise RowProblem(column, f"{what} {_BAD_BYTES}")
    raise RowProblem(column, f"{what} {problem}")


def check_deep(column: str | None, what: str, value: Any) -> None:
    """:func:`check_chars` on every string in a JSON value, object keys included."""
    found = first_bad_string(value)
    if found is not None:
        check_chars(column, f"{what} (a key)" if found[1] else what, found[0])


def check_csv_cell(column: str, cell: str) -> tuple[str, Any]:
    """A CSV fact cell read by :func:`~hybridroute._csv.parse_csv_cell` as ``(kind, value)``,
    refusing what it reads unsafely (JSON with duplicate keys, deep nesting or NaN, a huge
    integer, ``1e400``)."""
    try:
        return parse_csv_cell(cell)
    except InputError as exc:
        raise RowProblem(column, exc.reason) from None


# --------------------------------------------------------------------------- cells


def read_id(value: Any, column: str) -> str:
    """A row id: a non-blank string or an integer, as a string."""
    if value is None or (isinstance(value, str) and not value.strip()):
        raise RowProblem(column, "missing id")
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise RowProblem(
            column, f"expected a string or integer id, got {json_kind(value)} {short(value)}"
        )
    if isinstance(value, str):
        check_chars(column, "the id", value)
        return value.strip()
    return str(value)


def read_text(value: Any, column: str, max_chars: int) -> str:
    """The text of a row: present, a string, clean, not blank, at most ``max_chars`` long."""
    if value is None:
        raise RowProblem(column, "no text: the field is missing")
    if not isinstance(value, str):
        raise RowProblem(column, f"expected a string, got {json_kind(value)} {short(value)}")
    check_chars(column, "the text", value)
    if not value.strip():
        raise RowProblem(column, "the text is empty or whitespace only")
    if len(value) > max_chars:
        raise RowProblem(
            column, f"the text is {len(value):,} characters long (limit {max_chars:,})"
        )
    return value


def read_label(value: Any, column: str, label_set: Collection[str] | None = None) -> str:
    """The label of a row: a non-blank string or an integer (as a string), in ``label_set``
    when one is given."""
    if value is None:
        raise RowProblem(column, "missing label")
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise RowProblem(column, f"expected a string label, got {json_kind(value)} {short(value)}")
    if isinstance(value, int):
        label = str(value)
    else:
        check_chars(column, "the label", value)
        label = value.strip()
        if not label:
            raise RowProblem(column, "missing label (the cell is empty)")
    if label_set is not None and label not in label_set:
        shown = ", ".join(sorted(label_set)[:12])
        more = "" if len(label_set) <= 12 else f", ... ({len(label_set)} in all)"
        raise RowProblem(
            column, f"label {label!r} is not in the declared label set ({shown}{more})"
        )
    return label


def read_split(value: Any, column: str, *, required: bool = True) -> str | None:
    """The canonical split name of a row (an alias read as its name).

    A missing or blank split is an error when ``required`` (a loaded set's split column
    has one on every row), else ``None`` (a streamed row may carry none).
    """
    if value is None:
        if required:
            raise RowProblem(column, "missing split")
        return None
    if not isinstance(value, str):
        raise RowProblem(column, f"expected a split name, got {json_kind(value)} {short(value)}")
    check_chars(column, "the split", value)
    split = normalise_split(value)
    if not split:
        if required:
            raise RowProblem(column, "missing split (the cell is empty)")
        return None
    if split not in SPLIT_ORDER:
        raise RowProblem(
            column,
            f"unknown split {short(value.strip(), 40)}; {known_splits_hint()}: rows of "
            "any other split would be left out of training and testing",
        )
    return split


def read_annotation(column: str, value: Any, is_csv: bool) -> Any:
    """An annotation cell (``next_step``, ``destination``, ``evidence``, ``tags``).

    ``next_step`` / ``destination`` are a string or null; ``tags`` a list of strings (in
    CSV also ``a;b``); ``evidence`` any JSON value. In CSV a cell that starts with ``[``
    or ``{`` is read as JSON.
    """
    if is_csv:
        if value is None or not value.strip():
            return None
        check_chars(column, "the value", value)
        s = value.strip()
        if column in ("next_step", "destination"):
            return s
        if s[0] in "[{":
            try:
                parsed = parse_json(s)
            except InputError as exc:
                raise RowProblem(column, exc.reason) from None
        elif column == "tags":
            parsed = [t.strip() for t in s.split(";") if t.strip()]
        else:
            parsed = s
        value = parsed
    else:
        check_deep(column, "the value", value)
    if value is None:
        return None
    if column in ("next_step", "destination"):
        if not isinstance(value, str):
            raise RowProblem(
                column, f"expected a string or null, got {json_kind(value)} {short(value)}"
            )
        return value.strip() or None
    if column == "tags" and not (
        isinstance(value, list) and all(isinstance(t, str) for t in value)
    ):
        raise RowProblem(
            column, f"expected a list of strings, got {json_kind(value)} {short(value)}"
        )
    return value


def json_facts(rec: Mapping[str, Any], skip: Collection[str]) -> dict[str, Any]:
    """The facts of a JSON row: the nested ``facts`` object and the top-level keys not in
    ``skip`` (the row's text / label / split / id keys and its annotations).

    A fact may not take a reserved name, nor be given both at the top level and inside
    ``facts``; names and values are checked with :func:`check_deep`; an empty or blank
    string is an absent fact (``None``), as an empty CSV cell is.
    """
    facts: dict[str, Any] = {}
    nested = rec.get(FACTS_KEY)
    if nested is not None:
        if not isinstance(nested, dict):
            raise RowProblem(FACTS_KEY, f"expected a JSON object of facts, got {json_kind(nested)}")
        for k, v in nested.items():
            if k in RESERVED_COLUMNS:
                raise RowProblem(
                    f"{FACTS_KEY}.{k}", f"a fact cannot be named {k!r} (a reserved column)"
                )
            facts[k] = v
    for k, v in rec.items():
        if k in skip or k == FACTS_KEY:
            continue
        if k in RESERVED_COLUMNS:
            raise RowProblem(k, f"a fact cannot be named {k!r} (a reserved column)")
        if k in facts:
            raise RowProblem(k, f"given both at the top level and inside {FACTS_KEY!r}")
        facts[k] = v
    for k, v in facts.items():
        check_chars(k, "the fact name", k)
        check_deep(k, "the value", v)
    for k, v in facts.items():
        if isinstance(v, str) and not v.strip():
            facts[k] = None  # an empty fact is an absent one, as in a CSV cell
    return facts


# --------------------------------------------------------------------------- facts


def name_list(names: Sequence[str], limit: int = 12) -> str:
    """``"a, b, c"`` (the first ``limit`` names, then how many in all), or ``"none"``."""
    if not names:
        return "none"
    more = "" if len(names) <= limit else f", ... ({len(names)} in all)"
    return ", ".join(names[:limit]) + more


def kind_ok(expected: str, kind: str) -> bool:
    """Whether a value of JSON kind ``kind`` (:func:`~hybridroute._csv.json_kind`) may stand
    in a column of kind ``expected``: the same kind, an absent value, or an integer where
    numbers are expected."""
    return kind == "null" or kind == expected or (expected == "number" and kind == "int")


#: The JSON kind (:func:`json_kind`) of the values of each list fact type.
_LIST_TYPES = {"list[str]": "list", "list[number]": "list"}
#: The reason a required fact (one the schema gives no default) is refused when absent.
REQUIRED_MISSING = "a required fact is missing (the facts schema gives it no default)"


def check_fact_value(
    spec: FactSpec, kind: str, value: Any, shown: Any, *, required: bool = False
) -> tuple[Any, str | None]:
    """One fact value of a labelled row checked against its declaration.

    The one fact check of labelled rows: the loaders, :meth:`~hybridroute.datasets.
    LabelledSet.check_facts` and :class:`~hybridroute.evaluation.LabelledStream` all
    check facts here, so a value one refuses the others refuse with the same words
    (declared type, ``enum``, ``min`` / ``max``, a required fact left out).

    Parameters
    ----------
    spec : FactSpec
        The fact's declaration (:class:`~hybridroute.contracts.FactSpec`).
    kind : str
        The value's :func:`~hybridroute._csv.json_kind`.
    value : object
        The value as read; ``None`` for an absent fact (an empty cell, a missing key,
        ``null``).
    shown : object
        What the message quotes (the CSV cell as written).
    required : bool, default False
        Whether the fact must be present (a schema fact without a default). An absent
        fact that is not required is fine: a routed row would take the default. A set
        holds ``None`` (written as ``null``) for an unset fact, which the router reads as
        :meth:`~hybridroute.contracts.FactSchema.validate` does: not given, unless the
        fact is declared ``nullable`` (then ``null`` is its value, required or not).

    Returns
    -------
    tuple
        ``(value, None)`` with the value as the set keeps it (canonical: ``1.0`` of a
        ``number`` fact is ``1``, lists are lists), or ``(None, reason)``.
    """
    if value is None:
        return None, (REQUIRED_MISSING if required and not spec.nullable else None)
    try:
        out = spec.check(value)
    except FactsError as exc:
        if not kind_ok(_LIST_TYPES.get(spec.type, spec.type), kind):
            return None, f"expected {spec.type}, got {kind} {short(shown)}"
        text, prefix = str(exc), f"fact {spec.name!r}: "
        return None, text[len(prefix) :] if text.startswith(prefix) else text
    if isinstance(out, tuple):
        return list(value), None
    if isinstance(out, Mapping):
        return value, None  # the object as read (the check's copy is read-only)
    return out, None


def missing_required(schema: FactSchema, fact_cols: Sequence[str]) -> list[tuple[str, str]]:
    """``(fact, reason)`` for each required fact of ``schema`` (no default) that is not
    among ``fact_cols``: no row of the set could be routed."""
    return [
        (
            spec.name,
            "a required fact (the facts schema gives it no default) is not a fact column "
            f"(fact columns: {name_list(fact_cols)})",
        )
        for spec in schema.specs
        if spec.required and spec.name not in fact_cols
    ]


def first_missing_required(schema: FactSchema, fact_cols: Sequence[str]) -> tuple[str, str] | None:
    """``(fact, reason)`` for the first required fact of ``schema`` that is no fact column
    (the reason naming the others too), or ``None``: a file without it is refused whole."""
    missing = missing_required(schema, fact_cols)
    if not missing:
        return None
    column, reason = missing[0]
    if len(missing) > 1:
        reason += f"; nor are {', '.join(repr(c) for c, _ in missing[1:])}"
    return column, reason
