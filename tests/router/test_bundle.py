"""Router bundles: save, load, identical decisions; tampering is refused."""

from __future__ import annotations

import json

import pytest

from hybridroute.exceptions import ArtifactError, UserInputError
from hybridroute.router import load_router


@pytest.fixture(scope="module")
def bundle(router, tmp_path_factory):
    path = tmp_path_factory.mktemp("bundle") / "router"
    router.save(path)
    return path


def test_round_trip_gives_identical_decisions(router, bundle, support):
    loaded = load_router(bundle)
    assert (loaded.name, loaded.version) == ("support", "1")
    test = support.split("test")
    items = [
        {"facts": {k: v for k, v in test.facts(i).items() if v is not None}, "text": test.texts[i]}
        for i in range(80)
    ]
    assert loaded.route_many(items) == router.route_many(items)
    manifest = json.loads((bundle / "manifest.json").read_text())
    assert {"rules.yaml", "policy.json", "destinations.json"} <= set(manifest["files"])
    assert any(k.startswith("model/") for k in manifest["files"])


@pytest.mark.parametrize(
    ("tamper", "match"),
    [
        (
            lambda p: (p / "rules.yaml").write_text(
                (p / "rules.yaml").read_text().replace("max_steps: 12", "max_steps: 99")
            ),
            "checksum mismatch.*rules.yaml",
        ),
        (lambda p: (p / "destinations.json").unlink(), "missing destinations.json"),
        (
            lambda p: (p / "evil.pkl").write_bytes(b"\x80\x04cos\nsystem\n"),
            "does not list: evil.pkl",
        ),
        (lambda p: (p / "manifest.json").write_text("{"), "not valid JSON"),
        (
            lambda p: (p / "manifest.json").write_text(
                json.dumps({"format": "hybridroute.router", "format_version": 9, "files": {}})
            ),
            "format version 9",
        ),
        (
            lambda p: (p / "manifest.json").write_text(
                json.dumps({"format": "hybridroute.router", "format_version": 1, "files": {}})
            ),
            "format version 1 is not supported",
        ),
    ],
)
def test_tampered_bundles_are_refused(router, tmp_path, tamper, match):
    path = tmp_path / "b"
    router.save(path)
    tamper(path)
    with pytest.raises(ArtifactError, match=match):
        load_router(path)


def test_refuses_to_overwrite_without_force(router, tmp_path):
    path = tmp_path / "b"
    router.save(path)
    with pytest.raises(UserInputError, match="not empty"):
        router.save(path)
    router.save(path, overwrite=True)


# --------------------------------------------------------------------------- the manifest's seal

SIGNING_KEY = "b" * 32
MANIFEST_EDITS = {
    # the case: out-of-scope tickets would be answered
    "oos_destination": ("oos_destination", "answer"),
    "fallback_destination": ("fallback_destination", "answer"),
    "oos_label": ("oos_label", None),
    "name": ("name", "other"),
    "version": ("version", "2"),
    "created_by": ("created_by", "someone"),
    "files": ("files", {}),
}


def _edit_manifest(path, key, value, *, rehash, keep_signature=False):
    from hybridroute._integrity import content_hash

    m = path / "manifest.json"
    doc = json.loads(m.read_text())
    doc[key] = value
    if rehash:
        body = {k: v for k, v in doc.items() if k not in ("content_sha256", "signature")}
        new = {**body, "content_sha256": content_hash(body)}
        if keep_signature and "signature" in doc:
            new["signature"] = doc["signature"]
        doc = new
    m.write_text(json.dumps(doc))


@pytest.mark.parametrize("field", sorted(MANIFEST_EDITS))
def test_every_manifest_field_is_covered_by_the_checksum(router, tmp_path, field) -> None:
    path = tmp_path / "b"
    router.save(path)
    key, value = MANIFEST_EDITS[field]
    _edit_manifest(path, key, value, rehash=False)
    with pytest.raises(
        ArtifactError, match=r"content hash mismatch \(field 'content_sha256'\)"
    ) as e:
        load_router(path)
    assert str(path / "manifest.json") in str(e.value)


@pytest.mark.parametrize("keep_signature", [True, False])
@pytest.mark.parametrize("field", sorted(MANIFEST_EDITS))
def test_signed_bundle_edited_and_rehashed_is_refused(
    router, tmp_path, monkeypatch, field, keep_signature
):
    monkeypatch.setenv("HYBRIDROUTE_SIGNING_KEY", SIGNING_KEY)
    path = tmp_path / "b"
    router.save(path)
    assert load_router(path).oos_destination == router.oos_destination
    key, value = MANIFEST_EDITS[field]
    _edit_manifest(path, key, value, rehash=True, keep_signature=keep_signature)
    match = "'signature' does not verify" if keep_signature else "is not signed"
    with pytest.raises(ArtifactError, match=match):
        load_router(path)


