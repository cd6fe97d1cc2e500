"""The redactor's fast paths give what the plain algorithm gives, byte for byte.

:class:`~hybridroute._redact.Redactor` skips a pattern when a text cannot hold what it
matches, keeps the scrubbed form of short texts and of tuples of strings, and
:func:`~hybridroute._redact.scrub_text` reuses one redactor while the environment stays as
it was. Each is checked here against :func:`reference_scrub_text` /
:func:`reference_apply` -- the algorithm written out plainly, every pattern run on every
text, nothing cached -- over generated texts (key shapes, assignments, URLs, the non-ASCII
letters that ``IGNORECASE`` matches to ASCII ones), environments, learned values and
decision records.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hybridroute._canonical import snapshot_hash
from hybridroute._redact import (
    _ASSIGNED_SECRET_RE,
    _COUNT_KEY_RE,
    _MIN_ENV_SECRET,
    _MIN_SUBSTRING,
    _SECRET_VALUE_RE,
    _URL_PASSWORD_RE,
    REDACTED,
    Redactor,
    _assigned,
    scrub,
    scrub_text,
)

# --------------------------------------------------------------------------- the reference


def reference_scrub_text(r: Redactor, text: str, local: Mapping[str, str] | None = None) -> str:
    """Redactor.scrub_text as it reads without its fast paths."""
    whole = r._whole.get(text) if r._whole else None
    if whole is not None:
        return whole
    if local:
        if text in local:
            return local[text]
        for value, hashed in local.items():
            if len(value) >= _MIN_SUBSTRING and value in text:
                text = text.replace(value, hashed)
    if len(text) < _MIN_ENV_SECRET:
        return text
    if "://" in text:
        text = _URL_PASSWORD_RE.sub(lambda m: m.group("head") + REDACTED + "@", text)
    text = _SECRET_VALUE_RE.sub(REDACTED, text)
    if "=" in text or ":" in text:
        text = _ASSIGNED_SECRET_RE.sub(_assigned, text)
    if r._whole:
        for value in r._long:
            if value in text:
                text = text.replace(value, r._whole[value])
        if r._pattern is not None:
            text = r._pattern.sub(lambda m: r._whole[m.group(0)], text)
    for secret in r._env_secrets:
        if secret in text:
            text = text.replace(secret, REDACTED)
    return text


def _ref_scrub(r: Redactor, value: Any, key: str | None, changed: list, local: Any) -> Any:
    t = type(value)
    if key is not None and value is not None and r.secret_key(key):
        if (t is int or t is float) and _COUNT_KEY_RE.search(key):
            return value
        if value != REDACTED:
            changed.append(True)
        return REDACTED
    if t is str:
        out = reference_scrub_text(r, value, local)
        if out != value:
            changed.append(True)
        return out
    if value is None or t in (int, float, bool):
        return value
    if isinstance(value, Mapping):
        out_map = {}
        for k, v in value.items():
            sk = reference_scrub_text(r, k, local) if type(k) is str else k
            if sk != k:
                changed.append(True)
            out_map[sk] = _ref_scrub(r, v, str(k), changed, local)
        return out_map
    if t in (list, tuple):
        return [_ref_scrub(r, v, None, changed, local) for v in value]
    raise AssertionError(f"unexpected {t}")


def reference_apply(r: Redactor, record: Mapping[str, Any]) -> dict[str, Any]:
    """Redactor.apply as it reads without its fast paths."""
    out = dict(record)
    snap = dict(out.get("input_snapshot") or {})
    facts = snap.get("facts")
    hashed: list[str] = []
    changed: list[bool] = []
    local: dict[str, str] = {}
    if isinstance(facts, Mapping) and r.sensitive_fields:
        facts = dict(facts)
        for name in sorted(r.sensitive_fields & set(facts)):
            original = facts[name]
            if original is not None:
                value = r.hash_value(original)
                if value != original:
                    changed.append(True)
                    if type(original) in (str, int):
                        local[str(original)] = value
                facts[name] = value
                hashed.append(name)
        snap["facts"] = facts
    out["input_snapshot"] = _ref_scrub(r, snap, None, changed, local)
    if changed or not out.get("snapshot_hash"):
        out["snapshot_hash"] = snapshot_hash(out["input_snapshot"])
    detail = out.get("detail") or {}
    if r.sensitive_fields:
        detail = r._hash_named(detail, hashed)
    detail = _ref_scrub(r, detail, None, [], local)
    if hashed:
        detail["hashed_facts"] = hashed
    out["detail"] = detail
    return out


# --------------------------------------------------------------------------- the texts

# pieces that make the patterns fire, almost fire, or fire only under IGNORECASE
PIECES = [
    "sk-",
    "sk-proj-",
    "AKIA",
    "ghp_",
    "gh",
    "_",
    "xoxb-",
    "AIza",
    "Bearer ",
    "bearer\t",
    "BEARER ",
    "api_key=",
    "API-KEY: ",
    "apikey='",
    "password=",
    "passwd:",
    "pwd=",
    "token: ",
    "prompt_tokens=",
    "secret=",
    "credential:",
    "private_key=",
    "://",
    "user:pw@",
    "https://",
    "@",
    "=",
    ":",
    "ſecret=",  # LONG S: IGNORECASE matches it to s
    "\u212apikey",  # KELVIN SIGN: IGNORECASE matches it to k
    "İ",
    "é",
    "refund",
    "order 61002",
    " ",
    "ABCDEFGHIJKLMNOP",
    # whole keys of each shape (a piece above plus its body)
    "AIzaSyA1234567890abcdefghijklmnopqrstuv",
    "AKIAABCDEFGHIJKLMNOP",
    "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
    "xoxp-1234567890-abc",
    "sk-proj-AbCdEfGh12345678ijkl",
    "Bearer eyJhbGciOiJIUzI1NiJ9",
    "0123456789abcdef",
    "Z9",
]
TEXTS = st.lists(st.sampled_from(PIECES) | st.text(max_size=6), max_size=12).map("".join)
ENVS = st.dictionaries(
    st.sampled_from(["MY_API_KEY", "A_TOKEN", "DB_PASSWORD", "X_SECRET", "HOME_DIR"]),
    st.sampled_from(["refund-order", "C4N4RY-value-1", "0123456789abcdef", "sk-", "api_key=xx"]),
    max_size=3,
)
SETTINGS = settings(
    max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@pytest.fixture()
def clean_env(monkeypatch):
    for name in list(os.environ):
        if re.search("KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL", name, re.I):
            monkeypatch.delenv(name)
    monkeypatch.delenv("HYBRIDROUTE_LOG_SALT", raising=False)
    return monkeypatch


@SETTINGS
@given(texts=st.lists(TEXTS, min_size=1, max_size=8), env=ENVS)
def test_scrub_text_is_the_plain_algorithm(clean_env, texts, env):
    with pytest.MonkeyPatch.context() as mp:
        for k, v in env.items():
            mp.setenv(k, v)
        r = Redactor()
        for text in [*texts, *texts]:  # the second time from the cache, for short texts
            assert r.scrub_text(text) == reference_scrub_text(r, text)
            assert scrub_text(text) == reference_scrub_text(Redactor(), text)


@SETTINGS
@given(texts=st.lists(TEXTS, min_size=1, max_size=6), learned=st.lists(TEXTS, max_size=3))
def test_learned_and_local_values_are_the_plain_algorithm(clean_env, texts, learned):
    r = Redactor(["email"], salt="s-for-tests")
    for text in texts:  # cached before anything is learned
        assert r.scrub_text(text) == reference_scrub_text(r, text)
    r.learn([{"email": v} for v in [*learned, *texts[:2]]])
    local = {t: r.hash_value(t) for t in texts[-1:] if t}
    for text in texts:
        assert r.scrub_text(text) == reference_scrub_text(r, text)
        assert r.scrub_text(text, local) == reference_scrub_text(r, text, local)


def test_a_value_learned_later_replaces_a_cached_text():
    r = Redactor(["email"], salt="s-for-tests")
    labels = ("alice@example.com", "refund_request")
    assert r.scrub_text("alice@example.com") == "alice@example.com"  # cached as it is
    assert r._scrub(labels, None, [], None) == list(labels)  # the tuple too
    r.learn([{"email": "alice@example.com"}])
    hashed = r.hash_value("alice@example.com")
    assert r.scrub_text("alice@example.com") == hashed
    assert r._scrub(labels, None, [], None) == [hashed, "refund_request"]


def test_scrub_text_reads_the_environment_as_it_is_now(clean_env):
    text = "connect with zz-C4N4RY-env-value-1 please"
    assert scrub_text(text) == text
    clean_env.setenv("SERVICE_API_KEY", "zz-C4N4RY-env-value-1")
    assert scrub_text(text) == f"connect with {REDACTED} please"
    assert scrub({"note": text}) == {"note": f"connect with {REDACTED} please"}
    clean_env.delenv("SERVICE_API_KEY")
    assert scrub_text(text) == text
    clean_env.setenv("HYBRIDROUTE_LOG_SALT", "zz-C4N4RY-env-value-1")  # a long salt, too
    assert scrub_text(text) == f"connect with {REDACTED} please"


SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.floats(allow_nan=False), TEXTS)
KEYS = st.sampled_from(["amount", "email", "api_key", "prompt_tokens", "note", "tags", "ſecret"])
VALUES = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.lists(inner, max_size=4).map(tuple)
        | st.dictionaries(KEYS | TEXTS, inner, max_size=4)
    ),
    max_leaves=12,
)
LABELS = ("refund_request", "order_status", "sk-proj-ABCDEFGHIJ0123456789x")


def _record(facts: dict, text: str, detail: dict, frozen: bool) -> dict[str, Any]:
    freeze = MappingProxyType if frozen else dict
    return {
        "record_version": 1,
        "router": "r",
        "router_version": "1",
        "stage": "model",
        "selected_destination": "x",
        "allowed_destinations": ["x", "y"],
        "reason_code": "confident_intent",
        "evidence_ids": [],
        "input_snapshot": freeze({"facts": freeze(facts), "text": text}),
        "snapshot_hash": "0" * 64,
        "rule_id": None,
        "label": "x",
        "confidence": 0.5,
        "threshold": 0.4,
        "margin": 0.1,
        "detail": freeze({**detail, "classifier": {"labels": LABELS, "scores": (0.25, 0.75, 0.0)}}),
    }


@SETTINGS
@given(
    facts=st.dictionaries(KEYS, VALUES, max_size=5),
    text=TEXTS,
    detail=st.dictionaries(KEYS | TEXTS, VALUES, max_size=3),
    sensitive=st.booleans(),
    frozen=st.booleans(),
)
def test_apply_is_the_plain_algorithm(clean_env, facts, text, detail, sensitive, frozen):
    clean_env.setenv("X_API_TOKEN", "0123456789abcdef")
    r = Redactor(["email"] if sensitive else [], salt="s-for-tests")
    for _ in range(2):  # the second time through the caches
        record = _record(facts, text, detail, frozen)
        try:
            want = reference_apply(r, record)
        except (TypeError, ValueError):  # not canonical JSON (a hashed float NaN...)
            continue
        assert r.apply(record) == want


def test_the_per_key_caches_stay_bounded_whatever_keys_arrive():
    """A long-running service sees keys it did not choose: every per-key cache is bounded."""
    from hybridroute import _redact

    r = _redact.Redactor()
    n = _redact._TEXT_CACHE_SIZE + 500
    for i in range(n):
        key = f"key_{i}" if i % 2 else f"api_key_{i}"
        assert r.secret_key(key) == (i % 2 == 0)
        r.scrub({key: "x"})
    assert len(r._key_cache) <= _redact._TEXT_CACHE_SIZE
    assert len(r._key_info) <= _redact._TEXT_CACHE_SIZE
