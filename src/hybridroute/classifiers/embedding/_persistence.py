"""Saving and loading the embedding classifier (the protocol of :mod:`._persistence`).

A saved embedding classifier holds its TF-IDF block (``tfidf/``, a saved local
classifier), its embedding head (``embedding_head.npz``) and, in the manifest state,
``embedding_model``: where the model came from (``source``), the fingerprint of its
weights and tokenizer, the pooled layers, pooling, token limit and width -- never the
model itself. ``source`` is ``{"kind": "package", "package", "version", "model"}``,
``{"kind": "hub", "name"}`` or ``{"kind": "path", "path"}``.

Directories saved before the source was recorded this way (hybridroute up to the
format of commit 3006ea3) hold a bare string there, the ``model`` argument as given; they
still load, their source reads ``{"kind": "unrecorded", "model": <that string>}``, and
saving such a classifier again writes the bare string back, so its model fingerprint (and
any policy bound to it) stays valid.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from ...exceptions import ArtifactError
from .._local import LocalClassifier
from ._encoder import POOLING

if TYPE_CHECKING:  # pragma: no cover
    from ._classifier import EmbeddingClassifier

__all__ = ["load_state", "save_state", "source_from_manifest"]

_E = TypeVar("_E", bound="EmbeddingClassifier")

ARRAYS_FILE = "embedding_head.npz"
TFIDF_DIR = "tfidf"
_SEQUENCES = ("layers", "tfidf_Cs", "embedding_Cs", "fusion_weights")
_SOURCE_FIELDS = {"package": ("package", "version", "model"), "hub": ("name",), "path": ("path",)}


def _source_for_manifest(source: dict[str, Any]) -> Any:
    if source.get("kind") == "unrecorded":
        return str(source["model"])  # as the directory it was loaded from had it
    return dict(source)


def source_from_manifest(value: Any, where: str) -> dict[str, Any]:
    """The ``model_source_`` of a saved ``embedding_model.source`` (checked)."""
    if isinstance(value, str):
        return {"kind": "unrecorded", "model": value}
    if not isinstance(value, dict) or value.get("kind") not in _SOURCE_FIELDS:
        raise ArtifactError(
            "embedding_model.source must name its kind (package, hub or path)", path=where
        )
    fields = _SOURCE_FIELDS[value["kind"]]
    if set(value) != {"kind", *fields} or not all(isinstance(value[f], str) for f in fields):
        raise ArtifactError(
            f"embedding_model.source of kind {value['kind']!r} must hold exactly the strings "
            f"{', '.join(fields)}",
            path=where,
        )
    return dict(value)


def save_state(clf: EmbeddingClassifier, directory: Path) -> dict[str, Any]:
    """Write ``clf``'s files into ``directory``; return the JSON state for the manifest."""
    from .._persistence import save_classifier, write_arrays

    clf._check_fitted()
    save_classifier(clf.tfidf_, directory / TFIDF_DIR)
    write_arrays(
        directory / ARRAYS_FILE,
        {"weights": clf.embedding_weights_, "intercept": clf.embedding_intercept_},
    )
    params = clf.get_params(deep=False)
    params["model"] = None if params["model"] is None else str(params["model"])
    params["cache_dir"] = None if params["cache_dir"] is None else str(params["cache_dir"])
    params["layers"] = [int(v) for v in params["layers"]]
    for key in ("tfidf_Cs", "embedding_Cs", "fusion_weights"):
        params[key] = [float(v) for v in params[key]]
    return {
        "params": params,
        "embedding_model": {
            "source": _source_for_manifest(clf.model_source_),
            "fingerprint": clf.model_fingerprint_,
            "layers": list(clf.layers_),
            "pooling": POOLING,
            "max_seq_length": int(clf.max_seq_length_),
            "dim": int(clf.embedding_dim_),
        },
        "tfidf_scale_": clf.tfidf_scale_,
        "embedding_scale_": clf.embedding_scale_,
        "C_tfidf_": clf.C_tfidf_,
        "C_embedding_": clf.C_embedding_,
        "fusion_weight_": clf.fusion_weight_,
        "cv_results_": clf.cv_results_,
        "n_train_": clf.n_train_,
    }


def load_state(cls: type[_E], directory: Path, manifest: dict[str, Any]) -> _E:
    """Rebuild a fitted classifier from ``directory`` (already checked by the loader)."""
    from .._persistence import load_classifier, read_arrays

    where = str(directory)
    clf, state, _ = cls._from_saved_params(directory, manifest, sequences=_SEQUENCES)
    tfidf = load_classifier(directory / TFIDF_DIR)
    if not isinstance(tfidf, LocalClassifier):
        raise ArtifactError("the 'tfidf' block is not a local classifier", path=where)
    if [str(c) for c in tfidf.classes_] != manifest["classes"]:
        raise ArtifactError("the 'tfidf' block has another label set", path=where)
    try:
        info = dict(state["embedding_model"])
        dim = int(info["dim"])
        raw_source = info["source"]
        clf.model_fingerprint_ = str(info["fingerprint"])
        clf.layers_ = [int(v) for v in info["layers"]]
        clf.max_seq_length_ = int(info["max_seq_length"])
        clf.tfidf_scale_ = float(state["tfidf_scale_"])
        clf.embedding_scale_ = float(state["embedding_scale_"])
        clf.C_tfidf_ = float(state["C_tfidf_"])
        clf.C_embedding_ = float(state["C_embedding_"])
        clf.fusion_weight_ = float(state["fusion_weight_"])
        clf.cv_results_ = dict(state["cv_results_"])
        clf.n_train_ = int(state["n_train_"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ArtifactError(f"manifest state is missing or has a bad {exc}", path=where) from None
    clf.model_source_ = source_from_manifest(raw_source, where)
    n_classes = len(manifest["classes"])
    arrays = read_arrays(
        directory / ARRAYS_FILE, {"weights": (dim, n_classes), "intercept": (n_classes,)}
    )
    clf.tfidf_ = tfidf
    clf.embedding_weights_ = np.ascontiguousarray(arrays["weights"], dtype=np.float32)
    clf.embedding_intercept_ = np.asarray(arrays["intercept"], dtype=np.float64)
    clf.embedding_dim_ = dim
    clf.embedding_stats_ = {}
    clf.classes_ = np.array(manifest["classes"], dtype=str)
    return clf
