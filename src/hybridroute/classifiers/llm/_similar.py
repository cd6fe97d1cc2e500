"""Examples in the prompt: the labelled texts most similar to the one asked about.

:class:`SimilarExamples` holds a pool of labelled texts (the classifier's training data)
and, for a text, returns the ``k`` most similar ones with their labels, to be shown in
the prompt (``LLMClassifier(n_similar_examples=k)``). Similarity is the dot product of the
local classifier's TF-IDF features (word 1-2 + character 2-5 grams, each block
L2-normalised: :class:`~hybridroute.classifiers._tfidf.TfidfFeaturizer`), fitted on the
pool; ties go to the earlier pool entry, so the choice is deterministic. The examples are
listed least similar first, so the closest one stands next to the question.

The featurizer is refitted from the pool when a saved classifier is loaded (fitting is
deterministic), so only the pool is saved. A text that is itself in the pool finds
itself first, with its label: evaluate on texts outside the training data.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from .._tfidf import TfidfFeaturizer

__all__ = ["SimilarExamples"]


class SimilarExamples:
    """The ``k`` labelled texts of a pool most similar to a text (see the module notes).

    Parameters
    ----------
    texts, labels : sequence of str
        The pool.
    k : int
        How many examples a text gets (at most the pool's size).
    """

    def __init__(self, texts: Sequence[str], labels: Sequence[str], k: int) -> None:
        if len(texts) != len(labels):
            raise ValueError("texts and labels differ in length")
        if not texts:
            raise ValueError("the pool of examples is empty")
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValueError(f"k must be a positive integer, got {k!r}")
        self.texts = [str(t) for t in texts]
        self.labels = [str(y) for y in labels]
        self.k = min(k, len(self.texts))
        self._featurizer = TfidfFeaturizer.fit(
            self.texts,
            word_ngram_range=(1, 2),
            char_ngram_range=(2, 5),
            lowercase=True,
            sublinear_tf=True,
            min_df=1,
        )
        self._matrix = self._featurizer.transform(self.texts).T.tocsr()

    def nearest(self, texts: Sequence[str]) -> list[tuple[tuple[str, str], ...]]:
        """For each text, its ``k`` most similar pool entries, least similar first."""
        if not texts:
            return []
        similarity = np.asarray((self._featurizer.transform(list(texts)) @ self._matrix).todense())
        out = []
        for row in similarity:
            order = np.argsort(-row, kind="stable")[: self.k]
            out.append(tuple((self.texts[i], self.labels[i]) for i in reversed(order)))
        return out

    def fingerprint(self) -> str:
        """SHA-256 of ``k`` and the pool (part of the answer-cache key)."""
        payload = json.dumps(
            {"k": self.k, "pool": [list(p) for p in zip(self.texts, self.labels, strict=True)]},
            ensure_ascii=False,
            separators=(",", ":"),
        )
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()

    def to_state(self) -> dict[str, Any]:
        """``k`` and the pool as plain JSON (:meth:`from_state` refits the features)."""
        return {"k": self.k, "pool": [[t, y] for t, y in zip(self.texts, self.labels, strict=True)]}

    @classmethod
    def from_state(cls, state: Any) -> SimilarExamples:
        """Rebuild from :meth:`to_state` output.

        Raises
        ------
        ValueError
            A malformed state.
        """
        if not isinstance(state, dict) or not isinstance(state.get("pool"), list):
            raise ValueError("similar-examples state must hold a 'pool' list")
        pairs = state["pool"]
        if not all(
            isinstance(p, list) and len(p) == 2 and all(isinstance(x, str) for x in p)
            for p in pairs
        ):
            raise ValueError("each similar-examples pool entry must be a [text, label] pair")
        k = state.get("k")
        if isinstance(k, bool) or not isinstance(k, int):
            raise ValueError("similar-examples state must hold an integer 'k'")
        return cls([p[0] for p in pairs], [p[1] for p in pairs], k=k)
