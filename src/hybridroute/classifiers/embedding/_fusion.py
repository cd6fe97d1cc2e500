"""The embedding classifier's search: ``C`` of each block and the block weight, on
validation rows only.

Each block (TF-IDF, embedding) is fitted once per ``C``; the fused class scores of a grid
point are ``z_tfidf[i] + w * z_embedding[j]``, so the whole ``(C_tfidf, C_embedding, w)``
grid costs one fit per ``C`` value. The point with the best validation accuracy wins;
ties (common on small validation sets) go to the lowest validation log-loss at each
candidate's own fitted logit scale ``s`` (then to the first in grid order). That ``s`` --
the logit multiplier fitted by log-loss, i.e. temperature scaling of the fused logits,
:func:`hybridroute._logits.fit_logit_scale` -- is kept, so the raw probabilities start
out roughly calibrated.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..._logits import fit_logit_scale

__all__ = ["FusionChoice", "choose_fusion"]

# log s is searched in [-6, 4] (s from 0.0025 to 55), to 1e-4 in log s.
_LOG_SCALE_BOUNDS = (-6.0, 4.0)
_LOG_SCALE_XATOL = 1e-4


@dataclass(frozen=True, slots=True)
class FusionChoice:
    """The chosen grid point (indices into the three grids), its scale and the grid."""

    tfidf: int = 0
    embedding: int = 0
    weight: int = 0
    scale: float = 1.0
    validation_log_loss: float | None = None
    grid: list[dict[str, float]] = field(default_factory=list)


def choose_fusion(
    tfidf_logits: Sequence[np.ndarray],
    embedding_logits: Sequence[np.ndarray],
    y_val: np.ndarray,
    *,
    tfidf_Cs: Sequence[float],
    embedding_Cs: Sequence[float],
    weights: Sequence[float],
) -> FusionChoice:
    """Choose ``(C_tfidf, C_embedding, w)`` and the scale on validation rows.

    Parameters
    ----------
    tfidf_logits, embedding_logits : sequence of ndarray
        Validation class scores of each block, one array per ``C`` of its grid.
    y_val : ndarray of int
        Validation class indices.
    tfidf_Cs, embedding_Cs, weights : sequence of float
        The grids (recorded in :attr:`FusionChoice.grid`).
    """
    accuracy: dict[tuple[int, int, int], float] = {}
    grid: list[dict[str, Any]] = []
    for i, c_t in enumerate(tfidf_Cs):
        for j, c_e in enumerate(embedding_Cs):
            for k, w in enumerate(weights):
                z = tfidf_logits[i] + w * embedding_logits[j]
                acc = float(np.mean(np.argmax(z, axis=1) == y_val))
                accuracy[(i, j, k)] = acc
                grid.append(
                    {
                        "C_tfidf": c_t,
                        "C_embedding": c_e,
                        "fusion_weight": w,
                        "validation_accuracy": acc,
                    }
                )
    top = max(accuracy.values())
    fitted = {
        key: fit_logit_scale(
            tfidf_logits[key[0]] + weights[key[2]] * embedding_logits[key[1]],
            y_val,
            log_bounds=_LOG_SCALE_BOUNDS,
            xatol=_LOG_SCALE_XATOL,
        )
        for key, acc in accuracy.items()
        if acc == top
    }
    best = min(fitted, key=lambda key: (fitted[key][1], key))
    scale, loss = fitted[best]
    return FusionChoice(*best, scale=scale, validation_log_loss=loss, grid=grid)
