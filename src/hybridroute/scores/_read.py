"""Reading a scores file into a checked :class:`ScoresTable` (the format is in the package
docstring). Every refusal is a :class:`~hybridroute.exceptions.DatasetError` naming the
file, the row and the column; the command line prints it as one line and exits 2."""

from __future__ import annotations

import hashlib
import math
import os
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .._integrity import is_sha256_hex
from .._safeio import check_text, env_byte_limit, read_bytes
from ..classifiers.adapter import PROBA_SUM_TOLERANCE
from ..exceptions import DatasetError, InputError
from ._parse import RawScores, parse_csv, parse_jsonl, parse_parquet, suffix_format
from ._table import PER_CLASS, TOP_LABEL, ScoresTable

__all__ = [
    "MAX_SCORES_BYTES",
    "MAX_SCORES_BYTES_ENV",
    "SCORES_FORMAT",
    "SCORES_FORMAT_VERSION",
    "read_scores",
]

#: The ``format`` of a scores file's header.
SCORES_FORMAT = "hybridroute.scores"
#: The header ``version`` this library reads and writes.
SCORES_FORMAT_VERSION = 1
#: The largest scores file read (1 GiB, counted while reading; a Parquet file's data is
#: also refused when it would decompress to more).
MAX_SCORES_BYTES = 1 << 30
#: Environment variable that overrides :data:`MAX_SCORES_BYTES` (a whole number of bytes).
MAX_SCORES_BYTES_ENV = "HYBRIDROUTE_MAX_SCORES_BYTES"

SCORE_PREFIX = "score:"
_PLAIN = ("label", "id", "text")
_TOP = ("predicted", "confidence")
_HEADER_KEYS = ("format", "version", "classes", "model_fingerprint")
_NUMBER_RE = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")


class _Rows:
    """Error helper bound to one file."""

    def __init__(self, path: str) -> None:
        self.path = path

    def error(
        self, message: str, row: int | None = None, column: str | None = None
    ) -> DatasetError:
        return DatasetError(message, path=self.path, row=row, column=column)

    def text(self, value: Any, row: int, column: str, *, empty_ok: bool = False) -> str:
        if not isinstance(value, str):
            raise self.error(f"must be a string, got {_kind(value)}", row, column)
        if not empty_ok and not value.strip():
            raise self.error("is empty", row, column)
        try:
            return check_text(value, what="the value")
        except InputError as exc:
            raise self.error(exc.reason, row, column) from None

    def number(self, value: Any, row: int, column: str) -> float:
        if isinstance(value, str):
            if not _NUMBER_RE.fullmatch(value.strip()):
                raise self.error(f"is not a number: {value[:40]!r}", row, column)
            value = float(value)
        elif isinstance(value, bool) or not isinstance(value, int | float):
            raise self.error(f"must be a number, got {_kind(value)}", row, column)
        out = float(value)
        if not math.isfinite(out):
            raise self.error(f"must be a finite number, got {out}", row, column)
        if not 0.0 <= out <= 1.0:
            raise self.error(f"is {out:.6g}, not a probability in [0, 1]", row, column)
        return out


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _check_header(
    header: Mapping[str, Any] | None, f: _Rows
) -> tuple[list[str] | None, str | None]:
    """The header's classes and model fingerprint (each ``None`` when not given)."""
    if header is None:
        return None, None
    unknown = sorted(set(header) - set(_HEADER_KEYS))
    if unknown:
        raise f.error(f"is not a header field (known: {', '.join(_HEADER_KEYS)})", 0, unknown[0])
    if header.get("format") != SCORES_FORMAT:
        raise f.error(f"must be {SCORES_FORMAT!r}, got {header.get('format')!r}", 0, "format")
    if header.get("version", SCORES_FORMAT_VERSION) != SCORES_FORMAT_VERSION:
        raise f.error(
            f"version {header.get('version')!r} is not one this hybridroute reads "
            f"({SCORES_FORMAT_VERSION})",
            0,
            "version",
        )
    classes = header.get("classes")
    if classes is not None:
        if not isinstance(classes, list):
            raise f.error(f"must be a list of labels, got {_kind(classes)}", 0, "classes")
        classes = [f.text(c, 0, "classes") for c in classes]
        if len(set(classes)) != len(classes):
            raise f.error("names a label twice", 0, "classes")
    fingerprint = header.get("model_fingerprint")
    if fingerprint is not None and not is_sha256_hex(fingerprint):
        raise f.error(
            "must be a model fingerprint (64 lowercase hex digits)", 0, "model_fingerprint"
        )
    return classes, fingerprint


