"""What both adapters share: score checks, the probe, references and the saved state.

The **probe** is how a saved adapter proves, when it is loaded, that the model it finds is
the model it was saved with: a few fixed texts and the scores the model gave them are
recorded in the sealed manifest (so they are part of the model fingerprint a policy binds
to), and loading scores the same texts again and refuses the model when any score differs
by more than :data:`PROBE_TOLERANCE`. A model retrained behind the same import path, or a
different file put in place, is then refused instead of silently meeting a policy fitted
on another model's scores.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple, Self

import numpy as np

from ...exceptions import ArtifactError, ClassifierError
from .._base import IntentClassifier
from .._training_data import check_texts
from ._trust import REFERENCE_RE, TRUSTED_CODE_ENV, is_trusted

__all__ = [
    "PROBA_SUM_TOLERANCE",
    "PROBE_TOLERANCE",
    "ExternalClassifier",
    "check_reference",
    "check_scores",
    "import_reference",
    "reference_of",
    "resolve_reference",
]

#: How far a row of probabilities may sum from 1 (a model's or a scores file's).
PROBA_SUM_TOLERANCE = 1e-3
#: Largest difference between a probe score recorded at save time and the one the loaded
#: model gives (float round-off across machines is far below it; another model is not).
PROBE_TOLERANCE = 1e-6
#: Most probe texts recorded (they live in the manifest).
MAX_PROBE_TEXTS = 32


def check_scores(values: Any, n_texts: int, n_classes: int, *, source: str) -> np.ndarray:
    """The model's answer as an ``(n_texts, n_classes)`` array of probabilities, or raise.

    Parameters
    ----------
    values : array-like
        What the model returned.
    n_texts, n_classes : int
        The shape it must have.
    source : str
        What returned it, for the message (``"the scoring function"``).

    Raises
    ------
    ClassifierError
        Naming ``source``: not numeric, the wrong shape, a score that is not finite or
        outside [0, 1], or a row that does not sum to 1 (within
        :data:`PROBA_SUM_TOLERANCE`).
    """
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ClassifierError(f"{source} returned scores that are not numbers ({exc})") from None
    if arr.shape != (n_texts, n_classes):
        raise ClassifierError(
            f"{source} returned scores of shape {arr.shape}, expected ({n_texts}, {n_classes}): "
            "one row per text, one column per class"
        )
    if arr.size == 0:
        return arr
    if not (np.isfinite(arr).all() and arr.min() >= 0.0 and arr.max() <= 1.0 + PROBA_SUM_TOLERANCE):
        raise ClassifierError(f"{source} returned a score that is not a probability in [0, 1]")
    sums = arr.sum(axis=1)
    worst = int(np.argmax(np.abs(sums - 1.0)))
    if abs(sums[worst] - 1.0) > PROBA_SUM_TOLERANCE:
        raise ClassifierError(
            f"{source} returned a row (text {worst}) whose scores sum to {sums[worst]:.6g}, "
            f"not 1 (within {PROBA_SUM_TOLERANCE}); return probabilities, normalised per row"
        )
    return arr


def import_reference(reference: str) -> Any:
    """The object ``"package.module:attribute"`` names (imports the module).

    Raises ``ImportError`` or ``AttributeError`` when it cannot be found.
    """
    module_name, _, attr = reference.partition(":")
    value: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        value = getattr(value, part)
    return value


def reference_of(obj: Any) -> str | None:
    """``"module:qualname"`` of a module-level function or class, when importing it gives
    ``obj`` back; ``None`` otherwise (a lambda, a closure, a bound method, ``__main__``)."""
    module = getattr(obj, "__module__", None)
    qualname = getattr(obj, "__qualname__", None)
    if not isinstance(module, str) or not isinstance(qualname, str) or module == "__main__":
        return None
    reference = f"{module}:{qualname}"
    if not REFERENCE_RE.fullmatch(reference):
        return None  # "<lambda>", "<locals>"
    try:
        found = import_reference(reference)
    except (ImportError, AttributeError):
        return None
    return reference if found is obj else None


def check_reference(reference: Any, obj: Any, *, what: str) -> str:
    """``reference`` when it is ``"package.module:<what>"`` and imports as ``obj`` itself.

    What an adapter checks at ``fit`` before it saves a model by reference: loading imports
    the reference, and must find the very object the adapter was made with.

    Raises
    ------
    ValueError
        ``reference`` is malformed, cannot be imported, or names another object.
    """
    if not isinstance(reference, str) or not REFERENCE_RE.fullmatch(reference):
        raise ValueError(f"reference must be 'package.module:{what}', got {reference!r}")
    try:
        found = import_reference(reference)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"reference {reference!r} cannot be imported ({exc})") from None
    if found is not obj:
        noun = "estimator" if what == "attribute" else what
        raise ValueError(
            f"reference {reference!r} does not import as this {noun}; it must name the very "
            f"object (a module-level {what} of your package)"
        )
    return reference


def resolve_reference(reference: Any, *, path: str) -> Any:
    """Import ``reference`` (``"package.module:attribute"``) if it is trusted.

    Raises
    ------
    ArtifactError
        Naming ``path``: the reference is malformed, not trusted (the message says how to
        trust it), or cannot be imported.
    """
    if not isinstance(reference, str) or not REFERENCE_RE.fullmatch(reference):
        raise ArtifactError(
            f"field 'state.reference' must be 'package.module:attribute', got {reference!r}",
            path=path,
        )
    if not is_trusted(reference):
        raise ArtifactError(
            f"the model is saved by reference to {reference!r}, which this process does not "
            "trust, so it is not imported; if that is your code, trust it with "
            f"hybridroute.classifiers.adapter.trust({reference!r}) or "
            f"{TRUSTED_CODE_ENV}={reference}",
            path=path,
        )
    try:
        return import_reference(reference)
    except (ImportError, AttributeError) as exc:
        raise ArtifactError(
            f"the model reference {reference!r} cannot be imported ({type(exc).__name__}: {exc})",
            path=path,
        ) from None


def _probe_texts(value: Any) -> tuple[str, ...]:
    texts = tuple(check_texts(() if value is None else value, "probe_texts"))
    if len(texts) > MAX_PROBE_TEXTS:
        raise ValueError(f"probe_texts holds {len(texts)} texts; at most {MAX_PROBE_TEXTS}")
    return texts


def _labels(values: Any, what: str) -> np.ndarray:
    labels = [str(c) for c in values]
    if len(labels) < 2 or len(set(labels)) != len(labels) or not all(labels):
        raise ValueError(f"{what} must name at least 2 distinct, non-empty labels, got {labels!r}")
    return np.array(labels, dtype=str)


class _SavedCommon(NamedTuple):
    """What every saved adapter's state holds (read by ``ExternalClassifier._read_common``)."""

    where: str
    state: Mapping[str, Any]
    model_id: str | None
    probe_texts: tuple[str, ...]


