"""Any trained scikit-learn classifier (``predict_proba`` + ``classes_``) as a router classifier.

Saved two ways, neither of which unpickles anything:

* ``storage="skops"`` (the default): the estimator in the `skops <https://skops.readthedocs.io>`_
  format, which rebuilds objects from a JSON schema and ``.npy`` arrays and refuses any
  type outside its trusted set unless the loader names it. The skops archive is written
  canonically (object ids renumbered in order, fixed timestamps, sorted members), so the
  same estimator gives the same bytes -- and the same model fingerprint -- in every
  process. It is stored as a byte array in ``estimator.npz`` (a saved classifier holds
  only JSON and ``.npz`` files) and covered by the manifest's checksums.
* by reference (``reference="package.module:attribute"``): nothing of the estimator is
  written; loading imports that attribute, only if this process trusts the reference
  (:func:`~hybridroute.classifiers.adapter.trust`). For estimators skops cannot save with
  its default trust, or models too large to copy into every bundle.

Either way the probe (see :mod:`._common`) is checked when loading.
"""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path, PurePosixPath
from typing import Any, Self

import numpy as np

from ...exceptions import ArtifactError, NotFittedError
from .._persistence import read_arrays, write_arrays
from ._common import PROBE_TOLERANCE, ExternalClassifier, check_reference, resolve_reference
from ._trust import TRUSTED_CODE_ENV, trusted

__all__ = ["DEFAULT_PROBE_TEXTS", "SklearnAdapter"]

#: Probe texts recorded by default: scoring them is cheap for a local model.
DEFAULT_PROBE_TEXTS = (
    "hello",
    "I need help with my account",
    "my order has not arrived yet",
    "please cancel it and refund me",
    "what does the premium plan cost?",
)
_ESTIMATOR_FILE = "estimator.npz"
_SKOPS_MEMBER = "skops"
_ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)
#: Bounds on a skops archive read back (members, total uncompressed bytes).
_MAX_SKOPS_MEMBERS = 100_000
_MAX_SKOPS_BYTES = 2 << 30
#: Estimator attributes that hold an ``id()`` (a per-process memo, never compared after a
#: load): written as 0 so that they do not make every process's archive differ.
#: scikit-learn's text vectorisers keep ``_stop_words_id`` to skip re-checking stop words.
_ID_MEMOS = ("_stop_words_id",)


def _renumber(schema: Any) -> dict[str, str]:
    """Renumber skops object ids and member names in order of appearance (in place).

    skops names objects and array files by ``id()``, which differs in every process; the
    numbering here depends only on the estimator. An attribute in :data:`_ID_MEMOS` is
    set to 0. Returns old member name -> new name.
    """
    ids: dict[Any, int] = {}
    files: dict[str, str] = {}
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if "__id__" in node:
                node["__id__"] = ids.setdefault(node["__id__"], len(ids) + 1)
            name = node.get("file")
            if isinstance(name, str):
                if name not in files:
                    files[name] = f"{len(files) + 1}{PurePosixPath(name).suffix}"
                node["file"] = files[name]
            content = node.get("content")
            if isinstance(content, dict):
                for memo in _ID_MEMOS:
                    held = content.get(memo)
                    if isinstance(held, dict) and held.get("__loader__") == "JsonNode":
                        held["content"] = "0"
            stack.extend(reversed(list(node.values())))
        elif isinstance(node, list):
            stack.extend(reversed(node))
    return files


def canonical_skops(data: bytes) -> bytes:
    """The skops archive ``data`` rewritten so that the same estimator gives the same bytes."""
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        members = {name: zf.read(name) for name in zf.namelist()}
    schema = json.loads(members.pop("schema.json"))
    renamed = _renumber(schema)
    if set(renamed) != set(members):
        raise ValueError("the skops archive holds members its schema does not name")
    out = {renamed[old]: blob for old, blob in members.items()}
    out["schema.json"] = json.dumps(schema, indent=2).encode("utf-8")
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name in sorted(out):
            info = zipfile.ZipInfo(name, date_time=_ZIP_EPOCH)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            zf.writestr(info, out[name])
    return buffer.getvalue()


def _skops(error: type[Exception], where: str | None = None) -> Any:
    """``skops.io``, or ``error`` saying how to get it (it comes with hybridroute's MLflow)."""
    try:
        import skops.io
    except ImportError:
        message = (
            "saving or loading a scikit-learn estimator in skops format needs skops, which is "
            "not installed (pip install skops); or save the estimator by reference "
            "(reference='package.module:attribute')"
        )
        raise (
            ArtifactError(message, path=where) if error is ArtifactError else error(message)
        ) from None
    return skops.io


