"""Audit sampling: a keyed, reproducible random sample of auto-routed decisions.

Human-review labels only cover what a router did *not* auto-route; the only unbiased view
of auto-routed precision is a random audit of auto-routed decisions, with each one's
inclusion probability recorded so estimates can weight by it.

**Selection.** A decision is selected when ``HMAC-SHA-256(key, decision_id)``, read as a
number in ``[0, 1)`` (its first 8 bytes over ``2**64``), is below the audit rate. The
decision id is a fresh uuid4 drawn by the log, and the key is a secret of the operator
(``HYBRIDROUTE_AUDIT_KEY``, never stored): the same log and key select the same decisions
on replay, while a requester can neither choose nor predict which of its requests are
audited. Only live decisions of the model stage (auto-routed: ``stage="model"``) can be
selected; their inclusion probability is the rate, every other live decision's is 0.
Selection reads nothing but the decision id, so it never changes what is routed.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import os
from dataclasses import dataclass, field

from ..exceptions import UserInputError

__all__ = ["AUDITED_STAGE", "AUDIT_KEY_ENV", "AuditSampler"]

#: The environment variable holding the audit key (required when the audit rate is > 0).
AUDIT_KEY_ENV = "HYBRIDROUTE_AUDIT_KEY"
#: The stage of auto-routed decisions, the only ones an audit samples.
AUDITED_STAGE = "model"
_SCALE = float(1 << 64)


def check_rate(rate: object, what: str = "audit rate") -> float:
    """``rate`` as a float in [0, 1], else a :class:`UserInputError` naming ``what``."""
    if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not math.isfinite(rate):
        raise UserInputError(f"{what} must be a number between 0 and 1, got {rate!r}")
    if not 0.0 <= float(rate) <= 1.0:
        raise UserInputError(f"{what} must be between 0 and 1, got {rate!r}")
    return float(rate)


@dataclass(frozen=True, slots=True)
class AuditSampler:
    """Which auto-routed decisions are audited, and with which inclusion probability.

    Give one to :func:`~hybridroute.records.open_log` (``audit=``): every live decision
    the log writes then records ``audit_p`` (its inclusion probability) and ``audited``.

    Parameters
    ----------
    rate : float
        The audit rate of auto-routed decisions, in [0, 1] (``0.02``: 2 %).
    key : bytes or str
        The secret HMAC key; never stored or shown. Use :meth:`from_env` to read it from
        ``HYBRIDROUTE_AUDIT_KEY``.

    Raises
    ------
    UserInputError
        A rate outside [0, 1], or an empty key with a rate above 0.
    """

    rate: float
    key: bytes = field(repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "rate", check_rate(self.rate))
        key = self.key.encode("utf-8") if isinstance(self.key, str) else self.key
        if not isinstance(key, bytes):
            raise UserInputError("the audit key must be bytes or a string")
        if self.rate > 0 and not key:
            raise UserInputError(f"an audit rate above 0 needs a secret key: set {AUDIT_KEY_ENV}")
        object.__setattr__(self, "key", key)

    @classmethod
    def from_env(cls, rate: float, env: str = AUDIT_KEY_ENV) -> AuditSampler | None:
        """The sampler of ``rate`` keyed from the environment; ``None`` for rate 0.

        Raises
        ------
        UserInputError
            ``rate`` > 0 and the variable ``env`` is unset or empty (the message names it).
        """
        rate = check_rate(rate)
        if rate == 0:
            return None
        key = os.environ.get(env, "")
        if not key:
            raise UserInputError(
                f"audit rate {rate:g} needs the secret audit key: set {env} (a long random "
                "string; it is never stored)"
            )
        return cls(rate, key.encode("utf-8"))

    def score(self, decision_id: str) -> float:
        """The decision id's keyed hash as a number in [0, 1)."""
        digest = hmac.new(self.key, decision_id.encode("utf-8"), hashlib.sha256).digest()
        return int.from_bytes(digest[:8], "big") / _SCALE

    def inclusion(self, stage: str) -> float:
        """The inclusion probability of a decision of ``stage``: the rate, or 0."""
        return self.rate if stage == AUDITED_STAGE else 0.0

    def mark(self, decision_id: str, stage: str) -> tuple[float, bool]:
        """``(inclusion probability, selected)`` of one decision."""
        p = self.inclusion(stage)
        return p, p > 0 and self.score(decision_id) < p

    def __repr__(self) -> str:
        return f"AuditSampler(rate={self.rate!r})"
