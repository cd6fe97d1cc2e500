"""The scores of one file, checked: :class:`ScoresTable`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._ranking import complete_ranking

__all__ = ["PER_CLASS", "TOP_LABEL", "ScoresTable"]

#: Layout of a file with one probability per class (``score:<label>`` / ``scores``).
PER_CLASS = "per_class"
#: Layout of a file with the top label and its probability only (``predicted``, ``confidence``).
TOP_LABEL = "top_label"


@dataclass(frozen=True, eq=False, kw_only=True)
class ScoresTable:
    """A model's scores on labelled rows, read from a scores file.

    Build it with :func:`hybridroute.scores.read_scores`. Rows keep the file's order.

    Parameters
    ----------
    path : str
        The file read.
    fingerprint : str
        SHA-256 of the file's bytes (``sha256sum FILE``): what a policy fitted on it
        records as ``scores_fingerprint``, and its model binding when no model is named.
    layout : {"per_class", "top_label"}
        Whether the file holds every class's score or the top label and its confidence.
    classes : tuple of str
        The label set, in the model's column order.
    gold : tuple of str
        The gold label of each row.
    scores : ndarray
        ``per_class``: shape ``(n_rows, n_classes)``, probabilities in ``classes`` order.
        ``top_label``: shape ``(n_rows,)``, the confidence of ``predicted``.
    predicted : tuple of str or None
        ``top_label``: the model's label of each row; ``None`` for ``per_class``.
    ids : tuple of str
        Row ids (the file's ``id`` column, else ``"row-<n>"``), unique.
    rows : tuple of int
        Each row's number in the file (CSV: 1 = first data row; JSONL: the line;
        Parquet: 1 = first row), for messages.
    texts : tuple of str or None
        The ``text`` column, when the file has one.
    model_fingerprint : str or None
        The fingerprint of the model that produced the scores, when the file's header
        declares one.
    """

    path: str
    fingerprint: str
    layout: str
    classes: tuple[str, ...]
    gold: tuple[str, ...]
    scores: np.ndarray
    predicted: tuple[str, ...] | None
    ids: tuple[str, ...]
    rows: tuple[int, ...]
    texts: tuple[str, ...] | None = None
    model_fingerprint: str | None = None

    def __len__(self) -> int:
        return len(self.gold)

    def take(self, indices: Sequence[int] | np.ndarray) -> ScoresTable:
        """The table of the rows at ``indices`` (in that order); same file and fingerprint."""
        idx = [int(i) for i in indices]

        def pick(values: tuple[str, ...] | None) -> Any:
            return None if values is None else tuple(values[i] for i in idx)

        return ScoresTable(
            path=self.path,
            fingerprint=self.fingerprint,
            layout=self.layout,
            classes=self.classes,
            gold=pick(self.gold),
            scores=self.scores[idx],
            predicted=pick(self.predicted),
            ids=pick(self.ids),
            rows=tuple(self.rows[i] for i in idx),
            texts=pick(self.texts),
            model_fingerprint=self.model_fingerprint,
        )

    def proba(self) -> np.ndarray:
        """Probability rows ``(n_rows, n_classes)`` over ``classes``, as the policy reads them.

        ``per_class``: the scores. ``top_label``: the row a policy and a router build from a
        ranking of one label (:func:`hybridroute._ranking.complete_ranking`): the top
        label's confidence, and the rest of the mass shared equally by the other classes.
        """
        if self.layout == PER_CLASS:
            return np.array(self.scores, dtype=np.float64)
        assert self.predicted is not None
        k = len(self.classes)
        index = {c: i for i, c in enumerate(self.classes)}
        rows = [
            complete_ranking([index[p]], [float(c)], k)
            for p, c in zip(self.predicted, self.scores, strict=True)
        ]
        return np.array(rows, dtype=np.float64).reshape(len(rows), k)

    def ranked(self, i: int) -> tuple[tuple[str, ...], tuple[float, ...]]:
        """Row ``i`` as a ranking, best first: every class (``per_class``, ties in class
        order) or the top label alone (``top_label``)."""
        if self.layout == TOP_LABEL:
            assert self.predicted is not None
            return (self.predicted[i],), (float(self.scores[i]),)
        row = self.scores[i]
        order = np.argsort(-row, kind="stable")
        return tuple(self.classes[j] for j in order), tuple(float(row[j]) for j in order)
