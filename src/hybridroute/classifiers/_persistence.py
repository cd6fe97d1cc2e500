"""Saving and loading fitted classifiers as directories that cannot run code on load.

A saved classifier is a directory::

    model/
        manifest.json      kind, label set, training-data fingerprint, versions,
                           the classifier's JSON state, a sha256 for every other file,
                           the model fingerprint, and its seal (content_sha256, and an
                           HMAC signature when HYBRIDROUTE_SIGNING_KEY is set)
        vocabulary.json    (what the classifier itself writes: JSON and .npz only)
        arrays.npz

Why not pickle or joblib: unpickling runs whatever code the file names, so a model
directory from an untrusted place could run anything when loaded. Here nothing is
unpickled: JSON goes through :mod:`json`, arrays through :func:`numpy.load` with
``allow_pickle=False`` (an object array is refused), and the class to rebuild is looked up
by the manifest's ``kind`` in one fixed mapping of kind -> ``"module:Class"`` that only
code can extend (:func:`register_kind`) -- a manifest cannot name a module to import.

Before any classifier code reads a file, :func:`load_classifier` checks the directory
against its manifest and refuses it (:class:`~hybridroute.exceptions.ArtifactError`,
naming the path and what is wrong) when the manifest's own seal fails (its
``content_sha256``, or its signature under the rules of :mod:`hybridroute._integrity`), when
a listed file is missing or its checksum changed, when a file is present that the manifest
does not list, when a file has a suffix outside :data:`ALLOWED_SUFFIXES`, when anything in
it is a symbolic link or not a regular file, when the kind is unknown, when the recorded
fingerprint is not the one the manifest gives, or when the format version is not the one
this library reads. The seal covers every field of the manifest -- kind, classes, state,
the file list -- so a permuted label list is refused like a changed file. A plain hash
catches accidents only (anyone can recompute it); a signed manifest also resists a
deliberate edit. The refusal to run code does not depend on any of this.

The **model fingerprint** (``fingerprint`` in the manifest, :func:`classifier_fingerprint`)
is the SHA-256 of the canonical JSON of what decides the classifier's scores: its kind,
its classes, its state and the SHA-256 of each of its files (a nested saved classifier,
such as a cascade's stages, counts by its own fingerprint). It leaves out the metadata,
the training-data fingerprint, the library versions and the seal, so the same fitted
classifier has the same fingerprint whenever and wherever it is saved, signed or not. A
policy records the fingerprint of the model it was fitted on, and a router bundle refuses
a policy fitted on another model.

Writing is reproducible: manifests are written with sorted keys, ``.npz`` members carry a
fixed timestamp, and no clock time is recorded, so the same fitted classifier gives
byte-identical files.

Implementing a saveable classifier (the protocol used by every kind)::

    class MyClassifier(IntentClassifier):
        kind = "mine"

        def _save_state(self, directory: Path) -> dict:
            write_json(directory / "things.json", ...)      # any files, allowed suffixes
            return {...}                                    # JSON state for the manifest

        @classmethod
        def _load_state(cls, directory: Path, manifest: dict) -> "MyClassifier":
            ...                                             # read_json / read_arrays

    register_kind("mine", "mypackage.module:MyClassifier")

A composite classifier (the cascade) saves its parts with :func:`save_classifier` into
sub-directories of ``directory`` and loads them with :func:`load_classifier`; the outer
manifest covers their files too.
"""

from __future__ import annotations

import hashlib
import importlib
import io
import json
import os
import platform
import tempfile
import zipfile
from collections.abc import Mapping
from importlib import metadata as importlib_metadata
from pathlib import Path
from typing import Any

import numpy as np

from .. import _safeio
from .._atomic import replace_directory
from .._integrity import canonical_bytes, file_sha256, is_sha256_hex, seal, verify
from .._version import __version__
from ..exceptions import ArtifactError, InputError
from ._base import IntentClassifier

__all__ = [
    "ALLOWED_SUFFIXES",
    "FORMAT",
    "FORMAT_VERSION",
    "MANIFEST_NAME",
    "classifier_fingerprint",
    "load_classifier",
    "read_arrays",
    "read_json",
    "read_manifest",
    "register_kind",
    "registered_kinds",
    "save_classifier",
    "write_arrays",
    "write_json",
]