def test_signed_bundle_rules(router, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("HYBRIDROUTE_SIGNING_KEY", SIGNING_KEY)
    a, b = tmp_path / "a", tmp_path / "b"
    router.save(a)
    router.save(b)
    for f in sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file()):
        assert (a / f).read_bytes() == (b / f).read_bytes(), f  # signed, and reproducible
    for name in ("manifest.json", "policy.json", "model/manifest.json"):
        assert "signature" in json.loads((a / name).read_text()), name
        assert SIGNING_KEY not in (a / name).read_text()
    # an edit with the old signature kept: the signature fails
    doc = json.loads((a / "manifest.json").read_text())
    from hybridroute._integrity import content_hash

    doc["oos_destination"] = "answer"
    doc["content_sha256"] = content_hash(doc)
    (a / "manifest.json").write_text(json.dumps(doc))
    with pytest.raises(ArtifactError, match="'signature' does not verify"):
        load_router(a)
    monkeypatch.setenv("HYBRIDROUTE_SIGNING_KEY", "c" * 32)
    with pytest.raises(ArtifactError, match="'signature' does not verify"):
        load_router(b)
    monkeypatch.delenv("HYBRIDROUTE_SIGNING_KEY")
    with pytest.raises(ArtifactError, match="set it to the signing key"):
        load_router(b)
    unsigned = tmp_path / "unsigned"
    router.save(unsigned)
    monkeypatch.setenv("HYBRIDROUTE_SIGNING_KEY", SIGNING_KEY)
    with pytest.raises(ArtifactError, match="is not signed"):
        load_router(unsigned)


def test_unsigned_bundles_are_byte_reproducible(router, tmp_path) -> None:
    a, b = router.save(tmp_path / "a"), router.save(tmp_path / "b")
    files = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    assert files and all((a / f).read_bytes() == (b / f).read_bytes() for f in files)


@pytest.mark.parametrize(
    ("edit", "match"),
    [
        (lambda d: d.__setitem__("oos_label", 5), "field 'oos_label'"),
        (lambda d: d.__setitem__("name", ""), "field 'name'"),
        (lambda d: d.__setitem__("version", 3), "field 'version'"),
        (lambda d: d.__setitem__("oos_destination", None), "field 'oos_destination'"),
        (lambda d: d.pop("fallback_destination"), "field 'fallback_destination' is missing"),
        (lambda d: d.__setitem__("routes_to", "answer"), "field 'routes_to' is not a bundle"),
        (lambda d: d["files"].__setitem__("rules.yaml", "abc"), "field 'files'"),
    ],
)
def test_malformed_manifest_fields_are_refused_by_name(router, tmp_path, edit, match) -> None:
    from hybridroute._integrity import content_hash

    path = tmp_path / "b"
    router.save(path)
    m = path / "manifest.json"
    doc = json.loads(m.read_text())
    edit(doc)
    body = {k: v for k, v in doc.items() if k != "content_sha256"}
    m.write_text(json.dumps({**body, "content_sha256": content_hash(body)}))
    with pytest.raises(ArtifactError, match=match) as e:
        load_router(path)
    assert str(m) in str(e.value)


# --------------------------------------------------------------------------- policy <-> model


def _relist(path, rel):
    """Point the bundle manifest at the current bytes of ``rel`` and reseal it."""
    from hybridroute._integrity import content_hash, file_sha256

    m = path / "manifest.json"
    doc = json.loads(m.read_text())
    doc["files"][rel] = file_sha256(path / rel)
    body = {k: v for k, v in doc.items() if k != "content_sha256"}
    m.write_text(json.dumps({**body, "content_sha256": content_hash(body)}))


def test_save_binds_an_in_memory_policy_to_its_model(router, tmp_path) -> None:
    assert router.policy.model_fingerprint is None  # fitted in memory, unbound
    path = router.save(tmp_path / "b")
    written = json.loads((path / "policy.json").read_text())
    model = json.loads((path / "model" / "manifest.json").read_text())
    assert written["model_fingerprint"] == model["fingerprint"] == router.classifier.fingerprint()
    loaded = load_router(path)
    assert loaded.policy.model_fingerprint == loaded.classifier.manifest_["fingerprint"]


def test_save_refuses_a_policy_fitted_on_another_model(router, tmp_path) -> None:
    from hybridroute.router import HybridRouter

    other = router.policy.with_model_fingerprint("e" * 64)
    r = HybridRouter(
        rules=router.rules, classifier=router.classifier, policy=other, name="x", version="1"
    )
    with pytest.raises(ArtifactError, match="fitted on model eeeeeeeeeeeeeeee") as e:
        r.save(tmp_path / "b")
    assert router.classifier.fingerprint()[:16] in str(e.value)
    assert not (tmp_path / "b").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging left


