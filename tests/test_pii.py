"""Redaction of personal data in text (``hybridroute._pii``): what each kind is, and is not.

Each kind has many positive and negative examples; the checksums are checked against
oracles written independently here (an integer mod 97, a digit-sum Luhn); redaction is
idempotent (hypothesis); hostile texts finish in bounded time.
"""

from __future__ import annotations

import re
import threading
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hybridroute._pii import PII_KINDS, PII_TOKENS, PIIRedaction, iban_valid, luhn_valid
from hybridroute.exceptions import UserInputError

ALL = PIIRedaction()


def oracle_luhn(number: str) -> bool:
    digits = [int(c) for c in number][::-1]
    total = sum(digits[0::2]) + sum(sum(divmod(2 * d, 10)) for d in digits[1::2])
    return total % 10 == 0


def oracle_iban(text: str) -> bool:
    s = text.replace(" ", "").upper()
    rearranged = s[4:] + s[:4]
    return int("".join(str(int(c, 36)) for c in rearranged)) % 97 == 1


def with_check_digit(body: str) -> str:
    """``body`` plus the digit that makes it pass the Luhn check."""
    for d in "0123456789":
        if oracle_luhn(body + d):
            return body + d
    raise AssertionError("unreachable")


def group(number: str, sizes: tuple[int, ...], sep: str) -> str:
    out, i = [], 0
    for size in sizes:
        out.append(number[i : i + size])
        i += size
    return sep.join(out)


# --------------------------------------------------------------------------- emails

EMAILS = [
    "jo@example.com",
    "jo+tickets@example.com",  # plus-addressing
    "first.last+a.b@mail.eu.example.co.uk",  # subdomains
    "O'Brien@Example.IE",
    "user_name-1@sub-domain.example.org",
    "100%real@example.net",
    "2024.newme@example.org",
    "zoë@exämple.de",
]


@pytest.mark.parametrize("email", EMAILS)
@pytest.mark.parametrize(
    "template", ["{}", "mail me at {} please", "<{}>", "({})", "mailto:{}", "{}.", "{}, thanks"]
)
def test_emails_are_redacted(email, template):
    out = ALL.redact(template.format(email))
    assert out == template.format("[EMAIL]")


@pytest.mark.parametrize(
    "text",
    [
        "x@localhost",  # no top-level domain
        "@handle on twitter",
        "foo@bar",
        "a@b.c",  # a one-letter top-level domain
        "user@ example.com",
        "2@3.45",
        "meet @ 10",
        "user@example.c0m",
    ],
)
def test_not_emails_are_kept(text):
    assert ALL.redact(text) == text


def test_an_address_ends_at_its_last_alphabetic_domain():
    assert ALL.redact("a@b.com.123") == "[EMAIL].123"


def test_a_false_address_does_not_hide_the_next():
    assert ALL.redact("1111-@jo+x@mail.example.com") == "1111-@[EMAIL]"


# --------------------------------------------------------------------------- cards

CARDS = [
    "4111111111111111",  # Visa
    "4012888888881881",
    "4222222222222",  # Visa, 13 digits
    "5555555555554444",  # Mastercard
    "5105105105105100",
    "2223003122003222",  # Mastercard 2-series
    "378282246310005",  # Amex, 15 digits
    "371449635398431",
    "6011111111111117",  # Discover
    "6011000990139424",
    "3530111333300000",  # JCB
    "30569309025904",  # Diners, 14 digits
    with_check_digit("630400000000000000"),  # Maestro, 19 digits
]


@pytest.mark.parametrize("card", CARDS)
def test_card_examples_pass_the_oracle(card):
    assert oracle_luhn(card) and luhn_valid(card)


