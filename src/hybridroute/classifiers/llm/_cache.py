"""On-disk answer cache of the LLM classifier (a table of the classifiers' one cache
store, :mod:`hybridroute.classifiers._cache_store`, in a cache directory).

A key is the SHA-256 of the canonical JSON of everything that decides an answer and where
it came from (:func:`answer_fields`, then :func:`cache_key` with the text):

* the **endpoint** (:func:`endpoint_identity`): the ``api_base`` given, normalised
  (:func:`normalise_url`); without one, the provider's default endpoint -- the model
  string's provider prefix, plus the base URL the environment sets for that provider
  (``<PROVIDER>_API_BASE`` / ``<PROVIDER>_BASE_URL``; for the OpenAI route, a model
  string without a prefix included, ``OPENAI_BASE_URL`` / ``OPENAI_API_BASE``) and
  ``litellm.api_base`` when a caller set it. So a stand-in server, a self-hosted model
  and the provider behind the same model string never share answers. The API key is not
  part of it (another key of the same account gets the same model);
* the model string, and the extra litellm parameters (``max_tokens``, ``top_p``,
  ``custom_llm_provider``...);
* the **prompt** (:func:`prompt_identity`): the template's version string, the SHA-256 of
  its content, and the SHA-256 of the messages it renders for the label set (the text
  left as a placeholder, and the repair messages) -- so an edited template, or a
  hybridroute release that words the prompt differently, misses even under the same
  version string;
* the label set (in order), the structured-output mode, the confidence method and its
  settings, and the text.

Only valid answers are stored; an abstention is asked again on the next run. An endpoint
chosen some other way (a litellm config file, a proxy in front of the default URL) is not
seen: pass ``api_base`` to make it part of the key.

Key schema 2 added the endpoint, the extra parameters and the rendered prompt. Rows
written under schema 1 are never served: their keys cannot match a schema-2 key, so they
are misses (asked again, the new answer stored beside them); they stay in the file
unused until it is deleted.

Values are JSON, read back through the hardened parser (:func:`hybridroute._safeio.
parse_json`: no duplicate keys, bounded nesting and integers, no NaN / Infinity, valid
Unicode), so nothing stored can execute code or exhaust memory on load. A row that fails
that check (a damaged file, a hand-edited or hostile row) is a **cache miss**, not an
error: the text is asked again and the new answer replaces the row. Misses of that kind
are counted (:attr:`AnswerCache.damaged`) so that the classifier can warn about them --
a cache is an optimisation and must never stop a batch, but a damaged one should not go
unnoticed. The classifier also refuses rows whose labels are outside its label set.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from ..._safeio import parse_json
from ...exceptions import InputError
from .._cache_store import CacheStore

if TYPE_CHECKING:
    from ._prompt import PromptTemplate

__all__ = [
    "CACHE_FILENAME",
    "AnswerCache",
    "answer_fields",
    "cache_key",
    "endpoint_identity",
    "normalise_url",
    "prompt_identity",
]

CACHE_FILENAME = "llm_answers.sqlite3"
#: Version of the key's definition; a change makes every older row a miss.
_SCHEMA_VERSION = 2
_TABLE = (
    "CREATE TABLE IF NOT EXISTS answers (key TEXT PRIMARY KEY, value TEXT NOT NULL, "
    "created REAL NOT NULL)"
)

# Providers whose requests go to the OpenAI base URL (a model string without a provider
# prefix is resolved to OpenAI by litellm for the usual model names).
_OPENAI_ROUTE = frozenset({"", "openai", "custom_openai", "text-completion-openai"})
_DEFAULT_PORTS = {"http": 80, "https": 443}
# Stand-ins for the text, answer and error in the rendered prompt (never real input).
_TEXT_SLOT, _ANSWER_SLOT, _ERROR_SLOT = "\x00text\x00", "\x00answer\x00", "\x00error\x00"


def normalise_url(url: str) -> str:
    """``url`` as an endpoint identity: scheme and host lower-cased, the default port,
    user name / password, fragment and trailing slashes dropped (query kept).

    A string that does not parse as an absolute URL is returned stripped, as given.
    """
    text = str(url).strip()
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError:
        return text
    host = parts.hostname
    if not parts.scheme or not host:
        return text.rstrip("/")
    scheme = parts.scheme.lower()
    if ":" in host:  # an IPv6 address
        host = f"[{host}]"
    netloc = host if port is None or port == _DEFAULT_PORTS.get(scheme) else f"{host}:{port}"
    return urlunsplit((scheme, netloc, parts.path.rstrip("/"), parts.query, ""))


def _provider(model: str, extra_params: Mapping[str, Any]) -> str:
    custom = extra_params.get("custom_llm_provider")
    if isinstance(custom, str) and custom.strip():
        return custom.strip().lower()
    head, sep, _ = str(model).partition("/")
    return head.strip().lower() if sep else ""


def _base_variables(provider: str) -> list[str]:
    """Environment variables litellm reads a base URL for ``provider`` from."""
    names = set()
    if provider in _OPENAI_ROUTE:
        names.update({"OPENAI_BASE_URL", "OPENAI_API_BASE"})
    stem = provider.upper().replace("-", "_").replace(".", "_")
    for prefix in {stem, stem.split("_")[0]} - {""}:  # ollama_chat reads OLLAMA_API_BASE
        names.update({f"{prefix}_API_BASE", f"{prefix}_BASE_URL"})
    return sorted(names)


def endpoint_identity(
    model: str,
    api_base: str | None,
    extra_params: Mapping[str, Any] | None = None,
    *,
    environ: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Where the answers of ``model`` come from, as part of the cache key.

    Parameters
    ----------
    model : str
        The litellm model string.
    api_base : str or None
        The endpoint given to the classifier; when set it decides alone.
    extra_params : mapping, optional
        The classifier's extra litellm parameters (a ``custom_llm_provider`` there names
        the provider).
    environ : mapping, optional
        The environment to read (default: ``os.environ``).

    Returns
    -------
    dict
        ``{"api_base": <normalised URL>}``, or ``{"provider_default": <provider>,
        "overrides": {name: normalised URL}}`` naming the base URLs set in the
        environment (and ``litellm.api_base``) for that provider.
    """
    if api_base is not None:
        return {"api_base": normalise_url(api_base)}
    env = os.environ if environ is None else environ
    provider = _provider(model, extra_params or {})
    overrides = {
        name: normalise_url(env[name]) for name in _base_variables(provider) if env.get(name)
    }
    litellm = sys.modules.get("litellm")  # read, never imported here (nor set)
    configured = getattr(litellm, "api_base", None) if litellm is not None else None
    if isinstance(configured, str) and configured:
        overrides["litellm.api_base"] = normalise_url(configured)
    return {"provider_default": provider or "openai", "overrides": overrides}


