"""The labelled-set type: a validated pandas frame with its label set, splits and fingerprint."""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from .._canonical import canonical_json
from .._csv import json_kind
from .._labelled_rows import (
    ANNOTATION_COLUMNS,
    CORE_COLUMNS,
    DEFAULT_MAX_TEXT_CHARS,
    SPLIT_ORDER,
    check_fact_value,
    known_splits_hint,
    missing_required,
)
from .._redact import REDACTED, Redactor
from ..contracts import FactSchema
from ..exceptions import DatasetError
from ._export import from_cell, plain_value, write_set
from ._io import RawTable
from ._splits import SplitPlan, make_splits
from ._validate import (
    FactProblem,
    Options,
    SkippedRow,
    build,
    fact_types_from,
    text_key,
)

__all__ = ["LabelledSet"]

#: Bumped whenever the canonical serialisation behind :attr:`LabelledSet.fingerprint` changes.
FINGERPRINT_VERSION = 1
#: Default fractions of :meth:`LabelledSet.with_splits`.
DEFAULT_FRACTIONS = {"train": 0.6, "calibration": 0.2, "test": 0.2}


def _order_splits(names: Iterable[str]) -> list[str]:
    names = set(names)
    known = [s for s in SPLIT_ORDER if s in names]
    return known + sorted(names - set(known))