@pytest.mark.parametrize("card", CARDS)
@pytest.mark.parametrize("sep", [" ", "-", ""])
@pytest.mark.parametrize(
    "template", ["{}", "my card is {} exp 12/27", "card: {}.", "({})", "card {}, cvv 123"]
)
def test_cards_are_redacted_in_several_groupings(card, sep, template):
    sizes = (4, 6, 5) if len(card) == 15 else (*[4] * (len(card) // 4), len(card) % 4)
    written = group(card, tuple(s for s in sizes if s), sep) if sep else card
    assert ALL.redact(template.format(written)) == template.format("[CARD]")


@pytest.mark.parametrize(
    "text",
    [
        "4111 1111 1111 1112",  # 16 digits, fails Luhn
        "4111-1111-1111-1113",
        "1234 5678 9012 3456",
        "5555555555554445",
        "order 4111111111111112 shipped",
        "order #4111111111111111",  # an order id marked with #
        "ORD-4111111111111111",  # glued to an id prefix
        "ORD4111111111111111",
        "41111111111111111111",  # 20 digits: too long for a card
        "8111111111111114",  # Luhn-valid, but no card starts with 8
        "9111111111111113",
        "1111111111111117",
        "0000 0000 0000 0000",
        "4111 1111 1111",  # 12 digits
        "total 4111111111111111.50",  # an amount
        "call 555-123-4567",
    ],
)
def test_not_cards_are_kept(text):
    assert "[CARD]" not in ALL.redact(text)


def test_a_card_followed_by_more_groups_loses_only_the_card():
    assert ALL.redact("4111 1111 1111 1111 12 27") == "[CARD] 12 27"
    assert ALL.redact("12 4111 1111 1111 1111") == "12 [CARD]"
    assert ALL.redact("4111111111111111 4012888888881881") == "[CARD] [CARD]"


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from("23456"),
    st.integers(min_value=12, max_value=18),
    st.randoms(use_true_random=False),
    st.sampled_from([" ", "-", ""]),
)
def test_any_luhn_valid_card_is_redacted_and_a_changed_digit_is_kept(first, length, rnd, sep):
    body = first + "".join(rnd.choice("0123456789") for _ in range(length - 1))
    card = with_check_digit(body)
    sizes = [4] * (len(card) // 4) + ([len(card) % 4] if len(card) % 4 else [])
    written = group(card, tuple(sizes), sep)
    assert ALL.redact(f"pay with {written} today") == "pay with [CARD] today"
    if len(card) <= 16 or not sep:
        # (a longer grouped number holds a 16-digit prefix, which may pass Luhn by itself)
        wrong = card[:-1] + str((int(card[-1]) + 1) % 10)
        kept = f"pay with {group(wrong, tuple(sizes), sep)} today"
        assert "[CARD]" not in ALL.redact(kept)


# --------------------------------------------------------------------------- phones

PHONES = [
    "+44 20 7946 0958",
    "+44 (0)20 7946 0958",
    "+442079460958",
    "0044 20 7946 0958",
    "+1-202-555-0143",
    "+1 (202) 555-0143",
    "+33 1 23 45 67 89",
    "+49 30 123456",
    "+4930123456",
    "(555) 123-4567",
    "(555)123-4567",
    "555-123-4567",
    "555.123.4567",
    "555 123 4567",
    "1-800-555-0199",
    "020 7946 0958",
    "(020) 7946 0958",
    "07700 900123",
    "01 23 45 67 89",
    "01-23-45-67-89",
    "030 123456",
    "0151 23456789",
]


@pytest.mark.parametrize("phone", PHONES)
@pytest.mark.parametrize(
    "template",
    ["{}", "call me on {} after 5", "tel:{}", "phone: {}.", "({})", "{}, or email", "{}!"],
)
def test_phones_are_redacted(phone, template):
    assert ALL.redact(template.format(phone)) == template.format("[PHONE]")


@pytest.mark.parametrize(
    "text",
    [
        # amounts
        "I paid $1,234.56 twice",
        "refund of 2.500,00 EUR",
        "1 234 567 points",
        "12,345,678 units",
        "+1,000,000 users",
        # dates and times
        "on 2024-01-15",
        "on 15.01.2024",
        "on 01/15/2024",
        "on 15-01-2024",
        "at 10:30",
        "at 10:30:45",
        "15.01.2024 10:30",
        "+1 2024-01-15",
        # codes and order numbers
        "PIN 1234",
        "code 0042",
        "order 100234567",
        "order 5551234567",  # a bare digit run is never a phone
        "order 0012345678",
        "order #555-123-4567",
        "ORD-555-123-4567",
        "ORD-2024-000123",
        "ticket 123-456-7890",  # no area code starts with 1
        # IBAN digits left behind by an invalid IBAN
        "DE89 3704 0044 0532 0130 01",
        # other numbers
        "ip 192.168.0.1",
        "version 1.2.3",
        "+1.5% today",
        "4111 1111 1111 1112",
    ],
)
def test_not_phones_are_kept(text):
    assert ALL.redact(text) == text


def test_space_separated_phones_each_go_when_they_open_with_a_plus():
    assert ALL.redact("+44 20 7946 0958 +44 20 7946 0959") == "[PHONE] [PHONE]"
    assert ALL.redact("(555) 123-4567 (555) 987-6543") == "[PHONE] [PHONE]"
    assert ALL.redact("555-123-4567, 555-987-6543") == "[PHONE], [PHONE]"


# --------------------------------------------------------------------------- IBANs

IBANS = [
    "GB82WEST12345698765432",
    "GB82 WEST 1234 5698 7654 32",
    "DE89370400440532013000",
    "DE89 3704 0044 0532 0130 00",
    "de89 3704 0044 0532 0130 00",
    "FR1420041010050500013M02606",
    "FR14 2004 1010 0505 0001 3M02 606",
    "NL91ABNA0417164300",
    "BE68539007547034",
    "CH9300762011623852957",
    "NO9386011117947",
    "GB29NWBK60161331926819",
    "XK051212012345678906",
    "MT84MALT011000012345MTLCAST001S",
]


@pytest.mark.parametrize("iban", IBANS)
def test_iban_examples_pass_the_oracle(iban):
    assert oracle_iban(iban) and iban_valid(iban)


@pytest.mark.parametrize("iban", IBANS)
@pytest.mark.parametrize(
    "template", ["{}", "IBAN: {}.", "pay to {} thanks", "({})", "{}, ref 12", "iban {} ABCD"]
)
def test_ibans_are_redacted(iban, template):
    assert ALL.redact(template.format(iban)) == template.format("[IBAN]")


@pytest.mark.parametrize(
    "text",
    [
        "GB82WEST12345698765431",  # checksum fails
        "GB82 WEST 1234 5698 7654 31",
        "DE89370400440532013001",
        "DE89 3704 0044 0532 0130 01",
        "DE88370400440532013000",
        "GB82WEST1234569876543",  # one character short for GB
        "GB82WEST123456987654321",
        "AB12 please send the thing",
        "XX00 0000 0000 0000",
        "XK051212012345678907",  # the right length for Kosovo, but the checksum fails
        # a flight number and the words after it: an unknown country, and (for a known
        # one) far fewer than ten digits, whatever the mod-97 sum of the words says
        "flight ab123 and my luggage is now lost",
        "i was flying out of chicago on american airlines flight ab123 and my luggage",
        "de12 and then some more words here to fill it",
        "gb99 west abcd efgh ijkl mn",
    ],
)
def test_not_ibans_are_kept(text):
    assert ALL.redact(text) == text


def test_two_ibans_in_a_row_both_go():
    text = "GB82 WEST 1234 5698 7654 32 DE89 3704 0044 0532 0130 00"
    assert ALL.redact(text) == "[IBAN] [IBAN]"


# --------------------------------------------------------------------------- the settings


def test_kinds_are_kept_in_a_fixed_order_without_repeats():
    assert PIIRedaction(kinds=("phone", "email", "phone")).kinds == ("email", "phone")
    assert PIIRedaction().kinds == PII_KINDS


@pytest.mark.parametrize(
    ("value", "kinds"),
    [
        (True, PII_KINDS),
        ("all", PII_KINDS),
        (["all"], PII_KINDS),
        ("email, card", ("email", "card")),
        (("phone",), ("phone",)),
        (PIIRedaction(kinds=("iban",)), ("iban",)),
    ],
)
def test_coerce_reads_what_a_caller_writes(value, kinds):
    coerced = PIIRedaction.coerce(value)
    assert coerced is not None and coerced.kinds == kinds


@pytest.mark.parametrize("value", [None, False, "", [], ()])
def test_coerce_of_nothing_is_no_redaction(value):
    assert PIIRedaction.coerce(value) is None


@pytest.mark.parametrize(
    ("value", "match"),
    [
        (["ssn"], "redact_pii: 'ssn' is not a kind"),
        ("email,passport", "'passport' is not a kind"),
        (3, "expected true, 'all' or a list of kinds"),
        ({"email": True}, "expected true, 'all' or a list of kinds"),
    ],
)
def test_coerce_refuses_unknown_kinds_naming_the_option(value, match):
    with pytest.raises(UserInputError, match=match):
        PIIRedaction.coerce(value)


@pytest.mark.parametrize(("kinds", "match"), [((), "names no kind"), ("email", "not one string")])
def test_the_settings_refuse_empty_or_a_string(kinds, match):
    with pytest.raises(UserInputError, match=match):
        PIIRedaction(kinds=kinds)


def test_only_the_chosen_kinds_are_redacted():
    text = "jo@example.com 4111 1111 1111 1111 +44 20 7946 0958 GB82WEST12345698765432"
    assert PIIRedaction(kinds=("email",)).redact(text) == (
        "[EMAIL] 4111 1111 1111 1111 +44 20 7946 0958 GB82WEST12345698765432"
    )
    assert PIIRedaction(kinds=("card", "phone")).redact(text) == (
        "jo@example.com [CARD] [PHONE] GB82WEST12345698765432"
    )
    assert ALL.redact(text) == "[EMAIL] [CARD] [PHONE] [IBAN]"


def test_the_settings_are_frozen_and_hashable():
    r = PIIRedaction(kinds=("card",))
    with pytest.raises(AttributeError):
        r.kinds = ("email",)  # type: ignore[misc]
    assert hash(r) == hash(PIIRedaction(kinds=("card",)))
    assert r.union(PIIRedaction(kinds=("email",))).kinds == ("email", "card")
    assert r.union(None) is r


# --------------------------------------------------------------------------- idempotence

FRAGMENTS = [
    *EMAILS[:3],
    *CARDS[:4],
    "4111 1111 1111 1111",
    "4111-1111-1111-1111",
    "1234 5678 9012 3456",
    *PHONES[:12],
    *IBANS[:5],
    "2024-01-15",
    "10:30",
    "$1,234.56",
    *"#0+()-.,/:@[]'%",
    "00",
    "12",
    "123",
    "1234",
    "555",
    "[CARD]",
    "[PHONE]",
    "[EMAIL]",
    "[IBAN]",
    " ",
    "x",
    "GB",
    "é",
    "\n",
    "tel:",
]


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    st.lists(st.sampled_from(FRAGMENTS), max_size=10),
    st.sets(st.sampled_from(PII_KINDS), min_size=1),
)
def test_redaction_is_idempotent(parts, kinds):
    redaction = PIIRedaction(kinds=tuple(kinds))
    once = redaction.redact("".join(parts))
    assert redaction.redact(once) == once


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="0123456789 -.+()@abGBDE#/:,[]", max_size=50))
def test_redaction_is_idempotent_on_random_text(text):
    once = ALL.redact(text)
    assert ALL.redact(once) == once


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=80))
def test_text_without_personal_data_shapes_is_unchanged(text):
    if "@" not in text and not re.search(r"\d", text):
        assert ALL.redact(text) is text  # the passes that need @ or a digit never run