#: Value of the manifest's ``format`` field.
FORMAT = "hybridroute.classifier"
#: The manifest format version this library writes and reads. Version 2 added the seal
#: (``content_sha256`` / ``signature``) and the model ``fingerprint``; a version-1 manifest
#: is refused, since accepting one would let a stripped seal pass as an old file.
FORMAT_VERSION = 2
#: Name of the manifest file inside a saved classifier directory.
MANIFEST_NAME = "manifest.json"
#: File suffixes a saved classifier may contain: formats read without running code.
ALLOWED_SUFFIXES = frozenset({".json", ".jsonl", ".npz", ".txt"})

# Upper bounds against absurd inputs (a manifest or JSON file is read whole, and the byte
# limit is enforced while reading, not trusted from the reported size).
_MAX_JSON_BYTES = 256 * 1024 * 1024
_MAX_MANIFEST_BYTES = 64 * 1024 * 1024
# Identifies the definition of the model fingerprint (changed only with that definition).
_FINGERPRINT_SCHEME = "hybridroute.model-fingerprint/1"

# The one kind -> "module:Class" mapping. Entries are import paths, resolved only when a
# directory of that kind is loaded, so loading a local model never imports litellm.
_REGISTRY: dict[str, str] = {
    "local": "hybridroute.classifiers._local:LocalClassifier",
    "llm": "hybridroute.classifiers.llm:LLMClassifier",
    "cascade": "hybridroute.classifiers._cascade:CascadeClassifier",
    "embedding": "hybridroute.classifiers.embedding:EmbeddingClassifier",
    "sklearn": "hybridroute.classifiers.adapter:SklearnAdapter",
    "function": "hybridroute.classifiers.adapter:FunctionAdapter",
}

# Packages whose versions are recorded in every manifest (when installed).
_RECORDED_PACKAGES = ("numpy", "scipy", "scikit-learn")


def register_kind(kind: str, target: str) -> None:
    """Map classifier ``kind`` to ``"module:Class"`` for :func:`load_classifier`.

    Parameters
    ----------
    kind : str
        The ``kind`` class attribute written into manifests.
    target : str
        Import path of the class, e.g. ``"hybridroute.classifiers._local:LocalClassifier"``.
        It is imported only when a directory of this kind is loaded.
    """
    if not isinstance(kind, str) or not kind or not kind.isidentifier():
        raise ValueError(f"kind must be a non-empty identifier, got {kind!r}")
    module, sep, name = str(target).partition(":")
    if not sep or not module or not name:
        raise ValueError(f"target must look like 'package.module:Class', got {target!r}")
    existing = _REGISTRY.get(kind)
    if existing is not None and existing != target:
        raise ValueError(f"kind {kind!r} is already registered to {existing!r}")
    _REGISTRY[kind] = target


def registered_kinds() -> dict[str, str]:
    """A copy of the kind -> ``"module:Class"`` mapping."""
    return dict(_REGISTRY)


def _resolve(kind: str, path: Path) -> type[IntentClassifier]:
    target = _REGISTRY.get(kind)
    if target is None:
        known = ", ".join(sorted(_REGISTRY))
        raise ArtifactError(
            f"unknown classifier kind {kind!r} in {MANIFEST_NAME} (known: {known})",
            path=str(path),
        )
    module_name, _, class_name = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ArtifactError(
            f"classifier kind {kind!r} is not available in this installation ({exc})",
            path=str(path),
        ) from exc
    cls = getattr(module, class_name, None)
    if not (isinstance(cls, type) and issubclass(cls, IntentClassifier)):
        raise ArtifactError(
            f"classifier kind {kind!r} maps to {target!r}, which is not a classifier class",
            path=str(path),
        )
    if getattr(cls, "kind", None) != kind:
        raise ArtifactError(
            f"classifier kind {kind!r} maps to {target!r}, whose kind is {cls.kind!r}",
            path=str(path),
        )
    return cls


# -- file helpers (used by the classifiers' _save_state / _load_state) --------------------


def _check_suffix(path: Path) -> None:
    if path.suffix.lower() not in ALLOWED_SUFFIXES:
        allowed = ", ".join(sorted(ALLOWED_SUFFIXES))
        raise ArtifactError(
            f"file type {path.suffix or '(none)'!r} is not allowed in a saved classifier "
            f"(allowed: {allowed})",
            path=str(path),
        )


def _json_bytes(obj: Any) -> bytes:
    try:
        text = json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=True, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"cannot write as JSON: {exc}") from exc
    return (text + "\n").encode("ascii")


