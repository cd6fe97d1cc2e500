"""The one time parser: ISO 8601 with a UTC offset, everywhere a time is read."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from hybridroute._time import parse_utc_time

NO_OFFSET = [
    "2026-05-01",
    "2026-05-01T12:00",
    "2026-05-01T12:00:00",
    "2026-05-01 12:00:00",
    "2026-05-01T12:00:00.123456",
    "20260501T120000",
]
NOT_A_TIME = [
    "",
    " ",
    "yesterday",
    "2026-13-01T00:00:00Z",
    "2026-05-01T25:00:00Z",
    "1e9",
    "x" * 200,
]
OUT_OF_RANGE = ["0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00"]


@pytest.mark.parametrize("value", NO_OFFSET)
def test_a_time_without_an_offset_is_refused(value):
    with pytest.raises(ValueError, match=r"needs a UTC offset \(Z or \+00:00\)"):
        parse_utc_time(value)


@pytest.mark.parametrize("value", NOT_A_TIME)
def test_text_that_is_no_time_is_refused(value):
    with pytest.raises(ValueError, match="not an ISO 8601 time") as info:
        parse_utc_time(value)
    assert len(str(info.value)) < 140  # a long value is not echoed whole


@pytest.mark.parametrize("value", OUT_OF_RANGE)
def test_a_time_out_of_range_is_refused_not_an_overflow(value):
    with pytest.raises(ValueError, match="out of range"):
        parse_utc_time(value)


@pytest.mark.parametrize("value", [None, 5, 1.5, True, b"2026-05-01T00:00:00Z", ["x"]])
def test_a_value_that_is_no_string_is_refused(value):
    with pytest.raises(ValueError, match="must be an ISO 8601 time with a UTC offset"):
        parse_utc_time(value)


@pytest.mark.parametrize(
    ("value", "utc"),
    [
        ("2026-05-01T12:00:00Z", datetime(2026, 5, 1, 12, tzinfo=UTC)),
        ("2026-05-01T12:00:00+00:00", datetime(2026, 5, 1, 12, tzinfo=UTC)),
        ("2026-05-01T14:00:00+02:00", datetime(2026, 5, 1, 12, tzinfo=UTC)),
        (" 2026-05-01T07:30:00-04:30 ", datetime(2026, 5, 1, 12, tzinfo=UTC)),
        (
            datetime(2026, 5, 1, 13, tzinfo=timezone(timedelta(hours=1))),
            datetime(2026, 5, 1, 12, tzinfo=UTC),
        ),
    ],
)
def test_times_with_an_offset_are_read_as_utc(value, utc):
    got = parse_utc_time(value)
    assert got == utc and got.utcoffset() == timedelta(0)


def test_a_naive_datetime_is_refused_too():
    with pytest.raises(ValueError, match="needs a UTC offset"):
        parse_utc_time(datetime(2026, 5, 1, 12))


@pytest.mark.parametrize("value", [*NO_OFFSET, "yesterday"])
def test_outcome_times_are_refused_alike(value):
    """An outcome's ``at`` and ``--since`` refuse the same times."""
    from hybridroute.exceptions import UserInputError
    from hybridroute.records._outcomes import check_outcome

    item = {"decision_id": "d-1", "gold_intent": "x", "source": "audit", "at": value}
    with pytest.raises(UserInputError, match="'at'"):
        check_outcome(item, 1)
