"""Sealing and signing artifacts: the one implementation behind every checksum verified on load.

Every artifact that changes a decision -- a saved classifier's ``manifest.json``, a policy,
a router bundle's ``manifest.json`` -- is a JSON document *sealed* with :func:`seal`:

* ``content_sha256`` -- the SHA-256 of the document's canonical JSON (sorted keys, no
  spaces, UTF-8, no NaN) **without** its seal fields. It catches corruption and edits
  that did not also recompute the hash; anyone can recompute it, so it is no defence
  against a deliberate edit.
* ``signature`` -- ``{"algorithm": "hmac-sha256", "value": <hex>}``, the HMAC-SHA-256 of the
  same canonical bytes under the key in the environment variable
  :data:`SIGNING_KEY_ENV` (``HYBRIDROUTE_SIGNING_KEY``). Written only when that variable is
  set. The key is read when needed and never stored, logged or written anywhere.

:func:`verify` is the other half, applied on every load. Its rules:

===================================  =========================================================
key set?  artifact                   outcome
===================================  =========================================================
no        unsigned, hash matches     accepted (the plain hash catches accidents only)
no        signed                     refused: set the variable to verify it
yes       signed, signature matches  accepted
yes       signed, signature fails    refused: a wrong key, or an edit with a recomputed hash
yes       unsigned                   refused: with a key set only signed artifacts load
                                     (otherwise stripping the signature would defeat it)
any       hash missing or wrong      refused
===================================  =========================================================

Sealing is deterministic (the HMAC too), so the same document and key give the same bytes.
Files listed by a manifest are hashed with :func:`file_sha256`, which opens regular files
only (never blocking on a FIFO or reading an endless device).

This is a leaf module: it imports only :mod:`hybridroute.exceptions`.
"""

from __future__ import annotations

import copy
import hashlib
import hmac
import json
import os
import re
import stat
from collections.abc import Mapping
from typing import Any

from .exceptions import ArtifactError

__all__ = [
    "HASH_FIELD",
    "MIN_KEY_BYTES",
    "SIGNATURE_ALGORITHM",
    "SIGNATURE_FIELD",
    "SIGNING_KEY_ENV",
    "canonical_bytes",
    "content_hash",
    "file_sha256",
    "is_sha256_hex",
    "seal",
    "signing_key",
    "verify",
]

#: Environment variable holding the signing key (read when needed, never stored).
SIGNING_KEY_ENV = "HYBRIDROUTE_SIGNING_KEY"
#: Shortest key accepted, in bytes (a random key of 32 bytes or more is recommended).
MIN_KEY_BYTES = 16
#: The field holding the SHA-256 of the canonical JSON of the rest of the document.
HASH_FIELD = "content_sha256"
#: The field holding the HMAC signature, when the document is signed.
SIGNATURE_FIELD = "signature"
SIGNATURE_ALGORITHM = "hmac-sha256"
_SEAL_FIELDS = (HASH_FIELD, SIGNATURE_FIELD)
_HEX64 = re.compile(r"[0-9a-f]{64}")
_CHUNK = 1 << 20
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
_OPEN_FLAGS |= getattr(os, "O_CLOEXEC", 0)


def is_sha256_hex(value: Any) -> bool:
    """Whether ``value`` is a SHA-256 digest written as 64 lowercase hex digits."""
    return isinstance(value, str) and _HEX64.fullmatch(value) is not None


def canonical_bytes(doc: Any) -> bytes:
    """The canonical JSON of ``doc``: sorted keys, compact, UTF-8, no NaN or infinity.

    Raises
    ------
    ValueError
        ``doc`` holds something JSON cannot write exactly (a non-finite float, an object,
        a string that is not valid Unicode).
    """
    try:
        text = json.dumps(
            doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
        )
        return text.encode("utf-8")
    except (TypeError, ValueError, UnicodeEncodeError) as exc:
        raise ValueError(f"cannot be written as canonical JSON ({exc})") from None


def _body(doc: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in doc.items() if k not in _SEAL_FIELDS}


def content_hash(doc: Mapping[str, Any]) -> str:
    """SHA-256 (hex) of the canonical JSON of ``doc`` without its seal fields."""
    return hashlib.sha256(canonical_bytes(_body(doc))).hexdigest()


def signing_key() -> bytes | None:
    """The signing key from :data:`SIGNING_KEY_ENV`, or ``None`` when the variable is unset.

    Raises
    ------
    ArtifactError
        The variable is set but empty or shorter than :data:`MIN_KEY_BYTES` bytes (a key
        that short, or one lost on the way to the environment, must not silently turn
        signing off or make it guessable).
    """
    raw = os.environ.get(SIGNING_KEY_ENV)
    if raw is None:
        return None
    key = raw.encode("utf-8", "surrogateescape")
    if len(key) < MIN_KEY_BYTES:
        raise ArtifactError(
            f"{SIGNING_KEY_ENV} is set but {'empty' if not key else 'too short'}: a signing key "
            f"needs at least {MIN_KEY_BYTES} bytes (use 32 random bytes, e.g. "
            "`python3 -c 'import secrets; print(secrets.token_hex(32))'`), or unset it"
        )
    return key