def write_json(path: Path, obj: Any) -> None:
    """Write ``obj`` as JSON (sorted keys, ASCII, no NaN) to ``path``."""
    path = Path(path)
    _check_suffix(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(_json_bytes(obj))


def read_json(path: Path, *, limit: int = _MAX_JSON_BYTES, what: str = "JSON file") -> Any:
    """Read a JSON file strictly; any failure is an :class:`ArtifactError` naming ``path``.

    Goes through :mod:`hybridroute._safeio`: regular files only, the byte limit enforced
    while reading, strict UTF-8, and no duplicate keys, NaN, huge integers or deep nesting.
    """
    path = Path(path)
    if not os.path.lexists(path):
        raise ArtifactError("file is missing", path=str(path))
    try:
        text = _safeio.read_text(path, limit=limit, what=what)
        return _safeio.parse_json(text, source=str(path), what=what)
    except InputError as exc:
        where = f" (line {exc.line})" if exc.line is not None else ""
        raise ArtifactError(
            f"not a readable JSON file: {exc.reason}{where}", path=str(path)
        ) from None


# A fixed timestamp for .npz members (the zip format's earliest date), so the same arrays
# always give the same bytes.
_ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)


def write_arrays(path: Path, arrays: Mapping[str, np.ndarray]) -> None:
    """Write numeric arrays to an ``.npz`` file with reproducible bytes.

    Object arrays are refused (they would need pickle to read back).
    """
    path = Path(path)
    _check_suffix(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name in sorted(arrays):
            array = np.asarray(arrays[name])
            if array.dtype.hasobject:
                raise ValueError(f"array {name!r} has dtype object; only plain arrays are saved")
            buffer = io.BytesIO()
            np.lib.format.write_array(buffer, np.ascontiguousarray(array), allow_pickle=False)
            info = zipfile.ZipInfo(f"{name}.npy", date_time=_ZIP_EPOCH)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            zf.writestr(info, buffer.getvalue())


def read_arrays(
    path: Path, expected: Mapping[str, tuple[int, ...]] | None = None
) -> dict[str, np.ndarray]:
    """Read an ``.npz`` file without pickle; check names, numeric dtypes and shapes.

    Parameters
    ----------
    path : Path
        The ``.npz`` file.
    expected : mapping of name to shape, optional
        When given, the file must hold exactly these arrays with these shapes.
    """
    path = Path(path)
    out: dict[str, np.ndarray] = {}
    try:
        with np.load(path, allow_pickle=False) as npz:
            if not hasattr(npz, "files"):
                raise ArtifactError("not an .npz archive", path=str(path))
            for name in npz.files:
                array = npz[name]
                if array.dtype.kind not in "biuf":
                    raise ArtifactError(
                        f"array {name!r} has dtype {array.dtype}, not a number type",
                        path=str(path),
                    )
                out[name] = array
    except ArtifactError:
        raise
    except FileNotFoundError:
        raise ArtifactError("file is missing", path=str(path)) from None
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
        # allow_pickle=False makes an object array a ValueError here.
        raise ArtifactError(f"not a readable .npz file ({exc})", path=str(path)) from None
    if expected is not None:
        if set(out) != set(expected):
            raise ArtifactError(
                f"holds arrays {sorted(out)}, expected {sorted(expected)}", path=str(path)
            )
        for name, shape in expected.items():
            if out[name].shape != tuple(shape):
                raise ArtifactError(
                    f"array {name!r} has shape {out[name].shape}, expected {tuple(shape)}",
                    path=str(path),
                )
    return out


def _sha256(path: Path) -> str:
    return file_sha256(path)


def _versions(cls: type) -> dict[str, str]:
    versions = {"hybridroute": __version__, "python": platform.python_version()}
    for package in (*_RECORDED_PACKAGES, *getattr(cls, "_artifact_packages", ())):
        try:
            versions[package] = importlib_metadata.version(package)
        except importlib_metadata.PackageNotFoundError:
            continue
    return versions


def _walk_files(directory: Path) -> list[str]:
    """Relative POSIX paths of every file under ``directory``; refuses links and oddities."""
    found = []
    for root, dirs, files in os.walk(directory, followlinks=False):
        root_path = Path(root)
        for name in sorted(dirs):
            if (root_path / name).is_symlink():
                raise ArtifactError(
                    "contains a symbolic link, which a saved classifier never has",
                    path=str(root_path / name),
                )
        for name in sorted(files):
            full = root_path / name
            if full.is_symlink() or not full.is_file():
                raise ArtifactError(
                    "contains a link or special file, which a saved classifier never has",
                    path=str(full),
                )
            found.append(full.relative_to(directory).as_posix())
    return sorted(found)


# -- fingerprint -------------------------------------------------------------------------


def _nested_manifest(path: Path) -> dict[str, Any] | None:
    """The sealed manifest of a nested saved classifier at ``path``, or ``None`` if it is not one."""
    doc = read_json(path, limit=_MAX_MANIFEST_BYTES, what="manifest")
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        return None
    verify(doc, path=str(path), what="model manifest")
    return doc


def _fingerprint(manifest: Mapping[str, Any], directory: Path, depth: int = 0) -> str:
    """The model fingerprint of ``manifest`` (files under ``directory``; see the module notes).

    A listed ``manifest.json`` below the top level that is itself a saved classifier's
    manifest counts by its own fingerprint, computed the same way, so what a nested
    manifest records beside its model (versions, metadata, seal) never changes the outer
    fingerprint.
    """
    if depth > 8:
        raise ArtifactError("saved classifiers are nested too deeply", path=str(directory))
    files: dict[str, Any] = {}
    for rel in sorted(manifest["files"]):
        entry = manifest["files"][rel]
        parts = rel.split("/")
        if len(parts) > 1 and parts[-1] == MANIFEST_NAME:
            nested = _nested_manifest(directory / rel)
            if nested is not None:
                sub = directory.joinpath(*parts[:-1])
                files[rel] = {"fingerprint": _fingerprint(_checked(nested, sub), sub, depth + 1)}
                continue
        files[rel] = {"sha256": entry["sha256"]}
    core = {
        "scheme": _FINGERPRINT_SCHEME,
        "kind": manifest["kind"],
        "classes": manifest["classes"],
        "state": manifest["state"],
        "files": files,
    }
    try:
        return hashlib.sha256(canonical_bytes(core)).hexdigest()
    except ValueError as exc:
        raise ArtifactError(f"{MANIFEST_NAME} {exc}", path=str(directory)) from None


def classifier_fingerprint(source: IntentClassifier | str | os.PathLike[str]) -> str:
    """The model fingerprint of a saved classifier directory or of a fitted classifier.

    The fingerprint identifies exactly what computes the scores (kind, classes, state,
    file checksums; see the module notes). A policy records it
    (``fit_policy(..., model_fingerprint=...)``, ``hybridroute calibrate`` does this), and a
    router bundle refuses a policy whose fingerprint is not its model's.

    Parameters
    ----------
    source : IntentClassifier, str or path-like
        A saved classifier directory (read and verified, not loaded); a classifier loaded
        with :func:`load_classifier` (the fingerprint of the files it was loaded from --
        refitting it in place does not update it, so do not); or a fitted classifier,
        which is saved to a temporary directory to compute it (as long as a save takes).

    Returns
    -------
    str
        64 lowercase hex digits.
    """
    if isinstance(source, (str, os.PathLike)):
        return str(read_manifest(Path(source))["fingerprint"])
    manifest = getattr(source, "manifest_", None)
    if isinstance(manifest, Mapping) and is_sha256_hex(manifest.get("fingerprint")):
        return str(manifest["fingerprint"])
    with tempfile.TemporaryDirectory(prefix="hybridroute-fingerprint-") as tmp:
        return str(read_manifest(save_classifier(source, Path(tmp) / "model"))["fingerprint"])


# -- save --------------------------------------------------------------------------------


def save_classifier(
    classifier: IntentClassifier,
    path: str | Path,
    *,
    training_fingerprint: str | None = None,
    metadata: Mapping[str, Any] | None = None,
    overwrite: bool = False,
) -> Path:
    """Save a fitted classifier to directory ``path`` with a sealed manifest.

    The manifest records the model fingerprint and is sealed (``content_sha256``); when
    ``HYBRIDROUTE_SIGNING_KEY`` is set it is also signed (HMAC-SHA-256), and loading it then
    needs the same key (see :mod:`hybridroute._integrity`).

    Parameters
    ----------
    classifier : IntentClassifier
        A fitted classifier whose kind is registered and which implements
        ``_save_state(directory) -> dict``.
    path : str or Path
        Directory to create. It must not exist (or be empty) unless ``overwrite``.
    training_fingerprint : str, optional
        Fingerprint of the training data; defaults to the classifier's
        ``training_fingerprint_`` attribute when it has one.
    metadata : mapping, optional
        Further JSON-serialisable facts recorded under ``metadata``.
    overwrite : bool, default False
        Replace an existing saved classifier (a directory holding a ``manifest.json``);
        any other existing, non-empty directory is never replaced.

    Returns
    -------
    Path
        The directory written. Files are written to a temporary sibling and moved into
        place at the end, so a failed save leaves no half-written model behind.
    """
    kind = getattr(classifier, "kind", None)
    if kind not in _REGISTRY:
        raise ValueError(
            f"{type(classifier).__name__} has kind {kind!r}, which is not registered; "
            "call register_kind first"
        )
    classifier._check_fitted()
    target = Path(path)
    if target.exists():
        if not target.is_dir():
            raise ArtifactError("exists and is not a directory", path=str(target))
        if any(target.iterdir()):
            if not overwrite:
                raise ArtifactError(
                    "exists and is not empty; choose a new directory, or pass overwrite=True "
                    "to replace the saved classifier there",
                    path=str(target),
                )
            if not (target / MANIFEST_NAME).is_file():
                raise ArtifactError(
                    f"exists and holds no {MANIFEST_NAME}; refusing to replace a directory "
                    "that is not a saved classifier",
                    path=str(target),
                )
    if training_fingerprint is None:
        training_fingerprint = getattr(classifier, "training_fingerprint_", None)
    if training_fingerprint is not None and not isinstance(training_fingerprint, str):
        raise ValueError("training_fingerprint must be a string")

    # built in a staging directory and swapped in whole (hybridroute._atomic)
    with replace_directory(target) as staging:
        state = classifier._save_state(staging)  # type: ignore[attr-defined]
        if not isinstance(state, Mapping):
            raise TypeError(f"{type(classifier).__name__}._save_state must return a dict")
        files = {}
        for rel in _walk_files(staging):
            full = staging / rel
            if rel == MANIFEST_NAME:
                raise ValueError(f"_save_state must not write {MANIFEST_NAME}")
            _check_suffix(full)
            files[rel] = {"sha256": _sha256(full), "bytes": full.stat().st_size}
        classes = [str(c) for c in classifier.classes_]  # type: ignore[attr-defined]
        manifest: dict[str, Any] = {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "kind": kind,
            "classes": classes,
            "training_data": {"fingerprint": training_fingerprint},
            "versions": _versions(type(classifier)),
            "state": dict(state),
            "metadata": dict(metadata or {}),
            "files": files,
        }
        # round-trip through JSON first: the fingerprint and the seal are computed over
        # exactly what a reader will parse
        manifest = json.loads(_json_bytes(manifest))
        manifest["fingerprint"] = _fingerprint(manifest, staging)
        (staging / MANIFEST_NAME).write_bytes(_json_bytes(seal(manifest)))
    return target


# -- load --------------------------------------------------------------------------------


def _checked(manifest: dict[str, Any], directory: Path) -> dict[str, Any]:
    """Field checks of a parsed manifest whose seal is verified (no file is read)."""
    where = str(directory / MANIFEST_NAME)
    kind = manifest.get("kind")
    if not isinstance(kind, str) or kind not in _REGISTRY:
        known = ", ".join(sorted(_REGISTRY))
        raise ArtifactError(f"unknown classifier kind {kind!r} (known: {known})", path=where)
    classes = manifest.get("classes")
    if (
        not isinstance(classes, list)
        or not classes
        or not all(isinstance(c, str) for c in classes)
        or len(set(classes)) != len(classes)
    ):
        raise ArtifactError("'classes' must be a non-empty list of distinct strings", path=where)
    if not isinstance(manifest.get("state"), dict):
        raise ArtifactError("'state' must be an object", path=where)
    if not is_sha256_hex(manifest.get("fingerprint")):
        raise ArtifactError(
            "'fingerprint' must be the model fingerprint (64 lowercase hex digits)", path=where
        )
    files = manifest.get("files")
    if not isinstance(files, dict):
        raise ArtifactError("'files' must be an object of path -> checksum", path=where)
    for rel, entry in files.items():
        parts = Path(rel).parts
        if (
            not isinstance(rel, str)
            or not rel
            or "\\" in rel
            or Path(rel).is_absolute()
            or ".." in parts
            or rel != Path(rel).as_posix()
            or rel == MANIFEST_NAME
        ):
            raise ArtifactError(f"lists an unsafe file path {rel!r}", path=where)
        if not isinstance(entry, dict) or not is_sha256_hex(entry.get("sha256")):
            raise ArtifactError(f"entry for {rel!r} has no sha256", path=where)
        _check_suffix(directory / rel)
    return manifest


def read_manifest(path: str | Path) -> dict[str, Any]:
    """Read and check the manifest of saved classifier directory ``path``.

    Checks the format and its version, the manifest's seal (``content_sha256``, and the
    signature rules of :mod:`hybridroute._integrity`), every field (kind, classes, state,
    files), that the files in the directory are exactly those the manifest lists, with
    matching checksums, and that the recorded ``fingerprint`` is the one the manifest
    gives. Imports no classifier code.

    Returns
    -------
    dict
        The manifest, without its seal fields.
    """
    directory = Path(path)
    if not directory.is_dir():
        raise ArtifactError(
            "is not a directory (a saved classifier is a directory with a manifest.json)",
            path=str(directory),
        )
    if directory.is_symlink():
        raise ArtifactError("is a symbolic link", path=str(directory))
    manifest_path = directory / MANIFEST_NAME
    if not manifest_path.is_file() or manifest_path.is_symlink():
        raise ArtifactError(f"has no {MANIFEST_NAME}", path=str(directory))
    manifest = read_json(manifest_path, limit=_MAX_MANIFEST_BYTES, what="manifest")
    where = str(manifest_path)
    if not isinstance(manifest, dict):
        raise ArtifactError("must hold a JSON object", path=where)
    if manifest.get("format") != FORMAT:
        raise ArtifactError(
            f"format is {manifest.get('format')!r}, expected {FORMAT!r}", path=where
        )
    version = manifest.get("format_version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise ArtifactError(f"format_version {version!r} is not a positive integer", path=where)
    if version > FORMAT_VERSION:
        raise ArtifactError(
            f"format_version {version} is newer than this hybridroute ({__version__}) reads "
            f"(up to {FORMAT_VERSION}); upgrade hybridroute to load it",
            path=where,
        )
    if version < FORMAT_VERSION:
        raise ArtifactError(
            f"format_version {version} predates sealed manifests (this hybridroute reads "
            f"{FORMAT_VERSION}); save the classifier again with hybridroute {__version__}",
            path=where,
        )
    manifest = _checked(verify(manifest, path=where, what="model manifest"), directory)
    files = manifest["files"]
    listed = set(files)
    present = set(_walk_files(directory)) - {MANIFEST_NAME}
    for rel in sorted(present - listed):
        raise ArtifactError(
            f"file is not listed in {MANIFEST_NAME}; refusing a directory with unexpected files",
            path=str(directory / rel),
        )
    for rel in sorted(listed):
        full = directory / rel
        if rel not in present:
            raise ArtifactError(f"file listed in {MANIFEST_NAME} is missing", path=str(full))
        if _sha256(full) != files[rel]["sha256"]:
            raise ArtifactError(
                f"checksum does not match {MANIFEST_NAME}; the file was changed after saving",
                path=str(full),
            )
    actual = _fingerprint(manifest, directory)
    if actual != manifest["fingerprint"]:
        raise ArtifactError(
            f"field 'fingerprint' ({manifest['fingerprint'][:12]}…) is not the model "
            f"fingerprint its manifest gives ({actual[:12]}…)",
            path=where,
        )
    return manifest


def load_classifier(path: str | Path) -> IntentClassifier:
    """Load a classifier saved with ``save(path)``, whatever its kind.

    The directory is checked against its manifest first (see :func:`read_manifest`);
    nothing in it is unpickled or imported. The classifier class comes from the kind
    registry, never from the directory.

    Parameters
    ----------
    path : str or Path
        A saved classifier directory.

    Returns
    -------
    IntentClassifier
        The fitted classifier, with ``training_fingerprint_`` (``None`` when none was
        recorded) and ``manifest_`` (the verified manifest, whose ``fingerprint`` is the
        model fingerprint) set.

    Raises
    ------
    ArtifactError
        The directory is missing, tampered, incomplete, of an unknown kind, of another
        format version, or signed / unsigned against the signing rules.
    """
    directory = Path(path)
    manifest = read_manifest(directory)
    cls = _resolve(manifest["kind"], directory)
    classifier = cls._load_state(directory, manifest)  # type: ignore[attr-defined]
    loaded = [str(c) for c in getattr(classifier, "classes_", [])]
    if loaded != manifest["classes"]:
        raise ArtifactError(
            f"label set in the files does not match 'classes' in {MANIFEST_NAME}",
            path=str(directory),
        )
    training = manifest.get("training_data")
    fingerprint = training.get("fingerprint") if isinstance(training, dict) else None
    classifier.training_fingerprint_ = fingerprint  # type: ignore[attr-defined]
    classifier.manifest_ = manifest  # type: ignore[attr-defined]
    return classifier
