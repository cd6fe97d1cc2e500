"""The rows a fitted classifier learns from: input checks and the validation rows.

Shared by the local and the embedding classifier, which choose their hyper-parameters
the same way: on validation rows the caller passes (never trained on), or else on a
seeded, stratified share carved from the training rows (trained on afterwards).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..exceptions import DatasetError

__all__ = [
    "TrainingRows",
    "check_labels",
    "check_texts",
    "known_validation",
    "stratified_holdout",
    "training_rows",
]


def check_texts(texts: Any, what: str = "texts") -> list[str]:
    """``texts`` as a list of strings; a bare string or a non-string item is refused."""
    if isinstance(texts, str | bytes):
        raise DatasetError(
            f"{what} must be a sequence of strings, not a single {type(texts).__name__}; "
            "wrap one text in a list"
        )
    try:
        items = list(texts)
    except TypeError:
        raise DatasetError(
            f"{what} must be a sequence of strings, got {type(texts).__name__}"
        ) from None
    for i, text in enumerate(items):
        if not isinstance(text, str):
            raise DatasetError(f"{what}[{i}] is a {type(text).__name__}, not a string")
    return items


def check_labels(labels: Any, n: int, what: str = "labels") -> list[str]:
    """``labels`` as ``n`` non-empty strings."""
    items = check_texts(labels, what)
    if len(items) != n:
        raise DatasetError(f"{what} has {len(items)} items but there are {n} texts")
    for i, label in enumerate(items):
        if not label.strip():
            raise DatasetError(f"{what}[{i}] is empty")
    return items


def stratified_holdout(labels: Sequence[str], fraction: float, seed: int) -> np.ndarray:
    """Boolean mask of a seeded, stratified validation share of ``labels``.

    Each class with at least two rows gives ``round(fraction * n)`` rows (at least one,
    never all of them); classes are visited in sorted order so the mask depends only on
    the labels and the seed.
    """
    rng = np.random.default_rng(seed)
    y = np.asarray(labels, dtype=object)
    mask = np.zeros(len(y), dtype=bool)
    for label in sorted(set(labels)):
        idx = np.flatnonzero(y == label)
        if len(idx) < 2:
            continue
        take = min(len(idx) - 1, max(1, round(fraction * len(idx))))
        mask[rng.permutation(idx)[:take]] = True
    return mask


@dataclass(frozen=True, slots=True)
class TrainingRows:
    """Checked training rows and the validation rows hyper-parameters are chosen on.

    ``search_*`` are the rows the candidate models are fitted on (all training rows, or
    those left after a carve-out); ``source`` says where the validation rows came from:
    ``"given"`` (the caller's), ``"carved"`` (held out of ``texts``) or ``"none"``.
    """

    classes: list[str]
    texts: list[str]
    labels: list[str]
    search_texts: list[str]
    search_labels: list[str]
    val_texts: list[str]
    val_labels: list[str]
    source: str

    def class_indices(self, labels: Sequence[str]) -> np.ndarray:
        """Column index in ``classes`` of each label."""
        index = {c: i for i, c in enumerate(self.classes)}
        return np.array([index[y] for y in labels])


def training_rows(
    texts: Any,
    labels: Any,
    validation: Any,
    *,
    search: bool,
    fraction: float,
    seed: int,
    single_hint: str,
) -> TrainingRows:
    """Check the inputs of ``fit`` and settle the validation rows.

    Parameters
    ----------
    texts, labels : sequence of str
        Training rows (at least two distinct labels).
    validation : (texts, labels) or None
        The caller's validation rows: checked, never trained on.
    search : bool
        Whether there is anything to choose; without ``validation`` a stratified share
        ``fraction`` of the rows (seeded by ``seed``) is then carved out.
    fraction : float
        Share of each class carved out.
    seed : int
        Seed of the carve-out.
    single_hint : str
        How to do without validation rows, for the error when none can be carved
        (e.g. ``"a single value in Cs"``).
    """
    texts = check_texts(texts)
    labels = check_labels(labels, len(texts))
    classes = sorted(set(labels))
    if len(classes) < 2:
        raise DatasetError(
            f"need at least two labels to train a classifier, got {len(classes)}: {classes!r}"
        )
    search_texts, search_labels = texts, labels
    val_texts: list[str] = []
    val_labels: list[str] = []
    source = "none"
    if validation is not None:
        try:
            vt, vl = validation
        except (TypeError, ValueError):
            raise DatasetError("validation must be a pair (texts, labels)") from None
        val_texts = check_texts(vt, "validation texts")
        val_labels = check_labels(vl, len(val_texts), "validation labels")
        unknown = sorted(set(val_labels) - set(classes))
        if unknown:
            raise DatasetError(f"validation labels not among the training labels: {unknown[:10]!r}")
        if not val_texts:
            raise DatasetError("validation data is empty")
        source = "given"
    elif search:
        mask = stratified_holdout(labels, float(fraction), int(seed))
        if not mask.any():
            raise DatasetError(
                "too few rows to hold out validation data (no label has two rows); pass "
                f"validation=(texts, labels) or {single_hint}"
            )
        search_texts = [t for t, m in zip(texts, mask, strict=True) if not m]
        search_labels = [y for y, m in zip(labels, mask, strict=True) if not m]
        val_texts = [t for t, m in zip(texts, mask, strict=True) if m]
        val_labels = [y for y, m in zip(labels, mask, strict=True) if m]
        source = "carved"
    return TrainingRows(
        classes, texts, labels, search_texts, search_labels, val_texts, val_labels, source
    )


def known_validation(
    validation: tuple[Sequence[str], Sequence[str]] | None, labels: Sequence[str]
) -> tuple[list[str], list[str]] | None:
    """The validation rows whose label is among ``labels`` (``None`` when none is left).

    A validation split of a public set may hold labels its train split lacks; such rows
    cannot inform a choice, so ``hybridroute train`` keeps the others rather than fail.
    """
    if validation is None:
        return None
    known = set(labels)
    pairs = [(t, y) for t, y in zip(*validation, strict=True) if y in known]
    return ([t for t, _ in pairs], [y for _, y in pairs]) if pairs else None