def _layout(columns: list[str], f: _Rows) -> tuple[str, list[str]]:
    """The layout and, for per-class columns, the classes the ``score:`` columns name."""
    score_cols = [c for c in columns if c.startswith(SCORE_PREFIX)]
    known = set(_PLAIN) | set(_TOP) | {"scores"} | set(score_cols)
    for c in columns:
        if c not in known:
            raise f.error(
                "is not a scores-file column (label, id, text, and score:<label> columns, a "
                "'scores' object, or predicted and confidence)",
                0,
                c,
            )
    if "label" not in columns:
        raise f.error("the file has no 'label' column (the gold label)", 0, "label")
    top = [c for c in _TOP if c in columns]
    kinds = [bool(score_cols), "scores" in columns, bool(top)]
    if sum(kinds) != 1:
        raise f.error(
            "give the model's scores one way: score:<label> columns, a 'scores' field, or "
            "'predicted' and 'confidence'",
            0,
        )
    if top and len(top) != 2:
        missing = next(c for c in _TOP if c not in columns)
        raise f.error("goes with 'predicted' and 'confidence' (one is missing)", 0, missing)
    names = [c[len(SCORE_PREFIX) :] for c in score_cols]
    for c, name in zip(score_cols, names, strict=True):
        if not name.strip():
            raise f.error("names no label after 'score:'", 0, c)
    return (TOP_LABEL if top else PER_CLASS), names


def _order(file_classes: list[str], wanted: Sequence[str] | None, f: _Rows) -> list[str]:
    """The label set: ``wanted`` (the model's order) when given, which must be the same set."""
    if wanted is None:
        return file_classes
    wanted = [str(c) for c in wanted]
    missing = sorted(set(wanted) - set(file_classes))
    extra = sorted(set(file_classes) - set(wanted))
    if missing or extra:
        parts = []
        if missing:
            parts.append(f"lacks {', '.join(map(repr, missing[:5]))}")
        if extra:
            parts.append(f"has {', '.join(map(repr, extra[:5]))} beyond them")
        raise f.error(
            f"the file's classes are not the model's ({len(wanted)} labels): it "
            + " and ".join(parts),
            0,
        )
    return wanted


def _per_class_row(
    values: Mapping[str, Any], row: int, classes: list[str], flat: bool, f: _Rows
) -> list[float]:
    if flat:
        return [f.number(values[SCORE_PREFIX + c], row, SCORE_PREFIX + c) for c in classes]
    raw = values["scores"]
    if isinstance(raw, list):
        if len(raw) != len(classes):
            raise f.error(
                f"holds {len(raw)} scores; the header's classes are {len(classes)}", row, "scores"
            )
        return [f.number(v, row, "scores") for v in raw]
    if not isinstance(raw, dict):
        raise f.error(f"must be an object of label -> score, got {_kind(raw)}", row, "scores")
    if set(raw) != set(classes):
        odd = sorted(set(raw) ^ set(classes))
        raise f.error(f"names other labels than the file's classes: {odd[:5]!r}", row, "scores")
    return [f.number(raw[c], row, f"scores.{c}") for c in classes]


def _scores_classes(raw: RawScores, header_classes: list[str] | None, f: _Rows) -> list[str]:
    """The classes of a file whose scores are in a ``scores`` field (JSONL)."""
    if header_classes is not None:
        return header_classes
    first_row, first = raw.records[0]
    value = first["scores"]
    if not isinstance(value, dict):
        raise f.error(
            "an array of scores needs the classes in a header line "
            '({"format": "hybridroute.scores", "classes": [...]})',
            first_row,
            "scores",
        )
    return [f.text(c, first_row, "scores") for c in value]


def _classes_for(
    raw: RawScores,
    layout: str,
    flat_names: list[str],
    header_classes: list[str] | None,
    classes: Sequence[str] | None,
    oos_label: str | None,
    f: _Rows,
) -> list[str]:
    if layout == PER_CLASS:
        found = flat_names or _scores_classes(raw, header_classes, f)
        if header_classes is not None and flat_names:
            found = _order(flat_names, header_classes, f)
        return _order(found, classes, f)
    if header_classes is not None:
        return _order(header_classes, classes, f)
    if classes is not None:
        return [str(c) for c in classes]
    seen: set[str] = set()
    for row, values in raw.records:
        seen.add(f.text(values["predicted"], row, "predicted"))
        gold = f.text(values["label"], row, "label")
        if gold != oos_label:
            seen.add(gold)
    return sorted(seen)


def _probabilities(scores: list[float], row: int, f: _Rows) -> None:
    total = math.fsum(scores)
    if abs(total - 1.0) > PROBA_SUM_TOLERANCE:
        raise f.error(
            f"the scores sum to {total:.6g}, not 1 (within {PROBA_SUM_TOLERANCE}); write "
            "the model's probabilities, normalised per row",
            row,
        )


def _limit() -> int:
    try:
        return env_byte_limit(MAX_SCORES_BYTES_ENV, MAX_SCORES_BYTES)
    except InputError as exc:
        raise DatasetError(exc.reason) from None


