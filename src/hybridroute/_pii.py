"""Redaction of personal data in free text: emails, payment cards, IBANs, phone numbers.

A :class:`PIIRedaction` names the kinds to redact; :meth:`PIIRedaction.redact` replaces
each one found by its token (``[EMAIL]``, ``[IBAN]``, ``[CARD]``, ``[PHONE]``). The router
applies it to a text *before* anything else sees it (the classifier, the input snapshot
and its hash, the decision log, replay), so the same redacted text is everywhere.

What counts as each kind (decided here, pinned by the tests):

* **email** -- ``local@domain.tld``: the local part may hold letters, digits and
  ``. _ % + ' -`` (plus-addressing), the domain one or more dot-separated labels
  (subdomains) ending in an alphabetic top-level domain of two letters or more.
* **iban** -- a country code, two check digits and the account number, contiguous or in
  space-separated groups (the printed form), upper or lower case, whose length is the one
  registered for its country, holding at least ten digits, and whose ISO 13616 mod-97
  check holds. A country code outside the registry is not an IBAN (so a flight number
  followed by a few words, ``ab123 and my luggage``, cannot pass by chance).
* **card** -- 13 to 19 digits, contiguous or in groups separated by single spaces or
  dashes (``4111 1111 1111 1111``, ``3782-822463-10005``), starting with 2-6 (the
  payment-card industries), whose Luhn check holds. A number that fails the Luhn check,
  a 20-digit or longer digit run, a number glued to letters (``ORD4111...``) or written
  after ``#`` (an order id) is kept. The groups are read as written: a card followed by
  more digit groups (``4111 1111 1111 1111 12/27``) loses only the card.
* **phone** -- a number written the way phone numbers are: international with a ``+``
  (``+44 20 7946 0958``, ``+1-202-555-0143``, ``+4930123456``) or a separated ``00``
  prefix (``0044 20 7946 0958``), 8-15 digits; North American with separators
  (``(555) 123-4567``, ``555-123-4567``, ``555.123.4567``, ``1-800-555-0199``; the area
  code starts with 2-9); or national with a trunk ``0`` and separators (``020 7946 0958``,
  ``07700 900123``, ``01 23 45 67 89``), 9-12 digits. A run of digits *without*
  separators is never a phone number unless it starts with ``+`` (order numbers, amounts
  and codes are bare digit runs), and a number that is part of a longer sequence of digit
  groups (IBAN digits, card-like groups), glued to letters, after ``#``, a currency sign
  or a decimal point, or shaped like a date (``01.02.2024``, ``2024-01-15``) or a time
  (``10:30``) is kept.

Kinds are redacted in a fixed order -- email, iban, card, phone -- so an IBAN's digits are
gone before cards and phones are looked for. Redaction is idempotent: the tokens hold no
digit and no ``@``, and every pass reads a number as the whole run of groups it sits in,
so redacting a redacted text changes nothing (replaying a stored record gives the same
snapshot hash). Every pattern is compiled once, opens with a character class (so the
regex engine skips impossible starting points in C), checks its boundaries with
look-behinds and uses possessive quantifiers, and an email is found from its ``@``: the
cost is linear in the text's length, and a text without ``@`` or without a digit skips the
passes that need one (``benchmarks/bench_pii.py`` measures it per text).

Not covered: names, postal addresses, national identity, passport or tax numbers, dates
of birth, card numbers written with other separators (dots, slashes), phone numbers
written as one bare run of digits without ``+``, and anything a rule would need (rules
read facts, never the text).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from .exceptions import UserInputError

__all__ = ["PII_KINDS", "PII_TOKENS", "PIIRedaction", "iban_valid", "luhn_valid"]

#: The kinds of personal data that can be redacted, in the order they are redacted.
PII_KINDS: tuple[str, ...] = ("email", "iban", "card", "phone")
#: The token that replaces each kind.
PII_TOKENS: dict[str, str] = {
    "email": "[EMAIL]",
    "iban": "[IBAN]",
    "card": "[CARD]",
    "phone": "[PHONE]",
}

# --------------------------------------------------------------------------- checksums


def luhn_valid(digits: str) -> bool:
    """Whether a string of decimal digits passes the Luhn (mod-10) check."""
    total = 0
    double = False
    for ch in reversed(digits):
        d = int(ch)
        if double:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
        double = not double
    return total % 10 == 0


#: IBAN length per country (the SWIFT IBAN registry; ISO 13616).
_IBAN_LENGTHS: dict[str, int] = {
    "AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22,
    "BH": 22, "BI": 27, "BR": 29, "BY": 28, "CH": 21, "CR": 22, "CY": 28, "CZ": 24,
    "DE": 22, "DJ": 27, "DK": 18, "DO": 28, "EE": 20, "EG": 29, "ES": 24, "FI": 18,
    "FK": 18, "FO": 18, "FR": 27, "GB": 22, "GE": 22, "GI": 23, "GL": 18, "GR": 27,
    "GT": 28, "HN": 28, "HR": 21, "HU": 28, "IE": 22, "IL": 23, "IQ": 23, "IS": 26,
    "IT": 27, "JO": 30, "KW": 30, "KZ": 20, "LB": 28, "LC": 32, "LI": 21, "LT": 20,
    "LU": 20, "LV": 21, "LY": 25, "MC": 27, "MD": 24, "ME": 22, "MK": 19, "MN": 20,
    "MR": 27, "MT": 31, "MU": 30, "NI": 28, "NL": 18, "NO": 15, "OM": 23, "PK": 24,
    "PL": 28, "PS": 29, "PT": 25, "QA": 29, "RO": 24, "RS": 22, "RU": 33, "SA": 24,
    "SC": 31, "SD": 18, "SE": 24, "SI": 19, "SK": 24, "SM": 27, "SO": 23, "ST": 25,
    "SV": 28, "TL": 23, "TN": 24, "TR": 26, "UA": 29, "VA": 22, "VG": 24, "XK": 20,
    "YE": 30,
}  # fmt: skip
_IBAN_MIN_DIGITS = 10
_IBAN_SHAPE = re.compile(r"[A-Z]{2}[0-9]{2}[A-Z0-9]+")


def iban_valid(candidate: str) -> bool:
    """Whether ``candidate`` (spaces removed, any case) is an IBAN: shape, length, mod-97.

    The country must be in the IBAN registry and the length its registered length; every
    registered format holds at least ten digits (check digits included).
    """
    iban = candidate.replace(" ", "").upper()
    if len(iban) != _IBAN_LENGTHS.get(iban[:2]) or not _IBAN_SHAPE.fullmatch(iban):
        return False
    if sum(ch.isdigit() for ch in iban) < _IBAN_MIN_DIGITS:
        return False
    # move the first four characters to the end, letters to 10..35, then mod 97 == 1
    rotated = iban[4:] + iban[:4]
    remainder = 0
    for ch in rotated:
        value = ord(ch) - 55 if ch >= "A" else ord(ch) - 48
        remainder = (remainder * (100 if value > 9 else 10) + value) % 97
    return remainder == 1


# --------------------------------------------------------------------------- patterns

_HAS_DIGIT = re.compile(r"\d")

# Every pattern opens with a character class (the first character it consumes) and looks
# behind only after it: the regex engine then skips, in C, every position that cannot start
# a match, instead of trying the look-behinds at every character (4-6x faster).

# An address is found from its "@": the local part is the whole run of local-part
# characters before it (letters, digits, ``_ . % + ' -``), which must not follow a ``]``
# (a token) or be empty; the domain, after it, is one or more labels and an alphabetic
# top-level domain, matched by this pattern
_DOMAIN = re.compile(r"(?:[\w\-]++\.)+[^\W\d_]{2,}+(?![\w\-])")
_LOCAL_PUNCT = frozenset("_.%+'-")

# found from its check digits: two letters that start a word, two digits, the rest of the
# word, then any following space-separated words of letters and digits; the callback reads
# the words and keeps only a valid IBAN
_IBAN = re.compile(
    r"\d(?<=(?<![\w\]])[A-Za-z]{2}\d)\d[A-Za-z0-9]*+(?![\w\[])(?: [A-Za-z0-9]++(?![\w\[]))*+"
)
_IBAN_START = re.compile(r"[A-Za-z]{2}\d{2}[A-Za-z0-9]*")

# a whole run of digit groups separated by single spaces or dashes, not glued to a word,
# an id marker, an amount or a path (on either side), nor continuing one
_DIGIT_RUN = re.compile(
    r"\d(?<![\w#@/.,+\-$€£¥\]]\d)(?<!\d[ \-]\d)\d*+(?:[ \-]\d++)*+(?![\w@\[]|[.,]\d)"
)
_GROUP_SEP = re.compile(r"([ \-])")

_PHONE = re.compile(
    r"""
    [+(\d]                                   # the first character, then what came before:
    (?<![\w#@/.,+\-$€£¥\]].)                 # not inside a word, id, amount or path,
    (?:(?<=[+(])|(?<!\d[ .\-].))             # nor (unless it opens with + or a parenthesis)
                                             # continuing a sequence of digit groups
    (?:                                      # then, by the first character:
        (?<=\+)\d{1,3}+(?:[ .\-]?(?:\(\d{1,4}\)|\d{1,6}+))*+
                                             # international: +CC, then groups
      | (?<=0)0(?=[1-9])\d{1,3}+(?:[ .\-]?(?:\(\d{1,4}\)|\d{1,6}+))*+
                                             # international: 00CC, then groups
      | (?<=1)[ .\-](?:\([2-9]\d\d\)\ ?|[2-9]\d\d[ .\-])\d{3}[ .\-]\d{4}
      | (?<=\()[2-9]\d\d\)\ ?\d{3}[ .\-]\d{4}
      | (?<=[2-9])\d\d[ .\-]\d{3}[ .\-]\d{4}
                                             # North American: (NXX) XXX-XXXX, NXX-XXX-XXXX,
                                             # 1-NXX-XXX-XXXX
      | (?<=\()0[1-9]\d{0,3}\)\ ?\d{2,8}+(?:[ .\-]\d{2,8}+)*+
      | (?<=0)[1-9]\d{0,3}[ .\-]\d{2,8}+(?:[ .\-]\d{2,8}+)*+
                                             # national with a trunk 0: (020) 7946 0958,
                                             # 020 7946 0958
    )
    (?![\w@\[]|[ .\-]?\d|[,/]\d)             # and not continued by more digits (every
                                             # character before a digit here is one a
                                             # number may not start after, and the other
                                             # way round: redacting twice changes nothing)
    """,
    re.VERBOSE,
)
# a date with a four-digit year (2024-01-15, 15.01.2024, 01/15/2024)
_DATE = re.compile(r"(?:19|20)\d\d-\d\d-\d\d|\d{1,2}([./\-])\d{1,2}\1(?:19|20)\d\d(?!\d)")
_TRUNK_0 = re.compile(r"\(0\)")  # "+44 (0)20 ...": the trunk 0 is not part of the number


def _digits(text: str) -> str:
    return "".join(ch for ch in text if ch.isdigit())


def _is_local(ch: str) -> bool:
    return ch.isalnum() or ch in _LOCAL_PUNCT  # what the regex \w (plus . % + ' -) is


def _emails(text: str) -> str:
    out: list[str] = []
    last = 0
    at = text.find("@")
    while at != -1:
        start = at
        while start > last and _is_local(text[start - 1]):
            start -= 1
        before = text[start - 1] if start else ""
        domain = None
        if start < at and not (before and (_is_local(before) or before == "]")):
            domain = _DOMAIN.match(text, at + 1)
        if domain is None:
            at = text.find("@", at + 1)
            continue
        out += (text[last:start], PII_TOKENS["email"])
        last = domain.end()
        at = text.find("@", last)
    if not out:
        return text
    out.append(text[last:])
    return "".join(out)


def _ibans(text: str) -> str:
    out: list[str] = []
    last = 0
    for match in _IBAN.finditer(text):
        start = match.start() - 2  # the country code, before the check digits
        out += (text[last:start], _iban_words(text[start : match.end()]))
        last = match.end()
    if not out:
        return text
    out.append(text[last:])
    return "".join(out)


def _iban_words(found: str) -> str:
    words = found.split(" ")
    out: list[str] = []
    i = 0
    while i < len(words):
        end = 0
        if _IBAN_START.fullmatch(words[i]):
            # the run of whole words, starting here, of its country's IBAN length
            want = _IBAN_LENGTHS.get(words[i][:2].upper(), 0)
            size, j = 0, i
            while j < len(words) and size + len(words[j]) <= want:
                size += len(words[j])
                j += 1
            if size == want and iban_valid("".join(words[i:j])):
                end = j
        if end:
            out.append(PII_TOKENS["iban"])
            i = end
        else:
            out.append(words[i])
            i += 1
    return " ".join(out)


def _card(match: re.Match[str]) -> str:
    parts = _GROUP_SEP.split(match.group())  # [group, sep, group, sep, ..., group]
    groups, seps = parts[0::2], parts[1::2]
    out: list[str] = []
    i = 0
    while i < len(groups):
        end = 0
        if groups[i][0] in "23456" and len(groups[i]) <= 19:
            # the longest run of whole groups, starting here, that is a card number
            size, j, ends = 0, i, []
            while j < len(groups) and size + len(groups[j]) <= 19:
                size += len(groups[j])
                j += 1
                if size >= 13:
                    ends.append(j)
            for e in reversed(ends):
                if luhn_valid("".join(groups[i:e])):
                    end = e
                    break
        if end:
            out.append(PII_TOKENS["card"])
            i = end
        else:
            out.append(groups[i])
            i += 1
        if i < len(groups):
            out.append(seps[i - 1])
    return "".join(out)


def _phone(match: re.Match[str]) -> str:
    found = match.group()
    if _DATE.search(found):
        return found
    if found[0] == "+" or found.startswith("00"):
        if found[0] == "0" and not any(ch in found for ch in " .-("):
            return found  # a bare 00... run is an id, not a dialled number
        body = found[1:] if found[0] == "+" else found[2:]
        n = len(_digits(_TRUNK_0.sub("", body)))
        ok = 8 <= n <= 15
    elif found.lstrip("(")[0] == "0":
        ok = 9 <= len(_digits(found)) <= 12
    else:
        ok = True  # North American: its shape is its check
    return PII_TOKENS["phone"] if ok else found


_PASSES: dict[str, Callable[[str], str]] = {
    "email": _emails,
    "iban": _ibans,
    "card": lambda text: _DIGIT_RUN.sub(_card, text),
    "phone": lambda text: _PHONE.sub(_phone, text),
}

# --------------------------------------------------------------------------- the settings


@dataclass(frozen=True, slots=True)
class PIIRedaction:
    """Which kinds of personal data to redact from a text, and the redaction itself.

    Parameters
    ----------
    kinds : iterable of str, default all
        A subset of :data:`PII_KINDS` (``email``, ``iban``, ``card``, ``phone``); kept in
        that order whatever order it is given in, without repeats. At least one.

    Raises
    ------
    UserInputError
        ``kinds`` is empty, a string, or names an unknown kind.

    Examples
    --------
    >>> PIIRedaction().redact("mail jo+x@mail.example.com or call +44 20 7946 0958")
    'mail [EMAIL] or call [PHONE]'
    >>> PIIRedaction(kinds=("card",)).redact("card 4111-1111-1111-1111, order 1234567812345678")
    'card [CARD], order 1234567812345678'
    """

    kinds: tuple[str, ...] = PII_KINDS

    def __post_init__(self) -> None:
        object.__setattr__(self, "kinds", _kinds(self.kinds, "kinds"))

    def redact(self, text: str) -> str:
        """``text`` with each personal datum of :attr:`kinds` replaced by its token."""
        if not text:
            return text
        has_digit: bool | None = None
        for kind in self.kinds:
            if kind == "email":
                if "@" not in text:
                    continue
            else:
                if has_digit is None:
                    has_digit = _HAS_DIGIT.search(text) is not None
                if not has_digit:
                    continue
            text = _PASSES[kind](text)
        return text

    def to_list(self) -> list[str]:
        """The kinds as a JSON list (what a bundle's manifest records)."""
        return list(self.kinds)

    def union(self, other: PIIRedaction | None) -> PIIRedaction:
        """The kinds of both (``other`` ``None``: this one)."""
        if other is None or set(other.kinds) <= set(self.kinds):
            return self
        return PIIRedaction(kinds=(*self.kinds, *other.kinds))

    @classmethod
    def coerce(cls, value: Any, *, what: str = "redact_pii") -> PIIRedaction | None:
        """A redaction from what a caller may write, or ``None`` for none.

        Parameters
        ----------
        value
            ``None``, ``False``, ``""`` or an empty sequence: no redaction. ``True`` or
            ``"all"``: every kind. A string of comma-separated kinds (``"email,card"``),
            a sequence of kinds, or a :class:`PIIRedaction` (returned as it is).
        what : str
            The option's name, for the message.

        Raises
        ------
        UserInputError
            Naming ``what``: an unknown kind, or a value of another type.
        """
        if value is None or value is False:
            return None
        if isinstance(value, PIIRedaction):
            return value
        if value is True:
            return cls()
        if isinstance(value, str):
            value = [part.strip() for part in value.split(",") if part.strip()]
        if isinstance(value, (list, tuple, set, frozenset)):
            names = list(value)
            if not names:
                return None
            if "all" in names:
                return cls()
            return cls(kinds=_kinds(names, what))
        raise UserInputError(
            f"{what}: expected true, 'all' or a list of kinds ({', '.join(PII_KINDS)}), "
            f"got {type(value).__name__}"
        )


def _kinds(value: Iterable[str] | str, what: str) -> tuple[str, ...]:
    if isinstance(value, str):
        raise UserInputError(f"{what}: must be a list of kinds, not one string")
    names = list(value)
    if not names:
        raise UserInputError(f"{what}: names no kind (kinds: {', '.join(PII_KINDS)})")
    for name in names:
        if name not in PII_KINDS:
            raise UserInputError(
                f"{what}: {name!r} is not a kind of personal data this redacts "
                f"(kinds: {', '.join(PII_KINDS)}, or all)"
            )
    chosen = set(names)
    return tuple(k for k in PII_KINDS if k in chosen)
