"""Completing a partial ranking into a full score row: the one rule, used by the router and
the policy.

A classifier may rank fewer labels than the label set holds (``rank(texts, k=...)`` with a
small ``k``, an LLM that names one label). Its scores become one row over every class: each
ranked label keeps its score, and the labels it did not rank share equally the mass its
scores left, ``max(0, 1 - sum(scores))`` (an LLM that names one label with confidence 0.9
leaves 0.1 to the others). Nothing else is decided here: which label is the item's label,
whether a score may be negative or a label unknown, is the caller's to check.

A leaf module: numpy only.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

__all__ = ["complete_ranking"]


def complete_ranking(columns: Iterable[int], scores: Iterable[float], n_classes: int) -> np.ndarray:
    """The full row ``(n_classes,)`` of a ranking given as class columns and their scores.

    Parameters
    ----------
    columns : iterable of int
        The column (class index) of each ranked label, in ``[0, n_classes)``. A column
        given twice keeps its last score.
    scores : iterable of float
        The score of each ranked label, in the order of ``columns``.
    n_classes : int
        The number of classes (the row's length).

    Returns
    -------
    numpy.ndarray
        Float row: the ranked columns hold their scores; when some columns were not
        ranked and the scores sum to less than 1, those columns share ``1 - sum`` equally
        (otherwise they hold 0). Scores are not checked: a negative or non-finite score
        stays in the row for the caller to refuse.

    Examples
    --------
    >>> complete_ranking([2, 0], [0.5, 0.25], 4).tolist()
    [0.25, 0.125, 0.5, 0.125]
    """
    row = np.zeros(n_classes)
    ranked = np.zeros(n_classes, dtype=bool)
    for column, score in zip(columns, scores, strict=True):
        row[column] = float(score)
        ranked[column] = True
    left = 1.0 - float(row.sum())
    unranked = ~ranked
    if left > 0 and unranked.any():
        row[unranked] = left / int(unranked.sum())
    return row
