"""Canonical JSON: the one text (and SHA-256) an input snapshot has, whoever writes it.

A decision's ``snapshot_hash`` is the SHA-256 of the canonical JSON of its input
snapshot: sorted keys, no spaces, UTF-8 (no ``\\u`` escapes beyond what JSON needs),
integral floats written as integers (``1.0`` and ``1`` are the same fact), no NaN or
infinity. The same input therefore hashes the same across processes, machines and router
versions. :func:`canonical_json` and :func:`snapshot_hash` accept any JSON-like value;
:func:`hash_canonical` and :func:`_encode_canonical` are the fast paths for values
already in canonical form (what :meth:`hybridroute.contracts.FactSchema.validate`
returns). :func:`_freeze` / :func:`_thaw` turn such values into read-only views and back.

A leaf module: it imports nothing from hybridroute, so the decision contract, the
credential scrubber and the dataset fingerprints can all use it.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

__all__ = ["canonical_json", "hash_canonical", "snapshot_hash"]


def _canon(obj: Any) -> Any:
    """Turn an input snapshot into plain JSON types, rejecting what JSON cannot hold."""
    t = type(obj)
    if t is str or t is bool or obj is None:
        return obj
    if t is int:
        return obj
    if t is float:
        if not math.isfinite(obj):
            raise ValueError(f"non-finite number {obj!r} cannot go into an input snapshot")
        # 1.0 and 1 are the same fact; hash them the same.
        return int(obj) if obj.is_integer() and abs(obj) < 2**53 else obj
    if t is dict or t is MappingProxyType or isinstance(obj, Mapping):
        out = {}
        for k, v in obj.items():
            if type(k) is not str:
                raise ValueError(f"snapshot keys must be strings, got {k!r}")
            out[k] = _canon(v)
        return out
    if t is tuple or t is list:
        return [_canon(v) for v in obj]
    if isinstance(obj, bool):
        return bool(obj)
    if isinstance(obj, int):
        return int(obj)
    if isinstance(obj, float):
        return _canon(float(obj))
    if isinstance(obj, str):
        return str(obj)
    # numpy scalars and the like
    if hasattr(obj, "item") and callable(obj.item):
        return _canon(obj.item())
    raise ValueError(f"value of type {t.__name__} cannot go into an input snapshot")


def canonical_json(obj: Any) -> str:
    """Canonical JSON text: sorted keys, no spaces, UTF-8, integral floats as integers."""
    return json.dumps(
        _canon(obj), sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )


def snapshot_hash(snapshot: Mapping[str, Any]) -> str:
    """SHA-256 (hex) of the canonical JSON of an input snapshot."""
    return hashlib.sha256(canonical_json(snapshot).encode("utf-8")).hexdigest()


def _json_default(obj: Any) -> Any:
    if type(obj) is MappingProxyType:
        return dict(obj)
    raise TypeError(f"value of type {type(obj).__name__} is not canonical JSON")


def hash_canonical(snapshot: Mapping[str, Any]) -> str:
    """:func:`snapshot_hash` for a snapshot already in canonical form, skipping the rewrite.

    Canonical form is what :meth:`FactSchema.validate` returns: JSON types (tuples and
    read-only mappings allowed), no integral floats, no non-finite numbers. For such input
    the result equals :func:`snapshot_hash`; it is only faster.
    """
    text = json.dumps(
        snapshot,
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        allow_nan=False,
        default=_json_default,
    )
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


_encode_str = json.encoder.encode_basestring  # the C function json.dumps uses (ensure_ascii=False)


def _encode_canonical(v: Any) -> str:
    """JSON text of one canonical value, exactly as ``json.dumps`` with sorted keys writes it."""
    t = type(v)
    if t is str:
        return _encode_str(v)
    if t is bool:
        return "true" if v else "false"
    if t is int:
        return int.__repr__(v)
    if v is None:
        return "null"
    if t is float:
        return float.__repr__(v)
    if t is tuple:
        return "[" + ",".join([_encode_canonical(x) for x in v]) + "]"
    return json.dumps(
        v,
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        allow_nan=False,
        default=_json_default,
    )


def _freeze(obj: Any) -> Any:
    """Read-only copy: mappings become MappingProxyType, lists tuples (already-frozen kept)."""
    t = type(obj)
    if t is str or t is int or t is float or t is bool or obj is None:
        return obj
    if t is MappingProxyType:
        # Read-only views are built by hybridroute itself over already-frozen values.
        return obj
    if t is dict or isinstance(obj, Mapping):
        return MappingProxyType({k: _freeze(v) for k, v in obj.items()})
    if t is tuple or t is list:
        for v in obj:
            tv = type(v)
            if not (tv is str or tv is float or tv is int or tv is bool or v is None):
                return tuple(_freeze(v) for v in obj)
        return obj if t is tuple else tuple(obj)
    return obj


def _thaw(obj: Any) -> Any:
    t = type(obj)
    if t is MappingProxyType or t is dict:
        return {k: _thaw(v) for k, v in obj.items()}
    if t is tuple or t is list:
        return [_thaw(v) for v in obj]
    return obj