def _mac(key: bytes, body: Mapping[str, Any]) -> str:
    return hmac.new(key, canonical_bytes(body), hashlib.sha256).hexdigest()


def seal(doc: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``doc`` with ``content_sha256`` and, when a key is set, ``signature``.

    Seal fields already in ``doc`` are replaced. The result is deterministic: the same
    document and key always give the same seal.
    """
    body = copy.deepcopy(_body(doc))
    key = signing_key()
    out = dict(body)
    out[HASH_FIELD] = hashlib.sha256(canonical_bytes(body)).hexdigest()
    if key is not None:
        out[SIGNATURE_FIELD] = {"algorithm": SIGNATURE_ALGORITHM, "value": _mac(key, body)}
    return out


def verify(doc: Any, *, path: str | None, what: str) -> dict[str, Any]:
    """Check the seal of a loaded document; return it without its seal fields.

    Parameters
    ----------
    doc : object
        The parsed JSON document.
    path : str or None
        The file it came from (named in every error).
    what : str
        What it is (``"policy"``, ``"model manifest"``, ``"bundle manifest"``), for messages.

    Raises
    ------
    ArtifactError
        Naming ``path`` and the field: the hash is missing or does not match, or the
        signature rules in the module docstring refuse the document.
    """
    if not isinstance(doc, Mapping):
        raise ArtifactError(f"a {what} must be a JSON object", path=path)
    stored = doc.get(HASH_FIELD)
    if stored is None:
        raise ArtifactError(
            f"{what} has no {HASH_FIELD} (field {HASH_FIELD!r} is missing); refusing to trust it",
            path=path,
        )
    if not is_sha256_hex(stored):
        raise ArtifactError(
            f"{what} field {HASH_FIELD!r} is not a SHA-256 digest (64 lowercase hex digits)",
            path=path,
        )
    body = _body(doc)
    try:
        actual = hashlib.sha256(canonical_bytes(body)).hexdigest()
    except ValueError as exc:
        raise ArtifactError(f"{what} {exc}", path=path) from None
    if not hmac.compare_digest(stored, actual):
        raise ArtifactError(
            f"content hash mismatch (field {HASH_FIELD!r}): the {what} was modified after it was "
            f"written (stored {stored[:12]}…, content hashes to {actual[:12]}…)",
            path=path,
        )
    key = signing_key()
    signature = doc.get(SIGNATURE_FIELD)
    if signature is None:
        if key is not None:
            raise ArtifactError(
                f"{what} is not signed (no field {SIGNATURE_FIELD!r}) but {SIGNING_KEY_ENV} is "
                "set, so only signed artifacts are accepted; write it again with the key set",
                path=path,
            )
        return dict(body)
    if (
        not isinstance(signature, Mapping)
        or set(signature) != {"algorithm", "value"}
        or signature.get("algorithm") != SIGNATURE_ALGORITHM
        or not is_sha256_hex(signature.get("value"))
    ):
        raise ArtifactError(
            f"{what} field {SIGNATURE_FIELD!r} must be "
            f'{{"algorithm": "{SIGNATURE_ALGORITHM}", "value": <64 hex digits>}}',
            path=path,
        )
    if key is None:
        raise ArtifactError(
            f"{what} is signed (field {SIGNATURE_FIELD!r}) but {SIGNING_KEY_ENV} is not set; "
            "set it to the signing key to verify the signature",
            path=path,
        )
    if not hmac.compare_digest(signature["value"], _mac(key, body)):
        raise ArtifactError(
            f"{what} field {SIGNATURE_FIELD!r} does not verify with the key in "
            f"{SIGNING_KEY_ENV}: a wrong key, or the {what} was changed and its hash recomputed",
            path=path,
        )
    return dict(body)


def file_sha256(path: str | os.PathLike[str]) -> str:
    """SHA-256 (hex) of a regular file, read in chunks.

    The file is opened without blocking and checked with ``fstat`` before a byte is read,
    so a FIFO or a device put where a file is expected is refused instead of hanging.

    Raises
    ------
    ArtifactError
        The file is missing, unreadable or not a regular file.
    """
    where = os.fspath(path)
    try:
        fd = os.open(where, _OPEN_FLAGS)
    except FileNotFoundError:
        raise ArtifactError("file is missing", path=where) from None
    except OSError as exc:
        raise ArtifactError(f"cannot read the file ({exc.strerror or exc})", path=where) from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ArtifactError("is not a regular file", path=where)
        digest = hashlib.sha256()
        while True:
            try:
                block = os.read(fd, _CHUNK)
            except BlockingIOError:  # pragma: no cover - regular files never block
                continue
            except OSError as exc:
                raise ArtifactError(
                    f"cannot read the file ({exc.strerror or exc})", path=where
                ) from None
            if not block:
                return digest.hexdigest()
            digest.update(block)
    finally:
        os.close(fd)
