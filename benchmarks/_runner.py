"""The benchmark runner: every ``benchmarks/bench_*.py``, one table, JSON, comparisons.

    python -m benchmarks                       # the whole table (under 10 minutes here)
    python -m benchmarks --quick               # a smoke run on tiny sizes (seconds)
    python -m benchmarks --only langgraph --only memory
    python -m benchmarks --json new.json --compare old.json
    python -m benchmarks --show new.json --compare old.json   # no run: two saved files
    python -m benchmarks --set calibration.resplits=200 --set classifiers.datasets=banking77,clinc150

Every ``bench_*.py`` in this directory is discovered and imported; an adapter (``_adapters.py``) calls
its entry function with sizes that fit the time budget (:data:`SIZES`, overridable with
``--set``) and turns the result into table rows. A script without an adapter can define
``runner_entry(quick: bool, settings: dict) -> list[dict]`` (each dict holds
:class:`Row` fields); one with neither is listed as *not run*, never silently skipped.

Each row puts a measurement next to what it is compared with -- measured in the same
process run -- and their ratio, because this machine is shared and absolute numbers
drift with its load (the load averages are recorded). The JSON (``--json``) holds every
row, a flat ``metrics`` map and the raw results of each benchmark; ``--compare OLD.json``
prints each metric with the old value, the new one and the change.

**Goals.** A row may carry a goal on its ratio (``>= 2x``, ``<= 1.5x``: issue 27), measured
in the same run, and the noise of that ratio (the spread of its repeats). In a full-size
run each goal row is checked: ``ok`` when met, ``~`` when missed by no more than the noise
(the largest of the row's own, the committed run's -- ``--compare``, else
``benchmarks/results/benchmarks.json`` -- and 5%), ``FAIL`` beyond it. A failed goal is
printed as a ``GOAL FAILED`` line naming the row, its ratio, the goal, the noise and the
committed run's ratio, and the run exits with status 3 (``--no-goals``: 0). ``--show``
checks a saved run the same way. ``--quick`` runs are too small to measure: not checked.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import platform
import shlex
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

from ._adapters import ADAPTERS, ORDER, start_memory_in_background
from ._core import (
    BENCH_DIR,
    REPO_ROOT,
    BenchResult,
    Context,
    Row,
    check_goals,
    find_data_dir,
    fmt_goal,
    git_info,
    is_num,
    load_average,
    plain,
)

SCHEMA_VERSION = 1
#: The committed run (``--json`` on a quiet machine): the noise a goal check allows
#: comes from it when no ``--compare`` file is given.
COMMITTED = BENCH_DIR / "results" / "benchmarks.json"
#: The exit status of a run in which a goal failed (a failed bench exits 1).
GOAL_FAILED = 3
#: The time budget of a full run on the development machine (2 cores, shared).
BUDGET_SECONDS = 600

#: Benchmark sizes per mode; ``--set bench.key=value`` overrides one.
SIZES: dict[str, dict[str, dict[str, Any]]] = {
    "full": {
        "rules": {"n": 50_000, "repeats": 3},
        "langgraph": {"n": 20_000, "graph_n": 1_000, "repeats": 3},
        "router": {"n": 10_000},
        "classifiers": {
            "datasets": "banking77",
            "latency_texts": 300,
            "repeats": 2,
            "families": "local,embedding-onnx",
        },
        "calibration": {"datasets": "banking77,clinc150", "resplits": 200, "full_resplits": 200},
        "llm": {"n": 500, "latency": 0.2, "concurrency": 32, "faults": True},
        "records": {"n": 10_000, "repeats": 2},
        "memory": {"sizes": "100000,1000000", "n_boot": 200, "overlap": True},
        "log_monitor": {"sizes": "10000,1000000", "audited": 2_000, "rounds": 5},
    },
    "quick": {
        "rules": {"n": 5_000, "repeats": 1},
        "langgraph": {"n": 1_000, "graph_n": 100, "repeats": 1},
        "router": {"n": 1_000},
        "classifiers": {"datasets": "support-tickets", "latency_texts": 50, "repeats": 1},
        "calibration": {"datasets": "support-tickets", "resplits": 3, "full_resplits": 200},
        "llm": {"n": 64, "latency": 0.05, "concurrency": 16, "faults": False},
        "records": {"n": 1_000, "repeats": 1},
        "memory": {"sizes": "2000,20000", "n_boot": 20, "overlap": False},
        "log_monitor": {"sizes": "2000,20000", "audited": 300, "rounds": 3},
    },
}


def discover(bench_dir: Path = BENCH_DIR) -> list[str]:
    """Short names of the ``bench_*.py`` scripts (``bench_rules.py`` -> ``rules``)."""
    return sorted(p.stem[len("bench_") :] for p in bench_dir.glob("bench_*.py"))


def _import(name: str) -> ModuleType:
    if str(REPO_ROOT) not in sys.path:
        sys.path.insert(0, str(REPO_ROOT))
    return importlib.import_module(f"benchmarks.bench_{name}")


def _generic(mod: ModuleType, ctx: Context, name: str) -> BenchResult:
    entry = getattr(mod, "runner_entry", None)
    if entry is None:
        return BenchResult(
            name,
            status="not run",
            rows=[
                Row(
                    name,
                    f"{name}.not_run",
                    f"bench_{name}.py",
                    None,
                    status="not run",
                    notes="no runner adapter: add one to benchmarks/_runner.py or define "
                    "runner_entry(quick, settings) -> list[dict]",
                )
            ],
        )
    out = entry(ctx.quick, ctx.size(name))
    # a list of rows, or {"rows": [...], "raw": <the bench's own result>}
    rows, raw = (out["rows"], out.get("raw", out["rows"])) if isinstance(out, dict) else (out, out)
    return BenchResult(name, rows=[Row(**{"bench": name, **r}) for r in rows], raw=raw)


def run_bench(name: str, ctx: Context) -> BenchResult:
    """Import ``bench_<name>`` and run it through its adapter; failures become a row."""
    t0 = time.perf_counter()
    print(f"[bench] {name} ...", file=sys.stderr, flush=True)
    try:
        mod = _import(name)
        # a script's own runner_entry (rows with their goals) comes before an adapter
        adapter = None if hasattr(mod, "runner_entry") else ADAPTERS.get(name)
        result = adapter(mod, ctx) if adapter is not None else _generic(mod, ctx, name)
    except Exception as exc:  # a broken benchmark must not hide the others
        result = BenchResult(
            name,
            status="failed",
            error=f"{type(exc).__name__}: {exc}",
            rows=[
                Row(
                    name,
                    f"{name}.failed",
                    f"bench_{name}.py",
                    None,
                    status="failed",
                    notes=f"{type(exc).__name__}: {str(exc)[:300]}",
                )
            ],
        )
    result.seconds = time.perf_counter() - t0
    if any(r.status == "skipped" for r in result.rows) and result.status == "ok":
        result.status = "partial"
    print(f"[bench] {name}: {result.status} in {result.seconds:.1f} s", file=sys.stderr, flush=True)
    return result


# --------------------------------------------------------------------------- output


def fmt_value(value: Any, unit: str) -> str:
    if not is_num(value):
        return "—"
    v = float(value)
    if unit == "/s":
        return f"{v:,.0f}/s"
    if unit == "ms":
        return f"{v:.3f} ms"
    if unit == "MiB":
        return f"{v:,.1f} MiB"
    if unit == "share":
        return f"{v:.4f}"
    if unit == "count":
        return f"{v:,.0f}"
    return f"{v:,.4g}{(' ' + unit) if unit else ''}"


def fmt_ratio(ratio: Any) -> str:
    if not is_num(ratio):
        return "—"
    r = float(ratio)
    return f"{r:,.1f}×" if r >= 10 else f"{r:.3f}×"


def _console() -> Any:
    from rich.console import Console

    console = Console()
    if not console.is_terminal:
        console = Console(width=max(int(os.environ.get("COLUMNS", "0") or 0), 200))
    return console


def print_table(rows: Sequence[Row], title: str, console: Any = None) -> None:
    from rich.markup import escape
    from rich.table import Table

    console = console or _console()
    table = Table(title=escape(title), show_lines=False, expand=False)
    table.add_column("bench", style="bold", no_wrap=True)
    table.add_column("measure")
    table.add_column("value", justify="right", no_wrap=True)
    table.add_column("vs", justify="right")
    table.add_column("ratio", justify="right", no_wrap=True)
    table.add_column("goal", justify="right", no_wrap=True)
    table.add_column("notes", overflow="fold")
    for r in rows:
        if r.status != "ok":
            cells = [r.bench, r.measure, r.status.upper(), "", "", fmt_goal(r), r.notes]
        else:
            vs = fmt_value(r.baseline, r.unit)
            if r.baseline_label and is_num(r.baseline):
                vs = f"{vs} ({r.baseline_label})"
            cells = [
                r.bench,
                r.measure,
                fmt_value(r.value, r.unit),
                vs,
                fmt_ratio(r.ratio),
                fmt_goal(r),
                r.notes,
            ]
        table.add_row(*(escape(str(c)) for c in cells))  # notes hold [brackets]
    console.print(table)


def metrics_of(rows: Sequence[Row], extra: Mapping[str, float] | None = None) -> dict[str, Any]:
    """The flat map ``--compare`` reads: ``key`` -> value / baseline / ratio / unit."""
    out: dict[str, Any] = {}
    for r in rows:
        if r.status == "ok":
            out[r.key] = {
                "value": plain(r.value),
                "baseline": plain(r.baseline),
                "ratio": plain(r.ratio),
                "unit": r.unit,
                "measure": r.measure,
            }
    for k, v in (extra or {}).items():
        out[k] = {"value": plain(v), "baseline": None, "ratio": None, "unit": "", "measure": k}
    return out


def compare_rows(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Per metric (and per ratio): old value, new value, change (new / old - 1)."""
    om, nm = old.get("metrics", {}), new.get("metrics", {})
    keys = list(nm) + [k for k in om if k not in nm]
    out = []
    for key in keys:
        o, n = om.get(key) or {}, nm.get(key) or {}
        for field_, suffix in (("value", ""), ("ratio", " (ratio)")):
            ov, nv = o.get(field_), n.get(field_)
            if ov is None and nv is None:
                continue
            both = is_num(ov) and is_num(nv)
            change = (nv / ov - 1.0) if both and ov else None
            delta = (nv - ov) if both else None
            out.append(
                {
                    "key": key + suffix,
                    "unit": (n or o).get("unit", "") if field_ == "value" else "ratio",
                    "old": ov,
                    "new": nv,
                    "change": change,
                    "delta": delta,
                }
            )
    return out


