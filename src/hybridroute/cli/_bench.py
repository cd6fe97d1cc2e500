"""``hybridroute bench``: the benchmark runner of a source checkout (``python -m benchmarks``).

The benchmark scripts live in the repository's ``benchmarks/`` directory, next to
``src/``; they are not part of the installed package (they need the public data sets,
MAPIE and LangGraph). The command finds that directory (``--benchmarks``, then
``HYBRIDROUTE_BENCHMARKS_DIR``, then the current directory and its parents, then the
checkout this package was installed from in editable mode) and runs the same runner.
"""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path
from typing import Any

import typer

from ..exceptions import UserInputError

_RUNNER = "_runner.py"


def find_benchmarks_dir(explicit: Path | None = None) -> Path:
    """The ``benchmarks/`` directory of a source checkout, or a clear error."""
    if explicit is not None:
        if not (explicit / _RUNNER).is_file():
            raise UserInputError(f"--benchmarks {explicit}: no {_RUNNER} there")
        return explicit.resolve()
    env = os.environ.get("HYBRIDROUTE_BENCHMARKS_DIR")
    if env:
        if not (Path(env) / _RUNNER).is_file():
            raise UserInputError(f"HYBRIDROUTE_BENCHMARKS_DIR={env}: no {_RUNNER} there")
        return Path(env).resolve()
    here = Path.cwd().resolve()
    candidates = [p / "benchmarks" for p in (here, *here.parents)]
    # an editable install: src/hybridroute/cli/_bench.py -> the checkout root
    candidates.append(Path(__file__).resolve().parents[3] / "benchmarks")
    for c in candidates:
        if (c / _RUNNER).is_file():
            return c
    raise UserInputError(
        "hybridroute bench needs the benchmarks/ directory of a hybridroute source "
        "checkout, and none was found (an installed package does not ship the benchmark "
        "scripts): run it from inside the repository, or pass --benchmarks DIR"
    )


def _load_runner(bench_dir: Path) -> Any:
    root = str(bench_dir.parent)
    if root not in sys.path:
        sys.path.insert(0, root)
    module = importlib.import_module("benchmarks._runner")
    if Path(module.__file__ or "").resolve().parent != bench_dir.resolve():
        raise UserInputError(
            f"another module named 'benchmarks' is already importable ({module.__file__}); "
            f"run python -m benchmarks from {bench_dir.parent} instead"
        )
    return module


def register(app: typer.Typer) -> None:
    """Register ``bench`` on ``app``."""

    @app.command("bench")
    def bench(
        only: list[str] = typer.Option(
            [], "--only", help="Run only this benchmark (repeatable), e.g. langgraph."
        ),
        quick: bool = typer.Option(False, "--quick", help="Tiny sizes: a smoke run."),
        json_out: Path | None = typer.Option(None, "--json", help="Write the results here."),
        compare: Path | None = typer.Option(
            None, "--compare", help="A previous --json file to compare with."
        ),
        sets: list[str] = typer.Option(
            [], "--set", help="Override a size, BENCH.KEY=VALUE (repeatable)."
        ),
        data_dir: Path | None = typer.Option(
            None, "--data-dir", help="Directory with the public sets (default: auto)."
        ),
        cache_dir: Path | None = typer.Option(
            None, "--cache-dir", help="Keep scored calibration rows here between runs."
        ),
        no_overlap: bool = typer.Option(
            False, "--no-overlap", help="Run the memory benchmark alone, not alongside."
        ),
        show: Path | None = typer.Option(
            None, "--show", help="Print a saved run's table (with --compare) instead of running."
        ),
        list_: bool = typer.Option(False, "--list", help="List the benchmarks and sizes."),
        seed: int = typer.Option(0, "--seed", help="Seed of the generated inputs."),
        benchmarks: Path | None = typer.Option(
            None, "--benchmarks", help="The benchmarks/ directory (default: found)."
        ),
    ) -> None:
        """Run every benchmark side by side and print one table (python -m benchmarks)."""
        from ._outputs import check_output

        # before any benchmark runs (a full run takes minutes)
        if json_out is not None:
            check_output(json_out, "--json")
        if cache_dir is not None:
            check_output(cache_dir, "--cache-dir", kind="dir")
        runner = _load_runner(find_benchmarks_dir(benchmarks))
        argv: list[str] = []
        for name in only:
            argv += ["--only", name]
        for item in sets:
            argv += ["--set", item]
        if quick:
            argv.append("--quick")
        if json_out is not None:
            argv += ["--json", str(json_out)]
        if compare is not None:
            argv += ["--compare", str(compare)]
        if data_dir is not None:
            argv += ["--data-dir", str(data_dir)]
        if cache_dir is not None:
            argv += ["--cache-dir", str(cache_dir)]
        if show is not None:
            argv += ["--show", str(show)]
        if no_overlap:
            argv.append("--no-overlap")
        if list_:
            argv.append("--list")
        argv += ["--seed", str(seed)]
        try:
            code = runner.main(argv)
        except SystemExit as exc:  # the runner's own usage errors
            if isinstance(exc.code, str):
                raise UserInputError(exc.code) from None
            raise typer.Exit(int(exc.code or 0)) from None
        raise typer.Exit(code)
