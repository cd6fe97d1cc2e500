"""``hybridroute experiment run SPEC``: run an experiment spec into MLflow and print its table.

The table, its JSON and every line printed come from the result's
:class:`~hybridroute._scrub.Scrubber`, the same one its MLflow runs were logged through.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

experiment_app = typer.Typer(
    help="Run experiment specs (YAML) into MLflow: a parent run, one nested run per table row.",
    no_args_is_help=True,
    add_completion=False,
)


@experiment_app.command("run")
def run_cmd(
    spec: Path = typer.Argument(
        ..., help="Experiment spec (YAML), e.g. experiments/thresholds_banking77.yaml."
    ),
    tracking_uri: str | None = typer.Option(
        None, "--tracking-uri", help="MLflow tracking URI (default: ./mlflow.db)."
    ),
    track: bool = typer.Option(True, "--track/--no-track", help="Log the runs to MLflow."),
    resplits: int | None = typer.Option(
        None, "--resplits", min=1, help="Override the spec's resplits (quick runs)."
    ),
    out: Path | None = typer.Option(
        None, "--out", help="Also write table.json and table.csv to this directory."
    ),
    as_json: bool = typer.Option(
        False, "--json", help="Print the table (rows, notes, run ids) as JSON."
    ),
) -> None:
    """Run SPEC, print the comparison table, and log it (parent + nested MLflow runs)."""
    import warnings

    from rich.console import Console

    from ..experiments import load_spec, run_experiment

    if out is not None:
        from ._outputs import check_output

        check_output(out, "--out", kind="dir")  # before any run: table.json, table.csv
    loaded = load_spec(spec)
    err = Console(stderr=True)
    with _progress(err, enabled=err.is_terminal) as progress, warnings.catch_warnings():
        # the tracker's one warning is echoed below, once, as one line
        warnings.filterwarnings("ignore", message="MLflow tracking", category=RuntimeWarning)
        result = run_experiment(
            loaded,
            tracking_uri=tracking_uri,
            track=track,
            resplits=resplits,
            progress=progress,
            out_dir=out,
        )
    scrub = result.scrubber
    if result.tracking_warning:
        typer.echo(f"warning: {scrub.text(result.tracking_warning)}", err=True)
    if as_json:
        typer.echo(scrub.json(result.to_dict(), indent=2))
        return
    out_console = Console()
    # piped to a file, the table is wide enough for every column; a terminal keeps its width
    console = out_console if out_console.is_terminal else Console(width=200)
    console.print(result.table())
    if result.files:
        console.print(
            scrub.text(f"table: {result.files['json']}  {result.files['csv']}"), markup=False
        )
    if result.parent_run_id:
        from ..tracking import Tracker

        where = Tracker(
            result.tracking_uri, experiment=result.mlflow_experiment or "", scrubber=scrub
        ).run_url(result.parent_run_id)
        console.print(
            scrub.text(
                f"mlflow: parent run {result.parent_run_id} ({len(result.run_ids)} nested) — {where}"
            ),
            markup=False,
        )


class _progress:
    """A rich progress bar on stderr fed by ``progress(description, done, total)``."""

    def __init__(self, console: Any, *, enabled: bool) -> None:
        self.console = console
        self.enabled = enabled
        self._bar: Any = None
        self._task: Any = None

    def __enter__(self) -> Any:
        if not self.enabled:
            return None
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        self._bar = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=self.console,
            transient=True,
        )
        self._bar.__enter__()
        return self.update

    def update(self, description: str, done: int, total: int) -> None:
        if self._task is None:
            self._task = self._bar.add_task(description, total=total)
        self._bar.update(self._task, description=description, completed=done, total=total)

    def __exit__(self, *exc: Any) -> None:
        if self._bar is not None:
            self._bar.__exit__(*exc)


def register(app: typer.Typer) -> None:
    """Register the ``experiment`` group on ``app``."""
    app.add_typer(experiment_app, name="experiment")
