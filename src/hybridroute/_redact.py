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

from ._canonical import canonical_json, snapshot_hash
from .contracts import RECORD_VERSION
from .exceptions import UserInputError

__all__ = ["REDACTED", "Redactor", "scrub", "scrub_text"]

REDACTED = "[REDACTED]"

_SECRET_KEY_RE = re.compile(
    r"(api[_-]?key|apikey|secret|token|passw(or)?d|authorization|auth[_-]?header|credential|private[_-]?key)",
    re.IGNORECASE,
)
_SECRET_VALUE_RE = re.compile(
    r"""(
        sk-(?:ant-|proj-|live-|test-)?                    # OpenAI / Anthropic style: the body
          (?=[A-Za-z0-9_\-]*[A-Z0-9])[A-Za-z0-9_\-]{16,}  # has a digit or capital, so the
                                                          # "sk-" of "task-specific-datasets" is none
      | AKIA[0-9A-Z]{16}                                  # AWS access key id
      | gh[pousr]_[A-Za-z0-9]{30,}                        # GitHub tokens
      | xox[abprs]-[A-Za-z0-9\-]{10,}                     # Slack tokens
      | AIza[0-9A-Za-z_\-]{35}                            # Google API keys
      | (?i:bearer)\s+[A-Za-z0-9._\-+/=]{16,}              # bearer tokens
    )""",
    re.VERBOSE,
)
# a credential assigned in free text: "password=hunter22", "api_key: abc123...", "token='x...'"
# (the key must be credential-like, not a count such as prompt_tokens; the value is 6+
# characters up to whitespace, a quote or a separator)
_ASSIGNED_SECRET_RE = re.compile(
    r"""(?P<key>[A-Za-z0-9_\-]*(?:api[_-]?key|apikey|secret|token|passw(?:or)?d|pwd|credential
          |private[_-]?key)[A-Za-z0-9_\-]*)
        (?P<sep>["']?\s*[=:]\s*["']?)
        (?!\[REDACTED\])(?P<value>[^\s"';,)}\]]{6,})""",
    re.IGNORECASE | re.VERBOSE,
)
_HASHED_RE = re.compile(r"^hmac-sha256:[0-9a-f]{64}$")
# a URL's password: scheme://user:password@host
_URL_PASSWORD_RE = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.\-]*://[^/\s:@]*:)[^/\s@]+@")
# a number under a key that names token counts (prompt_tokens) is a count, not a token
_COUNT_KEY_RE = re.compile(r"tokens$", re.IGNORECASE)
_ENV_NAME_RE = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL)", re.IGNORECASE)
_MIN_ENV_SECRET = 8
# a sensitive value this short is replaced only where it is a whole string, never inside text
_MIN_SUBSTRING = 6
# learned values longer than this are matched with str.replace, not the trie pattern
_MAX_TRIE_VALUE = 256
# strings up to this long (labels, destinations, fact values: they repeat from record to
# record) keep their scrubbed form in a redactor's cache, at most _TEXT_CACHE_SIZE of them
_MAX_CACHED_TEXT = 64
_TEXT_CACHE_SIZE = 8192
_TUPLE_CACHE_SIZE = 256
_MIN_CACHED_TUPLE = 4
# Literal pieces without which the patterns above cannot match an ASCII text: a text that
# holds none of them skips the pattern (the same result, without the regex engine's walk
# over every position). Non-ASCII text always runs the patterns: under IGNORECASE a few
# non-ASCII letters match ASCII ones (the long s, the Kelvin sign, the dotted I).
_KEY_SHAPES_CASED = ("sk-", "AKIA", "xox", "AIza")
_ASSIGNED_WORDS = ("api", "secret", "token", "passw", "pwd", "credential", "private")
_PLAIN_TYPES = (type(None), bool, int, float)


def _may_hold_key_shape(text: str, lower: str) -> bool:
    """Whether :data:`_SECRET_VALUE_RE` can match the ASCII ``text`` (``lower``: its
    lower case): each of its alternatives starts with a literal tested here."""
    for piece in _KEY_SHAPES_CASED:
        if piece in text:
            return True
    return ("gh" in text and "_" in text) or "bearer" in lower