class LabelledSet:
    """A labelled set of texts: label, split, structured facts and annotations per row.

    Build one with :func:`~hybridroute.datasets.load_dataset` or :meth:`from_frame`;
    every row has been validated. The object is immutable: methods that change splits
    return a new set, and :attr:`frame` returns a copy.

    Columns of :attr:`frame`: ``id``, ``text``, ``label``, ``split`` (``None`` when the
    set has no splits), then the fact columns (:attr:`fact_columns`), then whichever of
    the annotations ``next_step``, ``destination``, ``evidence``, ``tags`` the source had.

    Parameters
    ----------
    frame : pandas.DataFrame
        The rows, already validated and kept as they are (index reset, not copied): the
        constructor checks nothing, so build a set with ``load_dataset`` or :meth:`from_frame`.
    name, source, oos_label, skipped, notes
        As the attributes of the same names (``skipped`` may hold plain tuples).
    fact_columns : iterable of str, default ()
        The columns of ``frame`` that are facts, in order.
    fact_types : mapping of str to str or None, default None
        Each fact column's type (``bool``, ``int``, ``number``, ``str``...).
    provenance : mapping or None, default None
        How the set was made (copied; ``name``, ``source`` and ``steps`` filled in if absent).

    Attributes
    ----------
    name : str
        Short name (``banking77``, or a file's stem).
    source : str
        Where the rows came from (a path, or a cache path and its URL).
    oos_label : str or None
        The label used for out-of-scope rows (``oos`` in CLINC150, ``out_of_scope`` in
        support-tickets), or ``None``.
    skipped : list of SkippedRow
        Rows left out by ``on_error="skip"``: ``(row, column, reason)``.
    notes : tuple of str
        Problems found in a published set that were kept as published (e.g. a text
        labelled two ways in CLINC150), and what a loader did by default (a file without a
        split column split when loaded, its out-of-scope label found by convention).
    """

    __slots__ = (
        "_fact_columns",
        "_fact_types",
        "_fingerprint",
        "_frame",
        "_name",
        "_notes",
        "_oos_label",
        "_provenance",
        "_skipped",
        "_source",
    )

    def __init__(
        self,
        frame: pd.DataFrame,
        *,
        name: str,
        source: str,
        fact_columns: Iterable[str] = (),
        fact_types: Mapping[str, str] | None = None,
        oos_label: str | None = None,
        skipped: Iterable[SkippedRow] = (),
        notes: Iterable[str] = (),
        provenance: Mapping[str, Any] | None = None,
    ) -> None:
        # Internal: callers hand over a frame that went through validation.
        self._frame = frame.reset_index(drop=True)
        self._name = str(name)
        self._source = str(source)
        self._fact_columns = tuple(fact_columns)
        self._fact_types = dict(fact_types or {})
        self._oos_label = oos_label
        self._skipped = [SkippedRow(*s) for s in skipped]
        self._notes = tuple(notes)
        self._provenance = copy.deepcopy(dict(provenance or {}))
        self._provenance.setdefault("name", self._name)
        self._provenance.setdefault("source", self._source)
        self._provenance.setdefault("steps", [])
        self._fingerprint: str | None = None

    # ------------------------------------------------------------------ construction

    @classmethod
    def _from_built(cls, built: Any, **kwargs: Any) -> LabelledSet:
        return cls(
            built.frame,
            fact_columns=built.fact_columns,
            fact_types=built.fact_types,
            skipped=built.skipped,
            notes=built.notes,
            **kwargs,
        )

    @classmethod
    def from_frame(
        cls,
        frame: pd.DataFrame,
        *,
        name: str = "frame",
        text_column: str = "text",
        label_column: str = "label",
        split_column: str = "split",
        id_column: str = "id",
        label_set: Iterable[str] | None = None,
        fact_types: Mapping[str, str] | FactSchema | None = None,
        oos_label: str | None = None,
        on_error: str = "raise",
        max_text_chars: int = DEFAULT_MAX_TEXT_CHARS,
    ) -> LabelledSet:
        """Validate a pandas DataFrame into a labelled set.

        Rows are numbered from 1 in frame order in error messages. Columns other than the
        text, label, split, id and annotation columns become facts (a ``facts`` column of
        dicts is read as nested facts).

        Parameters
        ----------
        frame : pandas.DataFrame
            One row per labelled text; missing cells (``None``, ``NaN``, ``pd.NA``) are
            absent values. A split column with every cell missing is dropped (unsplit set).
        name : str, default "frame"
            The set's name; error messages name it as the file.
        text_column, label_column, split_column, id_column : str
            The columns of the text, its label (a string or an integer), its split
            (``train``, ``validation``, ``calibration``, ``test`` or an alias) and its
            unique id; default ``text``, ``label``, ``split``, ``id``. Text and label must
            exist; split and id must too when renamed (ids default to row numbers).
        label_set : iterable of str or None, default None
            The declared labels (a row labelled outside it is an error); ``None``: any.
        fact_types : mapping of str to str, FactSchema or None, default None
            Declared fact types, or a facts schema whose ``enum``, ``min`` / ``max`` and
            required facts are checked too; other fact columns get their rows' usual type.
        oos_label : str or None, default None
            The label of out-of-scope rows, if any.
        on_error : {"raise", "skip"}, default "raise"
            Stop at the first bad row, or leave bad rows out (listed in :attr:`skipped`).
        max_text_chars : int, default 10000
            Longest text accepted, in characters.

        Raises
        ------
        TypeError
            If ``frame`` is not a DataFrame.
        DatasetError
            Naming row (from 1, frame order) and column: no rows, a missing column, or a
            bad row under ``on_error="raise"``.
        ValueError
            If ``on_error`` is neither ``raise`` nor ``skip``.
        """
        if not isinstance(frame, pd.DataFrame):
            raise TypeError(f"expected a pandas DataFrame, got {type(frame).__name__}")
        if split_column in frame.columns and frame[split_column].isna().all():
            frame = frame.drop(columns=[split_column])  # an unsplit set's frame
        columns = [str(c) for c in frame.columns]
        records = []
        for i, rec in enumerate(frame.to_dict(orient="records"), start=1):
            records.append((name, i, {str(k): from_cell(v) for k, v in rec.items()}))
        raw = RawTable(name, "json", columns, records)
        if not records:
            raise DatasetError("the frame has no rows", path=name)
        for col in (text_column, label_column):
            if col not in columns:
                raise DatasetError(
                    f"missing column: the frame has {', '.join(map(repr, columns))}",
                    path=name,
                    column=col,
                )
        opt = Options(
            text_column=text_column,
            label_column=label_column,
            split_column=split_column,
            split_required=split_column != "split",
            id_column=id_column,
            id_required=id_column != "id",
            label_set=frozenset(label_set) if label_set is not None else None,
            fact_types=fact_types_from(fact_types),
            max_text_chars=max_text_chars,
            on_error=on_error,
        )
        built = build(raw, opt)
        return cls._from_built(
            built,
            name=name,
            source="<DataFrame>",
            oos_label=oos_label,
            provenance={"loader": "from_frame"},
        )

    def _with_notes(self, notes: Iterable[str]) -> LabelledSet:
        """The same set with ``notes`` added (what a loader did by default, said once)."""
        return LabelledSet(
            self._frame,
            name=self._name,
            source=self._source,
            fact_columns=self._fact_columns,
            fact_types=self._fact_types,
            oos_label=self._oos_label,
            skipped=self._skipped,
            notes=(*self._notes, *notes),
            provenance=self._provenance,
        )

    def _derive(self, frame: pd.DataFrame, step: Mapping[str, Any]) -> LabelledSet:
        prov = copy.deepcopy(self._provenance)
        prov["steps"].append(dict(step))
        return LabelledSet(
            frame,
            name=self._name,
            source=self._source,
            fact_columns=self._fact_columns,
            fact_types=self._fact_types,
            oos_label=self._oos_label,
            skipped=self._skipped,
            notes=self._notes,
            provenance=prov,
        )

    # ------------------------------------------------------------------ basic views

    @property
    def name(self) -> str:
        """Short name: ``banking77``, ``clinc150``, ``support-tickets`` or a file's stem."""
        return self._name

    @property
    def source(self) -> str:
        """Where the rows were read from (paths; for downloads, the cache path and URL)."""
        return self._source

    @property
    def oos_label(self) -> str | None:
        """The out-of-scope label (``oos``, ``out_of_scope``), or ``None``."""
        return self._oos_label

    @property
    def skipped(self) -> list[SkippedRow]:
        """Rows left out by ``on_error="skip"``, as ``(row, column, reason)``, by row."""
        return list(self._skipped)

    @property
    def notes(self) -> tuple[str, ...]:
        """Problems kept as published, and defaults a loader applied (one per line)."""
        return self._notes

    @property
    def provenance(self) -> dict[str, Any]:
        """How the set was made: name, source, loader options and derivation steps."""
        return copy.deepcopy(self._provenance)

    @property
    def frame(self) -> pd.DataFrame:
        """A copy of the rows (changing it does not change the set)."""
        return self._frame.copy(deep=True)

    def __len__(self) -> int:
        """The number of rows."""
        return len(self._frame)

    @property
    def ids(self) -> list[str]:
        """The id of each row (from the file, or made from the row number)."""
        return self._frame["id"].tolist()

    @property
    def texts(self) -> list[str]:
        """The text of each row, in row order."""
        return self._frame["text"].tolist()

    @property
    def y(self) -> list[str]:
        """The label of each row, in row order."""
        return self._frame["label"].tolist()

    @property
    def labels(self) -> tuple[str, ...]:
        """The distinct labels, sorted."""
        return tuple(sorted(set(self._frame["label"].tolist())))

    @property
    def splits(self) -> dict[str, int]:
        """Rows per split: ``train``, ``validation``, ``calibration``, ``test``, then others."""
        counts: dict[str, int] = {}
        for s in self._frame["split"].tolist():
            if s is not None:
                counts[s] = counts.get(s, 0) + 1
        return {name: counts[name] for name in _order_splits(counts)}

    @property
    def fact_columns(self) -> tuple[str, ...]:
        """The names of the fact columns, in frame order."""
        return self._fact_columns

    @property
    def fact_types(self) -> dict[str, str]:
        """The type of each fact column (``bool``, ``int``, ``number``, ``str``, ``list``...)."""
        return dict(self._fact_types)

    def label_counts(self, split: str | None = None) -> dict[str, int]:
        """Rows per label (sorted by label), over the whole set or one split."""
        labels = self._frame["label"]
        if split is not None:
            labels = labels[self._frame["split"] == split]
        counts: dict[str, int] = {}
        for lab in labels.tolist():
            counts[lab] = counts.get(lab, 0) + 1
        return {k: counts[k] for k in sorted(counts)}

    def facts(self, i: int) -> dict[str, Any]:
        """The facts of row ``i`` (by position) as plain JSON values, ``None`` when absent."""
        row = self._frame.iloc[int(i)]
        return {c: plain_value(row[c]) for c in self._fact_columns}

    def iter_facts(self) -> Iterator[dict[str, Any]]:
        """The facts of every row, in row order."""
        cols = [self._frame[c].tolist() for c in self._fact_columns]
        names = self._fact_columns
        for values in zip(*cols, strict=True) if cols else (() for _ in range(len(self))):
            yield {c: plain_value(v) for c, v in zip(names, values, strict=True)}

    def check_facts(self, schema: FactSchema) -> list[FactProblem]:
        """Check every row's facts against a facts schema (a rules file's ``facts``).

        What a router would refuse is found here first, with its row and column: a value
        of the wrong type or outside the fact's ``enum`` or ``min`` / ``max``, and a
        required fact (no default) absent from a row or from the set. An absent fact
        (``None``) that has a default is fine: a routed row takes the default. A column the
        schema does not declare is no fact a rule reads and is not checked (an evaluation
        routes the declared facts only).

        Values are checked as the set holds them. Load a CSV file with the schema instead
        (``load_dataset(path, fact_types=schema)``): each cell is then read as its
        declared type (``12345`` in a ``str`` fact stays text) and these same checks run
        while loading, naming the file's rows.

        Parameters
        ----------
        schema : FactSchema
            The declared facts, e.g. ``load_rules(path).schema``.

        Returns
        -------
        list of FactProblem
            ``(row, id, column, reason)``: required facts that are no column first
            (``row`` and ``id`` are ``None``), then the first bad fact of each bad row, by
            row (``row`` is the 1-based position in this set). Empty when every fact passes.
        """
        if not isinstance(schema, FactSchema):
            raise TypeError(f"expected a FactSchema, got {type(schema).__name__}")
        names = self._fact_columns
        problems = [
            FactProblem(None, None, c, reason) for c, reason in missing_required(schema, names)
        ]
        checked = [(c, schema[c]) for c in names if c in schema]
        if checked:
            columns = [self._frame[c].tolist() for c, _ in checked]
            for i, (rid, *values) in enumerate(
                zip(self._frame["id"].tolist(), *columns, strict=True)
            ):
                for (c, spec), v in zip(checked, values, strict=True):
                    v = plain_value(v)
                    reason = check_fact_value(spec, json_kind(v), v, v, required=spec.required)[1]
                    if reason is not None:
                        problems.append(FactProblem(i + 1, rid, c, reason))
                        break
        return problems

    # ------------------------------------------------------------------ fingerprint

    @property
    def fingerprint(self) -> str:
        """SHA-256 (hex) of a canonical serialisation of the rows.

        Covers the column names and, row by row in order, id, text, label, split, facts
        and annotations, as canonical JSON (sorted keys, UTF-8, integral floats written as
        integers). It does not depend on the name, the source or the machine, so the same
        content fingerprints the same wherever it was loaded from.
        """
        if self._fingerprint is None:
            self._fingerprint = self._compute_fingerprint()
        return self._fingerprint

    def _compute_fingerprint(self) -> str:
        frame = self._frame
        extra = [c for c in frame.columns if c not in CORE_COLUMNS]
        columns = list(CORE_COLUMNS) + extra
        h = hashlib.sha256()
        h.update(f"hybridroute-labelled-set/{FINGERPRINT_VERSION}\n".encode())
        h.update(canonical_json(columns).encode("utf-8") + b"\n")
        data = [[plain_value(v) for v in frame[c].tolist()] for c in columns]
        if extra:
            for row in zip(*data, strict=True):
                h.update(canonical_json(list(row)).encode("utf-8") + b"\n")
        else:
            # Strings and nulls only: plain json.dumps gives the canonical form, faster.
            dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
            for row in zip(*data, strict=True):
                h.update(dumps(list(row)).encode("utf-8") + b"\n")
        return h.hexdigest()

    # ------------------------------------------------------------------ splits

    def split(self, *names: str) -> LabelledSet:
        """The rows of one or more splits, as a new set (rows keep their order).

        Raises
        ------
        DatasetError
            If a split is not in the set.
        """
        if not names:
            raise ValueError("name at least one split, e.g. ds.split('train')")
        have = self.splits
        for name in names:
            if name not in have:
                hint = (
                    f"its splits are {', '.join(have)}"
                    if have
                    else "it has no splits; make some with with_splits()"
                )
                raise DatasetError(f"{self._name} has no split {name!r}; {hint}", column="split")
        mask = self._frame["split"].isin(list(names))
        return self._derive(self._frame[mask.to_numpy()], {"op": "select", "splits": list(names)})

    def with_calibration_split(
        self, fraction: float = 0.2, seed: int = 0, from_split: str = "train"
    ) -> LabelledSet:
        """Carve a ``calibration`` split out of ``from_split``, stratified by label.

        The carve-out is seeded and recorded (the chosen ids go into :attr:`provenance`).
        Rows with the same text (ignoring case and spacing) stay together, so no text of
        the calibration split is left behind in training. Every class keeps at least one
        row in ``from_split``.

        Parameters
        ----------
        fraction : float, default 0.2
            Share of ``from_split`` moved to ``calibration``.
        seed : int, default 0
            Which rows are chosen; the same seed chooses the same rows.
        from_split : str, default "train"
            The split to carve from.

        Returns
        -------
        LabelledSet
            A new set whose ``from_split`` rows are divided between ``from_split`` and
            ``calibration``; other splits are untouched.
        """
        fraction = float(fraction)
        if not 0.0 < fraction < 1.0:
            raise ValueError(f"fraction must be between 0 and 1, got {fraction!r}")
        have = self.splits
        if "calibration" in have:
            raise DatasetError(
                f"{self._name} already has a calibration split ({have['calibration']} rows)",
                column="split",
            )
        if from_split not in have:
            hint = (
                f"its splits are {', '.join(have)}"
                if have
                else "it has no splits; use with_splits()"
            )
            raise DatasetError(f"{self._name} has no split {from_split!r}; {hint}", column="split")
        frame = self._frame
        pos = (frame["split"] == from_split).to_numpy().nonzero()[0]
        sub = frame.iloc[pos]
        plan = make_splits(
            sub["label"].tolist(),
            {from_split: 1.0 - fraction, "calibration": fraction},
            seed=seed,
            groups=[text_key(t) for t in sub["text"].tolist()],
        )
        calib_pos = pos[plan["calibration"]]
        split_values = frame["split"].tolist()
        for p in calib_pos:
            split_values[p] = "calibration"
        new = frame.copy()
        new["split"] = pd.Series(split_values, dtype=object, index=new.index)
        ids = frame["id"].to_numpy()[calib_pos].tolist()
        step = {
            "op": "calibration_split",
            "from_split": from_split,
            "fraction": fraction,
            "seed": int(seed),
            "stratified_by": "label",
            "grouped_by": "text",
            "counts": {from_split: int(len(pos) - len(calib_pos)), "calibration": len(ids)},
            "calibration_ids": ids,
        }
        return self._derive(new, step)

    def with_splits(
        self, fractions: Mapping[str, float] | None = None, seed: int = 0
    ) -> LabelledSet:
        """Split a set that has no splits, stratified by label, seeded and recorded.

        Parameters
        ----------
        fractions : mapping of str to float, optional
            Split name → share; default ``{"train": 0.6, "calibration": 0.2, "test": 0.2}``.
            Names are those of files: ``train``, ``validation``, ``calibration``, ``test``.
        seed : int, default 0
            Which rows go where; the same seed gives the same split.

        Returns
        -------
        LabelledSet
            A new set; the split plan (seed, fractions, counts) is in :attr:`provenance`.
        """
        have = self.splits
        if have:
            raise DatasetError(
                f"{self._name} already has splits ({', '.join(have)}); "
                "use with_calibration_split() to carve calibration rows out of train",
                column="split",
            )
        fractions = dict(fractions or DEFAULT_FRACTIONS)
        for split_name in fractions:
            if split_name not in SPLIT_ORDER:
                # a file with this split would not load back, and no command selects it
                raise ValueError(
                    f"unknown split {split_name!r} in fractions; {known_splits_hint()}"
                )
        frame = self._frame
        plan: SplitPlan = make_splits(
            frame["label"].tolist(),
            fractions,
            seed=seed,
            groups=[text_key(t) for t in frame["text"].tolist()],
        )
        new = frame.copy()
        new["split"] = pd.Series(list(plan.assignment), dtype=object, index=new.index)
        record = plan.to_dict()
        record.pop("indices")
        step = {"op": "splits", **record, "stratified_by": "label", "grouped_by": "text"}
        return self._derive(new, step)

    # ------------------------------------------------------------------ export

    def scrubbed(self) -> LabelledSet:
        """A copy with credentials removed, as the decision log removes them.

        Texts, facts and annotations go through the scrubbing of
        :func:`hybridroute._redact.scrub`: strings shaped like provider keys (``sk-...``,
        ``AKIA...``, ``ghp_...``, ``Bearer ...``), the values of credential-like
        environment variables (``OPENAI_API_KEY``...) and every value of a fact named like a
        credential (``api_key``, ``token``, ``password``...) become ``"[REDACTED]"``. Ids,
        labels and splits are kept. A fact column whose values were replaced whole becomes
        a ``str`` column.

        The rows change wherever something was removed, so the returned set has a
        different :attr:`fingerprint` (unless nothing was found); the number of cells
        changed is recorded in :attr:`provenance` (``{"op": "scrub", "cells": n}``).
        """
        red = Redactor()
        frame = self._frame.copy()
        fact_types = dict(self._fact_types)
        changed = 0
        texts = frame["text"].tolist()
        clean = [red.scrub_text(t) for t in texts]
        changed += sum(1 for a, b in zip(texts, clean, strict=True) if a != b)
        frame["text"] = pd.Series(clean, dtype=object, index=frame.index)
        annotations = [c for c in ANNOTATION_COLUMNS if c in frame.columns]
        for c in [*self._fact_columns, *annotations]:
            values = [plain_value(v) for v in frame[c].tolist()]
            out = [red.scrub({c: v})[c] for v in values]
            n = sum(1 for a, b in zip(values, out, strict=True) if a != b)
            if not n:
                continue
            changed += n
            whole = any(
                b == REDACTED and not isinstance(a, str) for a, b in zip(values, out, strict=True)
            )
            if whole and c in fact_types:
                fact_types[c] = "str"
            frame[c] = pd.Series(out, dtype=object, index=frame.index)
        prov = copy.deepcopy(self._provenance)
        prov["steps"].append({"op": "scrub", "cells": changed})
        return LabelledSet(
            frame,
            name=self._name,
            source=self._source,
            fact_columns=self._fact_columns,
            fact_types=fact_types,
            oos_label=self._oos_label,
            skipped=self._skipped,
            notes=self._notes,
            provenance=prov,
        )

    def export(self, path: str | Path, *, scrub: bool = False) -> Path:
        """Write the set to ``.csv`` or ``.jsonl``: text, label, split, facts, annotations, id.

        CSV cells hold facts as JSON text (``true``, ``3``, ``["a"]``), empty for ``None``;
        JSONL rows nest the facts under ``"facts"``. Either file loads back with
        :func:`~hybridroute.datasets.load_dataset` to the same fingerprint (CSV: as long as
        text-valued facts do not look like numbers).

        Every string written to a CSV cell (texts, labels, splits, ids, text facts and
        annotations, column names) is escaped against spreadsheet formulas with
        :func:`hybridroute._csv.escape_formula`: one that starts with ``=``, ``+``, ``-``,
        ``@``, a tab or a carriage return (``=cmd|' /C calc'!A0``) gets a leading
        apostrophe, so a spreadsheet shows it as text instead of running it. The CSV loader
        removes the apostrophe again, so the round trip is exact. Facts written as JSON
        numbers (``-5``) are numbers, not formulas, and are not escaped.

        The file is written next to ``path`` and moved into place when complete, so a
        failed export leaves no partial file; an existing ``path`` that is not a regular
        file (a FIFO, a device) is refused.

        Parameters
        ----------
        path : str or path
            The file; its suffix (``.csv`` / ``.jsonl``) chooses the format.
        scrub : bool, default False
            Write :meth:`scrubbed` rows instead: credentials in texts, facts and
            annotations replaced by ``"[REDACTED]"``, as in the decision log. The file then
            loads back to the scrubbed set's fingerprint, which differs from this set's
            wherever something was removed.

        Returns
        -------
        Path
            The file written.
        """
        if scrub:
            return self.scrubbed().export(path)
        return write_set(Path(path), self._frame, self._fact_columns)

    # ------------------------------------------------------------------ dunder

    def __repr__(self) -> str:
        splits = ", ".join(f"{k}={v}" for k, v in self.splits.items()) or "unsplit"
        return (
            f"LabelledSet({self._name!r}, rows={len(self)}, labels={len(self.labels)}, "
            f"{splits}, fingerprint={self.fingerprint[:12]})"
        )
