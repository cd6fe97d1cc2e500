"""The base of an experiment kind: its spec fields, its table columns, one ``run``."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from ...exceptions import SpecError, UserInputError

if TYPE_CHECKING:  # pragma: no cover
    from ...datasets import LabelledSet
    from .._spec import ExperimentSpec, SpecReader

__all__ = ["Column", "ExperimentKind", "KindOutput", "Progress"]

#: ``progress(description, done, total)``; called as long steps advance.
Progress = Callable[[str, int, int], None]


@dataclass(frozen=True, slots=True)
class Column:
    """One column of a comparison table.

    ``role`` is ``config`` for the columns that say which configuration a row is (logged as
    parameters of its nested run) and ``metric`` for measured numbers (logged as metrics).
    ``fmt`` is ``str``, ``int``, ``float`` (3 decimals), ``pct`` (a share, printed as %),
    ``bool``, ``ci`` (the value with the interval held in the two ``ci`` columns) or
    ``parts`` (a display-only cell joining the ``parts`` columns). Columns with
    ``show=False`` are in the rows, the artifacts and MLflow, but not printed on their own.

    Parameters
    ----------
    key : str
        The row key the column's value is stored under (and its MLflow name).
    header : str
        The printed column heading.
    role : {"metric", "config"}, default "metric"
        ``config``: says which configuration a row is (logged as a parameter of its
        nested run); ``metric``: a measured number (logged as a metric).
    fmt : {"str", "int", "float", "pct", "bool", "ci", "parts"}, default "float"
        How the cell is printed (see above); a missing or non-finite value prints ``–``.
    help : str, default ""
        One line on what the column means, written into the table's JSON document.
    show : bool, default True
        Whether the table prints the column.
    ci : tuple of (str, str) or None, default None
        With ``fmt="ci"``: the keys of the interval's low and high ends in the row.
    parts : tuple of str, default ()
        With ``fmt="parts"``: the keys whose values the cell joins with `` / ``.
    """

    key: str
    header: str
    role: str = "metric"
    fmt: str = "float"
    help: str = ""
    show: bool = True
    ci: tuple[str, str] | None = None
    parts: tuple[str, ...] = ()

    @property
    def in_rows(self) -> bool:
        """Whether rows hold a value under :attr:`key` (display-only columns do not)."""
        return self.fmt != "parts"


@dataclass
class KindOutput:
    """What a kind's ``run`` returns.

    Attributes
    ----------
    rows : list of dict
        One row per configuration, keyed by column key; numbers already rounded.
    labels : list of str
        A short name per row (its nested run's name).
    details : list of dict
        Per-row detail (e.g. per-resplit values) logged as an artifact of the nested run.
    summary : dict
        Scalars about the whole experiment (logged as metrics of the parent run).
    notes : list of str
        Cautions printed under the table and logged with it.
    info : dict
        Plain JSON facts about the run (sizes, fingerprints...) for the parent run.
    row_artifacts : list of dict
        Per row, ``{artifact_file: JSON object}`` to log on its nested run (e.g. a policy).
    """

    rows: list[dict[str, Any]]
    labels: list[str]
    details: list[dict[str, Any]] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)
    row_artifacts: list[dict[str, Any]] = field(default_factory=list)


#: The MLflow context of each split role's rows (a pool is resplit into calibration and
#: test rows; the fitting is what it is first used for).
_ROLE_CONTEXTS = {"train": "training", "calibration": "calibration", "pool": "calibration"}


class ExperimentKind:
    """Base of an experiment kind (one module per kind in this folder).

    Subclasses declare ``name``, ``description``, ``split_roles`` (role -> default split
    names), ``columns`` and ``fields`` (their own top-level spec keys), and implement
    :meth:`parse_settings` and :meth:`run`. ``has_resplits`` says whether ``resplits``
    can be overridden for a quick run.
    """

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    split_roles: ClassVar[dict[str, tuple[str, ...]]] = {}
    columns: ClassVar[tuple[Column, ...]] = ()
    fields: ClassVar[tuple[str, ...]] = ()
    has_resplits: ClassVar[bool] = False

    def __init__(self, spec: ExperimentSpec) -> None:
        self.spec = spec
        #: ``(context, rows, split names)`` of each role's rows taken (:meth:`role`): the
        #: runner logs them as the parent run's dataset inputs
        self.used: list[tuple[str, LabelledSet, str]] = []

    # ------------------------------------------------------------------ spec
    @classmethod
    def spec_fields(cls) -> tuple[str, ...]:
        """The top-level spec keys of this kind (besides the common ones)."""
        return cls.fields

    @classmethod
    def parse_settings(cls, doc: Mapping[str, Any], reader: SpecReader) -> dict[str, Any]:
        """Validate this kind's fields of a spec; return them with defaults filled in."""
        raise NotImplementedError

    # ------------------------------------------------------------------ running
    def run(self, progress: Progress | None = None) -> KindOutput:
        """Run the experiment; rows follow :attr:`columns`."""
        raise NotImplementedError

    # ------------------------------------------------------------------ helpers
    def error(self, message: str, field: str | None = None) -> SpecError:
        """A :class:`SpecError` naming this spec's file and ``field``."""
        return SpecError(message, path=self.spec.path, field=field)

    def load_dataset(self) -> LabelledSet:
        """The spec's labelled set (an option the loader does not take names ``dataset.options``)."""
        from ...datasets import load_dataset

        try:
            return load_dataset(self.spec.dataset, **self.spec.dataset_options)
        except TypeError as exc:
            raise self.error(str(exc), "dataset.options") from None
        except ValueError as exc:
            if isinstance(exc, UserInputError):
                raise
            raise self.error(str(exc), "dataset.options") from None

    def role(self, ds: LabelledSet, role: str) -> LabelledSet:
        """The rows of the splits the spec gives ``role``."""
        names = self.spec.splits[role]
        have = ds.splits
        missing = [n for n in names if n not in have]
        if missing:
            raise self.error(
                f"{ds.name} has no split {missing[0]!r}; its splits are {', '.join(have) or 'none'}",
                f"dataset.splits.{role}",
            )
        part = ds.split(*names)
        self.used.append((_ROLE_CONTEXTS.get(role, "evaluation"), part, "+".join(names)))
        return part

    def train_classifier(self, texts: list[str], labels: list[str]) -> Any:
        """Fit the spec's classifier (seeded); a bad parameter names ``classifier.params``."""
        from ...classifiers import LocalClassifier

        clf = LocalClassifier(**self.spec.classifier_params)
        try:
            return clf.fit(texts, labels)
        except ValueError as exc:
            if isinstance(exc, UserInputError):
                raise
            raise self.error(str(exc), "classifier.params") from None


def label_index(classes: Any, gold: list[str]) -> np.ndarray:
    """Column of each gold label in ``classes``; ``-1`` for labels outside them."""
    index = {str(c): i for i, c in enumerate(classes)}
    return np.array([index.get(str(g), -1) for g in gold], dtype=int)


def parse_calibrator(value: Any, reader: SpecReader, field: str = "calibrator") -> dict[str, Any]:
    """``calibrator: temperature`` or ``{method: temperature, fraction: 0.3}``.

    ``fraction`` is the share of the calibration rows that fits the probability
    calibrator (the rest fit the thresholds), as in ``hybridroute calibrate``; ``0`` fits
    both on the same rows.
    """
    from .._resplit import CALIBRATORS

    if isinstance(value, str):
        value = {"method": value}
    doc = reader.mapping(value, field, keys=("method", "fraction"))
    method = reader.string(
        doc.get("method", "temperature"), f"{field}.method", choices=tuple(CALIBRATORS)
    )
    fraction = reader.fraction(doc.get("fraction", 0.3), f"{field}.fraction", closed_low=True)
    if method == "none":
        fraction = 0.0
    return {"method": method, "fraction": fraction}


def parse_resplit_fields(doc: Mapping[str, Any], reader: SpecReader) -> dict[str, Any]:
    """The fields every resplit kind has: calibrator, calibration_fraction, targets, delta, resplits."""
    if "targets" not in doc:
        raise reader.error("missing: the list of targets to fit for", "targets")
    return {
        "calibrator": parse_calibrator(doc.get("calibrator", "temperature"), reader),
        "calibration_fraction": reader.fraction(
            doc.get("calibration_fraction", 0.5), "calibration_fraction"
        ),
        "targets": reader.fractions(doc["targets"], "targets"),
        "delta": reader.fraction(doc.get("delta", 0.05), "delta"),
        "resplits": reader.integer(doc.get("resplits", 100), "resplits", low=1, high=100_000),
    }
