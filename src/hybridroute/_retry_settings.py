"""The one retry-settings value: how often, and how long apart, a request is sent again.

:class:`RetrySettings` is a frozen value that both senders of requests read:

* the LLM seam (:mod:`hybridroute.classifiers.llm`): its retry-and-repair loop spends
  ``max_transport_retries`` on transport failures and ``max_label_repairs`` on invalid
  answers, each request bounded by ``timeout``; a ``Retry-After`` longer than
  ``max_retry_after`` ends the question;
* the HTTP client of the service (:mod:`hybridroute.client`): a safe request is sent again
  at most ``max_transport_retries`` times, after :meth:`RetrySettings.delay` capped at
  ``backoff_max``. ``hybridroute.client.RetrySettings`` is this value with the client's
  defaults (two quick retries, no jitter) and its older keyword names.

One schedule serves both: retry ``n`` (1-based) waits
``min(backoff_max, backoff_initial * backoff_multiplier ** (n - 1))``, shrunk by a seeded
jitter, and at least what the server asked for. A neutral leaf: it imports nothing
internal, so the classifiers and the client (which may import only the contracts and the
exceptions) both may import it.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

__all__ = ["RetrySettings"]


@dataclass(frozen=True, slots=True, kw_only=True)
class RetrySettings:
    """Budgets, backoff and timeout of a sender of requests (a frozen value).

    The defaults are the LLM seam's; the HTTP client's own
    (``hybridroute.client.RetrySettings``) are two retries 0.05 s apart, at most 1 s,
    without jitter.

    Parameters
    ----------
    max_transport_retries : int
        Transport failures (429, 5xx, connection, truncated/empty response, timeout)
        tolerated per question (the LLM seam) or per safe request (the HTTP client); the
        next one ends it (``provider_error`` or ``timeout``).
    max_label_repairs : int
        Re-asks with feedback after an invalid answer; the next invalid answer ends the
        question (``invalid_label``). The default, 1, is "repair once". The LLM seam's
        only; the HTTP client has no answers to repair.
    timeout : float
        Seconds one request of the LLM seam may take (the HTTP client takes its timeout
        as its own argument).
    backoff_initial, backoff_multiplier, backoff_max : float
        Delay before transport retry ``n`` (1-based) is
        ``min(backoff_max, backoff_initial * backoff_multiplier ** (n - 1))``, shrunk by
        jitter.
    jitter : float
        Fraction in [0, 1]: the delay is multiplied by ``1 - jitter * u`` with ``u`` a
        seeded uniform draw keyed by the question and the retry number, so runs repeat
        exactly whatever the scheduling order.
    max_retry_after : float
        The LLM seam: a ``Retry-After`` longer than this ends the question at once
        (``provider_error``) rather than stalling a batch; a shorter one is honoured: the
        retry waits at least that long. (The HTTP client waits at most ``backoff_max``.)
    seed : int
        Seeds the jitter.
    """

    max_transport_retries: int = 3
    max_label_repairs: int = 1
    timeout: float = 30.0
    backoff_initial: float = 0.5
    backoff_multiplier: float = 2.0
    backoff_max: float = 20.0
    jitter: float = 0.5
    max_retry_after: float = 60.0
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("max_transport_retries", "max_label_repairs", "seed"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"RetrySettings.{name} must be an integer, got {value!r}")
            if name != "seed" and value < 0:
                raise ValueError(f"RetrySettings.{name} must be >= 0, got {value}")
        for name in (
            "timeout",
            "backoff_initial",
            "backoff_multiplier",
            "backoff_max",
            "jitter",
            "max_retry_after",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ValueError(f"RetrySettings.{name} must be a number, got {value!r}")
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"RetrySettings.{name} must be finite and >= 0, got {value}")
            object.__setattr__(self, name, float(value))
        if self.timeout <= 0:
            raise ValueError("RetrySettings.timeout must be > 0")
        if self.backoff_multiplier < 1:
            raise ValueError("RetrySettings.backoff_multiplier must be >= 1")
        if self.jitter > 1:
            raise ValueError("RetrySettings.jitter must be in [0, 1]")

    @property
    def max_requests(self) -> int:
        """The most requests one question can make."""
        return 1 + self.max_transport_retries + self.max_label_repairs

    def backoff(self, retry_number: int, key: str = "") -> float:
        """Seconds to wait before transport retry ``retry_number`` (1-based), jittered."""
        base = min(
            self.backoff_max,
            self.backoff_initial * self.backoff_multiplier ** max(0, retry_number - 1),
        )
        digest = hashlib.sha256(f"{self.seed}\x1f{key}\x1f{retry_number}".encode()).digest()
        u = int.from_bytes(digest[:8], "big") / 2.0**64
        return base * (1.0 - self.jitter * u)

    def delay(self, retry_number: int, key: str = "", retry_after: float | None = None) -> float:
        """The wait before a transport retry: the backoff, or at least ``retry_after``.

        Parameters
        ----------
        retry_number : int
            Which transport retry of the question this is, 1-based (values below 1 get
            the first retry's backoff).
        key : str, default ""
            Identifies the question; with the seed and ``retry_number`` it fixes the
            jitter draw, so a rerun waits the same.
        retry_after : float or None, default None
            Seconds the provider asked to wait (``Retry-After``); the wait is at least
            this. Not capped here: the caller ends a question whose ``retry_after``
            exceeds ``max_retry_after`` before asking.

        Returns
        -------
        float
            Seconds to wait.
        """
        wait = self.backoff(retry_number, key)
        if retry_after is not None:
            wait = max(wait, retry_after)
        return wait

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict (round-trips through :meth:`from_dict`)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RetrySettings:
        """Build settings from :meth:`to_dict` output; unknown keys are an error."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown RetrySettings field(s): {', '.join(unknown)}")
        return cls(**dict(data))