@pytest.mark.parametrize(
    ("policy_fp", "match"),
    [
        ("f" * 64, "fitted on model ffffffffffffffff"),
        ("0" * 64, "fitted on model 0000000000000000"),
        (None, "field 'model_fingerprint' is null"),
    ],
)
def test_a_bundle_whose_policy_is_not_its_models_is_refused(
    router, tmp_path, policy_fp, match
) -> None:
    from hybridroute.calibration import Policy

    path = router.save(tmp_path / "b")
    doc = json.loads((path / "policy.json").read_text())
    doc["model_fingerprint"] = None
    swapped = Policy(doc)
    if policy_fp is not None:
        swapped = swapped.with_model_fingerprint(policy_fp)
    swapped.save(path / "policy.json")  # a consistent, sealed policy; the manifest resealed
    _relist(path, "policy.json")
    with pytest.raises(ArtifactError, match=match) as e:
        load_router(path)
    assert str(path / "policy.json") in str(e.value) and "model" in str(e.value)


def test_permuted_model_classes_are_caught_by_the_binding(router, tmp_path) -> None:
    """A deliberate edit that recomputes every plain hash still changes the model's
    fingerprint, so the policy fitted on the original model no longer binds."""
    from hybridroute._integrity import content_hash
    from hybridroute.classifiers import _persistence

    path = router.save(tmp_path / "b")
    mm = path / "model" / "manifest.json"
    doc = json.loads(mm.read_text())
    doc["classes"] = list(reversed(doc["classes"]))
    body = {k: v for k, v in doc.items() if k != "content_sha256"}
    body["fingerprint"] = _persistence._fingerprint(body, path / "model")
    mm.write_text(json.dumps({**body, "content_sha256": content_hash(body)}))
    _relist(path, "model/manifest.json")
    with pytest.raises(ArtifactError, match="the policy was fitted on model"):
        load_router(path)


def test_check_model_binding_in_memory_and_strict(router, local_clf, tmp_path) -> None:
    from hybridroute.classifiers import load_classifier
    from hybridroute.router._bundle import check_model_binding

    unbound = router.policy
    check_model_binding(unbound, local_clf)  # in memory: allowed (the README example)
    with pytest.raises(ArtifactError, match="is null"):
        check_model_binding(unbound, local_clf, strict=True)
    loaded = load_classifier(local_clf.save(tmp_path / "m"))
    check_model_binding(unbound.with_model_fingerprint(loaded.fingerprint()), loaded, strict=True)
    wrong = unbound.with_model_fingerprint("d" * 64)
    check_model_binding(wrong, local_clf)  # the in-memory classifier carries no fingerprint
    for clf in (loaded, local_clf):
        with pytest.raises(ArtifactError, match="fitted on model dddddddddddddddd"):
            check_model_binding(wrong, clf, strict=True, model_source="--model m")
    with pytest.raises(ArtifactError, match="fitted on model dddd"):
        check_model_binding(wrong, loaded)  # both carry one: refused even in memory


# --------------------------------------------------------------------------- strict reading


@pytest.mark.parametrize(
    ("name", "text", "match"),
    [
        (
            "manifest.json",
            '{"format": "hybridroute.router", "format": 1}',
            "duplicate key 'format'",
        ),
        ("manifest.json", '{"format": NaN}', "NaN"),
        ("manifest.json", "[" * 100 + "]" * 100, "nested too deeply"),
        ("destinations.json", '{"refund": "a", "refund": "b"}', "duplicate key 'refund'"),
        ("destinations.json", '{"refund": 3}', "must map to a destination name"),
        ("destinations.json", '["refund"]', "must hold an object"),
    ],
)
def test_bundle_json_is_read_strictly(router, tmp_path, name, text, match) -> None:
    path = router.save(tmp_path / "b")
    (path / name).write_text(text)
    if name != "manifest.json":
        _relist(path, name)
    with pytest.raises(ArtifactError, match=match) as e:
        load_router(path)
    assert name in str(e.value)


def test_manifest_over_its_byte_limit_is_refused(router, tmp_path, monkeypatch) -> None:
    from hybridroute.router import _bundle

    path = router.save(tmp_path / "b")
    monkeypatch.setattr(_bundle, "MANIFEST_MAX_BYTES", 100)
    with pytest.raises(ArtifactError, match="larger than the limit of 100 bytes"):
        load_router(path)


@pytest.mark.parametrize("target", ["destinations.json", "extra.json"])
def test_a_fifo_in_a_bundle_is_refused_without_blocking(router, tmp_path, target) -> None:
    import os
    import threading

    path = router.save(tmp_path / "b")
    if (path / target).exists():
        (path / target).unlink()
    os.mkfifo(path / target)
    box: dict = {}

    def run():
        try:
            load_router(path)
        except BaseException as exc:
            box["error"] = exc

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(20)
    assert not t.is_alive(), "load_router blocked on a FIFO"
    assert isinstance(box.get("error"), ArtifactError)
    assert "not a regular file" in str(box["error"]) and target in str(box["error"])


def test_overwrite_never_replaces_a_directory_that_is_not_a_bundle(router, tmp_path) -> None:
    other = tmp_path / "precious"
    other.mkdir()
    (other / "thesis.txt").write_text("keep")
    with pytest.raises(UserInputError, match="not a router bundle"):
        router.save(other, overwrite=True)
    assert (other / "thesis.txt").read_text() == "keep"
