"""The classifier interface every intent classifier implements.

A classifier follows the scikit-learn estimator contract: ``__init__`` stores its
arguments and does nothing else; ``fit(texts, labels)`` validates, learns and returns
``self``; learned state ends in ``_`` (``classes_``...). The base class gives every
classifier scikit-learn's public parameter API -- ``get_params(deep=...)``,
``set_params(**params)`` with nested ``stage__param`` keys
(:class:`hybridroute._params.ParamsMixin`) and a ``repr`` of the changed arguments --
read from the ``__init__`` signature, so ``sklearn.base.clone`` returns an unfitted copy
with equal parameters. The protocol is implemented rather than inherited from
``sklearn.base.BaseEstimator``: importing scikit-learn costs 0.5-1.5 s, and
``import hybridroute.classifiers``, the router and loading a saved local model do not
need it. Scores are probabilities over the
closed label set ``classes_`` (rows sum to 1). The policy layer reads the ranked view
(:meth:`IntentClassifier.rank`), which also carries abstentions: a classifier that could
not answer for an item (an LLM that never gave a valid label, a provider outage) reports
it with a reason code rather than a made-up label.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

import numpy as np

from .._logits import softmax
from .._params import ParamsMixin
from ..exceptions import ArtifactError, NotFittedError

__all__ = ["IntentClassifier", "RankedLabels"]


@dataclass(frozen=True, slots=True, kw_only=True)
class RankedLabels:
    """The top-k labels of one text with their scores, best first.

    ``labels`` and ``scores`` are empty and ``abstain_reason`` is set (e.g.
    ``"invalid_label"``, ``"provider_error"``, ``"timeout"``) when the classifier could not
    answer. ``usage`` holds per-item accounting (requests, tokens, cost, cached) where the
    classifier has any.

    Parameters
    ----------
    labels : tuple of str
        At most ``k`` labels of the classifier's label set, best first; empty for an
        abstention.
    scores : tuple of float
        The classifier's score of each label, in the same order (uncalibrated: a
        probability for the local and embedding classifiers, the model's raw score for the
        LLM one). Not checked against ``labels``; the classifiers build both together.
    abstain_reason : str or None, default None
        Why the classifier gave no label; ``None`` when it answered.
    usage : dict, default {}
        Per-item accounting (``requests``, tokens, ``cost_usd``, ``cached``, the cascade's
        ``stage``...); empty for a local classifier.
    """

    labels: tuple[str, ...]
    scores: tuple[float, ...]
    abstain_reason: str | None = None
    usage: dict[str, Any] = field(default_factory=dict)

    @property
    def top(self) -> str | None:
        """The best label, or ``None`` for an abstention."""
        return self.labels[0] if self.labels else None

    @property
    def confidence(self) -> float | None:
        """Score of the best label, or ``None`` for an abstention."""
        return self.scores[0] if self.scores else None

    @property
    def margin(self) -> float | None:
        """Top-1 minus top-2 score (the top-1 score when only one label is ranked)."""
        if not self.scores:
            return None
        return self.scores[0] - (self.scores[1] if len(self.scores) > 1 else 0.0)

    @property
    def abstained(self) -> bool:
        return self.abstain_reason is not None


class IntentClassifier(ParamsMixin):
    """Base class: scores over a closed label set, estimator contract.

    Subclasses implement :meth:`fit` and :meth:`predict_proba`; :meth:`predict` and
    :meth:`rank` derive from them. A subclass whose items can abstain (the LLM classifier)
    overrides :meth:`rank` to report abstentions.
    """

    #: Short name written into saved manifests (``local``, ``llm``, ``cascade``...).
    kind: str = "base"

    # -- parameters: get_params / set_params come from ParamsMixin -----------------------

    def __repr__(self) -> str:
        """``Kind(param=value, ...)`` with the arguments that differ from their defaults."""
        from .._redact import scrub_text

        signature = inspect.signature(type(self).__init__).parameters
        shown = []
        for name in self._param_names():
            value = getattr(self, name, None)
            default = signature[name].default
            try:
                same = value is default or bool(value == default)
            except Exception:  # an array or an object without a plain ==
                same = False
            if default is inspect.Parameter.empty or not same:
                shown.append(f"{name}={value!r}")
        # a credential pasted into an argument never reaches a log through a repr
        return scrub_text(f"{type(self).__name__}({', '.join(shown)})")

    @classmethod
    def _from_saved_params(
        cls, directory: Path, manifest: Mapping[str, Any], *, sequences: Sequence[str] = ()
    ) -> tuple[Self, dict[str, Any], dict[str, Any]]:
        """An unfitted classifier built from a saved manifest's ``state.params``.

        Refuses (:class:`~hybridroute.exceptions.ArtifactError`) a state without params,
        a parameter ``__init__`` does not take, and values the classifier's
        ``_validated_params`` rejects. ``sequences`` are parameters that JSON stores as
        lists and the classifier takes as tuples. Returns the classifier, the manifest's
        state and the validated parameters.
        """
        where = str(directory)
        state = manifest.get("state")
        if not isinstance(state, dict) or not isinstance(state.get("params"), dict):
            raise ArtifactError("manifest has no 'state.params' object", path=where)
        params = dict(state["params"])
        unknown = sorted(set(params) - set(cls._param_names()))
        if unknown:
            raise ArtifactError(f"manifest state has unknown parameters {unknown!r}", path=where)
        for key in sequences:
            if isinstance(params.get(key), list):
                params[key] = tuple(params[key])
        clf = cls(**params)
        try:
            checked = clf._validated_params()  # type: ignore[attr-defined]
        except ValueError as exc:
            raise ArtifactError(f"manifest parameters are invalid: {exc}", path=where) from None
        return clf, state, checked

    def fit(self, texts: Sequence[str], labels: Sequence[str]) -> IntentClassifier:
        raise NotImplementedError

    def predict_proba(self, texts: Sequence[str]) -> np.ndarray:
        """Array of shape ``(n_texts, n_classes)``; rows sum to 1 over ``classes_``."""
        raise NotImplementedError

    def save(
        self,
        path: str | os.PathLike[str],
        *,
        training_fingerprint: str | None = None,
        metadata: dict[str, Any] | None = None,
        overwrite: bool = False,
    ) -> Path:
        """Save to directory ``path`` in code-free formats, with a checksummed manifest.

        Parameters
        ----------
        path : str or path-like
            Directory to create (load it back with
            :func:`hybridroute.classifiers.load_classifier`).
        training_fingerprint : str, optional
            Fingerprint of the labelled data the classifier was trained on (defaults to
            ``training_fingerprint_`` when set).
        metadata : dict, optional
            Further JSON-serialisable facts to record in the manifest.
        overwrite : bool, default False
            Replace an existing saved classifier at ``path``.
        """
        from ._persistence import save_classifier

        return save_classifier(
            self,
            Path(path),
            training_fingerprint=training_fingerprint,
            metadata=metadata,
            overwrite=overwrite,
        )

    def fingerprint(self) -> str:
        """The model fingerprint: SHA-256 of what decides this classifier's scores.

        Computed from its kind, classes, saved state and file checksums, as
        :meth:`save` would write them (metadata, versions and signatures left out), so it
        equals the ``fingerprint`` in the manifest of any directory this classifier is
        saved to. Pass it to ``fit_policy(..., model_fingerprint=...)`` to bind a policy
        to this model. A classifier loaded from a directory returns that directory's
        fingerprint at once; any other is saved to a temporary directory to compute it.
        """
        from ._persistence import classifier_fingerprint

        return classifier_fingerprint(self)

    def _check_fitted(self) -> None:
        if not hasattr(self, "classes_"):
            raise NotFittedError(
                f"this {type(self).__name__} is not fitted yet; call fit(texts, labels) first"
            )

    def predict(self, texts: Sequence[str]) -> list[str | None]:
        """The best label for each text (``None`` where a classifier that can abstain did)."""
        proba = self.predict_proba(texts)
        classes = self.classes_  # type: ignore[attr-defined]
        return [str(classes[i]) for i in np.argmax(proba, axis=1)]

    def rank(self, texts: Sequence[str], k: int = 2) -> list[RankedLabels]:
        """Top-``k`` labels with scores for each text, best first."""
        proba = self.predict_proba(texts)
        classes = self.classes_  # type: ignore[attr-defined]
        k = max(1, min(int(k), proba.shape[1]))
        # argsort on the negated scores with a stable sort: ties broken by class order,
        # so the ranking is deterministic.
        order = np.argsort(-proba, axis=1, kind="stable")[:, :k]
        out = []
        for row, idx in zip(proba, order, strict=True):
            out.append(
                RankedLabels(
                    labels=tuple(str(classes[i]) for i in idx),
                    scores=tuple(float(row[i]) for i in idx),
                )
            )
        return out


class LogitClassifier(IntentClassifier):
    """A classifier whose probabilities are the softmax of its class logits.

    Subclasses (the local and the embedding classifier) implement
    :meth:`decision_function`; :meth:`predict_proba` is the one softmax over it.
    """

    def decision_function(self, texts: Sequence[str]) -> np.ndarray:
        """Class scores (logits) of shape ``(n_texts, n_classes)``."""
        raise NotImplementedError

    def predict_proba(self, texts: Sequence[str]) -> np.ndarray:
        """Class probabilities of shape ``(n_texts, n_classes)``; rows sum to 1.

        Parameters
        ----------
        texts : sequence of str
            Texts to score (a list; a bare string is refused).

        Returns
        -------
        ndarray
            The softmax of :meth:`decision_function`; columns follow ``classes_``.
        """
        return softmax(self.decision_function(texts))
