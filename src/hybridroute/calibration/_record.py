"""Reading fit records back: the checks every technique's ``from_state`` is made of.

A fit record is what a fitted technique writes (its ``to_state()``). Read back from a file
it is untrusted: each technique re-derives what its record claims from the record's own
counts -- the certificate from the accepted and wrong items, the bound from the
Clopper-Pearson formula -- and refuses a record that contradicts itself, raising
:class:`Contradiction` with the field at fault (the policy turns it into an
:class:`~hybridroute.exceptions.ArtifactError` naming the file).
"""

from __future__ import annotations

import math
from typing import Any

from ._bounds import clopper_pearson_lower, precision_p_value

__all__ = [
    "Contradiction",
    "accepted_counts",
    "certificate",
    "claims_certificate",
    "count",
    "ensure",
    "is_num",
    "probability",
    "same",
    "target_delta",
    "threshold_value",
]

# Recorded floats come from the very computations re-run here, so they agree to the last
# bit on one machine; the slack only absorbs scipy versions.
RATIO_TOL = 1e-12
BOUND_TOL = 1e-9


class Contradiction(Exception):
    """A record field that contradicts the rest of its record (``field``, ``message``)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"policy field {field!r}: {message}")
        self.field = field
        self.message = message


def ensure(cond: bool, field: str, message: str) -> None:
    """Raise :class:`Contradiction` naming ``field`` unless ``cond``."""
    if not cond:
        raise Contradiction(field, message)


def is_num(v: Any) -> bool:
    """A finite JSON number (not a boolean)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def probability(v: Any, field: str, high: float = 1.0) -> None:
    """``v`` is null (never passes) or a number in ``[0, high]`` (a probability)."""
    ensure(
        v is None or (is_num(v) and 0.0 <= v <= high),
        field,
        f"{v!r} is not a probability in [0, 1]",
    )


def same(a: Any, b: Any, field: str, source: str) -> None:
    """``a`` (at ``field``) equals ``b`` (what ``source`` records)."""
    ensure(a == b, field, f"{a!r} is not what {source} records ({b!r})")


def count(v: Any, field: str) -> int:
    """A non-negative integer."""
    ensure(
        isinstance(v, int) and not isinstance(v, bool) and v >= 0, field, f"{v!r} is not a count"
    )
    return int(v)


def threshold_value(v: Any) -> float:
    """A recorded threshold as a number (``None`` never passes: +inf)."""
    return math.inf if v is None else float(v)


def accepted_counts(rec: Any, field: str) -> tuple[int, int, int]:
    """``(n, accepted, errors)`` from a record's calibration size, coverage and precision."""
    n = count(rec.get("calibration_size"), f"{field}.calibration_size")
    cov = rec.get("coverage")
    ensure(is_num(cov) and 0.0 <= cov <= 1.0, f"{field}.coverage", f"{cov!r} is not a share")
    accepted = round(cov * n)
    ensure(
        (n > 0 and abs(accepted / n - cov) <= RATIO_TOL) or (n == 0 and cov == 0.0),
        f"{field}.coverage",
        f"{cov!r} is not a share of {n} calibration items",
    )
    prec = rec.get("precision")
    if accepted == 0:
        ensure(prec is None, f"{field}.precision", f"{prec!r} but no item is accepted")
        return n, 0, 0
    ensure(is_num(prec) and 0.0 <= prec <= 1.0, f"{field}.precision", f"{prec!r} is not a share")
    errors = round((1.0 - prec) * accepted)
    ensure(
        abs((1.0 - errors / accepted) - prec) <= RATIO_TOL,
        f"{field}.precision",
        f"{prec!r} is not a share of the {accepted} accepted items",
    )
    return n, accepted, errors


def target_delta(rec: Any, field: str) -> tuple[float, float, Any]:
    """The record's ``target`` and ``delta`` (each in (0, 1), as its params record them)."""
    params = rec.get("params")
    ensure(isinstance(params, dict), f"{field}.params", "must be an object")
    target, delta = rec.get("target"), rec.get("delta")
    for key, value in (("target", target), ("delta", delta)):
        ensure(is_num(value) and 0.0 < value < 1.0, f"{field}.{key}", f"{value!r} is not in (0, 1)")
        same(params.get(key), value, f"{field}.params.{key}", field)
    return float(target), float(delta), params


def claims_certificate(rec: Any, field: str, accepted: int, empty: tuple[str, ...]) -> bool:
    """Whether the record claims a certificate: if not, it routes nothing and its ``empty``
    keys are null; if so, its threshold is a number."""
    if not rec["certified"]:
        ensure(accepted == 0, f"{field}.coverage", "must be 0 when not certified")
        for key in empty:
            ensure(rec.get(key) is None, f"{field}.{key}", "must be null when not certified")
        return False
    ensure(
        rec.get("threshold") is not None, f"{field}.threshold", "a certified threshold is a number"
    )
    return True


def certificate(
    rec: Any, field: str, target: float, level: float, accepted: int, errors: int
) -> None:
    """The recorded counts certify ``target`` at ``level`` and give the recorded bound."""
    bound = rec.get("bound")
    p_value = float(precision_p_value(errors, accepted, target))
    ensure(
        p_value <= level,
        f"{field}.certified",
        f"true, but {errors} errors among {accepted} accepted items do not certify precision "
        f"{target:g} at level {level:g} (p-value {p_value:.3g})",
    )
    expected = float(clopper_pearson_lower(accepted - errors, accepted, level))
    ensure(
        is_num(bound) and abs(bound - expected) <= BOUND_TOL,
        f"{field}.bound",
        f"{bound!r} is not the Clopper-Pearson bound of {accepted - errors} correct among "
        f"{accepted} at level {level:g} ({expected!r})",
    )
    ensure(
        bound >= target - BOUND_TOL,
        f"{field}.bound",
        f"{bound!r} is below the target {target!r}, so the fit certifies nothing",
    )
