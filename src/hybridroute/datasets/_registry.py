"""Dataset references: ``banking77``, ``clinc150``, ``support-tickets``, ``csv:PATH``, ``jsonl:PATH``."""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._labelled_rows import DEFAULT_MAX_TEXT_CHARS
from ..contracts import FactSchema
from ..exceptions import DatasetError
from . import _bundled, _public
from ._io import read_csv, read_jsonl, sniff_kind
from ._labelled import LabelledSet
from ._validate import Options, build, fact_types_from

__all__ = [
    "AUTO_SPLIT_FRACTIONS",
    "AUTO_SPLIT_SEED",
    "OOS_LABELS",
    "list_datasets",
    "load_checked",
    "load_dataset",
]

#: ``oos_label="auto"`` (a file's default): the out-of-scope label is found by convention.
AUTO = "auto"
#: The labels that mark a file's out-of-scope rows by default (CLINC150's is ``oos``, the
#: bundled support-tickets set's ``out_of_scope``); a file may use one of them, not both.
OOS_LABELS = ("out_of_scope", "oos")
#: How a file without a split column is split when loaded (``auto_split=True``).
AUTO_SPLIT_FRACTIONS = {"train": 0.6, "calibration": 0.2, "test": 0.2}
#: The seed of that split: fixed, so every command that loads the file gets the same rows.
AUTO_SPLIT_SEED = 0


@dataclass(frozen=True, slots=True)
class DatasetEntry:
    """A named dataset: its loader and a one-line description."""

    name: str
    loader: Callable[..., LabelledSet]
    description: str
    licence: str


_ENTRIES: dict[str, DatasetEntry] = {
    e.name: e
    for e in (
        DatasetEntry(
            "banking77",
            _public.load_banking77,
            "online-banking queries, 77 intents; official train 10,003 / test 3,080",
            "CC BY 4.0 (PolyAI)",
        ),
        DatasetEntry(
            "clinc150",
            _public.load_clinc150,
            "150 intents + out-of-scope; train / validation / test 15,000 / 3,000 / 4,500 "
            "in scope, 100 / 100 / 1,000 out of scope (label 'oos'; oos='drop' to leave out)",
            "CC BY 3.0 (Clinc)",
        ),
        DatasetEntry(
            "support-tickets",
            _bundled.load_support_tickets,
            "customer-support tickets written for hybridroute, with rule facts and gold "
            "next steps; train / calibration / test",
            "bundled with hybridroute; see datasets/data/DATASET.md",
        ),
    )
}
_ALIASES = {"support_tickets": "support-tickets", "clinc": "clinc150", "banking": "banking77"}


def list_datasets() -> tuple[str, ...]:
    """The names :func:`load_dataset` knows, besides ``csv:PATH`` and ``jsonl:PATH``."""
    return tuple(_ENTRIES)


def dataset_entry(name: str) -> DatasetEntry:
    """The registry entry of a named dataset (for the command line)."""
    return _ENTRIES[name]


def _resolve(ref: str | os.PathLike[str]) -> tuple[str, str | None]:
    """``(kind, name_or_path)`` where kind is ``named``, ``csv`` or ``jsonl``."""
    if isinstance(ref, os.PathLike):
        path = os.fspath(ref)
        return ("csv" if sniff_kind(path) == "csv" else "jsonl"), path
    if not isinstance(ref, str) or not ref.strip():
        raise DatasetError(f"a dataset reference must be a non-empty string, got {ref!r}")
    text = ref.strip()
    key = text.lower()
    if key in _ENTRIES or key in _ALIASES:
        return "named", _ALIASES.get(key, key)
    for prefix in ("csv:", "jsonl:"):
        if key.startswith(prefix):
            path = text[len(prefix) :]
            if not path:
                raise DatasetError(f"{prefix}PATH needs a path after the colon")
            return prefix[:-1], path
    if Path(text).suffix.lower() in (".csv", ".jsonl"):
        return sniff_kind(text), text
    raise DatasetError(
        f"unknown dataset {ref!r}; use one of {', '.join(_ENTRIES)}, "
        "or csv:PATH / jsonl:PATH (or a path ending in .csv or .jsonl)"
    )


