"""Writing a labelled set to CSV or JSONL, and the cell conversions it needs.

Kept apart from :mod:`._labelled` (the set type) so that module stays one subject: what a
set is. :meth:`LabelledSet.export <hybridroute.datasets.LabelledSet.export>` documents the
file layout; this module writes it.
"""

from __future__ import annotations

import copy
import csv
import io
import json
import math
import os
import stat
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

import pandas as pd

from .._csv import escape_formula
from .._labelled_rows import ANNOTATION_COLUMNS
from ..exceptions import DatasetError

__all__ = ["from_cell", "plain_value", "write_set"]


def plain_value(value: Any) -> Any:
    """A frame cell as a plain JSON value (lists copied, missing values as ``None``)."""
    if value is None:
        return None
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, (list, dict)):
        return copy.deepcopy(value)
    if value is pd.NA:
        return None
    return value


def from_cell(value: Any) -> Any:
    """A DataFrame cell as a JSON value (numpy scalars unwrapped, missing → None)."""
    if value is None or value is pd.NA:
        return None
    if isinstance(value, float) and math.isnan(value):
        return None
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):
        value = value.tolist()  # numpy scalar or array
        if isinstance(value, float) and math.isnan(value):
            return None
    if isinstance(value, tuple):
        return list(value)
    return value


def write_set(path: Path, frame: pd.DataFrame, fact_columns: Sequence[str]) -> Path:
    """Write ``frame`` (a labelled set's) to ``path``, a ``.csv`` or ``.jsonl`` file."""
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix not in (".csv", ".jsonl"):
        raise DatasetError("export writes .csv or .jsonl files", path=str(p))
    has_split = any(s is not None for s in frame["split"].tolist())
    annotations = [c for c in ANNOTATION_COLUMNS if c in frame.columns]
    head = ["text", "label"] + (["split"] if has_split else [])
    columns = head + list(fact_columns) + annotations + ["id"]
    data = {c: frame[c].tolist() for c in columns}
    n = len(frame)

    def write_csv(fh: IO[str]) -> None:
        # csv quotes a field only for the characters of its line terminator, so rows are
        # formatted with "\r\n" (a cell holding a lone "\r" is quoted too) and written
        # ending in "\n"
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\r\n")

        def line(cells: list[str]) -> str:
            buf.seek(0)
            buf.truncate()
            writer.writerow(cells)
            return buf.getvalue()[:-2] + "\n"

        fh.write(line([escape_formula(c) for c in columns]))
        for i in range(n):
            fh.write(line([csv_cell(data[c][i]) for c in columns]))

    def write_jsonl(fh: IO[str]) -> None:
        for i in range(n):
            obj: dict[str, Any] = {c: data[c][i] for c in head}
            if fact_columns:
                obj["facts"] = {c: plain_value(data[c][i]) for c in fact_columns}
            for c in annotations:
                obj[c] = plain_value(data[c][i])
            obj["id"] = data["id"][i]
            fh.write(json.dumps(obj, ensure_ascii=False) + "\n")

    write_atomically(p, write_csv if suffix == ".csv" else write_jsonl)
    return p


def csv_cell(value: Any) -> str:
    """A cell as CSV text: strings formula-escaped, other JSON values as compact JSON."""
    value = plain_value(value)
    if value is None:
        return ""
    if isinstance(value, str):
        return escape_formula(value)
    # a JSON number, boolean, list or object: never starts like a formula but for a
    # negative number, which a spreadsheet reads as the number it is
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def write_atomically(path: Path, write: Callable[[IO[str]], None]) -> None:
    """Write a UTF-8 file beside ``path`` and move it into place once complete."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise DatasetError(f"cannot write the file ({exc.strerror})", path=str(path)) from None
    else:
        if not stat.S_ISREG(info.st_mode):
            what = (
                "a directory"
                if stat.S_ISDIR(info.st_mode)
                else "not a regular file (a FIFO, a device or a socket)"
            )
            raise DatasetError(f"is {what}; export writes a regular file", path=str(path))
    tmp = path.with_name(f".{path.name}.part-{os.getpid()}")
    try:
        with tmp.open("w", encoding="utf-8", newline="") as fh:
            write(fh)
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise DatasetError(f"cannot write the file ({exc.strerror})", path=str(path)) from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