def print_compare(
    comparison: Sequence[Mapping[str, Any]], old_label: str, console: Any = None
) -> None:
    from rich.markup import escape
    from rich.table import Table

    console = console or _console()
    table = Table(title=escape(f"compared with {old_label}"))
    table.add_column("metric")
    table.add_column("old", justify="right")
    table.add_column("new", justify="right")
    table.add_column("change", justify="right")
    for c in comparison:
        unit = c["unit"]
        show = fmt_ratio if unit == "ratio" else (lambda v, u=unit: fmt_value(v, u))
        change = "—" if c["change"] is None else f"{c['change']:+.1%}"
        if c["change"] is None and c.get("delta"):  # from 0: a relative change is undefined
            change = f"{c['delta']:+.4g} (abs)"
        if c["old"] is None:
            change = "new"
        elif c["new"] is None:
            change = "not run"
        table.add_row(escape(c["key"]), show(c["old"]), show(c["new"]), change)
    console.print(table)


# --------------------------------------------------------------------------- main


def _apply_sets(sizes: dict[str, dict[str, Any]], sets: Sequence[str]) -> None:
    for item in sets:
        key, sep, value = item.partition("=")
        bench, dot, name = key.partition(".")
        if not sep or not dot or not bench or not name:
            raise SystemExit(f"--set takes bench.key=value, got {item!r}")
        parsed: Any = value
        for cast in (int, float):
            try:
                parsed = cast(value)
                break
            except ValueError:
                continue
        if value.lower() in ("true", "false"):
            parsed = value.lower() == "true"
        sizes.setdefault(bench, {})[name] = parsed


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description="Run every benchmarks/bench_*.py and print one table of side-by-side ratios.",
    )
    parser.add_argument(
        "--only", action="append", default=[], metavar="NAME", help="run only this bench (repeat)"
    )
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a smoke run")
    parser.add_argument("--json", dest="json_out", type=Path, help="write the results here")
    parser.add_argument("--compare", type=Path, help="a previous --json file to compare with")
    parser.add_argument(
        "--set",
        dest="sets",
        action="append",
        default=[],
        metavar="BENCH.KEY=VALUE",
        help="override a size, e.g. calibration.resplits=200",
    )
    parser.add_argument("--data-dir", default=None, help="public sets (default: auto)")
    parser.add_argument(
        "--cache-dir",
        type=Path,
        default=None,
        help="keep scored calibration rows here between runs (default: a fresh temp dir)",
    )
    parser.add_argument(
        "--no-overlap",
        action="store_true",
        help="run the memory benchmark alone instead of alongside the others",
    )
    parser.add_argument(
        "--show",
        type=Path,
        metavar="RESULTS.json",
        help="print the table of a saved run (compared with --compare) instead of running",
    )
    parser.add_argument(
        "--no-goals",
        action="store_true",
        help="print the goals' verdicts but exit 0 when one fails (default: exit 3)",
    )
    parser.add_argument(
        "--postgres",
        action="store_true",
        help="start a throwaway PostgreSQL server (Debian's postgresql package) for the run: "
        "records and service also measure their writes on a PostgreSQL log",
    )
    parser.add_argument("--list", action="store_true", help="list the benchmarks and sizes")
    parser.add_argument("--seed", type=int, default=0)
    return parser


