"""The classifier interface every intent classifier implements.

A classifier follows the scikit-learn estimator contract: ``__init__`` stores its
arguments and does nothing else; ``fit(texts, labels)`` validates, learns and returns
``self``; learned state ends in ``_`` (``classes_``...). Scores are probabilities over the
closed label set ``classes_`` (rows sum to 1). The policy layer reads the ranked view
(:meth:`IntentClassifier.rank`), which also carries abstentions: a classifier that could
not answer for an item (an LLM that never gave a valid label, a provider outage) reports
it with a reason code rather than a made-up label.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..exceptions import NotFittedError

__all__ = ["IntentClassifier", "RankedLabels"]


@dataclass(frozen=True, slots=True, kw_only=True)
class RankedLabels:
    """The top-k labels of one text with their scores, best first.

    ``labels`` and ``scores`` are empty and ``abstain_reason`` is set (e.g.
    ``"invalid_label"``, ``"provider_error"``, ``"timeout"``) when the classifier could not
    answer. ``usage`` holds per-item accounting (requests, tokens, cost, cached) where the
    classifier has any.
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


class IntentClassifier:
    """Base class: scores over a closed label set, estimator contract.

    Subclasses implement :meth:`fit` and :meth:`predict_proba`; :meth:`predict` and
    :meth:`rank` derive from them. A subclass whose items can abstain (the LLM classifier)
    overrides :meth:`rank` to report abstentions.
    """

    #: Short name written into saved manifests (``local``, ``llm``, ``cascade``...).
    kind: str = "base"

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