def read_scores(
    path: str | os.PathLike[str],
    *,
    classes: Sequence[str] | None = None,
    oos_label: str | None = None,
    format: str | None = None,
) -> ScoresTable:
    """Read and check a scores file (CSV, JSON Lines, or Parquet with pyarrow installed).

    Parameters
    ----------
    path : str or path-like
        The file; its format comes from its suffix (``.csv``, ``.jsonl`` / ``.ndjson``,
        ``.parquet`` / ``.pq``) unless ``format`` says.
    classes : sequence of str, optional
        The model's label set, in its column order (e.g. ``classifier.classes_``).
        Per-class scores are put in this order (the file must name exactly these
        classes); a top-label file takes it as its label set.
    oos_label : str, optional
        The gold label of out-of-scope rows: the one gold label allowed outside the
        classes.
    format : {"csv", "jsonl", "parquet"}, optional
        Overrides the suffix.

    Returns
    -------
    ScoresTable
        Rows in file order; ``fingerprint`` is the SHA-256 of the file's bytes.

    Raises
    ------
    DatasetError
        Naming the file, row and column: unreadable or unsafe bytes (over the byte limit,
        not a regular file, not UTF-8, duplicate JSON keys, NaN), an unknown column, a
        score that is not a probability, a row whose scores do not sum to 1, a label
        outside the classes, a repeated id; Parquet without pyarrow installed.
    """
    where = os.fspath(path)
    f = _Rows(where)
    kind = suffix_format(where) if format is None else format
    if kind not in ("csv", "jsonl", "parquet"):
        raise f.error(f"format must be 'csv', 'jsonl' or 'parquet', got {kind!r}")
    limit = _limit()
    try:
        data = read_bytes(where, limit=limit, what="scores file")
    except InputError as exc:
        raise f.error(exc.reason) from None
    fingerprint = hashlib.sha256(data).hexdigest()
    if kind == "csv":
        raw = parse_csv(data, where)
    elif kind == "jsonl":
        raw = parse_jsonl(data, where)
    else:
        raw = parse_parquet(data, where, limit=limit)
    if not raw.records:
        raise f.error("the file holds no rows")
    header_classes, declared = _check_header(raw.header, f)
    layout, flat_names = _layout(raw.columns, f)
    labels = _classes_for(raw, layout, flat_names, header_classes, classes, oos_label, f)
    if len(labels) < 2:
        raise f.error(f"a scores file needs at least 2 classes, it has {labels!r}", 0)
    return _table(raw, f, fingerprint, layout, labels, oos_label, declared)


def _table(
    raw: RawScores,
    f: _Rows,
    fingerprint: str,
    layout: str,
    labels: list[str],
    oos_label: str | None,
    declared: str | None,
) -> ScoresTable:
    index = set(labels)
    first_keys = set(raw.columns)
    gold: list[str] = []
    ids: list[str] = []
    texts: list[str] = []
    predicted: list[str] = []
    rows: list[int] = []
    values_out: list[Any] = []
    seen_ids: dict[str, int] = {}
    floor = 1.0 / len(labels)
    for row, values in raw.records:
        if set(values) != first_keys:
            odd = sorted(set(values) ^ first_keys)[0]
            raise f.error("every row must have the same fields as the first row", row, odd)
        label = f.text(values["label"], row, "label")
        if label not in index and label != oos_label:
            raise f.error(
                f"{label!r} is not one of the {len(labels)} classes (the model's label set); "
                "if it marks out-of-scope rows, give it as the out-of-scope label",
                row,
                "label",
            )
        if "id" in values:
            item = values["id"]
            if isinstance(item, int) and not isinstance(item, bool):
                item = str(item)
            item = f.text(item, row, "id")
            if item in seen_ids:
                raise f.error(f"id {item!r} is repeated (first at row {seen_ids[item]})", row, "id")
            seen_ids[item] = row
        else:
            item = f"row-{row}"
        if "text" in values:
            texts.append(f.text(values["text"], row, "text", empty_ok=True))
        if layout == PER_CLASS:
            flat = "scores" not in values
            scores = _per_class_row(values, row, labels, flat, f)
            _probabilities(scores, row, f)
            values_out.append(scores)
        else:
            top = f.text(values["predicted"], row, "predicted")
            if top not in index:
                raise f.error(f"{top!r} is not one of the {len(labels)} classes", row, "predicted")
            conf = f.number(values["confidence"], row, "confidence")
            if conf <= floor:
                raise f.error(
                    f"is {conf:.6g}, not above 1/{len(labels)} (one over the number of "
                    "classes): no class can be the top label with that probability",
                    row,
                    "confidence",
                )
            predicted.append(top)
            values_out.append(conf)
        gold.append(label)
        ids.append(item)
        rows.append(row)
    return ScoresTable(
        path=f.path,
        fingerprint=fingerprint,
        layout=layout,
        classes=tuple(labels),
        gold=tuple(gold),
        scores=np.asarray(values_out, dtype=np.float64),
        predicted=tuple(predicted) if layout == TOP_LABEL else None,
        ids=tuple(ids),
        rows=tuple(rows),
        texts=tuple(texts) if "text" in first_keys else None,
        model_fingerprint=declared,
    )
