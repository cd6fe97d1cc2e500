"""Label-free start (research): one fixed sequence at the whole delta, from the zero-error start."""

from __future__ import annotations

from typing import Any

from .._bounds import required_calibration_size
from .fallback_precision import SequenceFitter

__all__ = ["LabelFreeStartThreshold"]


class LabelFreeStartThreshold(SequenceFitter):
    """One fixed sequence at the whole ``delta``, started where the scores say it can certify.

    The sequence begins at the highest candidate whose calibration count above it (the
    items it would auto-route) reaches the zero-error minimum for ``(target, delta)``
    (:func:`required_calibration_size`) -- computed from the scores, without the labels --
    and walks down the candidates, stopping at the first one it cannot certify; the lowest
    certified candidate is the threshold. Every candidate above the start accepts too few
    items to be certified even with no errors, so starting higher would only end the
    sequence there. No part of ``delta`` is set aside for other starts: this is
    ``CertifiedPrecisionThreshold(n_starts=1)`` as a technique of its own, the one that
    pays nothing for multiplicity and is the most exposed to a confident mistake near the
    top (see :class:`FallbackPrecisionThreshold` for the remedy).

    Why the guarantee holds: given the scores, the candidates and the start are fixed (no
    label enters them), so this is the fixed-sequence procedure at level ``delta``. It can
    certify a wrong candidate (one whose precision is below target) only if it certifies
    the *first* wrong candidate in its order, since it stops at the first failure; that one
    p-value is at most ``delta`` with probability at most ``delta``. So with probability at
    least ``1 - delta`` every certified candidate, the threshold among them, is right.

    Parameters
    ----------
    target, delta, grid
        As for :class:`FallbackPrecisionThreshold` (defaults 0.95, 0.05 and ``None``); there
        are no starts to choose.

    Attributes
    ----------
    threshold_, certified_, bound_, level_, weights_, start_counts_
        As for :class:`FallbackPrecisionThreshold`, with one start: ``weights_`` is
        ``[1.0]``, ``start_counts_`` the zero-error minimum, ``level_`` is ``delta``.
    reason_, required_size_, p_values_
        As for :class:`FallbackPrecisionThreshold`.
    """

    method = "label_free_start"
    objective = "precision"
    objective_help = ""
    _how = "one fixed sequence from the zero-error start"

    def __init__(self, target: float = 0.95, delta: float = 0.05, grid: Any = None) -> None:
        self.target = target
        self.delta = delta
        self.grid = grid

    def _plan(self, target: float, delta: float, n: int) -> tuple[list[float], list[int]]:
        return [1.0], [required_calibration_size(target, delta)]
