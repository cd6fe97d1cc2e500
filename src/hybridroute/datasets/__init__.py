"""Labelled sets: loaders, validation, splits and fingerprints.

>>> from hybridroute.datasets import load_dataset
>>> ds = load_dataset("banking77")                         # doctest: +SKIP
>>> train = ds.with_calibration_split(0.2, seed=0).split("train")  # doctest: +SKIP

References: ``banking77``, ``clinc150`` (public; read from ``HYBRIDROUTE_DATA_DIR``, the
cache, or downloaded with a checksum check), ``support-tickets`` (bundled), and files:
``csv:PATH`` / ``jsonl:PATH``. Every row is validated; errors name file, row and column.
Facts are checked against a rules file's facts schema with ``fact_types=schema`` when a
file is loaded, or :meth:`LabelledSet.check_facts` on any set.
"""

from __future__ import annotations

from ._labelled import LabelledSet
from ._registry import list_datasets, load_dataset
from ._splits import SplitPlan, make_splits
from ._validate import FactProblem, SkippedRow

__all__ = [
    "FactProblem",
    "LabelledSet",
    "SkippedRow",
    "SplitPlan",
    "list_datasets",
    "load_dataset",
    "make_splits",
]
