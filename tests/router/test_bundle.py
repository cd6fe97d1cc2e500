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
