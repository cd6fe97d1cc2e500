"""``hybridroute calibrate --from-log URL --router BUNDLE --out NEW``: recalibrate from production.

The bundle's auto-route threshold is refitted on its own audited decisions in the log
(:func:`hybridroute.monitoring.recalibrate_from_log`, whose docstring says exactly what the
result certifies and what it cannot), and a new bundle is written beside it: the same
rules, model, destinations and exits, the refitted policy, a new version. The policy's
provenance points at the log (without its password), the window of rows used and their
fingerprint.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import typer

from ..exceptions import InputError, UserInputError
from ._outputs import output_errors


def _new_version(old: str, report: dict[str, Any]) -> str:
    return f"{old}-log{report['window']['last_seq']}"


def recalibrate_cmd(
    *,
    log_url: str,
    router: Path | None,
    out: Path,
    router_version: str | None,
    version: str | None,
    target: float | None,
    delta: float | None,
    since: str | None,
    until: str | None,
    seed: int,
    as_json: bool,
    max_disputed_share: float = 0.05,
) -> None:
    """Refit ``router``'s threshold from ``log_url`` and write the new bundle to ``out``."""
    from .._scrub import Scrubber
    from ..monitoring import recalibrate_from_log
    from ..records import open_log
    from ..records._url import display_url
    from ..router import load_router, save_router

    if router is None:
        raise UserInputError("--from-log needs --router BUNDLE (the bundle that logged them)")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise InputError(
            "exists and is not an empty directory; --from-log writes a new router bundle there",
            path=str(out),
        )
    incumbent = load_router(router)
    with open_log(log_url, create=False) as log:
        try:
            result = recalibrate_from_log(
                log,
                incumbent,
                router_version=router_version,
                target=target,
                delta=delta,
                since=since,
                until=until,
                seed=seed,
                log_name=display_url(log_url),
                max_disputed_share=max_disputed_share,
            )
        except ValueError as exc:
            raise InputError(str(exc), path=log.where) from None
    report = dict(result.report)
    new_version = version if version is not None else _new_version(incumbent.version, report)
    if new_version == incumbent.version:
        raise UserInputError(
            f"--version {new_version!r} is the incumbent's; a recalibrated bundle needs its own"
        )
    candidate = incumbent.with_policy(result.policy, version=new_version)
    with output_errors(out, "--out"):
        save_router(candidate, out)
    report.update(out=str(out), version=new_version, incumbent_version=incumbent.version)
    scrub = Scrubber()
    if as_json:
        typer.echo(scrub.json(report, sort_keys=True, indent=2))
        return
    typer.echo(scrub.text("\n".join(_lines(report))))


def _num(v: Any) -> str:
    if v is None:
        return "none"
    if isinstance(v, float):
        return "inf" if math.isinf(v) else f"{v:.4f}"
    return str(v)


def _lines(r: dict[str, Any]) -> list[str]:
    w = r["window"]
    lines = [
        f"router bundle written to {r['out']} ({r['router']} version {r['version']}, "
        f"recalibrated from version {r['incumbent_version']})",
        f"log window       seq {w['first_seq']}..{w['last_seq']} "
        f"({w['first_logged_at']} .. {w['last_logged_at']})",
        f"audit rows       {r['calibration_size']} labelled of {r['audited']} audited "
        f"({r['pending']} pending, {r['thinned']} thinned to one rate, "
        f"{r['disputes']['disputed']} disputed: counted as wrong)",
        f"threshold        {_num(r['threshold'])} (was {_num(r['incumbent_threshold'])})",
    ]
    if r["certified"]:
        lines.append(
            f"certified        yes: precision >= {r['target']:g} with probability >= "
            f"{1 - r['delta']:g} (lower bound {_num(r['bound'])})"
        )
        lines.append(
            f"keeps            {_num(r['retained_share'])} of the auto-routed audit sample"
        )
    else:
        lines.append(f"certified        NO ({r['reason']}); the new bundle auto-routes nothing")
    if r["invalid_outcomes"]["count"]:
        lines.append(
            f"left out         {r['invalid_outcomes']['count']} stored outcome(s) the log "
            "would refuse today (a label or destination the version does not have, or "
            "observed before the decision)"
        )
    lines.append(
        "scope            holds for traffic like the window's; items the incumbent did not "
        "auto-route were never audited, so this policy never auto-routes them either"
    )
    return lines