def _read_results(path: Path, option: str) -> dict[str, Any]:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise SystemExit(f"{option} {path}: cannot read it ({exc})") from None
    if not isinstance(doc, dict) or "metrics" not in doc or "rows" not in doc:
        raise SystemExit(f"{option} {path}: not a results file of python -m benchmarks --json")
    return doc


def _committed(old: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """The run the goal checks take their noise from: ``--compare``'s, else the committed."""
    if old is not None or not COMMITTED.is_file():
        return old
    try:
        return _read_results(COMMITTED, "the committed run")
    except SystemExit as exc:  # a broken committed file must not hide the run's own table
        print(f"[bench] {exc}", file=sys.stderr)
        return None


def report_goals(failures: Sequence[str], console: Any) -> None:
    """Say loudly which goals failed (one line each), or nothing when none did."""
    from rich.markup import escape

    for line in failures:
        console.print(f"[bold red]GOAL FAILED[/bold red] {escape(line)}")


def _show(
    doc: Mapping[str, Any],
    old: Mapping[str, Any] | None,
    old_path: Path | None,
    no_goals: bool = False,
) -> int:
    """Print the table of a saved run (and its comparison) without running anything."""
    known = set(Row.__dataclass_fields__)
    rows = [Row(**{k: v for k, v in r.items() if k in known}) for r in doc["rows"]]
    failures = check_goals(rows, _committed(old), enforce=doc.get("mode") == "full")
    host = doc.get("host", {})
    title = (
        f"saved run of {doc.get('created')} ({doc.get('mode')}) -- {doc.get('wall_seconds')} s "
        f"wall; load {host.get('load_before')} -> {host.get('load_after')} on "
        f"{host.get('cpus')} CPUs; commit {(doc.get('git') or {}).get('commit')}"
    )
    console = _console()
    print_table(rows, title, console)
    report_goals(failures, console)
    if old is not None:
        print_compare(compare_rows(old, doc), str(old_path), console)
    return GOAL_FAILED if failures and not no_goals else 0


def _postgres_logs(stack: contextlib.ExitStack, benches: Sequence[str]) -> dict[str, str]:
    """A throwaway PostgreSQL server (removed when ``stack`` closes) and a fresh database
    on it for each of ``benches``: their log URLs."""
    from hybridroute.testing._postgres import PostgresServer, pg_bindir

    bindir = pg_bindir()
    if bindir is None:
        raise SystemExit(
            "--postgres: no PostgreSQL server programs (initdb, pg_ctl) on this machine; "
            "install Debian's postgresql package (apt-get install postgresql)"
        )
    server = PostgresServer(bindir)
    stack.callback(server.remove)
    server.start()
    urls = {}
    for bench in benches:
        urls[bench] = server.create_database(f"hr_bench_{bench}")
    print(f"[bench] PostgreSQL {bindir.parent.name} in {server.root}", file=sys.stderr)
    return urls


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    names = discover()
    mode = "quick" if args.quick else "full"
    sizes = json.loads(json.dumps(SIZES[mode]))
    _apply_sets(sizes, args.sets)
    if args.list:
        for name in names:
            adapter = "adapter" if name in ADAPTERS else "no adapter"
            print(f"{name:12s} {adapter:10s} {json.dumps(sizes.get(name, {}))}")
        return 0
    unknown = [n for n in args.only if n not in names]
    if unknown:
        raise SystemExit(f"unknown benchmark(s) {unknown}; known: {', '.join(names)}")
    selected = [n for n in names if not args.only or n in args.only]
    selected.sort(key=lambda n: (ORDER.index(n) if n in ORDER else len(ORDER), n))
    old = None if args.compare is None else _read_results(args.compare, "--compare")
    if args.show is not None:
        return _show(_read_results(args.show, "--show"), old, args.compare, args.no_goals)

    data_dir = find_data_dir(args.data_dir)
    if data_dir is not None:
        os.environ.setdefault("HYBRIDROUTE_DATA_DIR", str(data_dir))
    load_before = load_average()
    started = time.perf_counter()
    with contextlib.ExitStack() as stack:
        cache = args.cache_dir
        if cache is None:
            cache = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="hr-bench-")))
        ctx = Context(
            quick=args.quick, sizes=sizes, data_dir=data_dir, cache_dir=cache, seed=args.seed
        )
        if args.postgres:
            for bench, url in _postgres_logs(stack, ("records", "service")).items():
                sizes.setdefault(bench, {}).setdefault("log_url", url)
        if "memory" in selected and sizes.get("memory", {}).get("overlap") and not args.no_overlap:
            start_memory_in_background(ctx)
        results = [run_bench(name, ctx) for name in selected]
    wall = time.perf_counter() - started
    load_after = load_average()

    rows = [r for res in results for r in res.rows]
    # goals are checked on full-size runs only: --quick sizes are too small to measure
    failures = check_goals(rows, _committed(old), enforce=mode == "full")
    extra: dict[str, float] = {}
    for res in results:
        extra.update(res.metrics)
    from hybridroute import __version__

    title = (
        f"hybridroute {__version__} benchmarks ({mode}) -- {wall:.0f} s wall; "
        f"load {load_before} -> {load_after} on {os.cpu_count()} CPUs"
    )
    from rich.markup import escape

    console = _console()
    print_table(rows, title, console)
    for res in results:
        if res.error:
            console.print(f"[red]{res.name} failed:[/red] {escape(res.error)}")
    report_goals(failures, console)
    if mode == "full" and wall > BUDGET_SECONDS:
        console.print(f"[yellow]over the {BUDGET_SECONDS} s budget: {wall:.0f} s[/yellow]")
    document = {
        "schema_version": SCHEMA_VERSION,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "mode": mode,
        "argv": shlex.join(sys.argv[1:] if argv is None else list(argv)),
        "wall_seconds": round(wall, 2),
        "hybridroute_version": __version__,
        "git": git_info(),
        "host": {
            "cpus": os.cpu_count(),
            "load_before": load_before,
            "load_after": load_after,
            "python": platform.python_version(),
            "platform": platform.platform(),
        },
        "sizes": sizes,
        "benches": {
            res.name: {
                "status": res.status,
                "seconds": round(res.seconds, 2),
                "error": res.error,
                "raw": plain(res.raw),
            }
            for res in results
        },
        "rows": [plain(asdict(r)) for r in rows],
        "metrics": metrics_of(rows, extra),
    }
    if args.json_out is not None:
        args.json_out.parent.mkdir(parents=True, exist_ok=True)
        args.json_out.write_text(
            json.dumps(document, indent=2, sort_keys=False) + "\n", encoding="utf-8"
        )
        console.print(escape(f"results written to {args.json_out}"))
    if old is not None:
        print_compare(compare_rows(old, document), str(args.compare), console)
    if any(res.status == "failed" for res in results):
        return 1
    return GOAL_FAILED if failures and not args.no_goals else 0
