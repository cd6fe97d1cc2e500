"""Constant-memory evaluation of a labelled set streamed row by row.

:func:`evaluate_stream` scores a router (or a bare classifier) on an iterable of labelled
rows without keeping the rows, the decisions or any per-item array: everything it reports
is accumulated in counters whose size depends on the label set, the number of bins and the
number of bootstrap replicates, never on the number of rows. :class:`LabelledStream` reads
such rows from a JSONL or CSV file (optionally gzip-compressed) one line at a time.

What is exact and what is approximated
--------------------------------------
* **Exact** (equal to :func:`~hybridroute.evaluation.evaluate_router` /
  :func:`~hybridroute.evaluation.evaluate_classifier` on the same rows): counts, accuracy,
  macro-F1, per-class precision / recall / F1 / support, the confusion matrix, coverage,
  selective precision, abstentions by reason code, next-step accuracy, decisions by stage
  and destination, per-rule statistics, and ECE (the same 15 equal-width bins, accumulated
  as per-bin sums).
* **Binned**: the risk-coverage curve and AURC come from a histogram of the confidences
  (``rc_bins`` equal-width bins, items in one bin treated as tied), so AURC is within
  about one bin width of the exact value.
* **Online bootstrap**: confidence intervals use the Poisson bootstrap -- each item gets
  ``n_boot`` seeded Poisson(1) weights, and each replicate keeps weighted counters. The
  intervals are seeded and reproducible (the same seed and row order give the same
  intervals, whatever the batch size) but are not numerically equal to the multinomial
  bootstrap of the in-memory evaluation; they estimate the same sampling spread.
"""

from __future__ import annotations

import csv
import gzip
import io
import math
import os
import time
import zlib
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from .._csv import unescape_formula
from .._safeio import describe_bad_char, env_byte_limit, first_bad_string, open_regular, parse_json
from ..contracts import FactSpec, json_kind, parse_csv_cell
from ..exceptions import DatasetError, FactsError, InputError
from ._evaluate import Evaluation

__all__ = ["LabelledStream", "StreamEvaluation", "evaluate_stream"]

#: Most bytes a :class:`LabelledStream` reads, after decompression (64 GiB). A stream is
#: read in constant memory, so the limit only bounds the time spent on a file (or a gzip
#: stream that expands without end); ``HYBRIDROUTE_MAX_STREAM_BYTES`` or ``max_bytes=``
#: sets another.
MAX_STREAM_BYTES = 64 << 30
#: Environment variable that overrides :data:`MAX_STREAM_BYTES` (a whole number of bytes).
MAX_STREAM_BYTES_ENV = "HYBRIDROUTE_MAX_STREAM_BYTES"
#: The longest line read (the dataset loaders' limit); memory per line is bounded by it.
MAX_LINE_BYTES = 1_000_000

#: Keys of a labelled row that are never facts (the same reserved names as the datasets).
_RESERVED = frozenset(
    {"id", "text", "label", "split", "facts", "next_step", "destination", "evidence", "tags"}
)
_RULE = "rule"


class StreamEvaluation(Evaluation):
    """The result of :func:`evaluate_stream`: headline metrics, no per-item rows."""

    @property
    def rows(self) -> list[dict[str, Any]]:
        """A streamed evaluation keeps no per-item rows (that is the point of it)."""
        raise AttributeError(
            "a streamed evaluation keeps no per-item rows; use evaluate_router / "
            "evaluate_classifier on a set that fits in memory for item-level reports"
        )


# --------------------------------------------------------------------------- reading


class SkippedStreamRow(NamedTuple):
    """A row :class:`LabelledStream` left out (``on_error="skip"``): where, and why."""

    row: int
    column: str | None
    reason: str


class _Bad(Exception):
    def __init__(self, column: str | None, reason: str) -> None:
        super().__init__(reason)
        self.column = column
        self.reason = reason


