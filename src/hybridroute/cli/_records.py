"""``hybridroute replay`` and ``hybridroute drift``: look back at a decision log.

What they print (the JSON report or its summary lines) goes through one
:class:`~hybridroute._scrub.Scrubber`: a replayed example's ticket text, an error message
or a drift window named after a fact value carries no credential, and the facts named with
``--sensitive`` appear only as the salted hashes the log stores for declared facts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from ..exceptions import UserInputError

_SENSITIVE_HELP = (
    "A fact whose values are printed as salted hashes wherever they appear "
    "(salt: HYBRIDROUTE_LOG_SALT); repeatable."
)


def _open_log(path: Path):
    from ..records import DecisionLog

    if not path.is_file():
        raise UserInputError(f"{path}: no such decision log")
    return DecisionLog(path)


def _facts(records: Any) -> Any:
    for rec in records:
        yield (rec.get("input_snapshot") or {}).get("facts")


def _emit(scrub: Any, report: Any, as_json: bool) -> None:
    if as_json:
        typer.echo(scrub.json(report, indent=2))
    else:
        for line in report.summary_lines():
            typer.echo(scrub.text(line))


def replay_cmd(
    log: Path = typer.Option(..., "--log", help="Decision log (SQLite)."),
    router: Path = typer.Option(..., "--router", help="Router bundle to replay with."),
    rescore: bool = typer.Option(False, "--rescore", help="Score the logged text again."),
    router_version: str | None = typer.Option(
        None, "--only-version", help="Replay only this logged version."
    ),
    sensitive: list[str] = typer.Option([], "--sensitive", help=_SENSITIVE_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
) -> None:
    """Re-run a router on logged inputs and report the decisions that change."""
    from .._scrub import Scrubber
    from ..records import replay
    from ..router import load_router

    scrub = Scrubber(sensitive)
    with _open_log(log) as dl:
        r = load_router(router)
        if sensitive:
            scrub.learn(_facts(dl.records(router_version=router_version)))
        report = replay(dl.records(router_version=router_version), r, rescore=rescore)
    _emit(scrub, report, as_json)


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
    sensitive: list[str] = typer.Option([], "--sensitive", help=_SENSITIVE_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
) -> None:
    """Destination / reason-code drift, shift tests and same-snapshot conflicts."""
    from .._scrub import Scrubber
    from ..records import drift_report

    scrub = Scrubber(sensitive)
    with _open_log(log) as dl:
        frame = dl.to_frame()
    if sensitive:
        scrub.learn(_facts(frame["record"]))
    try:
        report = drift_report(
            frame, by=by, baseline=baseline, segment=segment, alpha=alpha, psi_flag=psi_flag
        )
    except UserInputError as exc:
        # the message lists the windows, which may be the values of a fact
        raise UserInputError(scrub.text(str(exc))) from None
    _emit(scrub, report, as_json)


def register(app: typer.Typer) -> None:
    """Register ``replay`` and ``drift`` on ``app``."""
    app.command("replay")(replay_cmd)
    app.command("drift")(drift_cmd)