class ExternalClassifier(IntentClassifier):
    """Base of the adapters: a model trained elsewhere, scored through one seam.

    Subclasses set ``kind``, implement :meth:`_scores` (the wrapped model's raw answer for
    a list of texts) and the state they save. ``fit`` does not train: the model is
    trained already; it checks the model, reads its label set into ``classes_`` and
    scores the probe texts into ``probe_scores_``.
    """

    _source = "the model"

    def __init__(self, *, reference: str | None, model_id: str | None, probe_texts: Any) -> None:
        # the arguments every adapter takes, stored as given (validated by fit)
        self.reference = reference
        self.model_id = model_id
        self.probe_texts = probe_texts

    def fit(self, texts: Any = None, labels: Any = None) -> Self:
        """Check the wrapped model and read its label set; nothing is trained.

        ``texts`` and ``labels`` are accepted for the classifier protocol and not used.
        The model is checked as the adapter says (:meth:`_check_model`: its scoring method,
        that it is trained, that ``reference`` imports as it), its label set is read into
        ``classes_`` and the probe texts are scored into ``probe_scores_``.

        Returns
        -------
        self

        Raises
        ------
        NotFittedError
            The wrapped estimator is not trained (it has no ``classes_``).
        ValueError
            The model cannot score (not callable, no ``predict_proba``); ``reference`` is
            malformed or does not import as the model; the label set has fewer than 2
            labels or repeats one; ``model_id`` or ``probe_texts`` are malformed; the
            model cannot be written as it is to be saved.
        """
        self._finish_fit(self._check_model())
        self._check_written()
        return self

    def _check_model(self) -> Any:
        """Check the wrapped model and its reference; return its label set."""
        raise NotImplementedError

    def _check_written(self) -> None:
        """Check what :meth:`save` will write gives the model back (once probe scored)."""

    def _scores(self, texts: list[str]) -> Any:
        raise NotImplementedError

    def predict_proba(self, texts: Sequence[str]) -> np.ndarray:
        """Class probabilities of shape ``(n_texts, n_classes)``, columns in ``classes_``.

        The wrapped model's answer is checked (:func:`check_scores`): an answer of the
        wrong shape, or rows that are not probabilities, raise
        :class:`~hybridroute.exceptions.ClassifierError`, which a router turns into a
        fallback decision that names it.
        """
        self._check_fitted()
        items = check_texts(texts)
        if not items:
            return np.zeros((0, len(self.classes_)))
        return check_scores(
            self._scores(items), len(items), len(self.classes_), source=self._source
        )

    # -- shared fitting and saved state -------------------------------------------------------

    def _finish_fit(self, classes: Any) -> None:
        model_id = self.model_id
        if model_id is not None and (not isinstance(model_id, str) or not model_id.strip()):
            raise ValueError(f"model_id must be a non-empty string or None, got {model_id!r}")
        probe = _probe_texts(self.probe_texts)
        self.classes_ = _labels(classes, "the model's classes")
        self.probe_scores_ = self.predict_proba(list(probe)) if probe else None

    def _common_state(self) -> dict[str, Any]:
        probe = _probe_texts(self.probe_texts)
        scores = self.probe_scores_
        return {
            "model_id": self.model_id,
            "probe": {
                "texts": list(probe),
                "scores": [] if scores is None else [[float(v) for v in r] for r in scores],
            },
        }

    @classmethod
    def _read_common(cls, directory: Path, manifest: Mapping[str, Any]) -> _SavedCommon:
        """Where the manifest is, its ``state``, and the checked ``model_id`` and probe texts."""
        where = cls._where(directory)
        state = manifest["state"]
        model_id = state.get("model_id")
        if model_id is not None and (not isinstance(model_id, str) or not model_id):
            raise ArtifactError("field 'state.model_id' must be a string or null", path=where)
        probe = state.get("probe")
        if (
            not isinstance(probe, dict)
            or set(probe) != {"texts", "scores"}
            or not isinstance(probe["texts"], list)
            or not all(isinstance(t, str) for t in probe["texts"])
            or len(probe["texts"]) > MAX_PROBE_TEXTS
        ):
            raise ArtifactError(
                "field 'state.probe' must be {'texts': [str...], 'scores': [[float...]...]}",
                path=where,
            )
        return _SavedCommon(where, state, model_id, tuple(probe["texts"]))

    def _check_probe(self, state: Mapping[str, Any], where: str) -> None:
        """Score the recorded probe texts again; refuse a model that answers otherwise."""
        probe = state["probe"]
        texts = list(probe["texts"])
        try:
            recorded = np.asarray(probe["scores"], dtype=np.float64)
        except (TypeError, ValueError):
            raise ArtifactError(
                "field 'state.probe.scores' must hold numbers", path=where
            ) from None
        expected_shape = (len(texts), len(self.classes_)) if texts else (0,)
        if recorded.shape != expected_shape:
            raise ArtifactError(
                f"field 'state.probe.scores' has shape {recorded.shape}, expected {expected_shape}",
                path=where,
            )
        if not texts:
            self.probe_scores_ = None
            return
        try:
            now = self.predict_proba(texts)
        except ClassifierError as exc:
            raise ArtifactError(
                f"the loaded model cannot score the probe texts: {exc}", path=where
            ) from None
        diff = float(np.max(np.abs(now - recorded)))
        if diff > PROBE_TOLERANCE:
            raise ArtifactError(
                f"{self._source} does not give the probe scores recorded when this adapter was "
                f"saved (largest difference {diff:.3g}): it is not the model the adapter -- "
                "and any policy bound to it -- was made with",
                path=where,
            )
        self.probe_scores_ = recorded

    @staticmethod
    def _where(directory: Path) -> str:
        return str(Path(directory) / "manifest.json")