def _may_hold_assignment(lower: str) -> bool:
    """Whether :data:`_ASSIGNED_SECRET_RE` can match an ASCII text (``lower``: its lower
    case; the caller has seen a ``=`` or ``:``): its key holds one of these words."""
    for word in _ASSIGNED_WORDS:
        if word in lower:
            return True
    return False


def _assigned(match: re.Match[str]) -> str:
    """An assigned credential with its value replaced (a token count is left alone)."""
    if _COUNT_KEY_RE.search(match.group("key")):
        return match.group(0)
    return match.group("key") + match.group("sep") + REDACTED


def _trie_pattern(words: Iterable[str]) -> str:
    """One regular expression matching any of ``words``, longest first (a trie, so the cost
    per character does not grow with the number of words)."""
    trie: dict[str, Any] = {}
    for w in words:
        node = trie
        for ch in w:
            node = node.setdefault(ch, {})
        node[""] = {}

    def build(node: dict[str, Any]) -> str:
        end = "" in node
        alts = [re.escape(ch) + build(sub) for ch, sub in sorted(node.items()) if ch]
        if not alts:
            return ""
        body = alts[0] if len(alts) == 1 else "(?:" + "|".join(alts) + ")"
        return "(?:" + body + ")?" if end else body

    return build(trie)


