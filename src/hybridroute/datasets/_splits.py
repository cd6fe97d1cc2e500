"""Seeded, stratified, recorded splits.

The order of the units inside each class comes from a keyed hash (SHA-256 of the seed
and the unit's key), not from a pseudo-random generator, so a split depends only on the
seed and the keys: it is the same on every machine and NumPy version, and a row keeps its
split when unrelated rows are added or the file is reordered (when keys are ids or texts).

Class sizes are apportioned so that each class is split as close to the fractions as
whole rows allow while the split totals stay within one row of their targets; the first
split named (normally ``train``) always gets at least one unit of every class, so no
class is carved out of training entirely.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Hashable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from ..exceptions import DatasetError

__all__ = ["SplitPlan", "make_splits"]


class SplitPlan(Mapping[str, np.ndarray]):
    """A recorded split: which split each row went to, and how it was made.

    Behaves as a read-only mapping from split name to the (sorted) row positions in that
    split. Build one with :func:`make_splits`.

    Parameters
    ----------
    fractions : mapping of str to float
        The requested fractions; its keys are the splits the mapping holds (the
        constructor does not check them: :func:`make_splits` does).
    seed : int
        The seed the split was made with.
    assignment : sequence of str
        The split name of each row, in row order; a name that is no key of
        ``fractions`` puts its row in no split.
    grouped : bool
        Whether rows sharing a group key were kept together.

    Attributes
    ----------
    fractions : dict of str to float
        The requested fractions, in the order given.
    seed : int
        The seed the split was made with.
    assignment : tuple of str
        The split name of each row, in row order.
    grouped : bool
        Whether rows sharing a group key were kept together.
    """

    __slots__ = ("_indices", "assignment", "fractions", "grouped", "seed")

    def __init__(
        self,
        *,
        fractions: Mapping[str, float],
        seed: int,
        assignment: Sequence[str],
        grouped: bool,
    ) -> None:
        self.fractions = dict(fractions)
        self.seed = int(seed)
        self.assignment = tuple(assignment)
        self.grouped = bool(grouped)
        arr = np.asarray(self.assignment, dtype=object)
        self._indices = {
            name: np.flatnonzero(arr == name).astype(np.int64) for name in self.fractions
        }

    def __getitem__(self, name: str) -> np.ndarray:
        return self._indices[name].copy()

    def __iter__(self) -> Iterator[str]:
        return iter(self._indices)

    def __len__(self) -> int:
        return len(self._indices)

    @property
    def counts(self) -> dict[str, int]:
        """Rows per split, in the order of :attr:`fractions`."""
        return {name: int(idx.size) for name, idx in self._indices.items()}

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able record of the split (method, seed, fractions, counts, row positions)."""
        return {
            "method": "stratified-keyed-hash",
            "seed": self.seed,
            "fractions": dict(self.fractions),
            "grouped": self.grouped,
            "counts": self.counts,
            "indices": {name: idx.tolist() for name, idx in self._indices.items()},
        }

    def __repr__(self) -> str:
        counts = ", ".join(f"{k}={v}" for k, v in self.counts.items())
        return f"SplitPlan(seed={self.seed}, {counts})"


def _check_fractions(fractions: Mapping[str, float]) -> dict[str, float]:
    if not isinstance(fractions, Mapping) or not fractions:
        raise ValueError("fractions must be a non-empty mapping of split name to fraction")
    out: dict[str, float] = {}
    for name, value in fractions.items():
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"split names must be non-empty strings, got {name!r}")
        f = float(value)
        if not math.isfinite(f) or f <= 0.0 or f >= 1.0 + 1e-12:
            raise ValueError(f"fraction for split {name!r} must be in (0, 1], got {value!r}")
        out[name] = f
    total = sum(out.values())
    if abs(total - 1.0) > 1e-6:
        raise ValueError(f"fractions must add up to 1, they add up to {total:g}")
    return out


def _order_key(seed: int, key: str) -> bytes:
    return hashlib.sha256(f"{seed}\x1f{key}".encode("utf-8", "surrogatepass")).digest()


