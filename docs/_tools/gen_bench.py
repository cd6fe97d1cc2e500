"""The Benchmarks page, generated from the committed benchmark runs.

Nothing on the page is typed in: each table is printed by the code that prints it for a
person at a terminal, from a file committed in the repository --

* ``benchmarks/results/*.json`` written by ``python -m benchmarks --json`` (rows with a
  measurement, what it is compared with and their ratio, the host and the load);
* ``benchmarks/bench_calibration.json``: the tables of ``bench_calibration.py --readme``
  and ``--show``;
* ``benchmarks/results/bench_monitor*.json``: ``bench_monitor.py --show``.

A run file that none of these recognise is listed as such, never dropped silently.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
from pathlib import Path
from typing import Any

PAGE = "benchmarks.md"
REPO = Path(__file__).resolve().parents[2]


def _bench_modules() -> tuple[Any, Any, Any]:
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    import benchmarks._runner as runner
    import benchmarks.bench_calibration as calibration
    import benchmarks.bench_monitor as monitor

    return runner, calibration, monitor


def run_files() -> list[Path]:
    """Every committed run the page is made from."""
    files = sorted((REPO / "benchmarks" / "results").glob("*.json"))
    committed = REPO / "benchmarks" / "bench_calibration.json"
    return [*([committed] if committed.is_file() else []), *files]


def _captured(fn: Any, *args: Any) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        fn(*args)
    return out.getvalue().rstrip()


def _cell(value: Any) -> str:
    return " ".join(str(value).split()).replace("|", "\\|")


def _host(doc: dict[str, Any]) -> str:
    host = doc.get("host") or {}
    if not host:
        return "not recorded in the file (the development machine: 2 shared CPU cores)"
    parts = [f"{k} {_cell(v)}" for k, v in host.items() if not isinstance(v, (dict, list))]
    return "; ".join(parts)


def _runner_section(path: Path, doc: dict[str, Any], runner: Any) -> list[str]:
    rel = path.relative_to(REPO)
    git = doc.get("git") or {}
    lines = [
        f"## `{rel}`",
        "",
        f"Made by `python -m benchmarks {doc.get('argv', '--json ' + rel.name) if isinstance(doc.get('argv'), str) else '--json ' + str(rel)}`"
        f" ({doc.get('mode', 'full')} sizes) on {doc.get('created', 'an unrecorded date')}, "
        f"commit `{git.get('commit', 'unknown')}`, {doc.get('wall_seconds', '?')} s wall. "
        f"Machine: {_host(doc)}. Reprint it with `python -m benchmarks --show {rel}`.",
        "",
        "| bench | measure | value | compared with | ratio | status | notes |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in doc["rows"]:
        value = runner.fmt_value(row.get("value"), row.get("unit", ""))
        base = row.get("baseline")
        compared = (
            f"{_cell(row.get('baseline_label', ''))}: {runner.fmt_value(base, row.get('unit', ''))}"
            if base is not None
            else _cell(row.get("baseline_label", ""))
        )
        ratio = runner.fmt_ratio(row.get("ratio"))
        goal = row.get("goal")
        notes = _cell(row.get("notes", "")) + (f" (goal: {_cell(goal)})" if goal else "")
        lines.append(
            f"| {_cell(row.get('bench'))} | {_cell(row.get('measure'))} | {_cell(value)} | "
            f"{compared} | {_cell(ratio)} | {_cell(row.get('status', 'ok'))} | {notes} |"
        )
    lines.append("")
    return lines


def _calibration_section(path: Path, doc: dict[str, Any], calibration: Any) -> list[str]:
    rel = path.relative_to(REPO)
    return [
        "## Certified thresholds against MAPIE",
        "",
        f"From `{rel}`, made by `python benchmarks/{doc.get('command', '?')}` "
        f"(MAPIE {doc.get('mapie_version', '?')}, δ = {doc.get('delta')}, "
        f"{doc.get('resplits')} resplits of the public sets, {doc.get('synthetic_resplits')} of "
        "the synthetic ones). Machine: not recorded in the file (the development machine: 2 "
        "shared CPU cores; these figures are coverage and violation rates, which do not depend "
        f"on it). `python benchmarks/bench_calibration.py --readme {rel}` prints these tables; "
        "`--show` prints every table of the run.",
        "",
        "The first table: mean test coverage / share of resplits whose test-half precision fell "
        "below the target, at δ = 0.05. The second: our coverage divided by the best MAPIE "
        "method's at an equal or lower violation rate, per MAPIE δ (the method in brackets). "
        "The third: the same at fixed calibration sizes. [What a certificate "
        "promises](concepts/certificates.md) explains how to read them.",
        "",
        calibration.readme_tables(doc),
        "",
        '??? note "Every table of the run (`--show`)"',
        "",
        "    ```text",
        *("    " + line for line in _captured(calibration.print_tables, doc).splitlines()),
        "    ```",
        "",
    ]


def _monitor_section(path: Path, doc: dict[str, Any], monitor: Any) -> list[str]:
    rel = path.relative_to(REPO)
    return [
        f"## The live-guarantee monitor: `{rel.name}`",
        "",
        f"From `{rel}`: {doc.get('streams')} seeded streams per cell of {doc.get('horizon'):,} "
        f"auto-routed decisions, the change at decision {doc.get('change'):,}, target "
        f"{doc.get('target')}, δ {doc.get('delta')}, seed {doc.get('seed')}, MAPIE "
        f"{doc.get('mapie_version')}; {doc.get('seconds')} s. Made by `python "
        f"benchmarks/bench_monitor.py --streams {doc.get('streams')} --change "
        f"{doc.get('change')} --horizon {doc.get('horizon')} --json`; reprinted by `python "
        f"benchmarks/bench_monitor.py --show {rel}`. Machine: not recorded in the file (the "
        "development machine: 2 shared CPU cores; the figures are counts of labels and alarm "
        "rates, which do not depend on it).",
        "",
        "```text",
        _captured(monitor.print_tables, doc),
        "```",
        "",
    ]


def page() -> str:
    """The markdown of the Benchmarks page."""
    runner, calibration, monitor = _bench_modules()
    lines = [
        "# Benchmarks",
        "",
        "Every figure on this page is generated, when the site is built, from a benchmark run",
        "committed in the repository; the command that made each run and the machine it ran on",
        "are given with it. Run them yourself with `python3 dev.py bench` (the runner: every",
        "`benchmarks/bench_*.py`, each row measured side by side with what it is compared to in",
        "the same process, so the ratio holds when the machine's load moves), `python3 dev.py",
        "bench --json new.json --compare old.json` to compare two revisions, or one script on",
        "its own (`.venv/bin/python benchmarks/bench_rules.py`).",
        "",
    ]
    unknown = []
    for path in run_files():
        doc = json.loads(path.read_text(encoding="utf-8"))
        if path.name == "bench_calibration.json":
            lines += _calibration_section(path, doc, calibration)
        elif doc.get("benchmark") == "monitor":
            lines += _monitor_section(path, doc, monitor)
        elif "rows" in doc and "metrics" in doc:
            lines += _runner_section(path, doc, runner)
        else:
            unknown.append(path.relative_to(REPO))
    if unknown:
        lines += ["## Other committed runs", ""]
        lines += [f"- `{p}`: no table generator knows this file" for p in unknown]
        lines.append("")
    return "\n".join(lines)


# --------------------------------------------------------------------------- capacity
THROUGHPUT = REPO / "benchmarks" / "results" / "throughput.json"


def _num(value: Any, spec: str = ",.0f") -> str:
    return "–" if value is None else format(value, spec)


def _service_rows(raw: dict[str, Any]) -> list[str]:
    lines = [
        "| requests | clients | items/s | p50 ms | p99 ms | server CPU per item |",
        "|---|---|---|---|---|---|",
    ]
    for mode in ("single", "batch"):
        for cell in raw.get("service", {}).get(mode, []):
            what = "single items" if mode == "single" else f"batches of {raw.get('batch_size')}"
            cpu = cell.get("server_cpu_us_per_item")
            lines.append(
                f"| {what} | {cell['concurrency']} | {_num(cell['items_per_s'])} | "
                f"{_num(cell['p50_ms'], '.1f')} | {_num(cell['p99_ms'], '.1f')} | "
                f"{'–' if cpu is None else f'{cpu:,.0f} µs'} |"
            )
    return lines


def _process_rows(raw: dict[str, Any]) -> list[str]:
    lines = [
        "| log | processes | clients | single items/s | batch items/s |",
        "|---|---|---|---|---|",
    ]
    workers = raw.get("service_workers")
    top = workers["single"][0]["concurrency"] if workers else None
    one = {
        m: next((c for c in raw["service"][m] if c["concurrency"] == top), None)
        for m in ("single", "batch")
    }
    if workers and one["single"] and one["batch"]:
        lines.append(
            f"| SQLite | 1 worker | {top} | {_num(one['single']['items_per_s'])} | "
            f"{_num(one['batch']['items_per_s'])} |"
        )
        lines.append(
            f"| SQLite | {workers['workers']} workers | {top} | "
            f"{_num(workers['single'][0]['items_per_s'])} | "
            f"{_num(workers['batch'][0]['items_per_s'])} |"
        )
    pg = raw.get("postgres")
    for label, shape in (pg or {}).get("shapes", {}).items():
        lines.append(
            f"| PostgreSQL | {label} | {pg['concurrency']} | "
            f"{_num(shape['single'][0]['items_per_s'])} | {_num(shape['batch'][0]['items_per_s'])} |"
        )
    if not pg:
        lines.append("| PostgreSQL | not measured in this run (`--postgres`) | | | |")
    return lines


def _cpu_rows(raw: dict[str, Any]) -> list[str]:
    cells = {
        m: next((c for c in raw["service"][m] if c.get("profile")), None)
        for m in ("single", "batch")
    }
    if not all(cells.values()):
        return ["The committed run has no profile of the server (`bench_service.py --profile`)."]
    single, batch = cells["single"], cells["batch"]
    assert single is not None and batch is not None
    parts = sorted(
        set(single["profile"]) | set(batch["profile"]), key=lambda p: -single["profile"].get(p, 0)
    )
    lines = [
        "| part | single items, µs per item | batches, µs per item |",
        "|---|---|---|",
    ]
    for part in parts:
        s = single["profile"].get(part, 0.0) * single["server_cpu_us_per_item"]
        b = batch["profile"].get(part, 0.0) * batch["server_cpu_us_per_item"]
        lines.append(f"| {part} | {s:,.0f} | {b:,.0f} |")
    lines.append(
        f"| **all** (CPU time, `/proc`) | {single['server_cpu_us_per_item']:,.0f} | "
        f"{batch['server_cpu_us_per_item']:,.0f} |"
    )
    floor = raw.get("floor") or {}
    if floor.get("server_cpu_us_per_item") is not None:
        lines += [
            "",
            f"A bare ASGI app on the same server stack (uvicorn, uvloop, httptools) took "
            f"{floor['server_cpu_us_per_item']:,.0f} µs per request under the same load "
            f"({_num(floor.get('items_per_s'))} requests/s): the HTTP floor.",
        ]
    return lines


def capacity(arg: str = "") -> str:
    """The capacity tables of the Operations page, from the committed throughput run."""
    rel = THROUGHPUT.relative_to(REPO)
    if not THROUGHPUT.is_file():
        return f"*No committed run at `{rel}`.*"
    doc = json.loads(THROUGHPUT.read_text(encoding="utf-8"))
    raw = ((doc.get("benches") or {}).get("service") or {}).get("raw")
    if not raw or "service" not in raw:
        return f"*The committed run `{rel}` has no service benchmark.*"
    git = doc.get("git") or {}
    head = (
        f"From `{rel}` ({doc.get('created')}, commit `{str(git.get('commit'))[:10]}`; "
        f"{_host(doc)}); reprint it with `python -m benchmarks --show {rel}`, measure your "
        "machine with `python -m benchmarks --only service --postgres`. The load generator "
        "shares the machine's cores with the server."
    )
    return "\n".join(
        [
            head,
            "",
            "**One worker, SQLite log.**",
            "",
            *_service_rows(raw),
            "",
            "**More processes.**",
            "",
            *_process_rows(raw),
            "",
            "**Where one worker's CPU goes** (32 clients; py-spy samples by part, times the CPU "
            "per item):",
            "",
            *_cpu_rows(raw),
        ]
    )
