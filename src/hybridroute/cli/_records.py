"""``hybridroute replay``, ``drift`` and ``export``: look back at a decision log.

``--log`` takes a path, a ``sqlite:///PATH`` URL or a ``postgresql://`` URL (see
:func:`hybridroute.records.open_log`); a log that does not exist is an error, never
created. When the log holds shadow decisions, ``replay`` and ``drift`` also report
live-vs-shadow disagreement (key ``shadow`` of ``--json``).

What they print (the JSON report or its summary lines) goes through one
:class:`~hybridroute._scrub.Scrubber`: a replayed example's ticket text, an error message
or a drift window named after a fact value carries no credential, and the facts named with
``--sensitive`` appear only as the salted hashes the log stores for declared facts.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import typer

from ..exceptions import UserInputError

_SENSITIVE_HELP = (
    "A fact whose values are printed as salted hashes wherever they appear "
    "(salt: HYBRIDROUTE_LOG_SALT); repeatable."
)


_LOG_HELP = (
    "Decision log to read: a SQLite file, sqlite:///PATH, or postgresql://USER@HOST/DB "
    "(it must exist)."
)


def _open_log(target: str):
    from ..records import open_log

    return open_log(target, create=False)


def _shadow(dl: Any, report: Any) -> list[str]:
    """Add live-vs-shadow disagreement to ``report`` when the log holds shadow rows."""
    if not dl.count(role="shadow"):
        return []
    from ..records import shadow_disagreement

    found = shadow_disagreement(dl)
    report["shadow"] = found.to_dict()
    return found.summary_lines()


def _facts(records: Any) -> Any:
    for rec in records:
        yield (rec.get("input_snapshot") or {}).get("facts")


def _emit(scrub: Any, report: Any, as_json: bool, extra: Sequence[str] = ()) -> None:
    if as_json:
        typer.echo(scrub.json(report, indent=2))
    else:
        for line in [*report.summary_lines(), *extra]:
            typer.echo(scrub.text(line))


def replay_cmd(
    log: str = typer.Option(..., "--log", help=_LOG_HELP),
    router: Path = typer.Option(..., "--router", help="Router bundle to replay with."),
    rescore: bool = typer.Option(False, "--rescore", help="Score the logged text again."),
    router_version: str | None = typer.Option(
        None, "--only-version", help="Replay only this logged version."
    ),
    role: str | None = typer.Option(
        None, "--role", help="Replay only decisions of this role: live or shadow."
    ),
    sensitive: list[str] = typer.Option([], "--sensitive", help=_SENSITIVE_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
) -> None:
    """Re-run a router on logged inputs and report the decisions that change."""
    from .._scrub import Scrubber
    from ..records import replay
    from ..router import load_router

    _check_role(role)
    scrub = Scrubber(sensitive)
    only = {"router_version": router_version, "role": role}
    with _open_log(log) as dl:
        r = load_router(router)
        if sensitive:
            scrub.learn(_facts(dl.records(**only)))
        report = replay(dl.records(**only), r, rescore=rescore)
        extra = _shadow(dl, report)
    _emit(scrub, report, as_json, extra)


def drift_cmd(
    log: str = typer.Option(..., "--log", help=_LOG_HELP),
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
        shadow: dict[str, Any] = {}
        extra = _shadow(dl, shadow)
    if sensitive:
        scrub.learn(_facts(frame["record"]))
    try:
        report = drift_report(
            frame, by=by, baseline=baseline, segment=segment, alpha=alpha, psi_flag=psi_flag
        )
    except UserInputError as exc:
        # the message lists the windows, which may be the values of a fact
        raise UserInputError(scrub.text(str(exc))) from None
    report.update(shadow)
    _emit(scrub, report, as_json, extra)


def _check_role(role: str | None) -> None:
    from ..records._schema import ROLES

    if role is not None and role not in ROLES:
        raise UserInputError(f"--role: must be one of {', '.join(ROLES)}, got {role!r}")


def export_cmd(
    log: str = typer.Option(..., "--log", help=_LOG_HELP),
    out: Path = typer.Option(..., "--out", "-o", help="JSONL file to write (one record a line)."),
    router_version: str | None = typer.Option(
        None, "--only-version", help="Export only this router version."
    ),
    role: str | None = typer.Option(None, "--role", help="Export only this role: live or shadow."),
) -> None:
    """Write a decision log's records as JSON lines (with seq, decision_id, role)."""
    from ._outputs import check_output, output_errors

    _check_role(role)
    check_output(out, "--out")  # before the log is opened
    with _open_log(log) as dl:
        # a regular file (a FIFO would block), and not the log itself
        check_output(out, "--out", inputs=[getattr(dl, "path", None)])
        with output_errors(out, "--out"):
            n = dl.to_jsonl(out, router_version=router_version, role=role)
    typer.echo(f"exported {n} decisions from {dl.where} to {out}", err=True)


def register(app: typer.Typer) -> None:
    """Register ``replay``, ``drift`` and ``export`` on ``app``."""
    app.command("replay")(replay_cmd)
    app.command("drift")(drift_cmd)
    app.command("export")(export_cmd)
