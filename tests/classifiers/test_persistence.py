"""Saved classifier directories: round trip, reproducible bytes, and refusal of tampering.

The refusal tests plant payloads that *would* run code if anything unpickled them (they
create a marker file when unpickled) and assert both that loading is refused with an
ArtifactError naming the path and that the marker never appears.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import pickle
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

from hybridroute import _integrity as integrity
from hybridroute.classifiers import IntentClassifier, LocalClassifier, load_classifier
from hybridroute.classifiers import _persistence as persistence
from hybridroute.exceptions import ArtifactError, NotFittedError, UserInputError

TEXTS = [
    "where is my parcel",
    "the courier has not delivered my package",
    "tracking says shipped but nothing arrived",
    "my delivery is late again",
    "i want a refund for this order",
    "please give me my money back",
    "refund the double charge",
    "how do i get reimbursed",
    "i cannot log in to my account",
    "reset my password please",
    "locked out of my account",
    "the login page rejects my password",
]
LABELS = ["shipping"] * 4 + ["refund"] * 4 + ["login"] * 4
QUERIES = ["parcel not delivered", "money back please", "password reset", "", "zzz"]


@pytest.fixture(scope="module")
def clf() -> LocalClassifier:
    return LocalClassifier(Cs=(10.0,), random_state=0).fit(TEXTS, LABELS)


@pytest.fixture
def saved(clf, tmp_path) -> Path:
    return clf.save(tmp_path / "model", training_fingerprint="abc123", metadata={"note": "x"})


class _Boom:
    """Unpickling this creates ``path`` -- proof that code ran."""

    def __init__(self, path: Path) -> None:
        self.path = str(path)

    def __reduce__(self):
        return (open, (self.path, "w"))


def _pickle_payload(marker: Path) -> bytes:
    return pickle.dumps(_Boom(marker))


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _rewrite_manifest(directory: Path, change, *, reseal: bool = True) -> None:
    """Edit the manifest as an attacker who knows the format would.

    With ``reseal`` the model fingerprint and the plain content hash are recomputed after
    the edit (anyone can), so what is tested is the check behind them; without it the
    edit is left as is and only the seal stands in the way.
    """
    path = directory / "manifest.json"
    manifest = json.loads(path.read_text())
    change(manifest)
    if reseal:
        body = {k: v for k, v in manifest.items() if k not in ("content_sha256", "signature")}
        try:
            body["fingerprint"] = persistence._fingerprint(body, directory)
        except (ArtifactError, KeyError, TypeError, AttributeError):
            pass  # an edit that leaves no fingerprint to compute
        manifest = integrity.seal(body)
    path.write_text(json.dumps(manifest))


def _relist(directory: Path, rel: str) -> None:
    """Update the manifest so that file ``rel`` is listed with its current checksum."""

    def change(m):
        m["files"][rel] = {
            "sha256": _sha(directory / rel),
            "bytes": (directory / rel).stat().st_size,
        }

    _rewrite_manifest(directory, change)


# --------------------------------------------------------------------------- round trip


def test_round_trip_gives_identical_probabilities(clf, saved) -> None:
    loaded = load_classifier(saved)
    assert isinstance(loaded, LocalClassifier)
    np.testing.assert_array_equal(loaded.predict_proba(QUERIES), clf.predict_proba(QUERIES))
    assert list(loaded.classes_) == list(clf.classes_)
    assert loaded.get_params() == clf.get_params()
    assert loaded.C_ == clf.C_
    assert loaded.cv_results_ == clf.cv_results_
    assert loaded.n_train_ == clf.n_train_
    assert loaded.word_vocabulary_ == clf.word_vocabulary_
    assert loaded.char_vocabulary_ == clf.char_vocabulary_
    assert loaded.training_fingerprint_ == "abc123"
    assert loaded.manifest_["metadata"] == {"note": "x"}


def test_manifest_contents(clf, saved) -> None:
    manifest = json.loads((saved / "manifest.json").read_text())
    assert manifest["format"] == "hybridroute.classifier"
    assert manifest["format_version"] == persistence.FORMAT_VERSION
    assert manifest["kind"] == "local"
    assert manifest["classes"] == ["login", "refund", "shipping"]
    assert manifest["training_data"] == {"fingerprint": "abc123"}
    assert {"hybridroute", "python", "numpy", "scipy", "scikit-learn"} <= set(manifest["versions"])
    assert sorted(manifest["files"]) == ["arrays.npz", "vocabulary.json"]
    for rel, entry in manifest["files"].items():
        assert entry["sha256"] == _sha(saved / rel)
        assert entry["bytes"] == (saved / rel).stat().st_size
    assert sorted(p.name for p in saved.iterdir()) == [
        "arrays.npz",
        "manifest.json",
        "vocabulary.json",
    ]


def test_saving_twice_gives_identical_bytes(clf, tmp_path) -> None:
    a = clf.save(tmp_path / "a", training_fingerprint="f")
    b = clf.save(tmp_path / "b", training_fingerprint="f")
    for name in ("manifest.json", "vocabulary.json", "arrays.npz"):
        assert (a / name).read_bytes() == (b / name).read_bytes(), name


def test_saving_a_loaded_model_keeps_its_fingerprint(saved, tmp_path) -> None:
    again = load_classifier(saved).save(tmp_path / "again")
    assert load_classifier(again).training_fingerprint_ == "abc123"


def test_reachable_through_the_package() -> None:
    import hybridroute.classifiers as pkg

    assert pkg.load_classifier is persistence.load_classifier


def test_loading_a_local_model_imports_no_llm_stack(saved) -> None:
    code = (
        "import sys, json\n"
        "from hybridroute.classifiers import load_classifier\n"
        f"clf = load_classifier({str(saved)!r})\n"
        "clf.predict_proba(['where is my parcel'])\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('litellm', 'instructor', 'openai', 'mlflow'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []


# --------------------------------------------------------------------------- saving


def test_save_refuses_unfitted(tmp_path) -> None:
    with pytest.raises(NotFittedError):
        LocalClassifier().save(tmp_path / "m")
    assert not (tmp_path / "m").exists()


def test_save_refuses_an_existing_directory(clf, saved) -> None:
    with pytest.raises(ArtifactError, match="exists and is not empty") as info:
        clf.save(saved)
    assert info.value.path == str(saved)


def test_overwrite_replaces_a_saved_model_only(clf, saved, tmp_path) -> None:
    clf.save(saved, overwrite=True, training_fingerprint="new")
    assert load_classifier(saved).training_fingerprint_ == "new"
    other = tmp_path / "precious"
    other.mkdir()
    (other / "thesis.txt").write_text("do not delete")
    with pytest.raises(ArtifactError, match="not a saved classifier"):
        clf.save(other, overwrite=True)
    assert (other / "thesis.txt").read_text() == "do not delete"


def test_save_into_an_empty_directory(clf, tmp_path) -> None:
    (tmp_path / "empty").mkdir()
    load_classifier(clf.save(tmp_path / "empty"))
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging left


def test_write_arrays_refuses_object_arrays(tmp_path) -> None:
    with pytest.raises(ValueError, match="dtype object"):
        persistence.write_arrays(tmp_path / "a.npz", {"x": np.array([{}, []], dtype=object)})


@pytest.mark.parametrize("name", ["model.pkl", "weights.joblib", "code.py", "noext"])
def test_write_helpers_refuse_other_file_types(tmp_path, name) -> None:
    with pytest.raises(ArtifactError, match="is not allowed in a saved classifier"):
        persistence.write_json(tmp_path / name, {})


# --------------------------------------------------------------------------- refusals


def _plant_unlisted_pickle(d: Path, marker: Path) -> str:
    (d / "model.pkl").write_bytes(_pickle_payload(marker))
    return "model.pkl"


def _plant_listed_pickle(d: Path, marker: Path) -> str:
    (d / "model.pkl").write_bytes(_pickle_payload(marker))
    _relist(d, "model.pkl")
    return "model.pkl"


def _plant_pickle_as_json(d: Path, marker: Path) -> str:
    (d / "vocabulary.json").write_bytes(_pickle_payload(marker))
    _relist(d, "vocabulary.json")
    return "vocabulary.json"


def _plant_object_array_npz(d: Path, marker: Path) -> str:
    # A well-formed .npz whose array is an object array: np.load would unpickle it if
    # allowed to. The manifest is updated, so only the no-pickle rule stands in the way.
    buffer = io.BytesIO()
    np.save(buffer, np.array([_Boom(marker)], dtype=object), allow_pickle=True)
    with zipfile.ZipFile(d / "arrays.npz", "w") as zf:
        for name in ("idf", "weights", "intercept"):
            zf.writestr(f"{name}.npy", buffer.getvalue())
    _relist(d, "arrays.npz")
    return "arrays.npz"


def _tamper_npz_bytes(d: Path, marker: Path) -> str:
    data = bytearray((d / "arrays.npz").read_bytes())
    data[len(data) // 2] ^= 0xFF
    (d / "arrays.npz").write_bytes(bytes(data))
    return "arrays.npz"


def _edit_vocabulary(d: Path, marker: Path) -> str:
    vocab = json.loads((d / "vocabulary.json").read_text())
    vocab["word"][0] = "changed"
    (d / "vocabulary.json").write_text(json.dumps(vocab))
    return "vocabulary.json"


def _delete_arrays(d: Path, marker: Path) -> str:
    (d / "arrays.npz").unlink()
    return "arrays.npz"


def _plant_python_module(d: Path, marker: Path) -> str:
    (d / "__init__.py").write_text(f"open({str(marker)!r}, 'w')\n")
    _relist(d, "__init__.py")
    return "__init__.py"


def _symlink_vocabulary(d: Path, marker: Path) -> str:
    target = d.parent / "outside.json"
    shutil.move(d / "vocabulary.json", target)
    os.symlink(target, d / "vocabulary.json")
    return "vocabulary.json"


def _nested_unlisted(d: Path, marker: Path) -> str:
    (d / "sub").mkdir()
    (d / "sub" / "x.json").write_text("{}")
    return "sub/x.json"


TAMPERINGS = {
    "unlisted pickle": (_plant_unlisted_pickle, "not listed in manifest.json"),
    "listed pickle": (_plant_listed_pickle, "file type '.pkl' is not allowed"),
    "pickle posing as json": (_plant_pickle_as_json, "not a readable JSON file"),
    "object array in npz": (_plant_object_array_npz, "not a readable .npz file"),
    "npz bytes changed": (_tamper_npz_bytes, "checksum does not match"),
    "vocabulary edited": (_edit_vocabulary, "checksum does not match"),
    "file deleted": (_delete_arrays, "listed in manifest.json is missing"),
    "python module listed": (_plant_python_module, "file type '.py' is not allowed"),
    "symlink": (_symlink_vocabulary, "link"),
    "nested unlisted file": (_nested_unlisted, "not listed in manifest.json"),
}


@pytest.mark.parametrize("case", sorted(TAMPERINGS))
def test_tampered_directory_is_refused_and_runs_nothing(saved, tmp_path, case) -> None:
    tamper, match = TAMPERINGS[case]
    marker = tmp_path / "PWNED"
    rel = tamper(saved, marker)
    with pytest.raises(ArtifactError, match=match) as info:
        load_classifier(saved)
    assert isinstance(info.value, UserInputError)
    assert info.value.path is not None
    assert str(saved) in info.value.path
    if rel != "__init__.py":  # the message names the offending file
        assert rel.split("/")[0] in str(info.value)
    assert not marker.exists(), "loading ran planted code"


def _set(key, value):
    def change(m):
        m[key] = value

    return change


MANIFEST_EDITS = {
    "unknown kind": (_set("kind", "evil"), r"unknown classifier kind 'evil' \(known: "),
    "module path as kind": (
        _set("kind", "os:system"),
        "unknown classifier kind 'os:system'",
    ),
    "newer format": (_set("format_version", 99), "format_version 99 is newer"),
    "bool format version": (_set("format_version", True), "not a positive integer"),
    "foreign format": (_set("format", "sklearn-pickle"), "format is 'sklearn-pickle'"),
    "no files": (_set("files", None), "'files' must be an object"),
    "duplicate classes": (_set("classes", ["a", "a", "b"]), "distinct strings"),
    "path traversal": (
        _set("files", {"../outside.json": {"sha256": "0" * 64}}),
        "unsafe file path '../outside.json'",
    ),
    "absolute path": (
        _set("files", {"/etc/passwd.json": {"sha256": "0" * 64}}),
        "unsafe file path",
    ),
    "classes do not fit the arrays": (
        _set("classes", ["login", "refund", "shipping", "extra"]),
        "array 'weights' has shape",
    ),
    "unknown parameter": (
        lambda m: m["state"]["params"].update({"__class__": "os.system"}),
        r"unknown parameters \['__class__'\]",
    ),
    "invalid parameter": (
        lambda m: m["state"]["params"].update({"min_df": 0}),
        "manifest parameters are invalid",
    ),
    "missing state": (_set("state", None), "'state' must be an object"),
    "no params in state": (lambda m: m["state"].pop("params"), "no 'state.params' object"),
}


@pytest.mark.parametrize("case", sorted(MANIFEST_EDITS))
def test_changed_manifest_is_refused(saved, case) -> None:
    change, match = MANIFEST_EDITS[case]
    _rewrite_manifest(saved, change)
    with pytest.raises(ArtifactError, match=match) as info:
        load_classifier(saved)
    assert str(saved) in (info.value.path or "")


@pytest.mark.parametrize(
    ("setup", "match"),
    [
        (lambda p: None, "is not a directory"),
        (lambda p: p.mkdir(), "has no manifest.json"),
        (lambda p: (p.mkdir(), (p / "manifest.json").write_text("{nope")), "not a readable JSON"),
        (lambda p: (p.mkdir(), (p / "manifest.json").write_text("[1, 2]")), "a JSON object"),
        (lambda p: p.write_text("x"), "is not a directory"),
    ],
)
def test_not_a_model_directory(tmp_path, setup, match) -> None:
    path = tmp_path / "m"
    setup(path)
    with pytest.raises(ArtifactError, match=match):
        load_classifier(path)


# --------------------------------------------------------------------------- registry


class _Constant(IntentClassifier):
    """A toy classifier kind: always the same distribution."""

    kind = "constant_test"

    def fit(self, texts, labels):
        self.classes_ = np.array(sorted(set(labels)))
        return self

    def predict_proba(self, texts):
        self._check_fitted()
        return np.full((len(texts), len(self.classes_)), 1.0 / len(self.classes_))

    def _save_state(self, directory):
        persistence.write_json(directory / "nested" / "extra.json", {"hello": "world"})
        return {"n": len(self.classes_)}

    @classmethod
    def _load_state(cls, directory, manifest):
        assert persistence.read_json(directory / "nested" / "extra.json") == {"hello": "world"}
        out = cls()
        out.classes_ = np.array(manifest["classes"])
        return out


def test_a_registered_kind_round_trips(monkeypatch, tmp_path) -> None:
    monkeypatch.setitem(persistence._REGISTRY, "constant_test", f"{__name__}:_Constant")
    clf = _Constant().fit(["a", "b"], ["x", "y"])
    path = persistence.save_classifier(clf, tmp_path / "c")
    manifest = json.loads((path / "manifest.json").read_text())
    assert sorted(manifest["files"]) == ["nested/extra.json"]
    loaded = load_classifier(path)
    assert isinstance(loaded, _Constant)
    assert list(loaded.classes_) == ["x", "y"]


def test_register_kind_rules(monkeypatch) -> None:
    monkeypatch.setattr(persistence, "_REGISTRY", dict(persistence._REGISTRY))
    persistence.register_kind("constant_test", f"{__name__}:_Constant")
    persistence.register_kind("constant_test", f"{__name__}:_Constant")  # same: fine
    assert persistence.registered_kinds()["constant_test"] == f"{__name__}:_Constant"
    with pytest.raises(ValueError, match="already registered"):
        persistence.register_kind("local", f"{__name__}:_Constant")
    with pytest.raises(ValueError, match=r"package\.module:Class"):
        persistence.register_kind("other", "no_colon_here")
    with pytest.raises(ValueError, match="identifier"):
        persistence.register_kind("bad kind", f"{__name__}:_Constant")


def test_save_refuses_an_unregistered_kind(tmp_path) -> None:
    clf = _Constant().fit(["a", "b"], ["x", "y"])
    with pytest.raises(ValueError, match="not registered"):
        persistence.save_classifier(clf, tmp_path / "c")


def test_registry_target_must_match_the_kind(monkeypatch, saved) -> None:
    monkeypatch.setitem(persistence._REGISTRY, "local", f"{__name__}:_Constant")
    with pytest.raises(ArtifactError, match="whose kind is 'constant_test'"):
        load_classifier(saved)


# --------------------------------------------------------------------------- seal and signature

SIGNING_KEY = "s" * 32


@pytest.mark.parametrize(
    "change",
    [
        # the case: a permuted label list (same shape, so the arrays still load)
        lambda m: m.__setitem__("classes", list(reversed(m["classes"]))),
        lambda m: m.__setitem__("classes", [m["classes"][1], m["classes"][0], m["classes"][2]]),
        lambda m: m["state"].__setitem__("C_", 0.001),
        lambda m: m["state"]["params"].__setitem__("sublinear_tf", False),
        lambda m: m["files"]["arrays.npz"].__setitem__("bytes", 1),
        lambda m: m["training_data"].__setitem__("fingerprint", "other"),
        lambda m: m["metadata"].__setitem__("note", "edited"),
        lambda m: m.__setitem__("fingerprint", "0" * 64),
    ],
)
def test_any_edit_of_the_manifest_is_refused(saved, change) -> None:
    _rewrite_manifest(saved, change, reseal=False)
    with pytest.raises(ArtifactError, match=r"content hash mismatch \(field 'content_sha256'\)"):
        load_classifier(saved)


def test_permuted_classes_with_a_recomputed_hash_change_the_fingerprint(saved) -> None:
    before = persistence.classifier_fingerprint(saved)

    def permute(m):
        m["classes"] = list(reversed(m["classes"]))

    # hash recomputed but not the fingerprint: refused
    path = saved / "manifest.json"
    manifest = json.loads(path.read_text())
    permute(manifest)
    path.write_text(json.dumps(integrity.seal(manifest)))
    with pytest.raises(ArtifactError, match="field 'fingerprint'"):
        load_classifier(saved)
    # both recomputed: the directory loads (a plain hash is no defence against a
    # deliberate edit), but it is another model, so no policy fitted on the first binds
    _rewrite_manifest(saved, lambda m: None)
    assert persistence.classifier_fingerprint(saved) != before


def test_manifest_without_a_seal_or_of_format_1_is_refused(saved) -> None:
    path = saved / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest.pop("content_sha256")
    path.write_text(json.dumps(manifest))
    with pytest.raises(ArtifactError, match="has no content_sha256"):
        load_classifier(saved)
    manifest["format_version"] = 1
    path.write_text(json.dumps(manifest))
    with pytest.raises(ArtifactError, match="format_version 1 predates sealed manifests"):
        load_classifier(saved)


def test_signed_save_and_the_signing_rules(clf, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("HYBRIDROUTE_SIGNING_KEY", SIGNING_KEY)
    a = clf.save(tmp_path / "a", training_fingerprint="f")
    b = clf.save(tmp_path / "b", training_fingerprint="f")
    assert (a / "manifest.json").read_bytes() == (b / "manifest.json").read_bytes()
    manifest = json.loads((a / "manifest.json").read_text())
    assert manifest["signature"]["algorithm"] == "hmac-sha256"
    assert SIGNING_KEY not in (a / "manifest.json").read_text()
    np.testing.assert_array_equal(
        load_classifier(a).predict_proba(QUERIES), clf.predict_proba(QUERIES)
    )

    monkeypatch.setenv("HYBRIDROUTE_SIGNING_KEY", "w" * 32)
    with pytest.raises(ArtifactError, match="'signature' does not verify") as info:
        load_classifier(a)
    assert str(a / "manifest.json") in str(info.value)

    monkeypatch.delenv("HYBRIDROUTE_SIGNING_KEY")
    with pytest.raises(ArtifactError, match="set it to the signing key"):
        load_classifier(a)
    unsigned = clf.save(tmp_path / "unsigned")
    monkeypatch.setenv("HYBRIDROUTE_SIGNING_KEY", SIGNING_KEY)
    with pytest.raises(ArtifactError, match="is not signed"):
        load_classifier(unsigned)


@pytest.mark.parametrize(
    "change",
    [
        lambda m: m.__setitem__("classes", list(reversed(m["classes"]))),
        lambda m: m["state"].__setitem__("C_", 0.001),
        lambda m: m.pop("signature"),
    ],
)
def test_signed_manifest_edited_and_rehashed_is_refused(clf, tmp_path, monkeypatch, change) -> None:
    monkeypatch.setenv("HYBRIDROUTE_SIGNING_KEY", SIGNING_KEY)
    saved = clf.save(tmp_path / "m")
    path = saved / "manifest.json"
    manifest = json.loads(path.read_text())
    change(manifest)
    body = {k: v for k, v in manifest.items() if k not in ("content_sha256", "signature")}
    body["fingerprint"] = persistence._fingerprint(body, saved)
    forged = {**body, "content_sha256": integrity.content_hash(body)}
    if "signature" in manifest:
        forged["signature"] = manifest["signature"]  # the old signature, now wrong
    path.write_text(json.dumps(forged))
    with pytest.raises(ArtifactError, match=r"does not verify|is not signed"):
        load_classifier(saved)


# --------------------------------------------------------------------------- fingerprint


def test_fingerprint_is_the_same_wherever_and_however_saved(clf, tmp_path, monkeypatch) -> None:
    plain = clf.save(tmp_path / "plain")
    noted = clf.save(tmp_path / "noted", training_fingerprint="x", metadata={"a": 1})
    monkeypatch.setenv("HYBRIDROUTE_SIGNING_KEY", SIGNING_KEY)
    signed = clf.save(tmp_path / "signed")
    fp = clf.fingerprint()  # in memory: computed through a temporary save
    assert persistence.classifier_fingerprint(signed) == fp
    monkeypatch.delenv("HYBRIDROUTE_SIGNING_KEY")
    assert persistence.classifier_fingerprint(plain) == fp
    assert persistence.classifier_fingerprint(noted) == fp
    loaded = load_classifier(noted)
    assert loaded.fingerprint() == loaded.manifest_["fingerprint"] == fp
    assert persistence.classifier_fingerprint(loaded.save(tmp_path / "again")) == fp
    assert len(fp) == 64 and int(fp, 16) >= 0


@pytest.mark.parametrize(
    "other",
    [
        lambda: LocalClassifier(Cs=(0.5,), random_state=0).fit(TEXTS, LABELS),
        lambda: LocalClassifier(Cs=(10.0,), random_state=0).fit(TEXTS[:-1], LABELS[:-1]),
        lambda: LocalClassifier(Cs=(10.0,), random_state=0, sublinear_tf=False).fit(TEXTS, LABELS),
    ],
)
def test_another_model_has_another_fingerprint(clf, other) -> None:
    assert other().fingerprint() != clf.fingerprint()


def test_llm_and_cascade_fingerprints_survive_a_round_trip(clf, tmp_path, monkeypatch) -> None:
    from hybridroute.classifiers import CascadeClassifier, LLMClassifier

    llm = LLMClassifier(model="openai/stand-in", api_base="http://127.0.0.1:9/v1").fit(
        TEXTS, LABELS
    )
    cascade = CascadeClassifier.from_fitted(clf, llm, threshold=0.5)
    for model in (llm, cascade):
        saved = model.save(tmp_path / model.kind)
        fp = persistence.classifier_fingerprint(saved)
        assert model.fingerprint() == fp
        resaved = load_classifier(saved).save(tmp_path / f"{model.kind}-again")
        assert persistence.classifier_fingerprint(resaved) == fp
    # a cascade's stages count by their own fingerprints: signing them changes nothing
    monkeypatch.setenv("HYBRIDROUTE_SIGNING_KEY", SIGNING_KEY)
    assert persistence.classifier_fingerprint(cascade.save(tmp_path / "signed")) == fp
    assert llm.fingerprint() != clf.fingerprint() != cascade.fingerprint()


def test_a_changed_nested_stage_is_refused(clf, tmp_path) -> None:
    from hybridroute.classifiers import CascadeClassifier, LLMClassifier

    llm = LLMClassifier(model="openai/stand-in").fit(TEXTS, LABELS)
    saved = CascadeClassifier.from_fitted(clf, llm, threshold=0.5).save(tmp_path / "c")
    inner = saved / "local" / "manifest.json"
    manifest = json.loads(inner.read_text())
    manifest["classes"] = list(reversed(manifest["classes"]))
    inner.write_text(json.dumps(manifest))
    with pytest.raises(ArtifactError, match="checksum does not match") as info:
        load_classifier(saved)
    assert "local" in str(info.value)


# --------------------------------------------------------------------------- strict JSON


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ('{"format": "hybridroute.classifier", "format": "x"}', "duplicate key 'format'.*line 1"),
        ('{"format": "hybridroute.classifier", "x": NaN}', "NaN"),
        ("[" * 200 + "]" * 200, "nested too deeply"),
        ('{"x": ' + "9" * 100 + "}", "digits"),
    ],
)
def test_manifest_is_read_as_strict_json(saved, text, match) -> None:
    (saved / "manifest.json").write_text(text)
    with pytest.raises(ArtifactError, match=match) as info:
        load_classifier(saved)
    assert "manifest.json" in str(info.value)


def test_duplicate_keys_in_a_classifier_file_are_refused(saved) -> None:
    (saved / "vocabulary.json").write_text('{"word": ["a"], "char": ["b"], "word": ["c"]}')
    _relist(saved, "vocabulary.json")
    with pytest.raises(ArtifactError, match="duplicate key 'word'") as info:
        load_classifier(saved)
    assert "vocabulary.json" in str(info.value)


def test_manifest_over_its_byte_limit_is_refused(saved, monkeypatch) -> None:
    monkeypatch.setattr(persistence, "_MAX_MANIFEST_BYTES", 64)
    with pytest.raises(ArtifactError, match="larger than the limit of 64 bytes"):
        load_classifier(saved)


def test_a_fifo_in_place_of_a_file_is_refused_without_blocking(saved) -> None:
    import threading

    (saved / "arrays.npz").unlink()
    os.mkfifo(saved / "arrays.npz")
    box: dict = {}

    def target():
        try:
            load_classifier(saved)
        except BaseException as exc:
            box["error"] = exc

    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(20)
    assert not t.is_alive(), "loading blocked on a FIFO"
    assert isinstance(box.get("error"), ArtifactError)
    assert "arrays.npz" in str(box["error"])