class LabelledStream:
    """Labelled rows read one at a time from a JSONL or CSV file (``.gz`` accepted).

    Each yielded row is ``{"id", "text", "label", "facts", "next_step", "split"}``. Per row
    it checks what :func:`hybridroute.datasets.load_dataset` checks per row: the text is
    present, a string, not blank and at most ``max_text_chars`` long; no text, label, id,
    split or string fact holds a NUL character; the label is a non-empty string or an
    integer (and in ``label_set`` when one is given); the split, when given, is one of
    ``train``, ``validation``, ``calibration``, ``test`` (or ``val``, ``valid``, ``dev``,
    ``calib``); ``next_step`` is a string or null; the facts (a nested ``facts`` object,
    or the non-reserved top-level keys / CSV columns) have their declared types when
    ``fact_types`` is given. Checks that need the whole set in memory are not made:
    duplicate ids, the same text with two labels, and the inference of an undeclared fact
    column's type from the majority of its rows (declare ``fact_types`` instead; the
    router validates facts against its schema anyway).

    Reading is bounded: the path must be a regular file (a FIFO or ``/dev/zero`` is refused
    before a byte is read), no line may be longer than :data:`MAX_LINE_BYTES`, and at most
    ``max_bytes`` bytes are read (after decompression, so a small ``.gz`` cannot expand
    without end). Each JSONL line is parsed with :func:`hybridroute._safeio.parse_json`
    (no duplicate keys, nesting deeper than 64 levels, integers of more than 64 digits,
    ``NaN``); CSV cells are read back from the spreadsheet-formula escaping of
    :func:`hybridroute._csv.escape_formula`, as the loaders read them.

    Parameters
    ----------
    path : str or path-like
        A ``.jsonl`` / ``.json`` / ``.csv`` file, optionally ending in ``.gz``.
    fact_types : mapping of str to str, optional
        Declared fact types (``{"amount": "number", ...}``); values are checked and
        canonicalised, undeclared facts are passed through as read.
    label_set : iterable of str, optional
        Labels the rows may carry.
    split : str, optional
        Yield only the rows of this split.
    max_text_chars : int
        The longest text accepted.
    on_error : {"raise", "skip"}
        Raise :class:`~hybridroute.exceptions.DatasetError` naming file, row and column at
        the first bad row, or leave bad rows out (counted in :attr:`n_skipped`, the first
        ``keep_skipped`` listed in :attr:`skipped`). Problems with the file as a whole
        (not a regular file, over ``max_bytes``, a broken gzip stream, an unreadable CSV
        row) always raise.
    max_bytes : int, optional
        Most bytes read; default :data:`MAX_STREAM_BYTES` (64 GiB), or the
        ``HYBRIDROUTE_MAX_STREAM_BYTES`` environment variable when set.

    Notes
    -----
    Row numbers are those of the loaders: in JSONL the line number (from 1, blank lines
    counted), in CSV the data row (the header is row 0). Iterating twice reads the file
    twice.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        fact_types: Mapping[str, str] | None = None,
        label_set: Iterable[str] | None = None,
        split: str | None = None,
        max_text_chars: int = 10_000,
        on_error: str = "raise",
        keep_skipped: int = 100,
        max_bytes: int | None = None,
    ) -> None:
        if on_error not in ("raise", "skip"):
            raise ValueError(f"on_error must be 'raise' or 'skip', not {on_error!r}")
        self.path = Path(path)
        name = self.path.name.lower()
        self.gzipped = name.endswith(".gz")
        base = name[:-3] if self.gzipped else name
        if base.endswith((".jsonl", ".json", ".ndjson")):
            self.kind = "json"
        elif base.endswith(".csv"):
            self.kind = "csv"
        else:
            raise DatasetError(
                "cannot tell the format from the file name (use .jsonl or .csv, optionally .gz)",
                path=str(self.path),
            )
        self.specs = {
            str(k): FactSpec(name=str(k), type=str(t), nullable=True)
            for k, t in (fact_types or {}).items()
        }
        self.label_set = None if label_set is None else frozenset(str(x) for x in label_set)
        if split is not None:
            canonical = _normalise_split(split)
            if canonical not in _SPLITS:
                raise ValueError(f"unknown split {split!r}; {_SPLITS_HINT}")
            split = canonical
        self.split = split
        self.max_text_chars = int(max_text_chars)
        self.on_error = on_error
        self.keep_skipped = int(keep_skipped)
        if max_bytes is None:
            max_bytes = stream_byte_limit()
        elif isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 1:
            raise ValueError(f"max_bytes must be a positive integer, got {max_bytes!r}")
        self.max_bytes = max_bytes
        self.n_skipped = 0
        self.skipped: list[SkippedStreamRow] = []

    def __iter__(self) -> Iterator[dict[str, Any]]:
        self.n_skipped = 0
        self.skipped = []
        records = self._json_records() if self.kind == "json" else self._csv_records()
        for row, rec in records:
            try:
                out = self._check(rec)
            except _Bad as bad:
                self._bad(row, bad.column, bad.reason)
                continue
            if self.split is None or out["split"] == self.split:
                yield out

    def _bad(self, row: int, column: str | None, reason: str) -> None:
        if self.on_error == "raise":
            raise DatasetError(reason, path=str(self.path), row=row, column=column)
        self.n_skipped += 1
        if len(self.skipped) < self.keep_skipped:
            self.skipped.append(SkippedStreamRow(row, column, reason))

    # ------------------------------------------------------------------ bounded reading

    def _fail(self, reason: str, row: int | None = None) -> DatasetError:
        return DatasetError(reason, path=str(self.path), row=row)

    def _lines(self) -> Iterator[tuple[int, bytes | None]]:
        """``(line number, raw line with its ending)``; ``None`` for a line over the limit.

        Memory stays bounded: a line is read at most :data:`MAX_LINE_BYTES` + 2 bytes at a
        time (the rest of an overlong line is read and dropped in such pieces), and the
        total read is checked against :attr:`max_bytes` as it grows.
        """
        try:
            fd, _ = open_regular(self.path, "labelled file")
        except InputError as exc:
            raise self._fail(exc.reason) from None
        limit = self.max_bytes
        with os.fdopen(fd, "rb") as raw:
            fh: gzip.GzipFile | io.BufferedReader = (
                gzip.GzipFile(fileobj=raw, mode="rb") if self.gzipped else raw
            )
            with fh:
                total = 0
                lineno = 0
                while True:
                    chunk = self._read(fh, MAX_LINE_BYTES + 2)
                    if not chunk:
                        return
                    lineno += 1
                    total += len(chunk)
                    overlong = False
                    while not chunk.endswith(b"\n") and len(chunk) > MAX_LINE_BYTES + 1:
                        overlong = True  # drop the rest of the line, piece by piece
                        chunk = self._read(fh, MAX_LINE_BYTES + 2)
                        total += len(chunk)
                        if total > limit or not chunk:
                            break
                    if total > limit:
                        raise self._fail(self._too_large(limit))
                    if not overlong:
                        body = chunk.removesuffix(b"\n").removesuffix(b"\r")
                        overlong = len(body) > MAX_LINE_BYTES
                    yield lineno, None if overlong else chunk

    def _read(self, fh: gzip.GzipFile | io.BufferedReader, n: int) -> bytes:
        try:
            return fh.readline(n)
        except (OSError, EOFError, zlib.error) as exc:
            raise self._fail(f"cannot read the gzip stream ({exc})") from None

    def _too_large(self, limit: int) -> str:
        what = "decompressed, " if self.gzipped else ""
        return (
            f"the file is larger than the limit of {limit:,} bytes ({what}set "
            f"{MAX_STREAM_BYTES_ENV} or max_bytes= to raise it)"
        )

    def _decode(self, lineno: int, chunk: bytes) -> str:
        if lineno == 1 and chunk.startswith(b"\xef\xbb\xbf"):
            chunk = chunk[3:]
        try:
            return chunk.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise _Bad(None, f"not valid UTF-8 (byte {exc.start} of line {lineno})") from None

    def _json_records(self) -> Iterator[tuple[int, dict[str, Any]]]:
        for lineno, chunk in self._lines():
            if chunk is None:
                self._bad(lineno, None, f"the line is longer than {MAX_LINE_BYTES:,} bytes")
                continue
            try:
                line = self._decode(lineno, chunk)
            except _Bad as bad:
                self._bad(lineno, None, bad.reason)
                continue
            if not line.strip():
                continue
            try:
                rec = parse_json(line, source=str(self.path), line=lineno)
            except InputError as exc:
                self._bad(lineno, None, exc.reason)
                continue
            if not isinstance(rec, dict):
                self._bad(lineno, None, f"expected a JSON object, got {json_kind(rec)}")
                continue
            yield lineno, rec

    def _text_lines(self) -> Iterator[str]:
        for lineno, chunk in self._lines():
            if chunk is None:
                raise self._fail(f"line {lineno} is longer than {MAX_LINE_BYTES:,} bytes")
            try:
                yield self._decode(lineno, chunk)
            except _Bad as bad:
                raise self._fail(bad.reason) from None

    def _csv_records(self) -> Iterator[tuple[int, dict[str, Any]]]:
        # csv reads quoted fields across lines from the line iterator; a field is capped by
        # csv.field_size_limit (131,072 characters by default), so an unclosed quote
        # cannot gather the whole file
        reader = csv.reader(self._text_lines())
        row = 0

        def next_cells() -> list[str] | None:
            try:
                return next(reader)
            except StopIteration:
                return None
            except csv.Error as exc:
                raise self._fail(f"unreadable CSV row ({exc})", row=row + 1) from None

        header = next_cells()
        if header is None:
            raise DatasetError("the file is empty", path=str(self.path))
        header = [unescape_formula(h.strip()) for h in header]
        for col in ("text", "label"):
            if col not in header:
                raise DatasetError(
                    f"missing column: the header has {', '.join(map(repr, header))}",
                    path=str(self.path),
                    row=0,
                    column=col,
                )
        while True:
            cells = next_cells()
            if cells is None:
                return
            if not cells or (len(cells) == 1 and not cells[0].strip() and len(header) > 1):
                continue  # a blank line: not a row (as in the loaders)
            row += 1
            if len(cells) != len(header):
                self._bad(row, None, f"{len(cells)} cells for {len(header)} columns")
                continue
            rec: dict[str, Any] = {}
            facts: dict[str, Any] = {}
            try:
                for col, cell in zip(header, cells, strict=True):
                    if cell[:1] == "'":
                        cell = unescape_formula(cell)
                    if col in _RESERVED:
                        rec[col] = cell if cell.strip() else None
                    else:
                        spec = self.specs.get(col)
                        if spec is not None and spec.type == "str":
                            facts[col] = cell if cell.strip() else None
                        else:
                            facts[col] = _csv_value(col, cell)
            except _Bad as bad:
                self._bad(row, bad.column, bad.reason)
                continue
            rec["facts"] = facts
            yield row, rec

    # ------------------------------------------------------------------ row checks

    def _check(self, rec: Mapping[str, Any]) -> dict[str, Any]:
        text = rec.get("text")
        if text is None:
            raise _Bad("text", "no text: the field is missing")
        if not isinstance(text, str):
            raise _Bad("text", f"expected a string, got {json_kind(text)}")
        _check_chars("text", "the text", text)
        if not text.strip():
            raise _Bad("text", "the text is empty or whitespace only")
        if len(text) > self.max_text_chars:
            raise _Bad(
                "text", f"the text is {len(text):,} characters long (limit {self.max_text_chars:,})"
            )
        label = rec.get("label")
        if label is None:
            raise _Bad("label", "missing label")
        if isinstance(label, bool) or not isinstance(label, (str, int)):
            raise _Bad("label", f"expected a string label, got {json_kind(label)}")
        if isinstance(label, str):
            _check_chars("label", "the label", label)
        label = str(label).strip()
        if not label:
            raise _Bad("label", "missing label (the cell is empty)")
        if self.label_set is not None and label not in self.label_set:
            raise _Bad("label", f"label {label!r} is not in the declared label set")
        next_step = rec.get("next_step")
        if next_step is not None:
            if not isinstance(next_step, str):
                raise _Bad("next_step", f"expected a string or null, got {json_kind(next_step)}")
            _check_chars("next_step", "the next step", next_step)
            next_step = next_step.strip() or None
        split = rec.get("split")
        if split is not None:
            if not isinstance(split, str):
                raise _Bad("split", f"expected a split name, got {json_kind(split)}")
            _check_chars("split", "the split", split)
            canonical = _normalise_split(split)
            if canonical and canonical not in _SPLITS:
                raise _Bad("split", f"unknown split {split.strip()[:40]!r}; {_SPLITS_HINT}")
            split = canonical or None
        facts = self._facts(rec)
        rid = rec.get("id")
        if isinstance(rid, str):
            _check_chars("id", "the id", rid)
        return {
            "id": None if rid is None else str(rid),
            "text": text,
            "label": label,
            "facts": facts,
            "next_step": next_step,
            "split": split,
        }

    def _facts(self, rec: Mapping[str, Any]) -> dict[str, Any]:
        nested = rec.get("facts")
        facts: dict[str, Any] = {}
        if nested is not None:
            if not isinstance(nested, dict):
                raise _Bad("facts", f"expected a JSON object of facts, got {json_kind(nested)}")
            facts.update(nested)
        if self.kind == "json":
            for k, v in rec.items():
                if k in _RESERVED:
                    continue
                if k in facts:
                    raise _Bad(k, "given both at the top level and inside 'facts'")
                facts[k] = v
        for k, v in facts.items():
            _check_chars(k, "the fact name", k)
            _check_deep(k, "the value", v)
            if isinstance(v, str) and not v.strip():
                facts[k] = None  # an empty fact is an absent one, as in the loaders
        for k, spec in self.specs.items():
            if k in facts:
                try:
                    value = spec.check(facts[k])
                except FactsError:
                    raise _Bad(
                        k, f"expected {spec.type}, got {json_kind(facts[k])} {facts[k]!r}"[:200]
                    ) from None
                facts[k] = list(value) if isinstance(value, tuple) else value
        return facts


# The split names of labelled sets (as hybridroute.datasets reads them; evaluation does not
# import datasets, so they are repeated here and a test pins them equal).
_SPLITS = ("train", "validation", "calibration", "test")
_SPLIT_ALIASES = {
    "val": "validation",
    "valid": "validation",
    "dev": "validation",
    "calib": "calibration",
}
_SPLITS_HINT = f"the known splits are {', '.join(_SPLITS)} (or {', '.join(_SPLIT_ALIASES)})"


def _normalise_split(name: str) -> str:
    key = name.strip().lower()
    return _SPLIT_ALIASES.get(key, key)


def _check_chars(column: str | None, what: str, value: str) -> None:
    problem = describe_bad_char(value)
    if problem is not None:
        raise _Bad(column, f"{what} {problem}")


def _check_deep(column: str | None, what: str, value: Any) -> None:
    found = first_bad_string(value)
    if found is not None:
        _check_chars(column, f"{what} (a key)" if found[1] else what, found[0])


def _csv_value(column: str, cell: str) -> Any:
    """A CSV fact cell's value (:func:`~hybridroute.contracts.parse_csv_cell`), refusing the
    cells it reads unsafely, as the dataset loaders do."""
    try:
        return parse_csv_cell(cell)[1]
    except InputError as exc:
        raise _Bad(column, exc.reason) from None


def stream_byte_limit() -> int:
    """The byte limit of a :class:`LabelledStream`: ``HYBRIDROUTE_MAX_STREAM_BYTES``, else
    :data:`MAX_STREAM_BYTES`.

    Raises
    ------
    DatasetError
        If the variable is not a positive whole number of bytes.
    """
    try:
        return env_byte_limit(MAX_STREAM_BYTES_ENV, MAX_STREAM_BYTES)
    except InputError as exc:
        raise DatasetError(exc.reason) from None


# --------------------------------------------------------------------------- accumulating


class _PoissonBootstrap:
    """Per-replicate weighted counters fed with seeded Poisson(1) weights per item."""

    def __init__(self, n_boot: int, seed: int) -> None:
        self.n_boot = int(n_boot)
        self.rng = np.random.default_rng(seed)

    def weights(self, m: int) -> np.ndarray:
        # Drawn row after row from one generator, so the weights of item i do not depend
        # on how the stream was cut into batches.
        return self.rng.poisson(1.0, size=(m, self.n_boot)).astype(np.float64)


class _Labels:
    """A growing label index (the model's classes first, then unseen gold labels)."""

    def __init__(self, initial: Sequence[str]) -> None:
        self.names: list[str] = []
        self.index: dict[str, int] = {}
        for x in initial:
            self.add(x)

    def add(self, label: str) -> int:
        i = self.index.get(label)
        if i is None:
            i = self.index[label] = len(self.names)
            self.names.append(label)
        return i


class _Intent:
    """Intent metrics over the items a classifier answered, in constant memory."""

    def __init__(self, labels: _Labels, n_boot: int, n_bins: int, rc_bins: int) -> None:
        self.labels = labels
        self.n = 0
        self.n_correct = 0
        self.confusion: Counter[tuple[int, int]] = Counter()
        self.gold = np.zeros(len(labels.names), dtype=np.int64)
        self.n_bins = n_bins
        self.ece_count = np.zeros(n_bins, dtype=np.int64)
        self.ece_conf = np.zeros(n_bins)
        self.ece_correct = np.zeros(n_bins)
        self.rc_bins = rc_bins
        self.rc_count = np.zeros(rc_bins, dtype=np.int64)
        self.rc_errors = np.zeros(rc_bins, dtype=np.int64)
        self.n_answered = 0
        # bootstrap replicate counters
        k = len(labels.names)
        self.b_n = np.zeros(n_boot)
        self.b_correct = np.zeros(n_boot)
        self.b_tp = np.zeros((n_boot, k))
        self.b_gold = np.zeros((n_boot, k))
        self.b_pred = np.zeros((n_boot, k))

    def _grow(self) -> None:
        k = len(self.labels.names)
        extra = k - len(self.gold)
        if extra > 0:
            self.gold = np.pad(self.gold, (0, extra))
            self.b_tp = np.pad(self.b_tp, ((0, 0), (0, extra)))
            self.b_gold = np.pad(self.b_gold, ((0, 0), (0, extra)))
            self.b_pred = np.pad(self.b_pred, ((0, 0), (0, extra)))

    def add(
        self,
        gold: Sequence[str],
        pred: Sequence[str | None],
        conf: np.ndarray,
        weights: np.ndarray,
    ) -> None:
        m = len(gold)
        if m == 0:
            return
        t = np.array([self.labels.add(g) for g in gold], dtype=np.int64)
        # a prediction outside the label set, or an abstention (None), never matches
        p = np.array(
            [-1 if x is None else self.labels.index.get(str(x), -1) for x in pred], dtype=np.int64
        )
        self._grow()
        k = len(self.labels.names)
        correct = t == p
        self.n += m
        self.n_correct += int(correct.sum())
        self.gold += np.bincount(t, minlength=k)
        keep = p >= 0
        self.confusion.update(zip(t[keep].tolist(), p[keep].tolist(), strict=True))
        answered = ~np.isnan(conf)
        if answered.any():
            s = conf[answered]
            c = correct[answered]
            self.n_answered += int(answered.sum())
            idx = np.clip(np.floor(s * self.n_bins).astype(int), 0, self.n_bins - 1)
            self.ece_count += np.bincount(idx, minlength=self.n_bins)
            self.ece_conf += np.bincount(idx, weights=s, minlength=self.n_bins)
            self.ece_correct += np.bincount(idx, weights=c.astype(float), minlength=self.n_bins)
            ridx = np.clip(np.floor(s * self.rc_bins).astype(int), 0, self.rc_bins - 1)
            self.rc_count += np.bincount(ridx, minlength=self.rc_bins)
            self.rc_errors += np.bincount(ridx[~c], minlength=self.rc_bins)
        # replicates: W is (m, B)
        wt = weights.T
        self.b_n += weights.sum(axis=0)
        self.b_correct += wt @ correct.astype(float)
        onehot_t = np.zeros((m, k))
        onehot_t[np.arange(m), t] = 1.0
        self.b_gold += wt @ onehot_t
        self.b_tp += wt @ (onehot_t * correct[:, None])
        onehot_p = np.zeros((m, k))
        onehot_p[np.flatnonzero(keep), p[keep]] = 1.0
        self.b_pred += wt @ onehot_p

    # -- results
    def _f1(self, tp: np.ndarray, pred: np.ndarray, gold: np.ndarray) -> np.ndarray:
        denom = pred + gold
        f1 = np.divide(2 * tp, denom, out=np.zeros_like(tp, dtype=float), where=denom > 0)
        present = gold > 0
        if f1.ndim == 1:
            return np.array(f1[present].mean() if present.any() else 0.0)
        out = np.zeros(f1.shape[0])
        counts = present.sum(axis=1)
        sums = np.where(present, f1, 0.0).sum(axis=1)
        np.divide(sums, counts, out=out, where=counts > 0)
        return out

    def results(self, level: float, label_order: Sequence[str]) -> dict[str, Any]:
        self._grow()
        names = self.labels.names
        k = len(names)
        cm = np.zeros((k, k), dtype=np.int64)
        for (i, j), c in self.confusion.items():
            cm[i, j] = c
        tp = np.diag(cm).astype(float)
        pred = cm.sum(axis=0).astype(float)
        gold = self.gold.astype(float)
        out: dict[str, Any] = {"n": self.n}
        out["accuracy"] = _r(self.n_correct / self.n) if self.n else None
        out["accuracy_ci"] = _interval(self.b_correct, self.b_n, level)
        out["macro_f1"] = _r(float(self._f1(tp, pred, gold))) if self.n else None
        boot_f1 = self._f1(self.b_tp, self.b_pred, self.b_gold)
        out["macro_f1_ci"] = _quantiles(boot_f1[self.b_n > 0], level)
        nz = self.ece_count > 0
        if self.n_answered:
            acc = self.ece_correct[nz] / self.ece_count[nz]
            mean_conf = self.ece_conf[nz] / self.ece_count[nz]
            out["ece"] = _r(
                float(np.sum(self.ece_count[nz] * np.abs(acc - mean_conf))) / self.n_answered
            )
            out["aurc"], out["risk_coverage"] = self._risk_coverage()
        else:
            out["ece"] = None
            out["aurc"] = None
            out["risk_coverage"] = []
        out["ece_bins"] = self.n_bins
        out["aurc_binned"] = {"bins": self.rc_bins, "note": "items in one bin count as tied"}
        # per-class report and confusion, over the same label order as the in-memory path
        order = [self.labels.index[x] for x in label_order if x in self.labels.index]
        per_class: dict[str, dict[str, Any]] = {}
        for i in order:
            t_i = int(cm[i, i])
            support = int(self.gold[i])
            predicted = int(cm[order, i].sum())
            precision = t_i / predicted if predicted else 0.0
            recall = t_i / support if support else 0.0
            f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
            row = cm[i, order].copy()
            row[order.index(i)] = 0
            top = np.argsort(-row, kind="stable")[:3]
            per_class[names[i]] = {
                "precision": round(precision, 6),
                "recall": round(recall, 6),
                "f1": round(f1, 6),
                "support": support,
                "confused_with": [
                    {"label": names[order[j]], "count": int(row[j])} for j in top if row[j] > 0
                ],
            }
        out["per_class"] = per_class
        out["confusion"] = {
            "labels": [names[i] for i in order],
            "matrix": cm[np.ix_(order, order)].tolist(),
        }
        return out

    def _risk_coverage(self) -> tuple[float | None, list[dict[str, float]]]:
        # most confident bins first; each bin is accepted as one tied block
        count = self.rc_count[::-1]
        errors = self.rc_errors[::-1]
        nz = count > 0
        accepted = np.cumsum(count)[nz]
        errs = np.cumsum(errors)[nz]
        sizes = count[nz]
        risk = errs / accepted
        aurc = float(np.sum(sizes * risk) / self.n_answered)
        edges = (self.rc_bins - np.arange(self.rc_bins))[nz] - 1  # lower edge index per bin
        curve = []
        step = max(1, len(accepted) // 20)
        for j in [*range(0, len(accepted), step), len(accepted) - 1]:
            curve.append(
                {
                    "threshold": round(float(edges[j]) / self.rc_bins, 6),
                    "coverage": round(float(accepted[j]) / self.n_answered, 6),
                    "risk": round(float(risk[j]), 6),
                }
            )
        unique: dict[float, dict[str, float]] = {}
        for point in curve:
            unique.setdefault(point["threshold"], point)
        return _r(aurc), list(unique.values())


def _r(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else round(float(x), 6)


def _quantiles(values: np.ndarray, level: float) -> list[float]:
    if len(values) == 0:
        return [math.nan, math.nan]
    alpha = (1.0 - level) / 2.0
    lo, hi = np.quantile(values, [alpha, 1.0 - alpha])
    return [round(float(lo), 6), round(float(hi), 6)]


def _interval(num: np.ndarray, den: np.ndarray, level: float) -> list[float]:
    ok = den > 0
    return _quantiles(num[ok] / den[ok], level)


# --------------------------------------------------------------------------- public


def evaluate_stream(
    model: Any,
    rows: Iterable[Mapping[str, Any]],
    *,
    policy: Any = None,
    batch_size: int = 1024,
    n_boot: int = 200,
    seed: int = 0,
    n_bins: int = 15,
    rc_bins: int = 10_000,
    level: float = 0.95,
) -> StreamEvaluation:
    """Evaluate a router or a classifier on labelled rows, in constant memory.

    Parameters
    ----------
    model : HybridRouter or IntentClassifier
        A router (anything with ``route_many`` and ``rules``) is scored like
        :func:`evaluate_router`; a fitted classifier (``rank`` and ``classes_``) like
        :func:`evaluate_classifier`.
    rows : iterable of mappings
        Each with ``text`` and ``label``, and optionally ``facts`` (a mapping) and
        ``next_step``; e.g. a :class:`LabelledStream`. Only ``batch_size`` rows are held
        at a time.
    policy : hybridroute.calibration.Policy, optional
        For a classifier: score coverage and selective precision under this fitted policy.
    batch_size : int
        Rows routed / classified per call.
    n_boot : int
        Poisson-bootstrap replicates for the confidence intervals.
    seed : int
        Seeds the bootstrap weights.
    n_bins : int
        Equal-width bins of the ECE (15, as in the in-memory evaluation).
    rc_bins : int
        Equal-width confidence bins of the risk-coverage curve and AURC.
    level : float
        Confidence level of the intervals.

    Returns
    -------
    StreamEvaluation
        The same headline keys as the in-memory evaluation (``accuracy``,
        ``accuracy_ci``, ``macro_f1``, ``ece``, ``aurc``, ``per_class``, ``confusion``,
        ``coverage``, ``next_step_accuracy``, ``decisions_by_stage``, ``rules``...), plus
        ``bootstrap`` and ``skipped_rows`` (when ``rows`` reports them); no ``items``.
    """
    if int(batch_size) < 1:
        raise ValueError("batch_size must be at least 1")
    if int(n_boot) < 1:
        raise ValueError("n_boot must be at least 1")
    if not 0 < level < 1:
        raise ValueError("level must be between 0 and 1")
    is_router = callable(getattr(model, "route_many", None)) and hasattr(model, "rules")
    if is_router and policy is not None:
        raise ValueError("a router carries its own policy; give policy= only with a classifier")
    classes = [str(c) for c in (model.classes if is_router else model.classes_)]
    labels = _Labels(classes)
    boot = _PoissonBootstrap(n_boot, seed)
    intent = _Intent(labels, n_boot, n_bins, rc_bins)
    gold_seen: set[str] = set()
    acc: _RouterCounts | _ClassifierCounts
    step: Callable[[Sequence[Mapping[str, Any]]], None]
    if is_router:
        router_counts = acc = _RouterCounts(n_boot)
        fact_names = set(model.rules.schema.names)

        def step(batch: Sequence[Mapping[str, Any]]) -> None:
            _route_batch(model, batch, boot, intent, router_counts, gold_seen, fact_names)

    else:
        clf_counts = acc = _ClassifierCounts()

        def step(batch: Sequence[Mapping[str, Any]]) -> None:
            _classify_batch(model, batch, boot, intent, clf_counts, gold_seen, policy)

    t0 = time.perf_counter()
    batch: list[Mapping[str, Any]] = []
    for row in rows:
        batch.append(row)
        if len(batch) >= batch_size:
            step(batch)
            batch = []
    if batch:
        step(batch)
    seconds = time.perf_counter() - t0

    label_order = sorted(set(classes) | gold_seen)
    result: dict[str, Any]
    if intent.n:
        result = intent.results(level, label_order)
    else:
        result = {"n": 0, "accuracy": None, "macro_f1": None}
    result.update(acc.results(intent, level))
    n = acc.n
    result["n"] = n
    result["latency"] = {
        "seconds": round(seconds, 4),
        "per_item_ms": round(seconds / max(n, 1) * 1000.0, 4),
        "items_per_s": round(n / seconds, 2) if seconds > 0 else None,
    }
    result["bootstrap"] = {
        "method": "poisson",
        "n_boot": int(n_boot),
        "seed": int(seed),
        "level": level,
    }
    skipped = getattr(rows, "n_skipped", None)
    if skipped is not None:
        result["skipped_rows"] = int(skipped)
    result["streamed"] = True
    if is_router:
        result["mode"] = "router"
        result["router"] = model.name
        result["router_version"] = model.version
    else:
        result["mode"] = "classifier"
        result["classifier_kind"] = getattr(model, "kind", type(model).__name__)
    return StreamEvaluation(result)


def _text_and_gold(row: Mapping[str, Any], pos: int) -> tuple[str, str]:
    try:
        text, gold = row["text"], row["label"]
    except KeyError as exc:
        raise DatasetError(f"row {pos}: missing {exc.args[0]!r}", column=str(exc.args[0])) from None
    return text, str(gold)


class _ClassifierCounts:
    def __init__(self) -> None:
        self.n = 0
        self.abstentions: Counter[str] = Counter()
        self.policy_seen = False
        self.n_auto = 0
        self.n_auto_correct = 0
        self.deferred: Counter[str] = Counter()

    def results(self, intent: _Intent, level: float) -> dict[str, Any]:
        n = self.n
        out: dict[str, Any] = {
            "abstention_rate": _r(sum(self.abstentions.values()) / n) if n else None,
            "abstentions_by_reason": dict(sorted(self.abstentions.items())),
        }
        if self.policy_seen:
            out["coverage"] = _r(self.n_auto / n) if n else None
            out["selective_precision"] = (
                _r(self.n_auto_correct / self.n_auto) if self.n_auto else None
            )
            out["n_auto_routed"] = self.n_auto
            out["deferred_by_reason"] = dict(sorted((str(k), v) for k, v in self.deferred.items()))
        return out


def _classify_batch(
    clf: Any,
    batch: Sequence[Mapping[str, Any]],
    boot: _PoissonBootstrap,
    intent: _Intent,
    acc: _ClassifierCounts,
    gold_seen: set[str],
    policy: Any,
) -> None:
    pairs = [_text_and_gold(r, acc.n + i + 1) for i, r in enumerate(batch)]
    texts = [p[0] for p in pairs]
    gold = [p[1] for p in pairs]
    gold_seen.update(gold)
    ranked = clf.rank(texts, k=len(clf.classes_))
    pred = [r.top for r in ranked]
    if policy is not None:
        outcomes = [policy.apply(r) for r in ranked]
        conf = np.array(
            [np.nan if o.confidence is None else o.confidence for o in outcomes], dtype=float
        )
        acc.policy_seen = True
        for g, r, o in zip(gold, ranked, outcomes, strict=True):
            if o.action == "auto_route":
                acc.n_auto += 1
                acc.n_auto_correct += int(r.top == g)
            else:
                acc.deferred[str(r.abstain_reason or o.reason_code)] += 1
    else:
        conf = np.array(
            [np.nan if r.confidence is None else r.confidence for r in ranked], dtype=float
        )
    for r in ranked:
        if r.abstain_reason:
            acc.abstentions[r.abstain_reason] += 1
    intent.add(gold, pred, conf, boot.weights(len(batch)))
    acc.n += len(batch)


class _RouterCounts:
    def __init__(self, n_boot: int) -> None:
        self.n = 0
        self.by_stage: Counter[str] = Counter()
        self.by_destination: Counter[str] = Counter()
        self.deferred: Counter[str] = Counter()
        self.rules: dict[str, dict[str, int]] = {}
        self.n_auto = 0
        self.n_auto_correct = 0
        self.ns_n = 0
        self.ns_ok = 0
        self.b_ns_n = np.zeros(n_boot)
        self.b_ns_ok = np.zeros(n_boot)

    def results(self, intent: _Intent, level: float) -> dict[str, Any]:
        n = self.n
        out: dict[str, Any] = {}
        m = intent.n
        out["n_classified"] = m
        if m:
            out["coverage"] = _r(self.n_auto / m)
            out["selective_precision"] = (
                _r(self.n_auto_correct / self.n_auto) if self.n_auto else None
            )
            out["n_auto_routed"] = self.n_auto
        else:
            out["coverage"] = None
            out["selective_precision"] = None
        if self.ns_n:
            out["next_step_accuracy"] = _r(self.ns_ok / self.ns_n)
            out["next_step_accuracy_ci"] = _interval(self.b_ns_ok, self.b_ns_n, level)
            out["n_next_step"] = self.ns_n
        else:
            out["next_step_accuracy"] = None
        out["decisions_by_stage"] = dict(sorted(self.by_stage.items()))
        out["decisions_by_destination"] = dict(sorted(self.by_destination.items()))
        out["abstention_rate"] = _r(sum(self.deferred.values()) / n) if n else None
        out["abstentions_by_reason"] = dict(sorted(self.deferred.items()))
        rules = {}
        for key, st in sorted(self.rules.items()):
            rules[key] = {
                **st,
                "match_rate": _r(st["matches_gold"] / st["scored"]) if st["scored"] else None,
            }
        out["rules"] = rules
        return out


def _route_batch(
    router: Any,
    batch: Sequence[Mapping[str, Any]],
    boot: _PoissonBootstrap,
    intent: _Intent,
    acc: _RouterCounts,
    gold_seen: set[str],
    fact_names: set[str],
) -> None:
    items = []
    gold = []
    next_steps = []
    for i, row in enumerate(batch):
        text, g = _text_and_gold(row, acc.n + i + 1)
        facts = row.get("facts") or {}
        items.append(
            {
                "facts": {k: v for k, v in facts.items() if v is not None and k in fact_names},
                "text": text,
            }
        )
        gold.append(g)
        ns = row.get("next_step")
        next_steps.append(ns if isinstance(ns, str) and ns else None)
    decisions = router.route_many(items)
    weights = boot.weights(len(batch))
    model_idx = []
    ns_ok = np.zeros(len(batch))
    ns_has = np.zeros(len(batch))
    for i, d in enumerate(decisions):
        stage = d.stage
        acc.by_stage[stage] += 1
        acc.by_destination[d.selected_destination] += 1
        gold_next = next_steps[i]
        ns_correct = (d.selected_destination == gold_next) if gold_next else None
        if ns_correct is not None:
            acc.ns_n += 1
            acc.ns_ok += int(ns_correct)
            ns_has[i] = 1.0
            ns_ok[i] = float(ns_correct)
        if stage == _RULE:
            key = d.rule_id or "(default exit)"
            st = acc.rules.setdefault(key, {"fires": 0, "matches_gold": 0, "scored": 0})
            st["fires"] += 1
            if ns_correct is not None:
                st["scored"] += 1
                st["matches_gold"] += int(ns_correct)
            continue
        model_idx.append(i)
        if stage in ("policy", "fallback"):
            acc.deferred[d.reason_code] += 1
        if stage == "model" or d.reason_code == "evidence_complete":
            acc.n_auto += 1
            acc.n_auto_correct += int(d.label == gold[i])
    wt = weights.T
    acc.b_ns_n += wt @ ns_has
    acc.b_ns_ok += wt @ ns_ok
    gold_seen.update(gold)  # every gold label, as in evaluate_router's label list
    for g in gold:  # rule-decided rows count too: per-class rows exist for their labels
        intent.labels.add(g)
    if model_idx:
        intent.add(
            [gold[i] for i in model_idx],
            [decisions[i].label for i in model_idx],
            np.array(
                [
                    np.nan if decisions[i].confidence is None else decisions[i].confidence
                    for i in model_idx
                ],
                dtype=float,
            ),
            weights[model_idx],
        )
    acc.n += len(batch)
