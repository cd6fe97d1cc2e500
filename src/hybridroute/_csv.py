"""CSV cells: how a fact cell is read, and text cells that a spreadsheet cannot run.

Reading: :func:`parse_csv_cell` reads a cell as the JSON value it spells (the dataset
loaders, ``datasets validate`` and the streamed evaluation all read fact columns this
way), and :func:`json_kind` names the JSON kind of a value as error messages do.

Writing: formula escaping for every CSV hybridroute writes. A spreadsheet treats a cell that starts with ``=``, ``+``, ``-``, ``@``, a tab or a
carriage return as a formula (``=cmd|' /C calc'!A0``, ``=HYPERLINK(...)``), so a ticket
text can run code on the machine of whoever opens an exported file. Following the OWASP
guidance on CSV injection, such a text cell is written with a leading apostrophe, which
spreadsheets show as plain text.

The escaping is reversible: a cell that already starts with an apostrophe followed by
what would need escaping gets one more apostrophe, so :func:`unescape_formula` of
:func:`escape_formula` gives back every string exactly, and the dataset loaders undo it
(an exported set loads back with the same fingerprint). Writers pass text cells only:
a fact written as a JSON number (``-5``) is a number to a spreadsheet, not a formula.
"""

from __future__ import annotations

import math
import re
from typing import Any

from ._safeio import MAX_INT_DIGITS, parse_json
from .exceptions import InputError

__all__ = ["escape_formula", "json_kind", "parse_csv_cell", "unescape_formula"]

_TRIGGERS = ("=", "+", "-", "@", "\t", "\r")


def _needs_escape(text: str) -> bool:
    i = 0
    while i < len(text) and text[i] == "'":
        i += 1
    return text[i : i + 1] in _TRIGGERS and text[i : i + 1] != ""


def escape_formula(text: str) -> str:
    """``text`` as a CSV cell a spreadsheet shows as text (an apostrophe added if needed)."""
    return "'" + text if _needs_escape(text) else text


def unescape_formula(text: str) -> str:
    """Undo :func:`escape_formula` (a cell it did not escape is returned unchanged)."""
    if text.startswith("'") and _needs_escape(text[1:]):
        return text[1:]
    return text


# --------------------------------------------------------------------------- reading

_INT_RE = re.compile(r"^[+-]?(?:0|[1-9][0-9]*)$")
_LEADING_ZERO_RE = re.compile(r"^[+-]?0[0-9]")
_FLOAT_RE = re.compile(r"^[+-]?(?:[0-9]+\.[0-9]*|\.[0-9]+|[0-9]+)(?:[eE][+-]?[0-9]+)?$")


def json_kind(value: Any) -> str:
    """The JSON kind of a value as error messages name it (``null``, ``int``, ``object``...)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "str"
    if isinstance(value, list):
        return "list"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def parse_csv_cell(cell: str) -> tuple[str, Any]:
    """A CSV cell read as the JSON value it spells: ``(kind, value)``.

    Empty is ``null``; ``true``/``false`` (any case) are booleans; integers and decimals
    are numbers, except that a leading zero (``02134``) keeps a code as text; a cell
    starting with ``[`` or ``{`` that parses as JSON is that list or object. Anything
    else is the cell's text, unchanged. The dataset loaders and the streamed evaluation
    both read fact columns this way.

    Raises
    ------
    InputError
        For a cell that would be read unsafely: JSON with duplicate keys, nesting too deep,
        ``NaN`` or a lone surrogate (:func:`hybridroute._safeio.parse_json`), an integer of
        more than :data:`~hybridroute._safeio.MAX_INT_DIGITS` digits, or a number too large
        for a float (``1e400``). ``reason`` says which, for the caller to name row and column.
    """
    s = cell.strip()
    if not s:
        return "null", None
    low = s.lower()
    if low == "true":
        return "bool", True
    if low == "false":
        return "bool", False
    if _LEADING_ZERO_RE.match(s):
        return "str", cell  # 02134 is a code (zip, account), not a number
    if _INT_RE.match(s):
        digits = len(s.lstrip("+-"))
        if digits > MAX_INT_DIGITS:
            raise InputError(
                f"the cell holds an integer with {digits:,} digits (the limit is {MAX_INT_DIGITS})"
            )
        return "int", int(s)
    if _FLOAT_RE.match(s):
        value = float(s)
        if not math.isfinite(value):
            raise InputError(f"the cell holds a number too large for a float ({s[:40]})")
        return "number", value
    if s[0] in "[{":
        try:
            parsed = parse_json(s, what="JSON value")
        except InputError as exc:
            if exc.reason.startswith("not valid "):
                return "str", cell  # not JSON at all: the cell's text, as always
            raise InputError(f"the cell {exc.reason}") from None
        return json_kind(parsed), parsed
    return "str", cell
