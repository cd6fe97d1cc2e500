"""``hybridroute replay`` and ``hybridroute drift``: look back at a decision log."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from ..exceptions import UserInputError


def _open_log(path: Path):
    from ..records import DecisionLog

    if not path.is_file():
        raise UserInputError(f"{path}: no such decision log")
    return DecisionLog(path)


def replay_cmd(
    log: Path = typer.Option(..., "--log", help="Decision log (SQLite)."),
    router: Path = typer.Option(..., "--router", help="Router bundle to replay with."),
    rescore: bool = typer.Option(False, "--rescore", help="Score the logged text again."),
    router_version: str | None = typer.Option(
        None, "--only-version", help="Replay only this logged version."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
) -> None:
    """Re-run a router on logged inputs and report the decisions that change."""
    from ..records import replay
    from ..router import load_router

    with _open_log(log) as dl:
        r = load_router(router)
        report = replay(dl.records(router_version=router_version), r, rescore=rescore)
    if as_json:
        typer.echo(json.dumps(report, indent=2, ensure_ascii=False))
    else:
        for line in report.summary_lines():
            typer.echo(line)


def drift_cmd(
    log: Path = typer.Option(..., "--log", help="Decision log (SQLite)."),
    by: str = typer.Option(
        "router_version", "--by", help="Window: router_version, day, or a fact name."
    ),
    baseline: str | None = typer.Option(
        None, "--baseline", help="Baseline window (default: the first)."
    ),
    segment: str | None = typer.Option(
        None, "--segment", help="Fact to break ask-user / review rates down by."
    ),
    alpha: float = typer.Option(0.01, "--alpha", help="Significance level of the chi-square test."),
    psi_flag: float = typer.Option(
        0.1, "--psi-flag", help="PSI from which a significant shift is flagged."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
) -> None:
    """Destination / reason-code drift, shift tests and same-snapshot conflicts."""
    from ..records import drift_report

    with _open_log(log) as dl:
        frame = dl.to_frame()
    report = drift_report(
        frame, by=by, baseline=baseline, segment=segment, alpha=alpha, psi_flag=psi_flag
    )
    if as_json:
        typer.echo(json.dumps(report, indent=2, ensure_ascii=False))
    else:
        for line in report.summary_lines():
            typer.echo(line)


def register(app: typer.Typer) -> None:
    """Register ``replay`` and ``drift`` on ``app``."""
    app.command("replay")(replay_cmd)
    app.command("drift")(drift_cmd)