def load_dataset(ref: str | os.PathLike[str], **options: Any) -> LabelledSet:
    """Load a labelled set by name or from a file.

    Parameters
    ----------
    ref : str or path
        ``"banking77"``, ``"clinc150"``, ``"support-tickets"``, ``"csv:PATH"``,
        ``"jsonl:PATH"``, or a path ending in ``.csv`` / ``.jsonl``.
    **options
        For ``banking77`` and ``clinc150``: ``data_dir`` (default: the
        ``HYBRIDROUTE_DATA_DIR`` variable, then the cache, then a download) and
        ``download`` (default True). ``clinc150`` also takes ``oos``: ``"label"``
        (default; out-of-scope rows kept with the label ``"oos"``) or ``"drop"`` (for
        in-scope accuracy). ``support-tickets`` takes ``on_error``. Files take
        ``text_column="text"``, ``label_column="label"``, ``split_column="split"``,
        ``id_column="id"``, ``label_set`` (labels outside it are errors), ``fact_types``
        (``{fact: type}`` or a :class:`~hybridroute.contracts.FactSchema`; other fact
        columns get the type most of their rows have), ``oos_label`` (default
        ``"auto"``: rows labelled ``out_of_scope`` or ``oos`` are out of scope; ``None``:
        none), ``max_text_chars`` (default 10,000), ``on_error`` (``"raise"`` or
        ``"skip"``: bad rows are left out and listed in :attr:`LabelledSet.skipped`) and
        ``auto_split`` (default True: a file without a split column is split 60/20/20
        into train / calibration / test when loaded, seeded and stratified; see
        :func:`load_file`).

    Returns
    -------
    LabelledSet

    Notes
    -----
    Files are read safely: a regular file only (a FIFO or ``/dev/zero`` is refused at
    once), at most 1 GiB (``HYBRIDROUTE_MAX_DATASET_BYTES`` sets another limit), a JSONL
    line at most 1 MB and parsed strictly (duplicate keys, nesting deeper than 64 levels,
    integers of more than 64 digits and ``NaN`` are row errors). No string may hold a NUL
    character; a split must be ``train``, ``validation``, ``calibration`` or ``test`` (or
    ``val``, ``valid``, ``dev``, ``calib``). CSV cells written with a leading apostrophe
    by :meth:`LabelledSet.export` (formula escaping) are read without it.

    Raises
    ------
    DatasetError
        Naming file, row and column, when a file is malformed or the reference unknown.
    DatasetUnavailableError
        When a public set is neither in the data directory, nor cached, nor downloadable.
    TypeError
        When an option does not apply to the reference.
    """
    kind, target = _resolve(ref)
    if kind == "named":
        assert target is not None
        loader = _ENTRIES[target].loader
        _check_options(target, loader, options)
        return loader(**options)
    assert target is not None
    _check_options(f"{kind}:PATH", load_file, options, skip=("path", "kind"))
    return load_file(target, kind, **options)


def load_checked(ref: str | os.PathLike[str], schema: FactSchema, **options: Any) -> LabelledSet:
    """Load a labelled set with every fact checked against a facts schema.

    What ``datasets validate --rules / --router``, ``evaluate --router``, ``spark evaluate
    --dataset`` and the experiments' ``router`` kind load: a fact a router would refuse is
    found before anything is routed, naming its row and column.

    Parameters
    ----------
    ref : str or path
        A :func:`load_dataset` reference.
    schema : FactSchema
        The declared facts, e.g. a router's ``router.rules.schema``.
    **options
        :func:`load_dataset` options (``fact_types`` is ``schema``).

    Returns
    -------
    LabelledSet

    Raises
    ------
    DatasetError
        For the first fact the schema refuses, naming row and column. A file is read with
        the schema (each CSV cell as its declared type, the file's rows named;
        ``on_error="skip"`` lists every bad row instead, in :attr:`LabelledSet.skipped`);
        a named set is loaded, then checked with :meth:`LabelledSet.check_facts` (its row
        id is named too, and how many rows break the schema in all).
    TypeError
        When an option does not apply to the reference (as :func:`load_dataset`).
    """
    if _resolve(ref)[0] != "named":
        return load_dataset(ref, **{**options, "fact_types": schema})
    ds = load_dataset(ref, **options)
    problems = ds.check_facts(schema)
    if problems:
        first = problems[0]
        reason = first.reason
        if first.id is not None:
            reason += f" (row id {first.id!r})"
        bad_rows = sum(1 for p in problems if p.row is not None)
        if bad_rows > 1:
            reason += f"; {bad_rows:,} rows break the facts schema in all"
        raise DatasetError(reason, path=ds.name, row=first.row, column=first.column)
    return ds


def _check_options(
    what: str, loader: Callable[..., Any], options: Mapping[str, Any], skip: Iterable[str] = ()
) -> None:
    allowed = [p for p in inspect.signature(loader).parameters if p not in set(skip)]
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise TypeError(
            f"load_dataset({what!r}) does not take {', '.join(unknown)}; "
            f"it takes {', '.join(allowed) or 'no options'}"
        )


