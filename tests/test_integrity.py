"""The seal and signature every artifact carries: hashing, signing rules, hostile files."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import threading

import pytest

from hybridroute import _integrity as integrity
from hybridroute.exceptions import ArtifactError, UserInputError

KEY = "k" * 32
OTHER_KEY = "o" * 32
DOC = {
    "format": "hybridroute.test",
    "format_version": 1,
    "thresholds": {"auto": 0.91, "ask": None},
    "classes": ["refund", "shipping", "ünïcode"],
    "nested": [{"b": 1, "a": [1.5, -0.0, 10**20]}],
}


@pytest.fixture
def no_key(monkeypatch):
    monkeypatch.delenv(integrity.SIGNING_KEY_ENV, raising=False)


@pytest.fixture
def key(monkeypatch):
    monkeypatch.setenv(integrity.SIGNING_KEY_ENV, KEY)


def _signed(monkeypatch, key=KEY) -> dict:
    monkeypatch.setenv(integrity.SIGNING_KEY_ENV, key)
    return integrity.seal(DOC)


# --------------------------------------------------------------------------- canonical form


def test_canonical_bytes_are_sorted_compact_utf8() -> None:
    assert integrity.canonical_bytes({"b": 1, "a": [1.0, "é"]}) == '{"a":[1.0,"é"],"b":1}'.encode()
    shuffled = json.loads(json.dumps(DOC, indent=4))
    assert integrity.canonical_bytes(shuffled) == integrity.canonical_bytes(DOC)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), object(), "\ud800"])
def test_canonical_bytes_refuse_what_json_cannot_hold_exactly(bad) -> None:
    with pytest.raises(ValueError, match="canonical JSON"):
        integrity.canonical_bytes({"x": bad})


def test_content_hash_ignores_only_the_seal_fields() -> None:
    base = integrity.content_hash(DOC)
    assert integrity.content_hash({**DOC, "content_sha256": "x", "signature": {}}) == base
    assert integrity.content_hash({**DOC, "classes": ["shipping", "refund", "ünïcode"]}) != base


# --------------------------------------------------------------------------- sealing


def test_unsigned_seal_round_trips_and_is_deterministic(no_key) -> None:
    sealed = integrity.seal(DOC)
    assert set(sealed) == set(DOC) | {"content_sha256"}
    assert sealed == integrity.seal(copy.deepcopy(DOC))
    assert integrity.verify(json.loads(json.dumps(sealed)), path="p", what="thing") == DOC


def test_signed_seal_is_deterministic_and_key_dependent(monkeypatch) -> None:
    a, b = _signed(monkeypatch), _signed(monkeypatch)
    assert a == b and a["signature"]["algorithm"] == "hmac-sha256"
    c = _signed(monkeypatch, OTHER_KEY)
    assert c["signature"] != a["signature"]
    assert c["content_sha256"] == a["content_sha256"]  # signing does not change the hash
    assert KEY not in json.dumps(a)  # the key itself is never written


def test_reseal_replaces_an_old_seal(monkeypatch) -> None:
    signed = _signed(monkeypatch)
    monkeypatch.delenv(integrity.SIGNING_KEY_ENV)
    assert "signature" not in integrity.seal(signed)


# --------------------------------------------------------------------------- the rules


def test_signed_document_verifies_with_its_key(monkeypatch) -> None:
    signed = _signed(monkeypatch)
    assert integrity.verify(signed, path="p", what="policy") == DOC


def test_signed_document_without_a_key_is_refused_naming_the_variable(monkeypatch) -> None:
    signed = _signed(monkeypatch)
    monkeypatch.delenv(integrity.SIGNING_KEY_ENV)
    with pytest.raises(ArtifactError, match=r"is signed.*HYBRIDROUTE_SIGNING_KEY is not set") as e:
        integrity.verify(signed, path="/x/policy.json", what="policy")
    assert e.value.path == "/x/policy.json" and isinstance(e.value, UserInputError)


def test_wrong_key_is_refused(monkeypatch) -> None:
    signed = _signed(monkeypatch)
    monkeypatch.setenv(integrity.SIGNING_KEY_ENV, OTHER_KEY)
    with pytest.raises(ArtifactError, match="'signature' does not verify") as e:
        integrity.verify(signed, path="p", what="policy")
    assert OTHER_KEY not in str(e.value) and KEY not in str(e.value)


def test_stripped_signature_is_refused_while_a_key_is_set(monkeypatch) -> None:
    signed = _signed(monkeypatch)
    stripped = {k: v for k, v in signed.items() if k != "signature"}
    with pytest.raises(ArtifactError, match=r"is not signed.*only signed artifacts"):
        integrity.verify(stripped, path="p", what="bundle manifest")


@pytest.mark.parametrize(
    "edit",
    [
        lambda d: d["thresholds"].__setitem__("auto", -5),
        lambda d: d.__setitem__("classes", ["shipping", "refund", "ünïcode"]),
        lambda d: d.__setitem__("extra", True),
        lambda d: d.pop("nested"),
    ],
)
def test_edit_with_a_recomputed_plain_hash(monkeypatch, edit) -> None:
    signed = _signed(monkeypatch)
    forged = copy.deepcopy(signed)
    edit(forged)
    forged["content_sha256"] = integrity.content_hash(forged)
    with pytest.raises(ArtifactError, match="'signature' does not verify"):
        integrity.verify(forged, path="p", what="policy")
    # without the key the plain hash alone cannot tell: it only catches accidents
    monkeypatch.delenv(integrity.SIGNING_KEY_ENV)
    unsigned = {k: v for k, v in forged.items() if k != "signature"}
    assert integrity.verify(unsigned, path="p", what="policy") != DOC


@pytest.mark.parametrize("signed", [False, True])
def test_an_edit_without_a_recomputed_hash_is_refused(monkeypatch, signed) -> None:
    if signed:
        monkeypatch.setenv(integrity.SIGNING_KEY_ENV, KEY)
    else:
        monkeypatch.delenv(integrity.SIGNING_KEY_ENV, raising=False)
    for field, value in (("classes", ["x"]), ("format_version", 2), ("thresholds", {})):
        stale = {**integrity.seal(DOC), field: value}
        with pytest.raises(ArtifactError, match="content hash mismatch"):
            integrity.verify(stale, path="p", what="policy")


@pytest.mark.parametrize(
    ("change", "match"),
    [
        (lambda d: d.pop("content_sha256"), "has no content_sha256"),
        (lambda d: d.__setitem__("content_sha256", "ABC"), "not a SHA-256 digest"),
        (lambda d: d.__setitem__("content_sha256", "0" * 64), "content hash mismatch"),
        (lambda d: d.__setitem__("signature", "deadbeef"), "'signature' must be"),
        (lambda d: d["signature"].__setitem__("algorithm", "md5"), "'signature' must be"),
        (lambda d: d["signature"].__setitem__("value", "0" * 63), "'signature' must be"),
        (lambda d: d["signature"].__setitem__("key", KEY), "'signature' must be"),
        (lambda d: d["signature"].__setitem__("value", "0" * 64), "does not verify"),
    ],
)
def test_malformed_seals_are_refused(monkeypatch, change, match) -> None:
    doc = copy.deepcopy(_signed(monkeypatch))
    change(doc)
    with pytest.raises(ArtifactError, match=match):
        integrity.verify(doc, path="p", what="policy")


@pytest.mark.parametrize("doc", [[], "x", None, 3])
def test_a_document_must_be_an_object(no_key, doc) -> None:
    with pytest.raises(ArtifactError, match="must be a JSON object"):
        integrity.verify(doc, path="p", what="policy")


@pytest.mark.parametrize("value", ["", "q7Zp", "x" * (integrity.MIN_KEY_BYTES - 1)])
def test_an_empty_or_short_key_is_an_error_not_signing_off(monkeypatch, value) -> None:
    monkeypatch.setenv(integrity.SIGNING_KEY_ENV, value)
    with pytest.raises(ArtifactError, match="HYBRIDROUTE_SIGNING_KEY is set but") as e:
        integrity.seal(DOC)
    if value:
        assert value not in str(e.value)


def test_key_of_the_minimum_length_is_accepted(monkeypatch) -> None:
    monkeypatch.setenv(integrity.SIGNING_KEY_ENV, "x" * integrity.MIN_KEY_BYTES)
    assert "signature" in integrity.seal(DOC)


# --------------------------------------------------------------------------- files


def test_file_sha256(tmp_path) -> None:
    import hashlib

    p = tmp_path / "a.bin"
    p.write_bytes(os.urandom(3 * (1 << 20) + 7))
    assert integrity.file_sha256(p) == hashlib.sha256(p.read_bytes()).hexdigest()
    with pytest.raises(ArtifactError, match="file is missing"):
        integrity.file_sha256(tmp_path / "nope")
    with pytest.raises(ArtifactError):
        integrity.file_sha256(tmp_path)


def _bounded(fn, timeout: float = 10.0):
    """Run ``fn`` in a daemon thread; a hang fails the test instead of blocking it."""
    box: dict = {}

    def target():
        try:
            box["value"] = fn()
        except BaseException as exc:  # the test inspects it
            box["error"] = exc

    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(timeout)
    assert not t.is_alive(), "hashing blocked"
    return box


def test_a_fifo_or_device_is_refused_without_blocking(tmp_path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    for path in (fifo, "/dev/zero"):
        box = _bounded(lambda p=path: integrity.file_sha256(p))
        assert isinstance(box.get("error"), ArtifactError), box
        assert "not a regular file" in str(box["error"])


def test_the_module_is_a_leaf() -> None:
    code = (
        "import sys, json; import hybridroute._integrity; "
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('hybridroute'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = set(json.loads(out.stdout)) - {"hybridroute._integrity", "hybridroute.exceptions"}
    # the package __init__ runs first; it must not need anything beyond its own light imports
    assert "hybridroute.calibration" not in loaded and "hybridroute.router" not in loaded
