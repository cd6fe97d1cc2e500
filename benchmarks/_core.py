"""Shared pieces of the benchmark runner: rows, results, the run context, helpers."""

from __future__ import annotations

import contextlib
import math
import os
import statistics
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
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
    #: The goal on ``ratio`` (issue 27: every goal is a ratio measured in one run).
    goal: float | None = None
    #: ``">="``: the ratio must reach the goal; ``"<="``: it must stay at or under it.
    goal_op: str = ">="
    #: The ratio's relative noise in this run (half the spread of its repeats over their
    #: median); ``None`` when the bench measured it once.
    noise: float | None = None
    #: Set by :func:`check_goals`: ``meets`` | ``within noise`` | ``FAIL`` | ``not checked``.
    verdict: str = ""

    def __post_init__(self) -> None:
        if self.ratio is None and is_num(self.value) and is_num(self.baseline) and self.baseline:
            self.ratio = float(self.value) / float(self.baseline)  # type: ignore[arg-type]
        if self.goal_op not in (">=", "<="):
            raise ValueError(f"goal_op must be '>=' or '<=', got {self.goal_op!r}")


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


# --------------------------------------------------------------------------- goals

#: The least relative noise a goal check allows: two runs of the same code on this
#: machine differ by a few percent even when the repeats of one run agree.
NOISE_FLOOR = 0.05


def spread(ratios: Sequence[float]) -> float | None:
    """Relative noise of repeated ratios: half their range over their median."""
    values = [float(r) for r in ratios if is_num(r)]
    if len(values) < 2:
        return None
    mid = statistics.median(values)
    return (max(values) - min(values)) / (2 * mid) if mid else None


def fmt_goal(row: Row) -> str:
    """The goal as its row prints it (``>= 2.00x``), with the verdict's mark."""
    if row.goal is None:
        return ""
    mark = {"meets": " ok", "within noise": " ~", "FAIL": " FAIL", "not checked": " (quick)"}
    return f"{row.goal_op} {row.goal:g}x{mark.get(row.verdict, '')}"


def check_goals(
    rows: Sequence[Row], committed: Mapping[str, Any] | None = None, *, enforce: bool = True
) -> list[str]:
    """Set each goal row's :attr:`Row.verdict`; return one message per failed goal.

    A row fails when its ratio misses the goal by more than the noise: the largest of its
    own noise in this run, the same row's noise in ``committed`` (the committed run,
    ``--json`` output) and :data:`NOISE_FLOOR`. The message names the row, the ratio, the
    goal, the noise allowed and the committed run's ratio. Rows of a run whose goals are
    not enforced (``--quick`` sizes are too small to measure) get ``not checked``.
    """
    old_rows = {
        r.get("key"): r for r in (committed or {}).get("rows", []) if isinstance(r, Mapping)
    }
    failures: list[str] = []
    for row in rows:
        if row.goal is None:
            continue
        if row.status != "ok" or not is_num(row.ratio):
            row.verdict = "FAIL" if enforce else "not checked"
            if enforce:
                failures.append(f"{row.key}: no figure ({row.status}) for its goal {fmt_goal(row)}")
            continue
        if not enforce:
            row.verdict = "not checked"
            continue
        old = old_rows.get(row.key) or {}
        noises = [n for n in (row.noise, old.get("noise")) if is_num(n)]
        noise = max([NOISE_FLOOR, *noises])
        ratio, goal = float(row.ratio or 0.0), float(row.goal)
        if row.goal_op == ">=":
            meets, fails = ratio >= goal, ratio < goal * (1 - noise)
        else:
            meets, fails = ratio <= goal, ratio > goal * (1 + noise)
        row.verdict = "meets" if meets else ("FAIL" if fails else "within noise")
        if fails:
            was = old.get("ratio")
            before = f"; the committed run had {was:.3f}x" if is_num(was) else ""
            failures.append(
                f"{row.key} ({row.measure}): ratio {ratio:.3f}x misses its goal "
                f"{row.goal_op} {goal:g}x by more than the noise ({noise:.0%}){before}"
            )
    return failures
