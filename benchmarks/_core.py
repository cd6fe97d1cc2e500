"""Shared pieces of the benchmark runner: rows, results, the run context, helpers."""

from __future__ import annotations

import contextlib
import math
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent

# --------------------------------------------------------------------------- rows


@dataclass
class Row:
    """One line of the table: a measurement, what it is compared with, and the ratio."""

    bench: str
    key: str
    measure: str
    value: float | None
    unit: str = ""
    baseline: float | None = None
    baseline_label: str = ""
    ratio: float | None = None
    notes: str = ""
    status: str = "ok"  # ok | skipped | failed | not run | n/a

    def __post_init__(self) -> None:
        if self.ratio is None and is_num(self.value) and is_num(self.baseline) and self.baseline:
            self.ratio = float(self.value) / float(self.baseline)  # type: ignore[arg-type]


def is_num(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


@dataclass
class BenchResult:
    name: str
    status: str = "ok"
    seconds: float = 0.0
    rows: list[Row] = field(default_factory=list)
    raw: Any = None
    error: str | None = None
    metrics: dict[str, float] = field(default_factory=dict)  # extra, JSON/compare only


@dataclass
class Context:
    """What every adapter gets: the mode, its sizes, where the data and caches are."""

    quick: bool
    sizes: dict[str, dict[str, Any]]
    data_dir: Path | None
    cache_dir: Path
    seed: int = 0
    background: dict[str, Any] = field(default_factory=dict)

    def size(self, bench: str) -> dict[str, Any]:
        return self.sizes.get(bench, {})


# --------------------------------------------------------------------------- helpers


@contextlib.contextmanager
def quiet_stdout() -> Iterator[None]:
    """Send a benchmark's own prints to stderr so stdout holds only the table."""
    with contextlib.redirect_stdout(sys.stderr):
        yield


def plain(obj: Any) -> Any:
    """JSON-able copy: numpy scalars to Python, non-finite floats to None, tuples to lists."""
    if isinstance(obj, Mapping):
        return {str(k): plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [plain(v) for v in obj]
    if hasattr(obj, "item") and callable(obj.item) and not isinstance(obj, (str, bytes)):
        try:
            obj = obj.item()
        except (TypeError, ValueError):
            return str(obj)
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    return str(obj)


def load_average() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:  # pragma: no cover - not on every OS
        return None


def git_info() -> dict[str, Any]:
    def out(*args: str) -> str | None:
        try:
            proc = subprocess.run(
                ["git", *args], cwd=REPO_ROOT, capture_output=True, text=True, timeout=10
            )
        except (OSError, subprocess.SubprocessError):
            return None
        return proc.stdout.strip() if proc.returncode == 0 else None

    status = out("status", "--porcelain")
    return {
        "commit": out("rev-parse", "HEAD"),
        "dirty": bool(status) if status is not None else None,
    }


def find_data_dir(explicit: str | None = None) -> Path | None:
    """The directory with the public sets: ``--data-dir``, ``HYBRIDROUTE_DATA_DIR``, or
    ``../shared/datasets`` beside the checkout; ``None`` when none holds ``banking77/``."""
    candidates = [explicit, os.environ.get("HYBRIDROUTE_DATA_DIR")]
    candidates.append(str(REPO_ROOT.parent / "shared" / "datasets"))
    for c in candidates:
        if c and (Path(c) / "banking77").is_dir():
            return Path(c)
    return None