class Redactor:
    """Hashes declared sensitive facts and scrubs credentials from records and documents.

    Parameters
    ----------
    sensitive_fields : iterable of str
        Fact names whose values are stored as salted hashes.
    salt : str or bytes, optional
        Required when ``sensitive_fields`` is not empty; defaults to the
        ``HYBRIDROUTE_LOG_SALT`` environment variable. Never written anywhere.

    Notes
    -----
    The rules, applied to every string and mapping key:

    * a value under a credential-like key (``api_key``, ``token``, ``password``...) is
      replaced whole, except a number under a key naming token counts (``prompt_tokens``);
    * provider-key-shaped substrings and URL passwords are replaced first, then the values
      of credential-like environment variables (read when the redactor is built), so an
      environment value inside a key cannot break the key's shape and let the rest through;
    * a declared sensitive fact is hashed under its key; its value is also hashed where it
      occurs in the same record's text and detail (values of 6 characters or more), and
      values passed to :meth:`learn` are hashed wherever they occur.
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
        salt_text = self._salt.decode("utf-8", "replace")
        self._env_secrets = sorted(
            {
                v
                for k, v in os.environ.items()
                if _ENV_NAME_RE.search(k)
                and len(v) >= _MIN_ENV_SECRET
                and k != "HYBRIDROUTE_LOG_SALT"
            }
            # a short salt is not searched for: replacing every "s" would mangle the text
            | ({salt_text} if len(salt_text) >= _MIN_ENV_SECRET else set()),
            key=len,
            reverse=True,
        )
        self._whole: dict[str, str] = {}  # learned sensitive value (as text) -> its hash
        self._long: list[str] = []
        self._pattern: re.Pattern[str] | None = None
        # short text -> its scrubbed form; what it depends on (the environment's secrets,
        # the salt, the learned values) is fixed until learn() adds values and clears it
        self._text_cache: dict[str, str] = {}
        # id -> (tuple of strings, its scrubbed items, whether any changed); the tuple is
        # held, so its id cannot be reused by another object while the entry lives
        self._tuple_cache: dict[int, tuple[tuple[str, ...], tuple[str, ...], bool]] = {}
        # mapping key -> (its scrubbed form, whether it is credential-like): one lookup per
        # key of a record instead of two calls (cleared with the text cache)
        self._key_info: dict[str, tuple[str, bool]] = {}

    def hash_value(self, value: Any) -> str:
        """Salted HMAC-SHA-256 of a fact value's canonical JSON (a hashed value is kept)."""
        if type(value) is str and _HASHED_RE.match(value):
            return value  # already redacted (a replayed or re-logged record)
        digest = hmac.new(self._salt, canonical_json(value).encode("utf-8"), hashlib.sha256)
        return "hmac-sha256:" + digest.hexdigest()

    def learn(self, facts_rows: Iterable[Mapping[str, Any] | None]) -> Redactor:
        """Remember the values of the declared sensitive facts in ``facts_rows`` so that they
        are hashed wherever they appear later (free text and keys included); returns self.

        Strings and integers only; values shorter than 6 characters are replaced only where
        they are a whole string (inside free text they would match too much).
        """
        names = self.sensitive_fields
        if not names:
            return self
        added = False
        for facts in facts_rows:
            if not facts:
                continue
            for name in names:
                v = facts.get(name)
                if v is None or isinstance(v, bool) or not isinstance(v, (str, int)):
                    continue  # floats, lists and objects are hashed only under their key
                text = str(v)
                if not text or _HASHED_RE.match(text) or text in self._whole:
                    continue
                self._whole[text] = self.hash_value(v)
                added = True
        if added:
            subs = [t for t in self._whole if len(t) >= _MIN_SUBSTRING]
            self._long = sorted(
                (t for t in subs if len(t) > _MAX_TRIE_VALUE), key=len, reverse=True
            )
            short = [t for t in subs if len(t) <= _MAX_TRIE_VALUE]
            self._pattern = re.compile(_trie_pattern(short)) if short else None
            self._text_cache = {}
            self._tuple_cache = {}
            self._key_info = {}
        return self

    def scrub_text(self, text: str, local: Mapping[str, str] | None = None) -> str:
        """``text`` with credentials (and learned or ``local`` sensitive values) replaced.

        ``local`` maps sensitive values of the record at hand to their hashes.
        """
        if not local and len(text) <= _MAX_CACHED_TEXT:
            cache = self._text_cache
            hit = cache.get(text)
            if hit is None:
                hit = self._scrub_text(text, None)
                if len(cache) >= _TEXT_CACHE_SIZE:
                    cache.clear()
                cache[text] = hit
            return hit
        return self._scrub_text(text, local)

    def _scrub_text(self, text: str, local: Mapping[str, str] | None) -> str:
        whole = self._whole.get(text) if self._whole else None
        if whole is not None:
            return whole
        if local:
            if text in local:
                return local[text]
            for value, hashed in local.items():
                if len(value) >= _MIN_SUBSTRING and value in text:
                    text = text.replace(value, hashed)
        if len(text) < _MIN_ENV_SECRET:
            return text  # too short to hold any credential we look for
        if "://" in text:
            text = _URL_PASSWORD_RE.sub(lambda m: m.group("head") + REDACTED + "@", text)
        ascii_text = text.isascii()
        lower = text.lower() if ascii_text else ""
        # key shapes first: replacing an environment value or a learned value that occurs
        # inside a key would break its shape and let the rest of the key through
        if not ascii_text or _may_hold_key_shape(text, lower):
            text = _SECRET_VALUE_RE.sub(REDACTED, text)
            lower = text.lower() if ascii_text else ""
        if ("=" in text or ":" in text) and (not ascii_text or _may_hold_assignment(lower)):
            text = _ASSIGNED_SECRET_RE.sub(_assigned, text)
        if self._whole:
            for value in self._long:
                if value in text:
                    text = text.replace(value, self._whole[value])
            if self._pattern is not None:
                text = self._pattern.sub(lambda m: self._whole[m.group(0)], text)
        for secret in self._env_secrets:
            if secret in text:
                text = text.replace(secret, REDACTED)
        return text

    def secret_key(self, key: str) -> bool:
        """Whether a mapping key is credential-like (its value is replaced whole)."""
        hit = self._key_cache.get(key)
        if hit is None:
            if len(self._key_cache) >= _TEXT_CACHE_SIZE:  # bounded, like the other caches
                self._key_cache.clear()
            hit = self._key_cache[key] = bool(_SECRET_KEY_RE.search(key))
        return hit

    def _key(self, key: str) -> tuple[str, bool]:
        """A string key's scrubbed form and whether it is credential-like (kept)."""
        info = self._key_info.get(key)
        if info is None:
            if len(self._key_info) >= _TEXT_CACHE_SIZE:
                self._key_info.clear()
            info = self._key_info[key] = (self.scrub_text(key), self.secret_key(key))
        return info

    def _scrub_map(
        self, value: Any, changed: list[bool] | None, local: Mapping[str, str] | None
    ) -> dict[Any, Any]:
        """:meth:`_scrub` of a mapping: keys scrubbed, each value under its key's rules.

        What the general walk does, with the common cases inline: a string key's facts
        looked up once, and a number, a flag, null or a short string under a key that is
        not credential-like handled without a call per value.
        """
        out_map: dict[Any, Any] = {}
        key_info = self._key_info
        texts = self._text_cache
        for k, v in value.items():
            if type(k) is str:
                if local:
                    sk, secret = self.scrub_text(k, local), self.secret_key(k)
                else:
                    info = key_info.get(k)
                    sk, secret = info if info is not None else self._key(k)
                name = k
            else:
                sk = k
                name = str(k)
                secret = self.secret_key(name)
            if changed is not None and sk != k:
                changed.append(True)
            tv = type(v)
            if v is None:
                out_map[sk] = v
            elif secret:
                out_map[sk] = self._scrub(v, name, changed, local)
            elif tv is str:
                hit = texts.get(v) if not local else None
                if hit is None:
                    hit = self.scrub_text(v, local)
                if changed is not None and hit is not v and hit != v:
                    changed.append(True)
                out_map[sk] = hit
            elif tv is int or tv is float or tv is bool:
                out_map[sk] = v
            # the key is not credential-like (handled above): what _scrub does with the
            # value under no key, its common containers without the call through it
            elif tv is dict or tv is MappingProxyType:
                out_map[sk] = self._scrub_map(v, changed, local)
            elif tv is tuple or tv is list:
                out_map[sk] = self._scrub_seq(v, changed, local)
            else:
                out_map[sk] = self._scrub(v, None, changed, local)
        return out_map

    def _scrub_seq(
        self,
        value: list[Any] | tuple[Any, ...],
        changed: list[bool] | None,
        local: Mapping[str, str] | None,
    ) -> list[Any]:
        """:meth:`_scrub` of a list or tuple, strings and plain values handled inline.

        A tuple of at least :data:`_MIN_CACHED_TUPLE` strings (a router's labels recur in
        every record of its router) keeps its scrubbed form, keyed by the tuple itself;
        shorter ones (a record's own fact lists) cost less to scrub than to keep.
        """
        is_tuple = type(value) is tuple
        if is_tuple and not local:
            held = self._tuple_cache.get(id(value))
            if held is not None and held[0] is value:  # the same tuple (held alive)
                if held[2] and changed is not None:
                    changed.append(True)
                return list(held[1])
        texts = None if local else self._text_cache
        plain = _PLAIN_TYPES
        out_list: list[Any] = []
        add = out_list.append
        all_str = True
        any_changed = False
        for v in value:
            tv = type(v)
            if tv is str:
                hit = texts.get(v) if texts is not None else None
                if hit is None:
                    hit = self.scrub_text(v, local)
                if hit is not v and hit != v:
                    any_changed = True
                add(hit)
            else:
                all_str = False
                add(v if tv in plain else self._scrub(v, None, changed, local))
        if any_changed and changed is not None:
            changed.append(True)
        if is_tuple and all_str and not local and len(value) >= _MIN_CACHED_TUPLE:
            cache = self._tuple_cache
            if len(cache) >= _TUPLE_CACHE_SIZE:
                cache.clear()
            cache[id(value)] = (tuple(value), tuple(out_list), any_changed)
        return out_list

    def _scrub(
        self,
        value: Any,
        key: str | None = None,
        changed: list[bool] | None = None,
        local: Mapping[str, str] | None = None,
    ) -> Any:
        t = type(value)
        if key is not None and value is not None and self.secret_key(key):
            if (t is int or t is float) and _COUNT_KEY_RE.search(key):
                return value  # prompt_tokens, max_tokens: a count, not a token
            if changed is not None and value != REDACTED:
                changed.append(True)
            return REDACTED
        if t is str:
            out = self.scrub_text(value, local)
            if changed is not None and out is not value and out != value:
                changed.append(True)
            return out
        if value is None or t is int or t is float or t is bool:
            return value
        if t is list or t is tuple:  # before the Mapping check: an ABC check is slow
            return self._scrub_seq(value, changed, local)
        if t is dict or t is MappingProxyType or isinstance(value, Mapping):
            return self._scrub_map(value, changed, local)
        if isinstance(value, (set, frozenset)):
            return [self._scrub(v, None, changed, local) for v in sorted(value, key=str)]
        if isinstance(value, str):  # str enums (stages, reason codes)
            return self._scrub(str(value), None, changed, local)
        if isinstance(value, (bool, int, float)):
            return value
        item = getattr(value, "item", None)  # numpy scalars
        if callable(item) and getattr(value, "shape", None) == ():
            return self._scrub(item(), None, changed, local)
        tolist = getattr(value, "tolist", None)  # numpy arrays
        if callable(tolist):
            return self._scrub(tolist(), None, changed, local)
        return self.scrub_text(str(value), local)  # paths and other objects: as their text

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
                    try:
                        out[k] = self.hash_value(v)
                    except (TypeError, ValueError):  # not canonical JSON (NaN, an object)
                        out[k] = REDACTED
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
        return self._apply_owned(dict(record))

    def _apply_owned(self, out: dict[str, Any]) -> dict[str, Any]:
        """:meth:`apply` of a record dict the caller made for it (changed in place)."""
        snap: Mapping[str, Any] = out.get("input_snapshot") or {}
        hashed: list[str] = []
        changed: list[bool] = []
        local: dict[str, str] = {}  # this record's sensitive values, hashed where they recur
        facts = snap.get("facts") if self.sensitive_fields else None
        if isinstance(facts, Mapping):
            snap = dict(snap)
            facts = dict(facts)
            for name in sorted(self.sensitive_fields & set(facts)):
                original = facts[name]
                if original is not None:
                    value = self.hash_value(original)
                    if value != original:
                        changed.append(True)
                        if type(original) is str or type(original) is int:
                            local[str(original)] = value
                    facts[name] = value
                    hashed.append(name)
            snap["facts"] = facts
        out["input_snapshot"] = self._scrub(snap, None, changed, local)
        if changed or not out.get("snapshot_hash"):
            # the hash of the original input would let a holder of the record test guesses
            # of what was removed; store the hash of what is stored instead
            out["snapshot_hash"] = snapshot_hash(out["input_snapshot"])
        detail = out.get("detail") or {}
        if self.sensitive_fields:
            # a rule's diagnosis may echo a fact value (e.g. the risk guard's "action")
            detail = self._hash_named(detail, hashed)
        detail = self._scrub(detail, None, None, local)
        if hashed:
            detail["hashed_facts"] = hashed
        out["detail"] = detail
        return out

    def apply_decision(self, decision: Any) -> dict[str, Any]:
        """:meth:`apply` straight from a Decision, without thawing it first."""
        return self._apply_owned(
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


# the redactor of the environment as it was when it was made: (the environment, redactor)
_ENV_REDACTOR: tuple[Any, Redactor] | None = None


def _env_redactor() -> Redactor:
    """A :class:`Redactor` without sensitive fields for the environment as it is now.

    Made again whenever the environment changed since the last one was made (compared
    as a whole: a new secret, or a changed salt, is never missed), else reused -- with
    its cache of scrubbed short texts -- instead of reading every variable again.
    """
    global _ENV_REDACTOR
    data = getattr(os.environ, "_data", None)  # CPython: the raw mapping behind os.environ
    key = tuple(data.items()) if isinstance(data, dict) else None
    held = _ENV_REDACTOR
    if key is not None and held is not None and held[0] == key:
        return held[1]
    redactor = Redactor()
    if key is not None:
        _ENV_REDACTOR = (key, redactor)
    return redactor


def scrub(value: Any) -> Any:
    """Credentials removed from any JSON-able value (what every written artifact gets).

    A :class:`Redactor` without sensitive fields, for the credential-like environment
    variables as they are now.
    """
    return _env_redactor().scrub(value)


def scrub_text(text: str) -> str:
    """Credentials removed from one string (see :func:`scrub`)."""
    return _env_redactor().scrub_text(text)
