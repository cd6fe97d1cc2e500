"""The service's configuration: one frozen value, checked when it is made.

Nothing here imports FastAPI, uvicorn or prometheus-client, so a configuration can be
built (and refused, naming the field) without the ``service`` extra installed.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from ..exceptions import UserInputError

__all__ = [
    "ADMIN_TOKEN_ENV",
    "DEFAULT_BODY_TIMEOUT_S",
    "DEFAULT_HEADER_TIMEOUT_S",
    "DEFAULT_MAX_BATCH",
    "DEFAULT_MAX_BODY_BYTES",
    "ServiceConfig",
]

#: The environment variable that holds the admin bearer token (by default).
ADMIN_TOKEN_ENV = "HYBRIDROUTE_ADMIN_TOKEN"
#: Largest request body read, in bytes (enforced while reading, not from Content-Length).
DEFAULT_MAX_BODY_BYTES = 4 << 20
#: Most items in one ``POST /v1/route/batch``.
DEFAULT_MAX_BATCH = 1000
#: How long the first decision of a log commit waits for others to share it, in seconds.
DEFAULT_COMMIT_WINDOW_S = 0.001
#: Live decisions the status page summarizes (the most recent, in this process).
DEFAULT_STATUS_WINDOW = 1000
#: Shadow jobs (requests waiting for the shadows) held before new ones are dropped.
DEFAULT_SHADOW_QUEUE = 10_000
#: Distinct values of the segment fact counted on their own in /metrics (then "other").
DEFAULT_MAX_SEGMENTS = 50
#: Seconds a request's body may take to arrive once its headers are in (then 408).
DEFAULT_BODY_TIMEOUT_S = 15.0
#: Seconds a request's headers may take to arrive (``hybridroute serve``; then 408).
DEFAULT_HEADER_TIMEOUT_S = 10.0
#: The longest one decision-log call may take (lock wait, statement, client deadline).
DEFAULT_LOG_TIMEOUT_S = 60.0
#: Longest either timeout may be set to, in seconds.
MAX_TIMEOUT_S = 3600.0
#: An origin as a browser sends it: scheme, host, optional port; nothing else.
_ORIGIN_RE = re.compile(r"https?://(?:[a-z0-9.\-]+|\[[0-9a-f:.]+\])(?::[0-9]{1,5})?")
_DEFAULT_PORT = {"http": ":80", "https": ":443"}


def _config_error(name: str, message: str) -> UserInputError:
    return UserInputError(f"service config field {name!r}: {message}")


def _int_at_least(name: str, value: Any, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise _config_error(name, f"must be an integer of at least {low:,}, got {value!r}")
    return value


def _seconds(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise _config_error(name, f"must be a number of seconds, got {value!r}")
    if not 0 < value <= MAX_TIMEOUT_S:
        raise _config_error(
            name, f"must be above 0 and at most {MAX_TIMEOUT_S:g} seconds, got {value!r}"
        )
    return float(value)


def _origins(values: Iterable[str] | str) -> tuple[str, ...]:
    out = _names("cors_origins", values)
    for v in out:
        if v == "*":
            raise _config_error(
                "cors_origins", "'*' would let any web page call the router; list the origins"
            )
        if not _ORIGIN_RE.fullmatch(v.lower()):
            raise _config_error(
                "cors_origins",
                f"{v[:100]!r} is not an origin; write it as a browser sends it: "
                "scheme://host[:port] (e.g. https://ops.example.com), no path",
            )
    # as browsers send them: lower case, no default port
    shown = (v.lower().removesuffix(_DEFAULT_PORT[v.lower().split(":", 1)[0]]) for v in out)
    return tuple(dict.fromkeys(shown))


def _names(name: str, values: Iterable[str] | str) -> tuple[str, ...]:
    if isinstance(values, str):
        raise _config_error(name, "must be a list of strings, not one string")
    out = tuple(values)
    for v in out:
        if not isinstance(v, str) or not v:
            raise _config_error(name, f"must hold non-empty strings, got {v!r}")
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class ServiceConfig:
    """What :func:`~hybridroute.service.create_app` serves, and under which limits.

    Parameters
    ----------
    router : str or path-like
        The live router bundle (loaded with :func:`hybridroute.router.load_router`, so
        every file's checksum, and its signature with a signing key set, is verified).
    log : str
        The decision log's URL (``sqlite:///PATH``, a bare path, ``postgresql://...``);
        see :func:`hybridroute.records.open_log`.
    shadows : sequence of str or path-like, default ()
        Candidate bundles that route every request after its answer is sent; their
        decisions are logged with role ``shadow``.
    max_body_bytes : int, default 4 MiB
        The largest request body; a longer one is refused (413) while it is read.
    max_batch : int, default 1000
        The most items in one batch request (413 beyond).
    segment_fact : str, optional
        A declared fact that /metrics and the status page break ask-user and
        human-review rates down by (for example a queue or a customer tier). It may not
        be a sensitive fact.
    cors_origins : sequence of str, default ()
        Origins (``scheme://host[:port]``) allowed to call the API from a browser. None by
        default: no CORS middleware is installed, and a request that a browser marks as
        cross-site (``Sec-Fetch-Site``, or an ``Origin`` that is not the service's own)
        is refused (403 ``forbidden_origin``) before it reaches an endpoint.
    sensitive_facts : sequence of str, default ()
        Facts stored in the log (and answered) as salted HMACs, as ``--sensitive`` does.
    salt : str, optional
        The salt of those HMACs (default ``HYBRIDROUTE_LOG_SALT``); never stored or shown.
    admin_token_env : str, default ``HYBRIDROUTE_ADMIN_TOKEN``
        The environment variable holding the bearer token of the admin endpoints. Unset
        or empty: admin endpoints are off (403 ``admin_disabled``).
    admin : bool, default True
        ``False`` turns the admin endpoints off whatever the environment holds
        (``hybridroute serve --workers N`` does: each worker holds its own routers).
    commit_window_s : float, default 0.001
        How long the first decision of a log commit waits for others to join it (group
        commit), while traffic is concurrent (the previous commit held more than one
        request; a lone client never waits); every answer still waits for its own
        commit. ``0``: no wait (decisions that arrive while a commit runs still share the
        next one).
    status_window : int, default 1000
        How many of the most recent live decisions the status page summarizes.
    shadow_queue : int, default 10000
        Requests waiting for the shadows; beyond it shadow work is dropped and counted
        (a shadow never holds back live traffic).
    max_segments : int, default 50
        Distinct segment values counted on their own in /metrics (others: ``other``),
        so one fact cannot grow the metrics without bound.
    audit_rate : float, default 0
        The share of live auto-routed decisions (stage ``model``) selected for audit, by
        a keyed hash of the decision id (key: ``HYBRIDROUTE_AUDIT_KEY``, required when
        the rate is above 0, never stored); each live decision records its inclusion
        probability. Auditing never changes what is routed.
    body_timeout_s : float, default 15
        Seconds a request's body may take to arrive once its headers are in; a slower
        (or stalled) body is answered 408 ``timeout`` and its connection closed, nothing
        routed. Enforced by the app itself, under any ASGI server.
    header_timeout_s : float, default 10
        Seconds a connection may take to send a request's headers (from the moment it
        opens, or from the previous answer on a kept-alive connection); a slower one is
        answered 408 and closed. Enforced by the server protocol that
        ``hybridroute serve`` runs (:mod:`hybridroute.service._protocol`); another ASGI
        server applies its own header timeout, if any.
    log_timeout_s : float, default 60
        The longest one call of the decision log may take before the request waiting for
        it is answered 503: SQLite's wait for its write lock (``busy_timeout_s``);
        PostgreSQL's ``statement_timeout`` on the server, and a client-side deadline 2 s
        later for a server that stops answering altogether.
    redact_pii : sequence of str, default ()
        Kinds of personal data (``email``, ``iban``, ``card``, ``phone``; ``["all"]`` or
        ``True`` for every kind) that the live router and every shadow redact from texts
        before routing and logging, in addition to what their bundles record. Empty: each
        router redacts what its bundle says (by default nothing: texts are logged as
        given). Normalized to the kinds, in a fixed order.
    """

    router: str | os.PathLike[str]
    log: str
    shadows: tuple[str | os.PathLike[str], ...] = ()
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    max_batch: int = DEFAULT_MAX_BATCH
    segment_fact: str | None = None
    cors_origins: tuple[str, ...] = ()
    sensitive_facts: tuple[str, ...] = ()
    salt: str | None = field(default=None, repr=False)
    admin_token_env: str = ADMIN_TOKEN_ENV
    admin: bool = True
    commit_window_s: float = DEFAULT_COMMIT_WINDOW_S
    status_window: int = DEFAULT_STATUS_WINDOW
    shadow_queue: int = DEFAULT_SHADOW_QUEUE
    max_segments: int = DEFAULT_MAX_SEGMENTS
    audit_rate: float = 0.0
    body_timeout_s: float = DEFAULT_BODY_TIMEOUT_S
    header_timeout_s: float = DEFAULT_HEADER_TIMEOUT_S
    log_timeout_s: float = DEFAULT_LOG_TIMEOUT_S
    redact_pii: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.router, (str, os.PathLike)) or not os.fspath(self.router):
            raise _config_error("router", f"must be a bundle directory, got {self.router!r}")
        if isinstance(self.shadows, (str, os.PathLike)):
            raise _config_error("shadows", "must be a list of bundle directories")
        shadows = tuple(self.shadows)
        for s in shadows:
            if not isinstance(s, (str, os.PathLike)) or not os.fspath(s):
                raise _config_error("shadows", f"must hold bundle directories, got {s!r}")
        object.__setattr__(self, "shadows", shadows)
        if not isinstance(self.log, (str, os.PathLike)) or not os.fspath(self.log):
            raise _config_error("log", f"must be a log URL or path, got {self.log!r}")
        object.__setattr__(self, "log", os.fspath(self.log))
        _int_at_least("max_body_bytes", self.max_body_bytes, 1024)
        _int_at_least("max_batch", self.max_batch, 1)
        _int_at_least("status_window", self.status_window, 1)
        _int_at_least("shadow_queue", self.shadow_queue, 1)
        _int_at_least("max_segments", self.max_segments, 1)
        if self.segment_fact is not None and (
            not isinstance(self.segment_fact, str) or not self.segment_fact
        ):
            raise _config_error("segment_fact", f"must be a fact name, got {self.segment_fact!r}")
        object.__setattr__(self, "cors_origins", _origins(self.cors_origins))
        object.__setattr__(self, "body_timeout_s", _seconds("body_timeout_s", self.body_timeout_s))
        object.__setattr__(
            self, "header_timeout_s", _seconds("header_timeout_s", self.header_timeout_s)
        )
        object.__setattr__(self, "log_timeout_s", _seconds("log_timeout_s", self.log_timeout_s))
        object.__setattr__(self, "sensitive_facts", _names("sensitive_facts", self.sensitive_facts))
        if self.segment_fact is not None and self.segment_fact in self.sensitive_facts:
            raise _config_error(
                "segment_fact",
                f"{self.segment_fact!r} is a sensitive fact; its values would appear in "
                "/metrics and on the status page",
            )
        if self.salt is not None and (not isinstance(self.salt, str) or not self.salt):
            raise _config_error("salt", "must be a non-empty string")
        if not isinstance(self.admin_token_env, str) or not self.admin_token_env:
            raise _config_error("admin_token_env", "must be an environment variable name")
        if not isinstance(self.admin, bool):
            raise _config_error("admin", f"must be true or false, got {self.admin!r}")
        w = self.commit_window_s
        if isinstance(w, bool) or not isinstance(w, (int, float)) or not math.isfinite(w):
            raise _config_error("commit_window_s", f"must be a number of seconds, got {w!r}")
        if not 0 <= w <= 1:
            raise _config_error("commit_window_s", f"must be between 0 and 1 second, got {w!r}")
        from ..records._audit import check_rate

        try:
            object.__setattr__(self, "audit_rate", check_rate(self.audit_rate, "it"))
        except UserInputError as exc:
            raise _config_error("audit_rate", str(exc).removeprefix("it ")) from None
        from .._pii import PIIRedaction

        try:
            redaction = PIIRedaction.coerce(self.redact_pii, what="it")
        except UserInputError as exc:
            raise _config_error("redact_pii", str(exc).removeprefix("it: ")) from None
        object.__setattr__(self, "redact_pii", () if redaction is None else redaction.kinds)

    def open_log(self, **kw: Any) -> Any:
        """The decision log of this config (:func:`hybridroute.records.open_log`), with its
        sensitive facts, salt and :attr:`log_timeout_s`; ``kw`` adds options (``audit``)."""
        from ..records import open_log
        from ..records._url import is_url

        scheme = self.log.split(":", 1)[0].lower() if is_url(self.log) else "sqlite"
        timeout: dict[str, Any] = (
            {"busy_timeout_s": self.log_timeout_s}
            if scheme == "sqlite"
            else {"statement_timeout_s": self.log_timeout_s}
        )
        return open_log(
            self.log,
            sensitive_fields=self.sensitive_facts,
            salt=self.salt,
            **timeout,
            **kw,
        )

    def audit_sampler(self) -> Any:
        """The :class:`~hybridroute.records.AuditSampler` of :attr:`audit_rate` (key from
        ``HYBRIDROUTE_AUDIT_KEY``), ``None`` for rate 0.

        Raises
        ------
        UserInputError
            The rate is above 0 and ``HYBRIDROUTE_AUDIT_KEY`` is not set (named).
        """
        from ..records import AuditSampler

        return AuditSampler.from_env(self.audit_rate)

    def admin_token(self) -> str | None:
        """The admin token from the environment, or ``None`` when admin endpoints are off."""
        if not self.admin:
            return None
        return os.environ.get(self.admin_token_env) or None

    # ------------------------------------------------------------------ worker hand-over
    def to_json(self) -> str:
        """The configuration as JSON, without the salt (for worker processes).

        Workers read the salt where the parent did: ``HYBRIDROUTE_LOG_SALT``. A salt
        given here is refused (it would have to travel in the environment or argv).
        """
        if self.salt is not None:
            raise _config_error(
                "salt",
                "cannot be handed to worker processes; set HYBRIDROUTE_LOG_SALT instead",
            )
        doc = asdict(self)
        doc["router"] = os.fspath(self.router)
        doc["shadows"] = [os.fspath(s) for s in self.shadows]
        doc.pop("salt")
        return json.dumps(doc, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> ServiceConfig:
        """The configuration :meth:`to_json` wrote."""
        from .._safeio import parse_json

        doc = parse_json(text, source="service config", what="service config")
        if not isinstance(doc, Mapping):
            raise UserInputError("service config: not a JSON object")
        known = set(cls.__dataclass_fields__) - {"salt"}
        unknown = sorted(set(doc) - known)
        if unknown:
            raise _config_error(unknown[0], "is not a service config field")
        args = dict(doc)
        for key in ("shadows", "cors_origins", "sensitive_facts"):
            if key in args and isinstance(args[key], list):
                args[key] = tuple(args[key])
        return cls(**args)
