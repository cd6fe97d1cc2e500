"""CSV cells that a spreadsheet cannot run: formula escaping for every CSV hybridroute writes.

A spreadsheet treats a cell that starts with ``=``, ``+``, ``-``, ``@``, a tab or a
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

__all__ = ["escape_formula", "unescape_formula"]

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