def _check_archive(data: bytes, where: str) -> None:
    """Refuse an archive that is not a zip or that would expand past the bounds."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            infos = zf.infolist()
    except zipfile.BadZipFile as exc:
        raise ArtifactError(
            f"the saved estimator is not a skops archive ({exc})", path=where
        ) from None
    total = sum(i.file_size for i in infos)
    if len(infos) > _MAX_SKOPS_MEMBERS or total > _MAX_SKOPS_BYTES:
        raise ArtifactError(
            f"the saved estimator expands to {len(infos)} members / {total:,} bytes, over the "
            f"limits ({_MAX_SKOPS_MEMBERS:,} / {_MAX_SKOPS_BYTES:,})",
            path=where,
        )


class SklearnAdapter(ExternalClassifier):
    """A trained scikit-learn classifier of texts, as a router classifier.

    Anything with ``predict_proba(texts)`` and ``classes_`` works: a ``Pipeline`` of a
    vectoriser and a classifier, a ``CalibratedClassifierCV``, your own estimator. The
    estimator is not trained or changed here.

    Parameters
    ----------
    estimator : object
        The trained estimator; ``predict_proba`` receives a list of texts and its columns
        follow ``estimator.classes_`` (which become this adapter's ``classes_``, as
        strings, in that order).
    reference : str, optional
        ``"package.module:attribute"`` naming ``estimator`` (checked at ``fit``): save by
        reference instead of in skops format. Loading then imports it, only if trusted.
    model_id : str, optional
        Your name for the model (``"ticket-clf 2025-06"``), recorded in the manifest and
        part of the model fingerprint.
    probe_texts : sequence of str, default :data:`DEFAULT_PROBE_TEXTS`
        Texts scored at ``fit`` and again at load; the loaded model must reproduce the
        scores. An empty sequence records none.

    Attributes
    ----------
    classes_ : ndarray of str
        The label set, in the estimator's column order.
    probe_scores_ : ndarray or None
        Scores of ``probe_texts``.
    storage_ : {"skops", "reference"}
        How :meth:`save` writes the estimator.
    untrusted_types_ : list of str
        Types in the skops archive beyond skops's default trusted set: loading needs them
        trusted (empty for plain scikit-learn pipelines; always empty by reference).

    Examples
    --------
    >>> from sklearn.pipeline import make_pipeline                       # doctest: +SKIP
    >>> model = make_pipeline(TfidfVectorizer(), LogisticRegression()).fit(texts, labels)
    >>> clf = SklearnAdapter(model, model_id="tickets-lr").fit()         # doctest: +SKIP
    >>> clf.save("model/")                                               # doctest: +SKIP
    """

    kind = "sklearn"
    _artifact_packages = ("skops",)
    _source = "the scikit-learn estimator"

    def __init__(
        self,
        estimator: Any,
        *,
        reference: str | None = None,
        model_id: str | None = None,
        probe_texts: Any = DEFAULT_PROBE_TEXTS,
    ) -> None:
        self.estimator = estimator
        super().__init__(reference=reference, model_id=model_id, probe_texts=probe_texts)

    def _check_model(self) -> Any:
        """Check the trained estimator and how it is to be saved; return its ``classes_``.

        Refused: no ``predict_proba``, no ``classes_`` (not trained), a ``reference`` that
        does not name it, an estimator skops cannot write (without a reference).
        """
        est = self.estimator
        if not callable(getattr(est, "predict_proba", None)):
            raise ValueError(f"{type(est).__name__} has no predict_proba method")
        classes = getattr(est, "classes_", None)
        if classes is None:
            raise NotFittedError(
                f"the {type(est).__name__} has no classes_: train it before wrapping it"
            )
        self.untrusted_types_: list[str] = []
        self.payload_: bytes | None = None
        if self.reference is not None:
            check_reference(self.reference, est, what="attribute")
            self.storage_ = "reference"
        else:
            self.storage_ = "skops"
            self.payload_, self.untrusted_types_ = self._skops_payload(est)
        return classes

    def _check_written(self) -> None:
        """The skops archive to be written must give back an estimator with the same probe
        scores (nothing to check by reference, or without probe texts)."""
        recorded = self.probe_scores_
        if self.payload_ is None or recorded is None:
            return
        sio = _skops(ValueError)
        copy = sio.loads(self.payload_, trusted=self.untrusted_types_ or None)
        again = np.asarray(copy.predict_proba(list(self.probe_texts)), dtype=np.float64)
        if again.shape != recorded.shape or not np.allclose(
            again, recorded, rtol=0.0, atol=PROBE_TOLERANCE
        ):
            raise ValueError(
                "the skops archive of this estimator does not reproduce its scores; save it "
                "by reference instead (reference='package.module:attribute')"
            )

    @staticmethod
    def _skops_payload(est: Any) -> tuple[bytes, list[str]]:
        sio = _skops(ValueError)

        try:
            payload = canonical_skops(sio.dumps(est))
        except Exception as exc:  # skops refuses what it cannot represent
            raise ValueError(
                f"skops cannot write this {type(est).__name__} ({type(exc).__name__}: {exc}); "
                "save it by reference instead (reference='package.module:attribute')"
            ) from exc
        return payload, sorted(sio.get_untrusted_types(data=payload))

    def _scores(self, texts: list[str]) -> Any:
        return self.estimator.predict_proba(texts)

    # -- persistence --------------------------------------------------------------------------

    def _save_state(self, directory: Path) -> dict[str, Any]:
        self._check_fitted()
        state = self._common_state()
        state["storage"] = self.storage_
        state["estimator"] = (
            f"{type(self.estimator).__module__}.{type(self.estimator).__qualname__}"
        )
        if self.storage_ == "reference":
            state["reference"] = self.reference
        else:
            assert self.payload_ is not None
            blob = np.frombuffer(self.payload_, dtype=np.uint8)
            write_arrays(Path(directory) / _ESTIMATOR_FILE, {_SKOPS_MEMBER: blob})
            state["untrusted_types"] = list(self.untrusted_types_)
        return state

    @classmethod
    def _load_state(cls, directory: Path, manifest: dict[str, Any]) -> Self:
        where, state, model_id, probe = cls._read_common(directory, manifest)
        storage = state.get("storage")
        payload: bytes | None = None
        untrusted: list[str] = []
        if storage == "reference":
            estimator = resolve_reference(state.get("reference"), path=where)
        elif storage == "skops":
            payload = cls._read_payload(Path(directory))
            estimator, untrusted = cls._load_skops(payload, where)
        else:
            raise ArtifactError(
                f"field 'state.storage' must be 'skops' or 'reference', got {storage!r}",
                path=where,
            )
        clf = cls(
            estimator,
            reference=state.get("reference") if storage == "reference" else None,
            model_id=model_id,
            probe_texts=probe,
        )
        found = [str(c) for c in getattr(estimator, "classes_", [])]
        if found != manifest["classes"] or not callable(getattr(estimator, "predict_proba", None)):
            raise ArtifactError(
                f"the loaded estimator's classes {found[:5]!r}... are not the manifest's "
                "'classes', or it has no predict_proba",
                path=where,
            )
        clf.classes_ = np.array(found, dtype=str)
        clf.storage_ = storage
        clf.payload_ = payload
        clf.untrusted_types_ = untrusted
        clf._check_probe(state, where)
        return clf

    @staticmethod
    def _read_payload(directory: Path) -> bytes:
        arrays = read_arrays(directory / _ESTIMATOR_FILE)
        blob = arrays.get(_SKOPS_MEMBER)
        if (
            set(arrays) != {_SKOPS_MEMBER}
            or blob is None
            or blob.dtype != np.uint8
            or blob.ndim != 1
        ):
            raise ArtifactError(
                f"must hold one 1-d uint8 array {_SKOPS_MEMBER!r} (the skops archive)",
                path=str(directory / _ESTIMATOR_FILE),
            )
        return blob.tobytes()

    @staticmethod
    def _load_skops(payload: bytes, where: str) -> tuple[Any, list[str]]:
        sio = _skops(ArtifactError, where)

        _check_archive(payload, where)
        try:
            untrusted = sorted(sio.get_untrusted_types(data=payload))
        except Exception as exc:
            raise ArtifactError(
                f"the saved estimator is not a readable skops archive ({exc})", path=where
            ) from None
        allowed = trusted()
        refused = [t for t in untrusted if t not in allowed]
        if refused:
            raise ArtifactError(
                f"the saved estimator holds types skops does not trust by default: "
                f"{', '.join(refused)}; they are not built unless you trust them "
                f"(hybridroute.classifiers.adapter.trust(...) or {TRUSTED_CODE_ENV})",
                path=where,
            )
        try:
            return sio.loads(payload, trusted=untrusted or None), untrusted
        except Exception as exc:
            raise ArtifactError(
                f"skops cannot load the saved estimator ({type(exc).__name__}: {exc})",
                path=where,
            ) from None