def load_file(
    path: str | os.PathLike[str],
    kind: str,
    *,
    text_column: str = "text",
    label_column: str = "label",
    split_column: str = "split",
    id_column: str = "id",
    label_set: Iterable[str] | None = None,
    fact_types: Mapping[str, str] | FactSchema | None = None,
    oos_label: str | None = AUTO,
    max_text_chars: int = DEFAULT_MAX_TEXT_CHARS,
    on_error: str = "raise",
    auto_split: bool = True,
) -> LabelledSet:
    """Load a labelled CSV or JSONL file (see :func:`load_dataset` for the options).

    Two defaults make a file of your own work like the public sets, each said in the set's
    :attr:`~LabelledSet.notes` and recorded in its provenance:

    * a file without a split column is split when it is loaded (``auto_split``): seeded
      (seed 0), stratified by label, rows with the same text kept together, 60% ``train``,
      20% ``calibration``, 20% ``test`` (:data:`AUTO_SPLIT_FRACTIONS`) -- so every command
      that loads the file sees the same rows in the same split (train on ``train``,
      calibrate on ``calibration``, evaluate on ``test``). Add a ``split`` column to choose
      the rows yourself;
    * rows labelled ``out_of_scope`` or ``oos`` (:data:`OOS_LABELS`) are the set's
      out-of-scope rows (``oos_label="auto"``); pass ``oos_label=None`` for none, or the
      label you use.
    """
    if on_error not in ("raise", "skip"):
        raise ValueError(f"on_error must be 'raise' or 'skip', not {on_error!r}")
    if isinstance(label_set, str):
        raise TypeError("label_set must be a collection of labels, not one string")
    labels = frozenset(str(x) for x in label_set) if label_set is not None else None
    if labels is not None and not labels:
        raise ValueError("label_set is empty")
    p = Path(path).expanduser()
    raw = read_csv(p) if kind == "csv" else read_jsonl(p)
    opt = Options(
        text_column=text_column,
        label_column=label_column,
        split_column=split_column,
        split_required=split_column != "split",
        id_column=id_column,
        id_required=id_column != "id",
        label_set=labels,
        fact_types=fact_types_from(fact_types),
        max_text_chars=int(max_text_chars),
        on_error=on_error,
    )
    built = build(raw, opt)
    notes: list[str] = []
    if oos_label == AUTO:
        oos_label = _auto_oos_label(built.frame["label"], p)
        if oos_label is not None:
            notes.append(
                f"{p.name}: rows labelled {oos_label!r} are out of scope (by convention: "
                "'out_of_scope' or 'oos'; `train --oos-label none` or oos_label=None for none)"
            )
    options = {
        "text_column": text_column,
        "label_column": label_column,
        "split_column": split_column,
        "id_column": id_column,
        "label_set": sorted(labels) if labels is not None else None,
        "fact_types": dict(opt.fact_types) if opt.fact_types else None,
        "oos_label": oos_label,
        "max_text_chars": int(max_text_chars),
        "on_error": on_error,
    }
    options["auto_split"] = bool(auto_split)
    ds = LabelledSet._from_built(
        built,
        name=p.stem,
        source=str(p),
        oos_label=oos_label,
        provenance={"loader": kind, "options": options},
    )
    if auto_split and not ds.splits:
        try:
            ds = ds.with_splits(AUTO_SPLIT_FRACTIONS, seed=AUTO_SPLIT_SEED)
        except DatasetError as exc:  # too few rows: every split would not get one
            notes.append(f"{p.name} has no {split_column!r} column and is not split: {exc}")
        else:
            counts = ", ".join(f"{k} {v:,}" for k, v in ds.splits.items())
            notes.append(
                f"{p.name} has no {split_column!r} column: its rows were split when loaded "
                f"({counts}; stratified by label, seed {AUTO_SPLIT_SEED}; the same rows "
                "every time), so training, calibration and evaluation use different rows; "
                "add a split column to choose them yourself"
            )
    if notes:
        ds = ds._with_notes(notes)
    return ds


def _auto_oos_label(labels: Iterable[Any], path: Path) -> str | None:
    """The out-of-scope label a file uses by convention (:data:`OOS_LABELS`), or ``None``."""
    present = {str(v) for v in labels}
    found = [label for label in OOS_LABELS if label in present]
    if len(found) > 1:
        raise DatasetError(
            f"rows are labelled both {found[0]!r} and {found[1]!r}, and either marks "
            "out-of-scope rows; relabel one, or pass oos_label= to say which is out of scope",
            path=str(path),
            column="label",
        )
    return found[0] if found else None