def prompt_identity(template: PromptTemplate, labels: Sequence[str]) -> dict[str, str]:
    """The prompt's part of the cache key: version, content hash, rendered-messages hash."""
    rendered = {
        "messages": template.render(list(labels), _TEXT_SLOT),
        "repair": template.repair_messages(_ANSWER_SLOT, _ERROR_SLOT),
    }
    return {
        "version": template.version,
        "template_sha256": template.fingerprint(),
        "messages_sha256": hashlib.sha256(_canonical(rendered).encode("utf-8")).hexdigest(),
    }


def answer_fields(
    *,
    model: str,
    api_base: str | None,
    extra_params: Mapping[str, Any] | None,
    template: PromptTemplate,
    labels: Sequence[str],
    mode: str,
    confidence: Mapping[str, Any],
) -> dict[str, Any]:
    """Everything but the text that decides an answer (see the module notes), for
    :func:`cache_key`. Values JSON cannot write exactly are keyed by their ``repr``."""
    labels = [str(label) for label in labels]
    return {
        "endpoint": endpoint_identity(model, api_base, extra_params),
        "model": model,
        "extra_params": json.loads(_canonical(dict(extra_params or {}))),
        "prompt": prompt_identity(template, labels),
        "labels": labels,
        "mode": mode,
        "confidence": dict(confidence),
    }


def _canonical(value: Any) -> str:
    return json.dumps(
        value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=repr
    )


def cache_key(fields: Mapping[str, Any], text: str) -> str:
    """SHA-256 of the canonical JSON of ``fields`` (:func:`answer_fields`) plus ``text``
    and the key schema version."""
    payload = _canonical({"schema": _SCHEMA_VERSION, **fields, "text": text})
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


class AnswerCache(CacheStore):
    """A small key -> JSON store in ``<directory>/llm_answers.sqlite3`` (a
    :class:`~hybridroute.classifiers._cache_store.CacheStore`).

    Use as a context manager; writes are committed on :meth:`flush` (every 64 puts) and
    on exit.

    Attributes
    ----------
    damaged : int
        Rows that :meth:`get_many` found but could not read (not strict JSON, or not a
        JSON object): treated as misses.
    """

    #: Longest stored value read back, in characters: a real entry is a few hundred.
    MAX_VALUE_CHARS = 1 << 16

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        super().__init__(directory, filename=CACHE_FILENAME, table="answers", create_sql=_TABLE)
        self.damaged = 0

    def get_many(self, keys: Iterable[str]) -> dict[str, dict[str, Any]]:
        """Stored values for those of ``keys`` that are present."""
        found: dict[str, dict[str, Any]] = {}
        # Only the first MAX_VALUE_CHARS + 1 characters are fetched, so an oversized row
        # costs no more memory than a legitimate one.
        columns = f"key, substr(value, 1, {self.MAX_VALUE_CHARS + 1}), typeof(value)"
        for key, value, kind in self.select(columns, keys):
            parsed = self._parse(value, kind)
            if parsed is None:
                self.damaged += 1  # a damaged row is a cache miss, not an error
            else:
                found[key] = parsed
        return found

    def _parse(self, value: Any, kind: str) -> dict[str, Any] | None:
        if kind != "text" or not isinstance(value, str) or len(value) > self.MAX_VALUE_CHARS:
            return None
        try:
            parsed = parse_json(value, source=str(self.path), what="cached LLM answer")
        except InputError:
            return None
        return parsed if isinstance(parsed, dict) else None

    def put(self, key: str, value: Mapping[str, Any]) -> None:
        """Queue one value; written on the next :meth:`flush` (every 64 puts)."""
        row = (key, json.dumps(value, sort_keys=True), time.time())
        self.queue(("key", "value", "created"), [row])
