"""Keeping secrets out of everything hybridroute writes.

The decision log, reports and errors files, MLflow parameters and artifacts, JSON output
of the command line and experiment tables all pass through :class:`Redactor` (records)
or :func:`scrub` (any other JSON-able value) before they are written. Two mechanisms:

* **Declared sensitive facts** (an email, a customer id) are replaced by a salted
  HMAC-SHA-256 (``"hmac-sha256:<hex>"``). The salt is given by the caller (or the
  ``HYBRIDROUTE_LOG_SALT`` environment variable) and never stored with the log, so the
  hashes can be joined across records without revealing the value.
* **Credentials never reach the log**: values under credential-like keys (``api_key``,
  ``token``, ``password``, ``secret``, ``authorization``...), strings shaped like common
  provider keys (``sk-...``, ``AKIA...``, ``ghp_...``, ``xox?-...``, ``Bearer ...``), and the
  exact values of credential-like environment variables are replaced by ``[REDACTED]``
  wherever they appear, free text included.

**The stored snapshot hash is the hash of what is stored.** A record's ``snapshot_hash``
is recomputed from the redacted snapshot whenever redaction changed it, so the hash
reveals nothing the stored record does not: nobody can put a guessed email or key back
into a stored snapshot and confirm it by comparing hashes (without the salt, a guess of a
hashed fact cannot even be formed). The same input with the same salt still gives the same
stored hash, which is all replay and the drift report's same-snapshot conflicts need.
Redaction is idempotent (an ``hmac-sha256:`` value is not hashed again), so replaying a
stored snapshot and redacting the result gives back the stored hash.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any

from .contracts import RECORD_VERSION, canonical_json, snapshot_hash
from .exceptions import UserInputError

__all__ = ["REDACTED", "Redactor", "scrub", "scrub_text"]

REDACTED = "[REDACTED]"

_SECRET_KEY_RE = re.compile(
    r"(api[_-]?key|apikey|secret|token|passw(or)?d|authorization|auth[_-]?header|credential|private[_-]?key)",
    re.IGNORECASE,
)
_SECRET_VALUE_RE = re.compile(
    r"""(
        sk-(?:ant-|proj-|live-|test-)?[A-Za-z0-9_\-]{16,}   # OpenAI / Anthropic style
      | AKIA[0-9A-Z]{16}                                  # AWS access key id
      | gh[pousr]_[A-Za-z0-9]{30,}                        # GitHub tokens
      | xox[abprs]-[A-Za-z0-9\-]{10,}                     # Slack tokens
      | AIza[0-9A-Za-z_\-]{35}                            # Google API keys
      | (?i:bearer)\s+[A-Za-z0-9._\-+/=]{16,}              # bearer tokens
    )""",
    re.VERBOSE,
)
_HASHED_RE = re.compile(r"^hmac-sha256:[0-9a-f]{64}$")
_ENV_NAME_RE = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL)", re.IGNORECASE)
_MIN_ENV_SECRET = 8


class Redactor:
    """Hashes declared sensitive facts and scrubs credentials from a record.

    Parameters
    ----------
    sensitive_fields : iterable of str
        Fact names whose values are stored as salted hashes.
    salt : str or bytes, optional
        Required when ``sensitive_fields`` is not empty; defaults to the
        ``HYBRIDROUTE_LOG_SALT`` environment variable. Never written to the log.
    """

    def __init__(
        self, sensitive_fields: Iterable[str] = (), salt: str | bytes | None = None
    ) -> None:
        self.sensitive_fields = frozenset(sensitive_fields)
        if salt is None:
            salt = os.environ.get("HYBRIDROUTE_LOG_SALT")
        if self.sensitive_fields and not salt:
            raise UserInputError(
                "sensitive fields "
                + ", ".join(sorted(self.sensitive_fields))
                + " are declared but no salt is given (pass salt= or set HYBRIDROUTE_LOG_SALT)"
            )
        self._salt = salt.encode("utf-8") if isinstance(salt, str) else (salt or b"")
        self._key_cache: dict[str, bool] = {}
        self._env_secrets = sorted(
            {
                v
                for k, v in os.environ.items()
                if _ENV_NAME_RE.search(k)
                and len(v) >= _MIN_ENV_SECRET
                and k != "HYBRIDROUTE_LOG_SALT"
            }
            | ({self._salt.decode("utf-8", "replace")} if self._salt else set()),
            key=len,
            reverse=True,
        )

    def hash_value(self, value: Any) -> str:
        """Salted HMAC-SHA-256 of a fact value's canonical JSON (a hashed value is kept)."""
        if type(value) is str and _HASHED_RE.match(value):
            return value  # already redacted (a replayed or re-logged record)
        digest = hmac.new(self._salt, canonical_json(value).encode("utf-8"), hashlib.sha256)
        return "hmac-sha256:" + digest.hexdigest()

    def scrub_text(self, text: str) -> str:
        """Replace credential-shaped substrings and credential env values in ``text``."""
        if len(text) < _MIN_ENV_SECRET:
            return text  # too short to hold any credential we look for
        for secret in self._env_secrets:
            if secret in text:
                text = text.replace(secret, REDACTED)
        return _SECRET_VALUE_RE.sub(REDACTED, text)

    def _secret_key(self, key: str) -> bool:
        hit = self._key_cache.get(key)
        if hit is None:
            hit = self._key_cache[key] = bool(_SECRET_KEY_RE.search(key))
        return hit

    def _scrub(self, value: Any, key: str | None = None, changed: list[bool] | None = None) -> Any:
        if key is not None and value is not None and self._secret_key(key):
            if changed is not None and value != REDACTED:
                changed.append(True)
            return REDACTED
        t = type(value)
        if t is str:
            out = self.scrub_text(value)
            if changed is not None and out is not value and out != value:
                changed.append(True)
            return out
        if value is None or t is int or t is float or t is bool:
            return value
        if t is dict or t is MappingProxyType or isinstance(value, Mapping):
            return {k: self._scrub(v, str(k), changed) for k, v in value.items()}
        if t is list or t is tuple:
            return [self._scrub(v, None, changed) for v in value]
        if isinstance(value, str):
            return self._scrub(str(value), None, changed)
        return value

    def scrub(self, value: Any) -> Any:
        """A plain-JSON copy of ``value`` with credentials replaced (and, under any key named
        like a declared sensitive fact, the value hashed). For reports, params, tables."""
        if self.sensitive_fields:
            value = self._hash_named(value, [])
        return self._scrub(value)

    def _hash_named(self, value: Any, hashed: list[str]) -> Any:
        """Hash every value stored under a key named like a sensitive fact."""
        if isinstance(value, Mapping):
            out = {}
            for k, v in value.items():
                if k in self.sensitive_fields and v is not None:
                    out[k] = self.hash_value(v)
                    if k not in hashed:
                        hashed.append(k)
                else:
                    out[k] = self._hash_named(v, hashed)
            return out
        if isinstance(value, (list, tuple)):
            return [self._hash_named(v, hashed) for v in value]
        return value

    def apply(self, record: Mapping[str, Any]) -> dict[str, Any]:
        """A redacted, plain-JSON copy of a decision record (``Decision.to_dict()`` shape,
        or a :class:`~hybridroute.contracts.Decision`'s read-only views)."""
        out = dict(record)
        snap = dict(out.get("input_snapshot") or {})
        facts = snap.get("facts")
        hashed: list[str] = []
        changed: list[bool] = []
        if isinstance(facts, Mapping) and self.sensitive_fields:
            facts = dict(facts)
            for name in sorted(self.sensitive_fields & set(facts)):
                if facts[name] is not None:
                    value = self.hash_value(facts[name])
                    if value != facts[name]:
                        changed.append(True)
                    facts[name] = value
                    hashed.append(name)
            snap["facts"] = facts
        out["input_snapshot"] = self._scrub(snap, None, changed)
        if changed or not out.get("snapshot_hash"):
            # the hash of the original input would let a holder of the record test guesses
            # of what was removed; store the hash of what is stored instead
            out["snapshot_hash"] = snapshot_hash(out["input_snapshot"])
        detail = out.get("detail") or {}
        if self.sensitive_fields:
            # a rule's diagnosis may echo a fact value (e.g. the risk guard's "action")
            detail = self._hash_named(detail, hashed)
        detail = self._scrub(detail)
        if hashed:
            detail["hashed_facts"] = hashed
        out["detail"] = detail
        return out

    def apply_decision(self, decision: Any) -> dict[str, Any]:
        """:meth:`apply` straight from a Decision, without thawing it first."""
        return self.apply(
            {
                "record_version": RECORD_VERSION,
                "router": decision.router,
                "router_version": decision.router_version,
                "stage": str(decision.stage),
                "selected_destination": decision.selected_destination,
                "allowed_destinations": list(decision.allowed_destinations),
                "reason_code": str(decision.reason_code),
                "evidence_ids": list(decision.evidence_ids),
                "input_snapshot": decision.input_snapshot,
                "snapshot_hash": decision.snapshot_hash,
                "rule_id": decision.rule_id,
                "label": decision.label,
                "confidence": decision.confidence,
                "threshold": decision.threshold,
                "margin": decision.margin,
                "detail": decision.detail,
            }
        )


def scrub(value: Any) -> Any:
    """Credentials removed from any JSON-able value (what every written artifact gets).

    A fresh :class:`Redactor` without sensitive fields, so the credential-like environment
    variables are read as they are now.
    """
    return Redactor().scrub(value)


def scrub_text(text: str) -> str:
    """Credentials removed from one string (see :func:`scrub`)."""
    return Redactor().scrub_text(text)