def test_tokens_hold_no_digit_and_no_at_sign():
    for token in PII_TOKENS.values():
        assert not re.search(r"[\d@]", token)


# --------------------------------------------------------------------------- hostile input

HOSTILE = {
    "word run": "a" * 100_000,
    "word run then @": "a" * 99_999 + "@",
    "dotted local part": "a." * 49_999 + "@x",
    "endless domain": "x@" + "a." * 49_998 + "a",
    "digits": "1" * 100_000,
    "digit groups": "1 " * 50_000,
    "dashed groups": "1-" * 50_000,
    "plus groups": "+1 " * 33_333,
    "iban starts": "GB82 " * 20_000,
    "iban words": "GB82 " + "ABCD " * 19_999,
    "trunk parens": "(0)" * 33_333,
    "cards": "4111 1111 1111 1111 " * 5_000,
    "phones": "555-123-4567, " * 7_000,
    "at signs": "@" * 100_000,
    "a@a": "a@" * 50_000,
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_texts_finish_in_bounded_time(name):
    text = HOSTILE[name]
    result: dict[str, float] = {}

    def run() -> None:
        t0 = time.perf_counter()
        ALL.redact(text)
        result["s"] = time.perf_counter() - t0

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(timeout=10)
    assert not worker.is_alive(), f"{name}: redaction of 100,000 characters ran past 10 s"
    assert result["s"] < 5
