"""The one parser of the times hybridroute reads: ISO 8601 with a UTC offset, always.

A time without an offset (``2026-05-01T12:00:00``) means a different instant on every
machine it is read on, so it is refused wherever a time is read -- an outcome's ``at``,
``calibrate --from-log --since / --until``, the library's ``since`` / ``until`` -- never
silently taken as UTC or as local time. ``Z`` is accepted for ``+00:00``.

A leaf module: it imports nothing from the package.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime

__all__ = ["TIME_EXAMPLE", "parse_utc_time"]

#: An example shown in the messages.
TIME_EXAMPLE = "2026-05-01T12:00:00Z"
#: Longest time text read (a longer one is no time; it is not echoed whole either).
_MAX_CHARS = 64


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def parse_utc_time(value: object) -> datetime:
    """``value`` (ISO 8601 text with a UTC offset, or an aware datetime) as an aware datetime.

    Raises
    ------
    ValueError
        The reason, without the name of the field or option (the caller adds it): not a
        string, not ISO 8601, or no UTC offset (``Z`` or ``+00:00``). The message quotes at
        most 60 characters of the value.
    """
    if isinstance(value, datetime):
        at = value
    elif not isinstance(value, str):
        raise ValueError(f"must be an ISO 8601 time with a UTC offset, got {_short(value)}")
    else:
        text = value.strip()
        if len(text) > _MAX_CHARS:
            raise ValueError(f"not an ISO 8601 time (e.g. {TIME_EXAMPLE}), got {_short(value)}")
        try:
            at = datetime.fromisoformat(text)
        except ValueError:
            raise ValueError(
                f"not an ISO 8601 time (e.g. {TIME_EXAMPLE}), got {_short(value)}"
            ) from None
    if at.tzinfo is None or at.utcoffset() is None:
        raise ValueError(f"needs a UTC offset (Z or +00:00), got {_short(value)}")
    try:
        stamp = at.timestamp()
        out = at.astimezone(UTC)
    except (OverflowError, OSError, ValueError):
        stamp = math.nan
    if not math.isfinite(stamp):
        raise ValueError(f"is out of range, got {_short(value)}")
    return out