def make_splits(
    labels: Sequence[Hashable],
    fractions: Mapping[str, float],
    seed: int = 0,
    *,
    keys: Sequence[Hashable] | None = None,
    groups: Sequence[Hashable] | None = None,
) -> SplitPlan:
    """Split rows into named parts, stratified by label, reproducibly.

    Parameters
    ----------
    labels : sequence
        The label of each row.
    fractions : mapping of str to float
        Split name → fraction of the rows, adding up to 1, e.g.
        ``{"train": 0.6, "calibration": 0.2, "test": 0.2}``. The first split named always
        receives at least one unit of every class.
    seed : int, default 0
        Changes which rows go where; the same seed gives the same split.
    keys : sequence, optional
        A stable key per row (e.g. the row id). The order inside each class is a keyed
        hash of the seed and the key, so a row's split survives reordering the rows.
        Defaults to the row position.
    groups : sequence, optional
        A group key per row; rows sharing a key always land in the same split (use it to
        keep duplicate texts together). A group takes the label of its first row and is
        ordered by its key.

    Returns
    -------
    SplitPlan
        The split of every row, with the seed and fractions, ready to record.

    Raises
    ------
    ValueError
        If the fractions are not positive and adding up to 1, or lengths differ.
    DatasetError
        If there are too few rows for some split to receive any.
    """
    fr = _check_fractions(fractions)
    n = len(labels)
    if n == 0:
        raise ValueError("cannot split an empty set of labels")
    if keys is not None and len(keys) != n:
        raise ValueError(f"keys has {len(keys)} entries for {n} labels")
    if groups is not None and len(groups) != n:
        raise ValueError(f"groups has {len(groups)} entries for {n} labels")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise ValueError(f"seed must be an integer, got {seed!r}")
    seed = int(seed)
    names = list(fr)
    weights = np.array([fr[k] for k in names])

    # Units: single rows, or groups of rows that must stay together.
    unit_rows: dict[Hashable, list[int]] = {}
    unit_label: dict[Hashable, Hashable] = {}
    unit_key: dict[Hashable, str] = {}
    for i in range(n):
        if groups is not None:
            u: Hashable = ("g", groups[i])
            k = str(groups[i])
        else:
            u = i
            k = str(keys[i]) if keys is not None else str(i)
        if u not in unit_rows:
            unit_rows[u] = []
            unit_label[u] = labels[i]
            unit_key[u] = k
        unit_rows[u].append(i)

    by_class: dict[Hashable, list[Hashable]] = {}
    for u, lab in unit_label.items():
        by_class.setdefault(lab, []).append(u)

    assignment: list[str] = [""] * n
    allocated = np.zeros(len(names))
    seen_units = 0
    for lab in sorted(by_class, key=lambda x: (type(x).__name__, str(x))):
        units = sorted(by_class[lab], key=lambda u: (_order_key(seed, unit_key[u]), unit_key[u]))
        m = len(units)
        seen_units += m
        # Give each unit to the split furthest behind its running target (ties: first
        # named), so classes are split proportionally and totals stay on target.
        target = weights * seen_units
        counts = np.zeros(len(names), dtype=np.int64)
        for _ in range(m):
            s = int(np.argmax(target - allocated - counts))
            counts[s] += 1
        if counts[0] == 0:
            donor = int(np.argmax(counts))
            counts[donor] -= 1
            counts[0] += 1
        allocated += counts
        pos = 0
        for s, c in enumerate(counts):
            for u in units[pos : pos + int(c)]:
                for i in unit_rows[u]:
                    assignment[i] = names[s]
            pos += int(c)

    plan = SplitPlan(fractions=fr, seed=seed, assignment=assignment, grouped=groups is not None)
    empty = [name for name, c in plan.counts.items() if c == 0]
    if empty:
        raise DatasetError(
            f"too few rows ({n}) to split into {', '.join(names)}: "
            f"split {empty[0]!r} would be empty",
            column="split",
        )
    return plan
